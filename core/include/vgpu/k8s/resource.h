#pragma once
// Which REST collection a call addresses. The daemons need nodes, pods and events of the
// core group; other kinds can be described the same way.

#include <string>
#include <string_view>

namespace vgpu::k8s {

/// A resource kind as the REST API names it.
struct ResourceType {
  std::string_view apiPrefix;  ///< "/api/v1" for the core group, "/apis/<group>/<version>"
  std::string_view plural;     ///< path segment: "pods"
  std::string_view kind;       ///< "Pod"
  bool namespaced = true;

  /// The collection: /api/v1/pods (ns empty, all namespaces) or /api/v1/namespaces/ns/pods.
  std::string collectionPath(std::string_view ns) const;
  /// One object: /api/v1/nodes/n1 or /api/v1/namespaces/ns/pods/p1 (ns ignored if cluster-scoped).
  std::string objectPath(std::string_view ns, std::string_view name) const;
};

inline constexpr ResourceType kNodes{"/api/v1", "nodes", "Node", false};
inline constexpr ResourceType kPods{"/api/v1", "pods", "Pod", true};
inline constexpr ResourceType kEvents{"/api/v1", "events", "Event", true};
inline constexpr ResourceType kResourceQuotas{"/api/v1", "resourcequotas", "ResourceQuota", true};
inline constexpr ResourceType kLeases{"/apis/coordination.k8s.io/v1", "leases", "Lease", true};

/// Percent-encodes a path segment or query value (everything but RFC 3986 unreserved).
std::string urlEncode(std::string_view s);

}  // namespace vgpu::k8s
