// HAMi's metric names and labels beside vgpu's own (--hami-metrics, hami_metrics.h), so HAMi's
// dashboards keep working on a node vgpu serves.

#include "hami_metrics.h"

#include <algorithm>

namespace vgpu::deviceplugin {
namespace {

// HAMi registers its collectors under this constant label.
constexpr const char* kZone = "vGPU";
const std::vector<std::string> kLabels{"namespace", "pod", "container", "vdevice_index", "device_uuid", "zone"};
const std::vector<std::string> kMigLabels{"node",          "device_uuid",         "device_index",
                                          "mig_uuid",      "profile",             "gpu_instance_id",
                                          "compute_instance_id", "placement_start", "placement_size",
                                          "zone"};

}  // namespace

HamiNodeMetrics::HamiNodeMetrics(metrics::Registry& r)
    : memoryUsed_(r.gauge("hami_vgpu_memory_used_bytes", "vGPU device usage", kLabels)),
      memoryLimit_(r.gauge("hami_vgpu_memory_limit_bytes", "vGPU device limit", kLabels)),
      deviceMemory_(r.gauge("hami_container_device_memory_bytes", "Container device memory usage", kLabels)),
      utilization_(r.gauge("hami_container_device_utilization_ratio", "Container device utilization", kLabels)),
      migInstance_(r.gauge("hami_node_gpu_mig_instance_info",
                           "1 for each MIG instance on the node: its GPU, profile, placement and instance ids",
                           kMigLabels)) {}

metrics::LabelValues HamiNodeMetrics::hamiLabels(const ContainerLabels& l) const {
  return {l.at(0), l.at(1), l.at(2), l.at(4), l.at(3), kZone};
}

void HamiNodeMetrics::begin() {
  for (auto* g : {&memoryUsed_, &memoryLimit_, &deviceMemory_, &utilization_, &migInstance_}) g->clear();
  std::lock_guard lock(mu_);
  for (auto& [labels, b] : busy_) b.seen = false;
}

void HamiNodeMetrics::memory(const ContainerLabels& labels, double usedBytes) {
  const auto l = hamiLabels(labels);
  memoryUsed_.set(l, usedBytes);
  deviceMemory_.set(l, usedBytes);
}

void HamiNodeMetrics::memoryLimit(const ContainerLabels& labels, double limitBytes) {
  memoryLimit_.set(hamiLabels(labels), limitBytes);
}

void HamiNodeMetrics::utilization(const ContainerLabels& labels, double percent) {
  utilization_.set(hamiLabels(labels), percent);
}

void HamiNodeMetrics::busyTime(const ContainerLabels& labels, double busySeconds, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto [it, fresh] = busy_.try_emplace(labels);
  Busy& b = it->second;
  const double wall = std::chrono::duration<double>(now - b.at).count();
  // A counter that went back is a new region (the container restarted): start again.
  if (!fresh && wall > 0 && busySeconds >= b.seconds)
    utilization(labels, std::clamp(100.0 * (busySeconds - b.seconds) / wall, 0.0, 100.0));
  b = {busySeconds, now, true};
}

void HamiNodeMetrics::partition(const std::string& node, const Partition& p, int parentIndex) {
  if (p.kind != "mig") return;
  const auto placement = parsePlacement(p.placement);
  const std::string start = placement ? std::to_string(placement->first) : "";
  const std::string size = placement ? std::to_string(placement->second) : "";
  migInstance_.set({node, p.parent, std::to_string(parentIndex), p.id, p.profile, p.instanceId, p.subInstanceId, start,
                    size, kZone},
                   1);
}

void HamiNodeMetrics::end() {
  std::lock_guard lock(mu_);
  std::erase_if(busy_, [](const auto& entry) { return !entry.second.seen; });
}

}  // namespace vgpu::deviceplugin
