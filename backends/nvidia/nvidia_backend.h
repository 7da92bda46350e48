#pragma once
// The NVIDIA backend: allocator (scheduler side), discovery and limiter (node side), with the
// options of its device-config.yaml section. docs/backends/nvidia.md describes them.

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocator.h"
#include "discovery.h"
#include "limiter.h"
#include "mig_manager.h"
#include "vgpu/backend_params.h"
#include "vgpu/container_spec.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// Everything the options and settings of a config section say, checked.
struct NvidiaOptions {
  DiscoverySettings discovery;
  LimiterSettings limiter;
  MigServing mig;
};

/// Parses `params` (options included; unknown option keys are refused naming
/// backends.<name>.options.<key>) and the health-check environment variables.
Result<NvidiaOptions> parseOptions(const BackendParams& params, const char* disableHealthChecks,
                                   const char* enableHealthChecks);

class NvidiaBackend {
 public:
  static Result<std::unique_ptr<NvidiaBackend>> create(const BackendParams& params);

  // Allocator
  const std::vector<ResourceName>& resources() const { return allocator_.resources(); }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const {
    return allocator_.parseRequest(container, annotations);
  }
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const {
    allocator_.fit(request, device, usage, result);
  }
  std::uint32_t fitReads() const { return allocator_.fitReads(); }
  /// Every GPU, MIG-managed or not, publishes the configured split count.
  std::optional<std::uint32_t> splitCountFor(const std::string& /*model*/) const {
    return options_.discovery.splitCount;
  }
  bool placesGrants(const vgpu_device& device) const { return allocator_.placesGrants(device); }
  void fitPlaced(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                 vgpu_placement& placement, vgpu_fit_result& result) const {
    allocator_.fitPlaced(request, device, usage, placement, result);
  }
  std::string explain(const vgpu_fit_result& result) const { return allocator_.explain(result); }
  /// Also refuses, at admission, a container that asks (nvidia.com/disable-control) to run
  /// without libvgpu.so where the operator does not allow it (allowOptOut).
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  /// NVIDIA_VISIBLE_DEVICES in any container; in containers with NVIDIA resources, the
  /// driver cap, LD_PRELOAD and every variable libvgpu.so or HAMi-core reads.
  std::vector<ProtectedEnv> protectedEnv() const;

  // Discovery
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout) {
    return discovery_->waitForHealthEvents(timeout);
  }

  /// Per-process usage for the node agent's watchdog (NVML's process lists).
  Result<std::vector<DeviceProcess>> deviceProcesses() { return discovery_->deviceProcesses(); }
  Result<std::optional<std::uint64_t>> cgroupMemoryUsed(const std::string& procCgroup, const std::string& deviceId) {
    return discovery_->cgroupMemoryUsed(procCgroup, deviceId);
  }

  // Limiter
  /// On a GPU under dynamic MIG, first creates the container's MIG instance (MigManager) at
  /// the placement the scheduler chose (the grant's token; planned again on the GPU's real
  /// state when that place is taken, with a notice saying why) and gives the container that
  /// MIG device instead of the GPU.
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  /// Also destroys the container's MIG instances (dynamic MIG).
  Status release(const ContainerRef& container);
  /// Also reclaims MIG instances of containers not in `live`, and those a dead agent left.
  Status reconcile(const std::vector<ContainerRef>& live);

  /// Whether the driver's kernel memory cap can be used on this node (asks NVML and cgroupfs).
  Status kernelMemoryCap();

 private:
  NvidiaBackend(const BackendParams& params, NvidiaOptions options);
  Status probeKernelMemoryCap();
  /// Whether `deviceId` is a GPU discovery published under dynamic MIG.
  bool managed(const std::string& deviceId);
  Result<MigManager*> migManager();

  NvidiaOptions options_;
  NvidiaAllocator allocator_;
  std::unique_ptr<NvidiaDiscovery> discovery_;
  std::unique_ptr<NvidiaLimiter> limiter_;
  std::mutex capMutex_;
  std::optional<Status> kernelCap_;  ///< asked once: support changes only with a driver upgrade
  std::atomic<bool> loggedEnforcement_{false};  ///< the memory enforcement chosen is logged once
  std::mutex migMutex_;  ///< guards the two below
  std::map<std::string, bool> managedSeen_;  ///< device id -> published under dynamic MIG
  std::unique_ptr<MigManager> migManager_;   ///< made once NVML is open
};

}  // namespace vgpu::nvidia
