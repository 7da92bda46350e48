#include "hami_metrics.h"

#include <cctype>

#include "vgpu/hami_type_name.h"

namespace vgpu::scheduler {
namespace {

// HAMi registers its collectors under this constant label.
constexpr const char* kZone = "vGPU";
constexpr double kMiB = 1048576.0;

std::vector<std::string> withZone(std::vector<std::string> labels) {
  labels.emplace_back("zone");
  return labels;
}

const std::vector<std::string> kDeviceLabels = withZone({"node", "device_uuid", "device_index", "device_type"});
const std::vector<std::string> kContainerLabels =
    withZone({"namespace", "node", "pod", "container_index", "device_uuid"});

}  // namespace

std::string hamiDeviceType(const Device& device) {
  std::string vendor = device.backend;
  for (char& c : vendor) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return hamiTypeName(vendor, device.model);
}

HamiSchedulerMetrics::HamiSchedulerMetrics(metrics::Registry& r)
    : memoryLimit_(r.gauge("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", kDeviceLabels)),
      coreLimit_(r.gauge("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU", kDeviceLabels)),
      memoryAllocated_(r.gauge("hami_gpu_memory_allocated_bytes", "Device memory allocated for a certain GPU",
                               withZone({"node", "device_uuid", "device_index", "device_cores", "device_type"}))),
      // HAMi's name ends in _count, which promtool's lint refuses for a gauge: untyped here
      // (queries do not see the type).
      sharedCount_(r.untypedGauge("hami_gpu_shared_count", "Number of containers sharing this GPU", kDeviceLabels)),
      coreAllocated_(r.gauge("hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", kDeviceLabels)),
      overview_(r.gauge("hami_node_gpu_overview", "GPU overview on a certain node",
                        withZone({"node", "device_uuid", "device_index", "device_cores", "device_memory_limit",
                                  "device_type"}))),
      memoryAllocatedRatio_(r.gauge("hami_node_gpu_memory_allocated_ratio",
                                    "GPU Memory Allocated Percentage on a certain GPU", kDeviceLabels)),
      containerMemory_(r.gauge("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container",
                               kContainerLabels)),
      containerCore_(r.gauge("hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container",
                             kContainerLabels)),
      quotaUsed_(r.gauge("hami_resource_quota_used", "ResourceQuota usage tracked by the scheduler",
                         withZone({"namespace", "quota_name", "limit"}))) {}

void HamiSchedulerMetrics::collect(const ClusterCache& cache) {
  for (auto* g : {&memoryLimit_, &coreLimit_, &memoryAllocated_, &sharedCount_, &coreAllocated_, &overview_,
                  &memoryAllocatedRatio_, &containerMemory_, &containerCore_, &quotaUsed_})
    g->clear();
  cache.forEachNode([&](const NodeEntry& node) {
    const auto& entries = node.state.inventory->entries();
    for (size_t i = 0; i < entries.size(); ++i) {
      const Device& d = entries[i].device();
      const DeviceUsage& u = node.state.usage[i];
      const std::string index = std::to_string(d.index), type = hamiDeviceType(d);
      const std::string cores = std::to_string(d.computeUnits);
      const metrics::LabelValues l{node.state.name, d.id, index, type, kZone};
      const double used = static_cast<double>(u.memoryMiB) * kMiB;
      memoryLimit_.set(l, static_cast<double>(d.memoryMiB) * kMiB);
      coreLimit_.set(l, d.computeUnits);
      memoryAllocated_.set({node.state.name, d.id, index, cores, type, kZone}, used);
      sharedCount_.set(l, u.shares);
      coreAllocated_.set(l, u.compute);
      overview_.set({node.state.name, d.id, index, cores, std::to_string(d.memoryMiB), type, kZone}, used);
      if (d.memoryMiB > 0) memoryAllocatedRatio_.set(l, static_cast<double>(u.memoryMiB) / static_cast<double>(d.memoryMiB));
    }
  });
  // HAMi counts quotas on `limits.<resource>` keys only, and names a series by the resource
  // with the hard limit as a label; the value is in the resource's unit.
  const QuotaResources& resources = cache.quotaResources();
  cache.forEachNamespace([&](const std::string& ns, const ClusterCache::NamespaceQuota& q) {
    for (const QuotaLimit& limit : q.limits) {
      if (!limit.key.starts_with("limits.")) continue;
      const auto used = q.used.find(limit.resource);
      const std::int64_t amount = used == q.used.end() ? 0 : resources.inUnits(limit.resource, used->second);
      quotaUsed_.set({ns, limit.resource, std::to_string(limit.hard), kZone}, static_cast<double>(amount));
    }
  });
  // One walk over the pods, not a look-up (and a lock) per node.
  cache.forEachHeldPod([&](const ClusterCache::HeldPodView& pod) {
    if (!pod.ours) return;  // another scheduler's pod: which devices it holds is unknown
    const auto slash = pod.key.find('/');
    const std::string ns(pod.key.substr(0, slash)), name(slash == std::string_view::npos ? "" : pod.key.substr(slash + 1));
    const auto& containers = pod.assignment.containers;
    for (size_t c = 0; c < containers.size(); ++c)
      for (const auto& g : containers[c].devices) {
        const metrics::LabelValues l{ns, std::string(pod.node), name, std::to_string(c), g.deviceId, kZone};
        containerMemory_.set(l, static_cast<double>(g.memoryMiB) * kMiB);
        containerCore_.set(l, g.compute);
      }
  });
}

}  // namespace vgpu::scheduler
