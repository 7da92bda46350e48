#pragma once
// The node agent's liveness Lease (coordination.k8s.io/v1), shared by the agent, which renews
// it, and vgpu-scheduler, which judges a node stale by it: one Lease per node in the chart's
// namespace, so that an idle node costs no Node write (the Node's annotations change only with
// its inventory). The vgpu.io/heartbeat annotation of agents before it is still honoured.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json.hpp>

namespace vgpu {

/// Label on every node Lease (the scheduler watches only these): value "true".
inline constexpr std::string_view kNodeLeaseLabel = "vgpu.io/node-lease";

/// The Lease's name for `node`: "vgpu-node-<node>"; empty when that would exceed the 253
/// characters of an object name (the agent then keeps the heartbeat annotation).
std::string nodeLeaseName(std::string_view node);

/// The whole Lease object (for a create) or, with `patchOnly`, a merge patch of its spec:
/// holderIdentity = the node, renewTime = `now` (MicroTime), leaseDurationSeconds.
boost::json::object nodeLeaseObject(std::string_view node, std::string_view ns,
                                    std::chrono::system_clock::time_point now, std::chrono::seconds duration,
                                    bool patchOnly = false);

/// The node a Lease speaks for and when it was last renewed; nullopt for a Lease without the
/// label, a holder, or a readable renewTime (written by someone else, or damaged).
struct NodeLeaseRenewal {
  std::string node;
  std::chrono::system_clock::time_point renewed;
};
std::optional<NodeLeaseRenewal> parseNodeLease(const boost::json::object& lease);

}  // namespace vgpu
