#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster_file.h"
#include "dra_allocator.h"
#include "dra_objects.h"
#include "vgpu/assignment.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/node_state.h"
#include "vgpu/pod_info.h"
#include "vgpu/result.h"

namespace vgpu::simulator {

/// What happened to one pod.
struct PodOutcome {
  std::string pod;  ///< namespace/name
  std::int32_t priority = 0;  ///< spec.priority (PriorityClasses resolved by the caller)
  enum class Kind { kPlaced, kPending, kInvalid, kNotOurs } kind = Kind::kNotOurs;
  Assignment assignment;                       ///< kPlaced
  /// kPlaced under the topology policy: per request, how its devices are linked and what
  /// it kept whole ("train: devices 0-3: direct x4 all-to-all; 4-7 kept whole (...)").
  std::vector<std::string> links;
  std::map<std::string, std::string> reasons;  ///< kPending: node -> why, in words
  /// kPending: the pod's condition as kube-scheduler words it from vgpu-scheduler's
  /// categories ("0/N nodes are available: 3 vgpu: ..., 2 vgpu: ...").
  std::string kubeScheduler;
  std::string error;                           ///< kInvalid: why the request is refused
  std::vector<std::string> claims;             ///< the ResourceClaims it uses ("ns/name")
};

/// What happened to one ResourceClaim (DRA nodes: kube-scheduler's allocator places it).
struct ClaimOutcome {
  std::string claim;   ///< namespace/name (a template's claims: "<pod>-<pod's claim name>")
  std::string origin;  ///< "ResourceClaim", or "ResourceClaimTemplate <name>"
  std::vector<std::string> pods;  ///< the pods using it; none: placed as for a first pod using it
  enum class Kind { kAllocated, kPending, kInvalid } kind = Kind::kPending;
  std::size_t node = 0;         ///< kAllocated: index into SimulationResult::draNodes
  std::vector<DraShare> shares; ///< kAllocated: device shares (DraShare::claim unused)
  std::map<std::string, std::string> reasons;  ///< kPending without a pod: node -> why
  std::string error;            ///< kInvalid, or kPending: why (its pod is pending)
};

/// ResourceClaims, templates and DeviceClasses of an input and each pod's references to them.
struct DraPodInputs {
  DraInputs objects;
  std::vector<std::vector<PodClaimRef>> podClaims;  ///< per pod, in the pods' order
  std::string driverDomain = "vgpu.io";             ///< drivers are "<backend>.<domain>"
};

/// The result of placing a list of pods in order on a cluster.
struct SimulationResult {
  std::vector<PodOutcome> pods;
  std::vector<NodeState> nodes;  ///< With the usage of every placed pod.
  SchedulerConfig policies;
  std::vector<DraNode> draNodes;  ///< per node: the devices it publishes through DRA
  std::vector<ClaimOutcome> claims;
  /// What the simulation assumed where the input did not say (splitCountWarnings): the
  /// reports carry them, so a prediction is never passed off as what the nodes publish.
  std::vector<std::string> assumptions;
};

/// Places `pods` in order on `cluster` with the engine and the backends the scheduler
/// would use; each placed pod's usage counts for the next. A backend whose front end on a
/// node is DRA publishes that node's devices as ResourceSlices (the DRA plugin's own
/// builder) instead of to the extender; pods' ResourceClaims are placed on them as
/// kube-scheduler's allocator would (dra_allocator.h), on the first node in the cluster's
/// order where they fit (and where the pod's device-plugin request fits, if it has one).
/// Claims no pod uses are placed afterwards, as for a first pod using each.
SimulationResult simulate(const std::vector<ClusterNode>& cluster, const std::vector<PodInfo>& pods,
                          const DeviceConfig& config, const BackendSet& backends, const DraPodInputs& dra = {});

/// For the pending pod `pod` ("namespace/name", or a name in "default"): per node, the
/// fewest placed pods of lower priority whose eviction would let it fit (chooseVictims, as
/// vgpu-scheduler's preempt verb answers), or why none helps, and the node kube-scheduler's
/// default order would pick. Errors: no such pod, or it is not a pending pod of ours.
Result<std::string> explainPreemption(const SimulationResult& result, const std::vector<PodInfo>& pods,
                                      const std::string& pod, const DeviceConfig& config, const BackendSet& backends);

/// The human-readable report: placements, device use, pending pods with reasons.
std::string renderText(const SimulationResult& result);

/// The same as JSON for machines.
std::string renderJson(const SimulationResult& result);

}  // namespace vgpu::simulator
