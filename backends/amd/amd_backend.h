#pragma once
// The AMD Instinct GPU backend. Whole GPUs are shared by the scheduler's accounting, with
// the ROCm runtime's heap size (GPU_MAX_HEAP_SIZE) set to the grant's share; an MI300-class
// GPU set to a compute partition mode (DPX/QPX/CPX) is offered as its partitions, one per
// grant, placed with ABI 1.6 tokens. Discovery and usage: AMD SMI (libamd_smi.so, dlopen'd).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "amdsmi_library.h"
#include "gpu_layout.h"
#include "vgpu/allocator.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"
#include "vgpu/container_spec.h"
#include "vgpu/device.h"
#include "vgpu/device_process.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::amd {

/// The ROCm runtime's (ROCclr) heap size, percent of the GPU's memory: what hipMemGetInfo and
/// hipDeviceProp_t::totalGlobalMem report, and the base of the single-allocation cap.
inline constexpr const char* kHeapSizeEnv = "GPU_MAX_HEAP_SIZE";
/// The AMD Container Toolkit's variable: its runtime hook gives the GPUs named there to any
/// container that sets it.
inline constexpr const char* kToolkitVisibleEnv = "AMD_VISIBLE_DEVICES";
inline constexpr std::uint32_t kDefaultSplitCount = 10;

struct AmdOptions {
  std::vector<std::string> libraryPaths{"libamd_smi.so", "/opt/rocm/lib/libamd_smi.so"};
  std::filesystem::path devRoot = "/dev";
  std::filesystem::path sysfsRoot = "/sys";  ///< the KFD topology, for render minors on ROCm < 6.4
};

class AmdBackend {
 public:
  static Result<std::unique_ptr<AmdBackend>> create(const BackendParams& params);

  // Allocator
  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const {
    return sdk::parseStandardRequest(rules_, container, annotations);
  }
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// The standard fields and the compute partition attribute (whole or partitioned).
  std::uint32_t fitReads() const { return sdk::kStandardFitReads | VGPU_FIT_READS_ATTRIBUTES; }
  bool placesGrants(const vgpu_device& device) const { return isPartitionedDevice(device); }
  /// The configured split count of a whole GPU; not told for MI300-class models (MI3xx),
  /// whose count is their partitions' when the GPU is set to DPX/QPX/CPX, a per-GPU mode.
  std::optional<std::uint32_t> splitCountFor(const std::string& model) const {
    if (model.find("MI3") != std::string::npos) return std::nullopt;
    return params_.settings.splitCount.value_or(kDefaultSplitCount);
  }
  void fitPlaced(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                 vgpu_placement& placement, vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const {
    return sdk::standardAdmissionDefaults(rules_, container, annotations);
  }
  std::vector<ProtectedEnv> protectedEnv() const {
    return {{kToolkitVisibleEnv, ProtectedEnv::Scope::kEveryContainer},
            {kHeapSizeEnv, ProtectedEnv::Scope::kBackendContainers}};
  }

  // Discovery
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  // Limiter: nothing is made on the node; release and reconcile forget which partition a
  // container was given (for grants that name none).
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  Status reconcile(const std::vector<ContainerRef>& live);
  Result<std::vector<DeviceProcess>> deviceProcesses();

 private:
  AmdBackend(BackendParams params, sdk::StandardRequestRules rules, AmdOptions options);
  Result<AmdSmiLibrary*> library();
  Result<std::vector<PhysicalGpu>> gpus();
  Device toDevice(const PhysicalGpu& gpu, int index) const;
  Result<DeviceNode> nodeAt(const std::string& name) const;
  /// The partition of `gpu` for a grant: its token's, else the one this container was given
  /// before, else the lowest no live container holds (noted in `notes`).
  Result<std::uint32_t> partitionFor(const ContainerRef& container, const PhysicalGpu& gpu, const std::string& token,
                                     std::vector<std::string>& notes);

  BackendParams params_;
  sdk::StandardRequestRules rules_;
  AmdOptions options_;
  std::vector<ResourceName> resources_;

  std::mutex mutex_;  ///< the library and the GPUs seen last
  std::unique_ptr<AmdSmiLibrary> library_;
  std::vector<PhysicalGpu> lastGpus_;
  std::map<std::string, Health> lastHealth_;
  /// Partitions given to live containers: (container, GPU id) -> partition. In memory only:
  /// the scheduler's tokens say where each grant goes; this only keeps grants without one
  /// (written by hand, or by a scheduler that did not place them) off each other.
  std::map<std::pair<ContainerRef, std::string>, std::uint32_t> given_;
};

}  // namespace vgpu::amd
