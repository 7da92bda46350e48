#pragma once
// Node side: the GPUs of this node from NVML (one long-lived session), or from
// `nvidia-smi -q -x` when NVML cannot be used here; Xid health through NVML event sets.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gpu_info.h"
#include "nvml.h"
#include "vgpu/device_process.h"
#include "vgpu/device.h"
#include "vgpu/discovery.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// Which Xids make a GPU unhealthy. NVIDIA's device plugin treats 13, 31, 43, 45, 68 and 109
/// as application errors, and honours DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS; so do we.
struct HealthCheckPolicy {
  bool enabled = true;
  std::set<unsigned long long> ignoredXids{13, 31, 43, 45, 68, 109};

  /// `disable`: "all" or "xids" turn health checks off; numbers are Xids to ignore as well.
  /// `enable`: numbers are Xids to treat as critical even if ignored by default; "all"
  /// ignores none. Null or empty = unset. Errors name the variable and the bad item.
  static Result<HealthCheckPolicy> fromEnvironment(const char* disable, const char* enable);
  bool critical(unsigned long long xid) const { return enabled && !ignoredXids.contains(xid); }
};

enum class DiscoverySource : std::uint8_t { kAuto, kNvml, kNvidiaSmi };

struct DiscoverySettings {
  std::string backend = "nvidia";
  DiscoverySource source = DiscoverySource::kAuto;
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  std::string nvidiaSmiPath = "nvidia-smi";
  std::chrono::milliseconds nvidiaSmiTimeout{10000};
  std::string sysRoot = "/sys";  ///< host /sys (NUMA nodes of PCI devices, cgroup v2)
  std::uint32_t splitCount = 10;
  double memoryScaling = 1.0;
  double coreScaling = 1.0;
  HealthCheckPolicy health;
  MigStrategy migStrategy = MigStrategy::kNone;
  /// The backend's count resource; under mixed each device names the one it is served under.
  std::string countResource = "nvidia.com/gpu";
  MigServing mig;  ///< which GPUs are under dynamic MIG
};

/// A published Device from what discovery learnt (scaling and split count applied).
Device toDevice(const GpuInfo& gpu, const DiscoverySettings& settings, const std::string& discoveredBy);

/// A published Device for one MIG device of `gpu`: its own memory and compute (100 = the
/// whole MIG device), the GPU's model, NUMA node and health.
Device toMigDevice(const GpuInfo& gpu, const MigDevice& mig, const DiscoverySettings& settings);

/// "00000000:3B:00.0" -> "0000:3b:00.0", the name of the device under /sys/bus/pci/devices.
std::string sysfsPciName(const std::string& nvmlBusId);

class NvidiaDiscovery {
 public:
  explicit NvidiaDiscovery(DiscoverySettings settings);
  ~NvidiaDiscovery();
  NvidiaDiscovery(const NvidiaDiscovery&) = delete;
  NvidiaDiscovery& operator=(const NvidiaDiscovery&) = delete;

  /// Every GPU, unhealthy ones included: a GPU whose queries fail, one that had a critical
  /// Xid (until the agent restarts, as NVIDIA's plugin does), and one seen before that is no
  /// longer reported. Errors: neither NVML nor nvidia-smi could list the GPUs (both reasons).
  Result<std::vector<Device>> discover();

  /// Waits up to `timeout` for critical Xid events; an NVML failure while waiting marks every
  /// GPU unhealthy. Without NVML (or with health checks off) it just waits. It may run on a
  /// thread of its own once discover() has run; the NVML session is opened by discover().
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  /// The NVML session, once discovery opened one (null before, or on the nvidia-smi path).
  const NvmlSession* nvml() const { return nvml_.get(); }
  /// Every process on every GPU, from NVML (processes.h). Errors: NVML not in use (nvidia-smi
  /// discovery, or discover() not run yet), or its queries fail.
  Result<std::vector<DeviceProcess>> deviceProcesses();
  /// What the driver charges the memory cgroup of a process (CgroupMemoryReporter): its
  /// per-cgroup limit's currentUsed, where a limit is set (r615+, whole GPUs).
  Result<std::optional<std::uint64_t>> cgroupMemoryUsed(const std::string& procCgroup, const std::string& deviceId);
  /// Why NVML was not used on the last discovery (empty when it was).
  const std::string& nvmlUnavailableReason() const { return nvmlWhy_; }

 private:
  Result<std::vector<GpuInfo>> listWithNvml();
  Result<std::vector<GpuInfo>> listWithNvidiaSmi() const;
  /// The links between `gpus` from `nvidia-smi topo -m`; left unknown when it fails.
  void linksFromNvidiaSmi(std::vector<GpuInfo>& gpus) const;
  void watchForXids(nvml::Device handle, const std::string& uuid, std::vector<std::string>& failures);
  int numaFromSysfs(const std::string& busId) const;
  /// Whether `g`'s MIG devices are published in its place (a MIG strategy, MIG on).
  bool servesMigDevices(const GpuInfo& g) const;
  /// The `single` strategy's rule: every GPU in MIG mode, every MIG device alike.
  Status checkMigStrategy(const std::vector<GpuInfo>& gpus) const;
  void markUnhealthy(const std::string& uuid, const std::string& reason, std::vector<HealthEvent>& out);

  DiscoverySettings settings_;
  std::unique_ptr<NvmlSession> nvml_;
  std::string nvmlWhy_;
  nvml::EventSet events_ = nullptr;

  std::mutex mutex_;  ///< guards the maps below (the health wait runs beside discover)
  std::map<nvml::Device, std::string> handles_;       ///< registered for events -> uuid
  std::map<std::string, std::string> watchFailures_;  ///< uuid -> why events cannot be watched
  std::map<std::string, Device> known_;               ///< last published, by uuid
  std::map<std::string, std::string> stickyUnhealthy_;  ///< uuid -> reason (critical Xid)
};

}  // namespace vgpu::nvidia
