#pragma once
// A list response's body read item by item: each element of "items" is decoded on its own
// and handed on, so a list costs one decoded object at a time, never a whole page's tree.

#include <functional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "vgpu/result.h"

namespace vgpu::k8s::detail {

struct ListBodyMeta {
  std::string resourceVersion;
  std::string continueToken;
};

/// Walks `body` (a List: {"kind":..., "metadata":{...}, "items":[...]}); calls `onItem` with
/// each item, decoded into short-lived storage (copy what you keep). Errors name what was
/// wrong: not a JSON object, "items" not an array, an item that is not an object.
Result<ListBodyMeta> readListBody(std::string_view body,
                                  const std::function<void(const boost::json::object&)>& onItem);

}  // namespace vgpu::k8s::detail
