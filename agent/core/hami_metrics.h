#pragma once
// HAMi's per-container metric names and labels (HAMi's vGPUmonitor, :9394/metrics) and its MIG
// instance series (HAMi's scheduler exports it; here the agent that makes the instances does),
// exported beside vgpu's own when --hami-metrics is given, so that HAMi's Grafana dashboards and
// alerts keep working after a switch. docs/metrics.md maps each one to vgpu's, and says which of
// HAMi's the agent cannot produce.

#include <chrono>
#include <map>
#include <mutex>

#include "vgpu/metrics/registry.h"
#include "vgpu/partition.h"

namespace vgpu::deviceplugin {

class HamiNodeMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  /// vgpu's container labels, in vgpu's order: namespace, pod, container, device_uuid, device_index.
  using ContainerLabels = metrics::LabelValues;

  /// Registers HAMi's families in `registry`.
  explicit HamiNodeMetrics(metrics::Registry& registry);

  /// Starts a scrape: drops every series (containers that went away disappear).
  void begin();
  /// A container's memory on one device (bytes): used as its limiter or vendor library counts it.
  void memory(const ContainerLabels& labels, double usedBytes);
  void memoryLimit(const ContainerLabels& labels, double limitBytes);
  /// How busy the container keeps the device, percent, as the vendor library reports it.
  void utilization(const ContainerLabels& labels, double percent);
  /// The container's cumulative kernel time on the device (libvgpu.so's region): its
  /// utilization is the growth since the previous scrape over the wall time between them, so
  /// the first scrape of a series sets none.
  void busyTime(const ContainerLabels& labels, double busySeconds, Clock::time_point now);
  /// A partition on node `node` whose parent has index `parentIndex`: HAMi's MIG instance
  /// series, for partitions of kind "mig" (HAMi has none for other kinds).
  void partition(const std::string& node, const Partition& p, int parentIndex);
  /// Ends a scrape: forgets the busy time of series not seen in it.
  void end();

 private:
  metrics::LabelValues hamiLabels(const ContainerLabels& labels) const;

  metrics::Gauge& memoryUsed_;
  metrics::Gauge& memoryLimit_;
  metrics::Gauge& deviceMemory_;
  metrics::Gauge& utilization_;
  metrics::Gauge& migInstance_;
  struct Busy {
    double seconds = 0;
    Clock::time_point at;
    bool seen = false;
  };
  std::mutex mu_;  // busy_: two scrapes may collect at once
  std::map<ContainerLabels, Busy> busy_;
};

}  // namespace vgpu::deviceplugin
