#pragma once
// The two audits a test runs on what a cluster holds after a scenario, whatever the cluster
// is (the apiserver double in tests/integration/e2e, a real one in tests/realk8s): no share
// of a device given twice, and the kubelets agreeing with the annotations. They take plain
// data and return one message per violation, so each suite reports them its own way.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/assignment.h"
#include "vgpu/device.h"

namespace vgpu::e2e {

/// A node as its agent published it (the vgpu.io/devices-<backend> annotations, decoded).
struct AuditNode {
  std::string name;
  std::vector<Device> devices;
};

/// A live pod bound to a node (not Succeeded or Failed).
struct AuditPod {
  std::string key;  ///< namespace/name
  std::string uid;
  std::string node;
  /// Its vgpu.io/assignment, decoded; nullopt when missing or unreadable.
  std::optional<Assignment> assignment;
};

/// Device IDs a kubelet handed out: pod uid -> container -> resource -> ids.
using KubeletHoldings = std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>>;

/// Audit 1: the assignments of the pods bound to each node, summed per device, stay within
/// the device as published (memory, compute, split count), and no virtual device
/// (<device id>::<slot>) is held by two pods. Pods on nodes not in `nodes` are skipped.
/// Messages: "<id>::<slot> is given to both <a> and <b>", "<node>: <id> memory
/// over-committed (...)", "... compute over-committed ...", "... shared by more containers
/// than its split count ...", "<pod> is bound to <node> without a readable assignment".
std::vector<std::string> auditShares(const std::vector<AuditNode>& nodes, const std::vector<AuditPod>& pods);

/// Audit 2: every pod bound to a node in `holdings` was admitted by that node's kubelet,
/// and its annotation names exactly the virtual devices the kubelet handed each container.
/// Messages: "<pod> is bound to <node> but its kubelet holds nothing for it", "<pod>
/// container <c>: annotated [...] but the kubelet gave [...]".
std::vector<std::string> auditKubeletAgreement(const std::map<std::string, KubeletHoldings>& holdingsByNode,
                                               const std::vector<AuditPod>& pods);

}  // namespace vgpu::e2e
