#pragma once
// Scheduler side: NVIDIA's resource names and annotations on top of the standard rules, and
// the fit rule that is NVIDIA's own (MIG mode). NUMA binding is core's: it needs all GPUs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mig.h"
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
  /// mixed: a MIG device serves only its own nvidia.com/mig-<profile> resource.
  kReasonMigDeviceNeedsMigResource = VGPU_REASON_BACKEND + 2,
  /// mixed: the container asks for a MIG profile and this is a whole GPU.
  kReasonNotAMigDevice = VGPU_REASON_BACKEND + 3,
  /// mixed: the MIG device has another profile than the one asked for.
  kReasonMigProfileMismatch = VGPU_REASON_BACKEND + 4,
  /// Dynamic MIG: no allowed profile of the GPU has the memory asked (needed: MiB asked,
  /// available: the largest allowed profile's MiB).
  kReasonMigNoProfile = VGPU_REASON_BACKEND + 5,
  /// Dynamic MIG: the smallest profile that fits does not fit in what the GPU has left
  /// (needed: its MiB, available: MiB not yet in instances).
  kReasonMigNoRoom = VGPU_REASON_BACKEND + 6,
  /// Dynamic MIG: the GPU's published MIG profiles cannot be read (a bad inventory).
  kReasonMigInventory = VGPU_REASON_BACKEND + 7,
  /// Dynamic MIG: no allowed profile with the memory has a free placement next to the GPU's
  /// instances (needed: the smallest such profile's MiB, available: MiB not in instances).
  /// The planner's words ("no free 3g.40gb placement: slices 4–7 hold a 1g.10gb") come
  /// through vgpu_placement.why.
  kReasonMigNoPlacement = VGPU_REASON_BACKEND + 8,
};

/// The default resource names and annotation keys (HAMi's, so pods move over unchanged).
sdk::StandardResourceNames defaultResourceNames();
sdk::ConstraintAnnotationKeys annotationKeys();

class NvidiaAllocator {
 public:
  explicit NvidiaAllocator(const BackendParams& params, MigServing mig = {});

  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  /// mixed MIG: a container asks for at most one of the nvidia.com/mig-<profile> resources
  /// (with gpumem / gpucores it takes a slice of such a MIG device) and not for nvidia.com/gpu.
  /// Checks in order: health, MIG resource against MIG device (mixed), MIG mode, the standard rules (model and UUID filters, size,
  /// shares, exclusive use, memory, compute). A GPU whose NUMA node is unknown (-1) is left
  /// to core's grouping: sysfs says -1 on single-node machines, where binding always holds.
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// A GPU under dynamic MIG (attribute migManaged): the fit must know where the instances
  /// of the grants on it sit.
  bool placesGrants(const vgpu_device& device) const;
  /// fit() with the placements of the grants on the device: on a GPU under dynamic MIG, the
  /// instance is planned next to them and its placement is the grant's token.
  void fitPlaced(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                 vgpu_placement& placement, vgpu_fit_result& result) const;
  /// The standard rules' fields and the attributes (MIG mode).
  std::uint32_t fitReads() const { return sdk::kStandardFitReads | VGPU_FIT_READS_ATTRIBUTES; }
  std::string explain(const vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  const sdk::StandardRequestRules& rules() const { return rules_; }

 private:
  /// fit() and fitPlaced(); `placement` null: no grant on the device has a placement.
  void fitWith(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
               vgpu_placement* placement, vgpu_fit_result& result) const;
  /// mixed: the request's MIG profile (a constraint among its model filters) against the
  /// device's, then fitGpu with the remaining filters.
  void fitMixed(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                vgpu_placement* placement, vgpu_fit_result& result) const;
  /// A GPU (or MIG device): dynamic MIG, MIG mode, then the standard rules.
  void fitGpu(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
              vgpu_placement* placement, vgpu_fit_result& result) const;
  /// A GPU under dynamic MIG: the request becomes one GPU instance, the smallest allowed
  /// profile with its memory that has a free placement next to the GPU's instances (those
  /// in its inventory and those of the grants placed on it), where MigPlanner puts it.
  void fitManaged(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                  vgpu_placement* placement, vgpu_fit_result& result) const;

  /// "nvidia.com/mig-1g.5gb" -> "1g.5gb" (mixed), from the count resource's domain.
  std::map<std::string, std::string> migResources_;
  sdk::StandardRequestRules rules_;
  std::vector<ResourceName> resources_;
  MigServing mig_;
};

}  // namespace vgpu::nvidia
