#pragma once
// ExtenderArgs (k8s-protocols.md section 2) read in one validating pass. With
// nodeCacheCapable the body is mostly NodeNames (5,000 names, ~58 KiB): those are scanned
// by hand and stay views into the body instead of a tree of 5,000 json::strings; the Pod
// and a Nodes list are built as Boost.JSON values, in `storage` (a per-request arena).

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>

#include "vgpu/result.h"

namespace vgpu::scheduler {

struct ExtenderArgs {
  boost::json::value pod;  ///< an object
  /// NodeNames was given as an array (nodeCacheCapable); otherwise the candidates are
  /// `nodes` (Nodes.items), whose names are in `names` too.
  bool cacheCapable = false;
  /// Candidate names in request order: views into the body, or into `unescaped` for names
  /// the body spells with escapes. The body must outlive them.
  std::vector<std::string_view> names;
  boost::json::array nodes;  ///< Node objects, parallel to `names` when !cacheCapable
  std::deque<std::string> unescaped;
  std::string_view body;  ///< the request body the names view

  /// A name still in the body, between its quotes: its JSON token can be copied as is.
  bool inBody(std::string_view name) const {
    const auto at = reinterpret_cast<std::uintptr_t>(name.data());
    const auto begin = reinterpret_cast<std::uintptr_t>(body.data());
    return at > begin && at + name.size() < begin + body.size();
  }

  /// The trees live in `storage`; moving a value into one in another storage would copy it.
  explicit ExtenderArgs(boost::json::storage_ptr storage = {}) : pod(storage), nodes(storage) {}
  ExtenderArgs(ExtenderArgs&&) = default;  // deque and vector moves keep the views valid
  ExtenderArgs& operator=(ExtenderArgs&&) = default;
};

/// Errors (words naming what is wrong, without a prefix): not JSON (with the parser's
/// reason), not an object, no Pod object, NodeNames holding a non-string, neither
/// NodeNames nor Nodes.items, a node in Nodes.items without metadata.name.
Result<ExtenderArgs> parseExtenderArgs(std::string_view body, boost::json::storage_ptr storage = {});

}  // namespace vgpu::scheduler
