#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vgpu/config.h"
#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu::simulator {

/// One node of a simulated cluster: its published device inventory, as the node agent
/// would publish it (split count and scaling from device-config.yaml unless given).
struct ClusterNode {
  std::string name;
  std::vector<Device> devices;
  std::set<std::string> cordoned;
  std::string unavailable;  ///< Non-empty: the node is offered nothing, for this reason.
  /// Which front end serves every backend of the node (`frontEnd: devicePlugin|dra`);
  /// unset: device-config.yaml's frontEnd for each backend on this node.
  std::optional<FrontEnd> frontEnd;
  /// Where a device group's split count was assumed (key paths, e.g. "nodes[0].devices[1]",
  /// with the backend): neither the group nor device-config.yaml gives one, and what the
  /// backend's discovery publishes on a real node (its own default, per model or mode) is
  /// not known here. vgpu-sim says so rather than pass a guess off as the node's.
  std::vector<std::pair<std::string, std::string>> assumedSplitCount;  ///< (path, backend)
};

/// What a loaded backend says a device of (backend, model) is split into (ABI 1.10's
/// split_count, Allocator::splitCountFor); nullopt where it does not say.
using SplitCountSource =
    std::function<std::optional<std::uint32_t>(const std::string& backend, const std::string& model)>;

/// The split count assumed where neither the cluster file, device-config.yaml nor the backend gives one.
inline constexpr std::uint32_t kAssumedSplitCount = 10;

/// One warning per backend whose split count was assumed somewhere in `cluster`, naming
/// where and what to set; empty when none was.
std::vector<std::string> splitCountWarnings(const std::vector<ClusterNode>& cluster);

/// Parses a cluster file:
///   nodes:
///     - name: gpu-1
///       devices:
///         - {backend: sim, model: "NVIDIA A100-SXM4-80GB", memoryMiB: 81920, count: 8,
///            numaNodes: 2, splitCount: 10, computeUnits: 100, idPrefix: GPU-a, unhealthy: [3],
///            attributes: {migMode: disabled},
///            links: {groupsOf: 4, within: direct, lanes: 4, across: cross-numa}}
///         # or exact links, every pair (rows and columns by position, "-" on the diagonal):
///         #   links: {matrix: [["-", "direct x4", "none"], ["direct x4", "-", "pcie-switch"],
///         #                    ["none", "pcie-switch", "-"]]}
///       cordoned: [GPU-a-1]
///       unavailable: "agent heartbeat is stale"
///       frontEnd: dra      # devicePlugin or dra; default: device-config.yaml's per backend
/// A group's split count: its own `splitCount`, else a per-node one from device-config.yaml,
/// else what `backendSays` for its model (the backend was created with the config's settings),
/// else the config's, else kAssumedSplitCount (and the group is listed as assumed).
/// Errors name the file, the key path and the line.
Result<std::vector<ClusterNode>> parseClusterFile(const std::string& yamlText, const std::string& fileName,
                                                  const DeviceConfig& config,
                                                  const SplitCountSource& backendSays = {});

}  // namespace vgpu::simulator
