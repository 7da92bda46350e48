#include "cluster_audit.h"

#include <algorithm>
#include <cstdint>

#include "vgpu/virtual_device_id.h"

namespace vgpu::e2e {
namespace {

std::string joined(const std::vector<std::string>& ids) {
  std::string out = "[";
  for (const auto& id : ids) out += (out.size() > 1 ? ", " : "") + id;
  return out + "]";
}

}  // namespace

std::vector<std::string> auditShares(const std::vector<AuditNode>& nodes, const std::vector<AuditPod>& pods) {
  struct Use {
    std::uint64_t memoryMiB = 0;
    std::uint32_t compute = 0;
    std::uint32_t shares = 0;
  };
  std::vector<std::string> out;
  for (const auto& node : nodes) {
    std::map<std::string, const Device*> devices;
    for (const auto& d : node.devices) devices[d.id] = &d;
    std::map<std::string, Use> used;
    std::map<std::string, std::string> holder;  // virtual device id -> pod
    for (const auto& pod : pods) {
      if (pod.node != node.name) continue;
      if (!pod.assignment) {
        out.push_back(pod.key + " is bound to " + node.name + " without a readable assignment");
        continue;
      }
      for (const auto& container : pod.assignment->containers) {
        // Init containers' devices may be reused by the app containers: the scenarios
        // that audit have none. Every init container is listed (indices stay aligned
        // with the spec), most with no devices: those are nothing to sum.
        if (container.init && !container.devices.empty())
          out.push_back(pod.key + " has an init container with devices: the audit cannot sum it");
        for (const auto& g : container.devices) {
          Use& u = used[g.deviceId];
          u.memoryMiB += g.memoryMiB;
          u.compute += g.compute;
          ++u.shares;
          const std::string id = formatVirtualDeviceId(g.deviceId, g.slot);
          auto [it, fresh] = holder.emplace(id, pod.key);
          if (!fresh) out.push_back(node.name + ": " + id + " is given to both " + it->second + " and " + pod.key);
        }
      }
    }
    for (const auto& [id, u] : used) {
      auto d = devices.find(id);
      if (d == devices.end()) {
        out.push_back(node.name + " publishes no device " + id + ", which pods hold");
        continue;
      }
      const Device& dev = *d->second;
      if (u.memoryMiB > dev.memoryMiB)
        out.push_back(node.name + ": " + id + " memory over-committed (" + std::to_string(u.memoryMiB) + " of " +
                      std::to_string(dev.memoryMiB) + " MiB)");
      if (u.compute > dev.computeUnits)
        out.push_back(node.name + ": " + id + " compute over-committed (" + std::to_string(u.compute) + " of " +
                      std::to_string(dev.computeUnits) + ")");
      if (u.shares > dev.splitCount)
        out.push_back(node.name + ": " + id + " shared by more containers than its split count (" +
                      std::to_string(u.shares) + " of " + std::to_string(dev.splitCount) + ")");
    }
  }
  return out;
}

std::vector<std::string> auditKubeletAgreement(const std::map<std::string, KubeletHoldings>& holdingsByNode,
                                               const std::vector<AuditPod>& pods) {
  std::vector<std::string> out;
  for (const auto& pod : pods) {
    const auto node = holdingsByNode.find(pod.node);
    if (node == holdingsByNode.end()) continue;
    const auto mine = node->second.find(pod.uid);
    if (mine == node->second.end() || !pod.assignment) {
      out.push_back(pod.key + " is bound to " + pod.node + (pod.assignment ? "" : " without an assignment") +
                    (mine == node->second.end() ? " but its kubelet holds nothing for it" : ""));
      continue;
    }
    for (const auto& container : pod.assignment->containers) {
      std::vector<std::string> annotated, got;
      for (const auto& g : container.devices) annotated.push_back(formatVirtualDeviceId(g.deviceId, g.slot));
      if (auto byResource = mine->second.find(container.name); byResource != mine->second.end())
        for (const auto& [resource, ids] : byResource->second) got.insert(got.end(), ids.begin(), ids.end());
      std::sort(annotated.begin(), annotated.end());
      std::sort(got.begin(), got.end());
      if (annotated != got)
        out.push_back(pod.key + " container " + container.name + ": annotated " + joined(annotated) +
                      " but the kubelet gave " + joined(got));
    }
  }
  return out;
}

}  // namespace vgpu::e2e
