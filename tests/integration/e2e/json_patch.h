#pragma once
// What the apiserver does with a mutating webhook's answer (once base64-decoded): apply it
// as an RFC 6902 JSON Patch (add, replace, remove; RFC 6901 pointers with ~0/~1).

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

#include "vgpu/result.h"

namespace vgpu::e2e {

/// Applies `patch` (a JSON array of operations) to `doc`. Errors name the failing operation;
/// `doc` may then be partly patched (the apiserver would refuse the request).
Status applyJsonPatch(boost::json::value& doc, const boost::json::value& patch);

}  // namespace vgpu::e2e
