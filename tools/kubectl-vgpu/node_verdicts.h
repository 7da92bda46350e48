#pragma once
// Every node's verdict on one pod as vgpu-scheduler's filter gives it, on a snapshot of the
// live cache: the category kube-scheduler is told, the words with the numbers, how close
// the node is; shared by `explain` (the cluster as it is) and `simulate` (with pods added).

#include <optional>
#include <string>
#include <vector>

#include "live_state.h"
#include "vgpu/node_state.h"
#include "vgpu/placement.h"

namespace vgpu::kubectl {

/// The nodes as the scheduler's cache has them now; a node it cannot use keeps its reason.
struct Snapshot {
  struct Node {
    std::string name;
    std::optional<NodeState> state;  ///< null: not known to the cache
    std::string unusableCategory;    ///< non-empty: offered nothing (heartbeat, inventory)
    std::string unusableReason;
  };
  std::vector<Node> nodes;  ///< in the order of LiveState::nodes
};
Snapshot takeSnapshot(const LiveState& live);

struct NodeVerdict {
  std::string node;
  bool fits = false;
  std::string category;  ///< what kube-scheduler is told (the same few words for many nodes)
  std::string detail;    ///< with the numbers
  double distance = 0;   ///< PlacementEngine::distance; lower is closer
};

struct Verdicts {
  std::vector<NodeVerdict> nodes;
  std::string summary;                  ///< "0/N nodes can take the pod: 2 vgpu: ..." (FilterResult's)
  const NodeVerdict* closest = nullptr;  ///< the refused node nearest to fitting, if one can fit by waiting
};
Verdicts judge(const PlacementEngine& engine, const PreparedPod& pod, const Snapshot& snapshot);

}  // namespace vgpu::kubectl
