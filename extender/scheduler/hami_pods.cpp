#include "hami_pods.h"

#include <algorithm>

#include "cluster_cache.h"

namespace vgpu::scheduler {

Result<std::optional<HamiPlacement>> readHamiPlacement(const PodInfo& pod) {
  HamiPlacement out;
  bool any = false;
  for (const auto& [key, value] : pod.annotations) {
    if (!hami::isAllocatedKey(key)) continue;
    any = true;
    auto list = hami::decodeDeviceList(value);
    if (!list.ok()) return makeError("its " + key + " annotation cannot be read: " + list.error().message);
    if (list->size() > pod.containers.size())
      return makeError("its " + key + " annotation lists " + std::to_string(list->size()) + " containers, the pod has " +
                       std::to_string(pod.containers.size()));
    if (out.devices.size() < list->size()) out.devices.resize(list->size());
    for (std::size_t c = 0; c < list->size(); ++c)
      for (auto& d : (*list)[c]) out.devices[c].push_back(std::move(d));
  }
  if (!any) return std::optional<HamiPlacement>{};
  const std::string node(hami::kPodNode);
  if (auto it = pod.annotations.find(node); it != pod.annotations.end() && it->second != pod.nodeName)
    return makeError("its " + node + " annotation names node " + it->second + ", but the pod is bound to " + pod.nodeName);
  if (auto it = pod.annotations.find(std::string(hami::kPodMigAllocations)); it != pod.annotations.end()) {
    auto mig = hami::decodeMigAllocations(it->second);
    if (!mig.ok()) return makeError("its " + std::string(hami::kPodMigAllocations) + " annotation cannot be read: " +
                                    mig.error().message);
    for (const auto& m : *mig) {
      const auto c = static_cast<std::size_t>(m.containerIndex);
      const bool listed = c < out.devices.size() && std::any_of(out.devices[c].begin(), out.devices[c].end(),
                                                                [&](const hami::Device& d) { return d.uuid == m.gpuUuid; });
      if (!listed)
        return makeError("its MIG allocation " + m.profile + " on " + m.gpuUuid + " for container " +
                         std::to_string(m.containerIndex) + " is not among the devices HAMi gave that container");
    }
  }
  out.containers = pod.containers;
  return std::optional<HamiPlacement>(std::move(out));
}

Result<Assignment> resolveHamiPlacement(const HamiPlacement& placement, const NodeInventory& inventory,
                                        const BackendSet& backends) {
  Assignment out;
  const auto& entries = inventory.entries();
  for (std::size_t c = 0; c < placement.devices.size(); ++c) {
    if (placement.devices[c].empty()) continue;
    const ContainerResources& container = placement.containers[c];
    ContainerAssignment granted{container.name, container.init, {}};
    for (const auto& d : placement.devices[c]) {
      auto at = std::find_if(entries.begin(), entries.end(), [&](const NodeInventory::Entry& e) { return e.device().id == d.uuid; });
      if (at == entries.end())
        return makeError("HAMi gave container \"" + container.name + "\" device " + d.uuid + " (" + d.type +
                         "), which the node does not publish");
      const Device& device = at->device();
      granted.devices.push_back({device.backend, device.id, device.index, d.memoryMiB, d.cores, -1, -1});
    }
    out.containers.push_back(std::move(granted));
  }
  if (std::string why = implausibleAssignment(out, placement.containers, backends); !why.empty())
    return makeError("HAMi's annotation " + why);
  return out;
}

}  // namespace vgpu::scheduler
