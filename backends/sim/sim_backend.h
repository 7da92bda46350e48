#pragma once
// The simulation backend: devices described in a YAML file instead of found through a
// vendor library. It serves vgpu-sim, the tests, and is the example to copy when writing a
// backend (see docs/writing-a-backend.md).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vgpu/allocator.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"
#include "vgpu/container_spec.h"
#include "vgpu/device.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::sim {

/// Reads the devices file: `devices: [{id, model, memoryMiB, computeUnits, numa, health}]`.
/// Errors name the file and the entry.
Result<std::vector<Device>> loadDevicesFile(const std::string& path);

/// The split count of a device when the settings give none.
inline constexpr std::uint32_t kDefaultSplitCount = 10;

class SimBackend {
 public:
  static Result<std::unique_ptr<SimBackend>> create(const BackendParams& params);

  // Allocator
  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// fit is the standard rules alone.
  std::uint32_t fitReads() const { return sdk::kStandardFitReads; }
  /// Every device is split as the settings say (discover applies the same).
  std::optional<std::uint32_t> splitCountFor(const std::string& /*model*/) const {
    return params_.settings.splitCount.value_or(kDefaultSplitCount);
  }
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  /// The variables containerSpec sets: the visibility one in no container, the limits in
  /// containers with sim resources.
  std::vector<ProtectedEnv> protectedEnv() const;

  // Discovery: the devices file, with split count and scaling applied.
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  // Limiter: env naming the devices and limits, and the container's host folder mounted.
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  Status reconcile(const std::vector<ContainerRef>& live);
  /// Containers the limiter currently holds something for.
  std::set<ContainerRef> held() const;

  const sdk::StandardRequestRules& rules() const { return rules_; }

 private:
  SimBackend(BackendParams params, sdk::StandardRequestRules rules, std::string devicesFile);

  BackendParams params_;
  sdk::StandardRequestRules rules_;
  std::vector<ResourceName> resources_;
  std::string devicesFile_;
  std::map<std::string, Health> lastHealth_;
  mutable std::mutex mutex_;
  std::set<ContainerRef> held_;
};

}  // namespace vgpu::sim
