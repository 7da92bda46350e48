#pragma once
// Which pods to evict from a node so that a higher-priority pod fits on concrete devices:
// kube-scheduler's preemption counts extended resources per node, not memory and compute
// per device, so vgpu-scheduler's preempt verb and vgpu-sim --explain-preemption ask this.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vgpu/assignment.h"
#include "vgpu/node_state.h"
#include "vgpu/placement.h"
#include "vgpu/result.h"

namespace vgpu {

/// A pod holding devices on the node, which could be evicted.
struct VictimCandidate {
  std::string uid;
  std::string key;  ///< "namespace/name", for words
  std::int32_t priority = 0;
  /// Evicting it breaks a PodDisruptionBudget, as far as the caller knows.
  bool violatesPdb = false;
  /// kube-scheduler proposed it: between otherwise equal sets, the one closer to its proposal.
  bool proposed = false;
  Assignment assignment;  ///< what it holds on the node (counted in the NodeState given)
};

/// What chooseVictims() decided.
struct VictimChoice {
  std::vector<std::size_t> victims;  ///< indices into the candidates, most important first
  std::int64_t pdbViolations = 0;
  Assignment assignment;  ///< where the preemptor goes once they are gone
};

/// The victims to evict from `node` (whose usage counts every candidate) so that
/// `preemptor` fits: only candidates of lower priority than `preemptorPriority`; among the
/// sets found, the one with the fewest PDB violations, then the fewest pods, then the
/// lowest sum of priorities, then the most pods kube-scheduler proposed. An empty set when
/// the pod fits as it is.
///
/// Algorithm (O(candidates x devices) fits, a few ms for an 8-device node of 50 pods):
/// 1. Every eligible candidate removed: if the pod still does not fit, no set helps.
/// 2. Reprieve, as kube-scheduler does: starting from that state, give each candidate back
///    in order of importance (PDB-protected first, higher priority, smaller) and keep it
///    when the pod still fits; those that cannot come back are the victims.
/// 3. Per device: for each device an eligible candidate uses, evict the pods on it (least
///    important, largest share of the device first) until the pod fits, then reprieve
///    those that turn out unneeded (multi-device pods, a request for another device).
/// 4. The best of these sets by the order above; every set is verified by the engine.
/// Errors say why no set helps, in words.
Result<VictimChoice> chooseVictims(const PlacementEngine& engine, const PreparedPod& preemptor,
                                   std::int32_t preemptorPriority, const NodeState& node,
                                   std::span<const VictimCandidate> candidates);

}  // namespace vgpu
