#pragma once
// Scheduler side: NVIDIA's resource names and annotations on top of the standard rules, and
// the fit rule that is NVIDIA's own (MIG mode). NUMA binding is core's: it needs all GPUs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/allocator.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"
#include "vgpu/device_request.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::nvidia {

/// Reason codes of this backend (explained by NvidiaAllocator::explain).
enum NvidiaReason : std::int32_t {
  /// The GPU is in MIG mode: it is partitioned in hardware and cannot be shared by libvgpu.so.
  kReasonMigEnabled = VGPU_REASON_BACKEND + 1,
};

/// The default resource names and annotation keys (HAMi's, so pods move over unchanged).
sdk::StandardResourceNames defaultResourceNames();
sdk::ConstraintAnnotationKeys annotationKeys();

class NvidiaAllocator {
 public:
  explicit NvidiaAllocator(const BackendParams& params);

  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  /// Checks in order: health, MIG mode, the standard rules (model and UUID filters, size,
  /// shares, exclusive use, memory, compute). A GPU whose NUMA node is unknown (-1) is left
  /// to core's grouping: sysfs says -1 on single-node machines, where binding always holds.
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// The standard rules' fields and the attributes (MIG mode).
  std::uint32_t fitReads() const { return sdk::kStandardFitReads | VGPU_FIT_READS_ATTRIBUTES; }
  std::string explain(const vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  const sdk::StandardRequestRules& rules() const { return rules_; }

 private:
  sdk::StandardRequestRules rules_;
  std::vector<ResourceName> resources_;
};

}  // namespace vgpu::nvidia
