#pragma once
// ExtenderPreemptionArgs and ExtenderPreemptionResult (k8s.io/kube-scheduler/extender/v1,
// k8s-protocols.md section 2): kube-scheduler sends the victims it proposes per candidate
// node, as whole Pods (NodeNameToVictims) or, with nodeCacheCapable, as UIDs
// (NodeNameToMetaVictims); the answer is always the Meta form.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "vgpu/result.h"

namespace vgpu::scheduler {

/// The victims proposed for, or chosen on, one node.
struct NodeVictims {
  std::vector<std::string> uids;
  std::int64_t pdbViolations = 0;
};

struct PreemptionArgs {
  boost::json::value pod;  ///< an object
  bool cacheCapable = false;  ///< the victims came as NodeNameToMetaVictims
  std::map<std::string, NodeVictims> nodes;
};

/// Errors (words naming what is wrong): not JSON, no Pod object, neither map an object, a
/// victim without a UID.
Result<PreemptionArgs> parsePreemptionArgs(std::string_view body);

/// `{"NodeNameToMetaVictims":{"<node>":{"Pods":[{"UID":"..."}],"NumPDBViolations":N}}}`.
std::string preemptionResultJson(const std::map<std::string, NodeVictims>& nodes);

}  // namespace vgpu::scheduler
