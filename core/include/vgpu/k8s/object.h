#pragma once
// Small typed readers for the fields every caller needs, over objects kept as JSON so each
// daemon picks out only what it uses. Missing or mistyped fields read as empty.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

namespace vgpu::k8s {

/// Objects handed out by the informer are shared and immutable.
using ObjectPtr = std::shared_ptr<const boost::json::object>;

/// Cuts a decoded object down to what its reader needs (client-go's TransformFunc). The
/// result must not share storage with the argument, which may be freed right after.
using ObjectTransform = std::function<boost::json::object(const boost::json::object&)>;

std::string_view name(const boost::json::object& obj);
std::string_view namespaceOf(const boost::json::object& obj);
std::string_view uid(const boost::json::object& obj);
std::string_view resourceVersion(const boost::json::object& obj);
/// spec.nodeName of a pod; empty when unscheduled.
std::string_view nodeName(const boost::json::object& pod);
/// status.phase of a pod (Pending, Running, Succeeded, Failed, Unknown).
std::string_view podPhase(const boost::json::object& pod);
std::optional<std::string_view> annotation(const boost::json::object& obj, std::string_view key);
std::optional<std::string_view> label(const boost::json::object& obj, std::string_view key);
/// metadata.annotations / metadata.labels, or null when absent.
const boost::json::object* annotations(const boost::json::object& obj);
const boost::json::object* labels(const boost::json::object& obj);
/// The cache key: "namespace/name", or "name" for cluster-scoped objects.
std::string objectKey(const boost::json::object& obj);

/// Follows a path of object keys ("spec", "nodeName"); null when any step is missing.
const boost::json::value* findPath(const boost::json::object& obj,
                                   std::initializer_list<std::string_view> path);

}  // namespace vgpu::k8s
