// The per-device families both front ends serve (device_metrics.h).
#include "device_metrics.h"

#include <vector>

namespace vgpu::deviceplugin {
namespace {
const std::vector<std::string> kDevice{"backend", "device_id", "device_index", "model"};
}

DeviceGauges::DeviceGauges(metrics::Registry& registry)
    : memory_(registry.gauge("vgpu_device_memory_bytes", "Device memory offered to containers (after scaling).", kDevice)),
      compute_(registry.gauge("vgpu_device_compute_units", "Compute units of the device (100 = whole device).", kDevice)),
      split_(registry.gauge("vgpu_device_split_slots", "How many containers may share the device.", kDevice)),
      healthy_(registry.gauge("vgpu_device_healthy", "1 when the device is healthy.", kDevice)),
      memoryEnforcement_(registry.gauge("vgpu_device_memory_enforcement",
                                        "1 for what holds containers to their memory on the device: the driver "
                                        "itself (mode driver) or the in-container library alone (mode preload).",
                                        {"backend", "device_id", "device_index", "model", "mode"})) {}

metrics::LabelValues deviceLabels(const std::string& backend, const Device& d) {
  return {backend, d.id, std::to_string(d.index), d.model};
}

void DeviceGauges::clear() {
  for (auto* g : {&memory_, &compute_, &split_, &healthy_, &memoryEnforcement_}) g->clear();
}

void DeviceGauges::set(const std::string& backend, const Device& d) {
  const auto l = deviceLabels(backend, d);
  memory_.set(l, static_cast<double>(d.memoryMiB) * 1048576.0);
  compute_.set(l, d.computeUnits);
  split_.set(l, d.splitCount);
  healthy_.set(l, d.health == Health::kUnhealthy ? 0 : 1);
  if (auto m = d.attributes.find(kMemoryEnforcementAttribute); m != d.attributes.end())
    memoryEnforcement_.set({backend, d.id, std::to_string(d.index), d.model, m->second}, 1);
}

}  // namespace vgpu::deviceplugin
