#pragma once
// HAMi's scheduler metric names and labels (hami-scheduler's :9395/metrics), exported beside
// vgpu's own when --hami-metrics is given, so that HAMi's Grafana dashboards and alerts keep
// working after a switch. docs/metrics.md maps each one to vgpu's.

#include "cluster_cache.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::scheduler {

/// HAMi's `device_type` of a device: the model, prefixed with the backend's name in capitals
/// unless it already starts with it ("NVIDIA A100-SXM4-80GB"; "Tesla P4" -> "NVIDIA-Tesla P4").
std::string hamiDeviceType(const Device& device);

class HamiSchedulerMetrics {
 public:
  /// Registers HAMi's families in `registry`.
  explicit HamiSchedulerMetrics(metrics::Registry& registry);
  /// Sets every series from the cache's devices and the pods holding them (called before
  /// each render).
  void collect(const ClusterCache& cache);

 private:
  metrics::Gauge& memoryLimit_;
  metrics::Gauge& coreLimit_;
  metrics::Gauge& memoryAllocated_;
  metrics::Gauge& sharedCount_;
  metrics::Gauge& coreAllocated_;
  metrics::Gauge& overview_;
  metrics::Gauge& memoryAllocatedRatio_;
  metrics::Gauge& containerMemory_;
  metrics::Gauge& containerCore_;
  metrics::Gauge& quotaUsed_;
};

}  // namespace vgpu::scheduler
