#pragma once
// The Huawei Ascend NPU backend. Splitting: a chip whole, or one vNPU of the smallest
// documented template that holds the request (fixed slices: placed with ABI 1.6 tokens).
// Discovery and usage: DCMI (libdcmi.so, dlopen'd on first use). Enforcement: the driver's
// vNPUs, created per container with dcmi_create_vdevice and destroyed on release.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dcmi_library.h"
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
#include "vnpu_state.h"

namespace vgpu::ascend {

/// What the Ascend runtime reads: the NPUs (or vNPUs) a container sees, and whether those
/// ids are vNPU ids ("VIRTUAL"), as Ascend's container runtime takes them.
inline constexpr const char* kVisibleDevicesEnv = "ASCEND_VISIBLE_DEVICES";
inline constexpr const char* kRuntimeOptionsEnv = "ASCEND_RUNTIME_OPTIONS";
/// Device attributes discovery publishes (for people and metrics; fit reads the model).
inline constexpr const char* kAiCoresAttribute = "aiCores";
inline constexpr const char* kTemplatesAttribute = "vnpuTemplates";

struct AscendOptions {
  std::vector<std::string> libraryPaths{"libdcmi.so", "/usr/local/dcmi/libdcmi.so"};
  std::filesystem::path devRoot = "/dev";
  std::filesystem::path stateDir = "/var/lib/vgpu/ascend";
  /// Off: every chip is offered whole (a node whose chips are not in vNPU mode).
  bool vnpu = true;
  /// HAMi's chip families to serve, each under its own names (huawei.com/<family>,
  /// huawei.com/<family>-memory): "Ascend910B3,Ascend310P". Empty: one set of names
  /// (`resources`) for every chip.
  std::vector<std::string> families;
};

/// The resource names of one chip family and the chips they count ("" = every chip).
struct ChipFamily {
  std::string model;  ///< a prefix of Device::model, "Ascend910B3"; "" = any
  sdk::StandardRequestRules rules;
};

class AscendBackend {
 public:
  static Result<std::unique_ptr<AscendBackend>> create(const BackendParams& params);

  // Allocator
  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// The model (its template table), memory, split count, health; the id only against id lists.
  std::uint32_t fitReads() const { return sdk::kStandardFitReads; }
  bool placesGrants(const vgpu_device& device) const;
  /// The most vNPUs of the smallest template (1 for a chip without templates), at most the
  /// configured split count: what discover publishes for a chip of `model`.
  std::optional<std::uint32_t> splitCountFor(const std::string& model) const;
  void fitPlaced(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                 vgpu_placement& placement, vgpu_fit_result& result) const;
  std::string explain(const vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  std::vector<ProtectedEnv> protectedEnv() const;

  // Discovery
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  // Limiter
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  Status reconcile(const std::vector<ContainerRef>& live);
  /// Each held chip's limits (a vNPU's template, a whole chip's memory); memory used is left
  /// to the per-process listing, which DCMI gives per chip, not per vNPU.
  Result<std::vector<ContainerUsage>> containerUsage();
  Result<std::vector<DeviceProcess>> deviceProcesses();

  const AscendOptions& options() const { return options_; }
  std::filesystem::path statePath() const { return options_.stateDir / "held-chips.tsv"; }

 private:
  AscendBackend(BackendParams params, std::vector<ChipFamily> families, AscendOptions options);
  /// The family whose resources the container asks for; null when none; an error for two.
  Result<const ChipFamily*> familyOf(const ContainerResources& container) const;
  /// The family that counts a chip of `model` (the longest prefix); null when none does.
  const ChipFamily* familyFor(const std::string& model) const;

  Result<DcmiLibrary*> library();
  Result<std::vector<ChipInfo>> chips();
  Device toDevice(const ChipInfo& chip) const;
  Result<DeviceNode> nodeAt(const std::string& name) const;
  /// Destroys what `doomed` holds; returns the first error, keeping what it could not undo.
  Status undo(const std::vector<HeldChip>& doomed, std::vector<HeldChip>& held);

  BackendParams params_;
  std::vector<ChipFamily> families_;
  AscendOptions options_;
  std::vector<ResourceName> resources_;

  std::mutex mutex_;  ///< the library, the chips seen last and the held state
  std::unique_ptr<DcmiLibrary> library_;
  std::vector<ChipInfo> lastChips_;
  std::map<std::string, Health> lastHealth_;
};

}  // namespace vgpu::ascend
