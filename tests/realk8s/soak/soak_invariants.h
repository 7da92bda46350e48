#pragma once
// The soak's invariants (issue 43 items 2 and 3), read from the apiserver and the kubelet
// doubles: during the run (check, every few seconds) and once it settles (settleProblems).

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "real_cluster.h"
#include "scenario_support.h"

namespace vgpu::realk8s::soak {

class InvariantChecker {
 public:
  InvariantChecker(RealCluster& c, std::string ns, std::vector<std::string> nodes, Admitter& admitter);

  /// One pass. `deleting`: pods (ns/name) whose deletion is under way (the kubelet double
  /// already freed them: they are left out); `deleted`: every pod the soak asked to delete
  /// (a kubelet refusing a pod already gone is no violation). Returns the violations:
  /// share audits (no share to two live pods, no device over memory, compute or split
  /// count) that held in this pass and the one before (a pod admitted or deleted between
  /// reading the kubelets and the apiserver shows for one pass only), and at once each new
  /// bind that double-booked (Admitter::bindViews) and each admission the kubelet double
  /// refused. An error when the apiserver cannot be read (a fault): no verdict then.
  /// `partitioned`: nodes whose agent is cut off from kube-apiserver now or was until
  /// moments ago (a held connection): their refusals are counted apart, not as violations.
  Result<std::vector<std::string>> check(const std::set<std::string>& deleting, const std::set<std::string>& deleted,
                                         const std::set<std::string>& partitioned);

  /// What does not hold now for a settled cluster: a bound pod not through its kubelet, a
  /// pending pod that fits a node (/filter), vgpu-scheduler's shares not those the live
  /// pods hold, a kubelet double holding devices for a pod that is gone, or any violation.
  std::vector<std::string> settleProblems();

  /// The longest a pod waited from its creation to being bound (PodScheduled), seconds.
  double longestPendingSeconds() const { return longestPending_; }
  std::string longestPendingPod() const { return longestPendingPod_; }
  std::size_t kubeletRefusals() const { return kubeletRefusals_; }
  /// Of those, the refusals of the agent's known pairing defects (docs/reliability.md 2, 3):
  /// no waiting pod found for the Allocate, or devices other than the assignment.
  std::size_t agentPairingRefusals() const { return agentPairingRefusals_; }
  /// Pods gone from the apiserver whose devices a kubelet double still held (freed).
  std::size_t kubeletCleanups() const { return kubeletCleanups_; }
  /// Refusals on a node whose agent was cut off (see check), with their reasons.
  const std::vector<std::string>& partitionRefusals() const { return partitionRefusals_; }

 private:
  Result<std::vector<std::string>> audits(const std::set<std::string>& deleting);

  RealCluster& c_;
  std::string ns_;
  std::vector<std::string> nodes_;
  Admitter& admitter_;
  std::set<std::string> lastPass_;
  std::vector<std::string> partitionRefusals_;
  std::size_t viewsSeen_ = 0, refusalsSeen_ = 0, kubeletRefusals_ = 0, kubeletCleanups_ = 0;
  std::size_t agentPairingRefusals_ = 0;
  double longestPending_ = 0;
  std::string longestPendingPod_;
};

}  // namespace vgpu::realk8s::soak
