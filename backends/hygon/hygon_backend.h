#pragma once
// The Hygon DCU backend: discovery through ROCm-SMI and hydmi (opened with dlopen), splitting
// by memory and whole compute units, and enforcement by virtual DCUs (vDCUs) made either
// through hydmi or through the vDCU configuration file that the container's hyhal reads.
// docs/backends/hygon.md is the user's side of this file.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "drm_nodes.h"
#include "vdev_state.h"
#include "vendor_libs.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"
#include "vgpu/container_spec.h"
#include "vgpu/device.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::hygon {

/// How a slice of a DCU is enforced.
enum class Enforcement : std::uint8_t {
  kVdevFile,  ///< Write the vDCU configuration file (CU masks, memory, ids) the container reads.
  kHydmi,     ///< Create the vDCU in the driver with dmiCreateVDevices.
  kNone,      ///< Only pass the device nodes: the scheduler's accounting, no hard limit.
};

/// The backend's `options`, checked.
struct HygonOptions {
  std::vector<std::string> driverDirs{"/opt/hyhal/lib", "/opt/hyhal/lib64"};
  std::filesystem::path sysfsRoot = "/sys";
  std::filesystem::path devRoot = "/dev";
  Enforcement enforcement = Enforcement::kVdevFile;
  std::filesystem::path stateDir = "/var/lib/vgpu/hygon";
  /// The host's vDCU folder. hydmi mode: hydmi writes vdev<id>.conf there and the backend
  /// only reads it. vdev-file mode: the backend puts its copy there for the exporter, never
  /// over a file it did not write. Empty: no copy (vdev-file mode only).
  std::string vdevCopyDir = "/etc/vdev";
  /// Where the per-pod folders with each container's vdev0.conf go; empty: <stateDir>/dcu.
  std::filesystem::path containerConfDir;
  std::string hyhalDir = "/opt/hyhal";    ///< Empty: not mounted.
  std::string driverMountDir;             ///< Mounted at /opt/hygondriver when set ($HYGONPATH).

  /// Unknown keys and bad values are errors naming `backends.<backend>.options.<key>`.
  static Result<HygonOptions> parse(const std::string& backend, const std::map<std::string, std::string>& options);
};

/// Reason codes of this backend (explained by HygonBackend::explain).
inline constexpr std::int32_t kReasonComputeUnits = VGPU_REASON_BACKEND;  ///< needed / available whole CUs
inline constexpr std::int32_t kReasonUnknownComputeUnits = VGPU_REASON_BACKEND + 1;

/// Node limits of the vDCU configuration file.
inline constexpr int kMaxVdevIds = 200;      ///< per node
inline constexpr int kMaxPipeIds = 20;       ///< per device
inline constexpr std::uint32_t kDefaultSplitCount = 4;

/// Whole CUs a compute percent asks for on a DCU of `total` CUs: rounded up, at least one
/// (a vDCU cannot run without a CU), all of them at 100.
std::uint32_t computeUnitsFor(std::uint32_t percent, std::uint32_t total);
/// The percent the scheduler books for `cus` CUs: rounded up, so the bookings on a device
/// never add up to more CUs than it has.
std::uint32_t percentFor(std::uint32_t cus, std::uint32_t total);
/// CUs a booked percent grants (rounded down, at least one): never more than was booked.
std::uint32_t grantedComputeUnits(std::uint32_t percent, std::uint32_t total);
/// A device's CU count: its `cuCount` attribute, else the model table; 0 = unknown.
std::uint32_t deviceComputeUnits(const vgpu_device& device);

/// The text of a vDCU configuration file (vdev0.conf in the container, vdev<id>.conf on
/// the host): one `key: value` per line, both cu_mask words, device_id as given.
struct VdevConfig {
  std::string pciBusId;
  CuMask mask;
  std::uint32_t cuCount = 0;
  std::uint64_t memoryMiB = 0;
  int deviceId = 0;  ///< 0 in the container's file: it sees its one vDCU as device 0
  int vdevId = 0;
  int pipeId = 0;
  std::string render() const;
  /// Reads such a file (hydmi's own); errors name the line that is wrong or missing.
  static Result<VdevConfig> parse(const std::string& text);
};

class HygonBackend {
 public:
  static Result<std::unique_ptr<HygonBackend>> create(const BackendParams& params);

  // Allocator
  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// The standard rules' fields and the attributes (the DCU's compute unit count).
  std::uint32_t fitReads() const { return sdk::kStandardFitReads | VGPU_FIT_READS_ATTRIBUTES; }
  /// Every DCU publishes the configured split count.
  std::optional<std::uint32_t> splitCountFor(const std::string& /*model*/) const {
    return params_.settings.splitCount.value_or(kDefaultSplitCount);
  }
  std::string explain(const vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;

  // Discovery
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  // Limiter
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  /// Also removes the per-pod folders no live container holds (by pod UID).
  Status reconcile(const std::vector<ContainerRef>& live);

  /// Per-container usage: hydmi's per-vDCU memory and busy percent, ROCm-SMI's per-device
  /// figures for a DCU held whole; a vdev-file slice reports only its limits (no query
  /// exists for it).
  Result<std::vector<ContainerUsage>> containerUsage();

  /// What the limiter holds now (loads the state file on first use).
  Result<std::vector<Holding>> holdings();
  const HygonOptions& options() const { return options_; }
  const sdk::StandardRequestRules& rules() const { return rules_; }

 private:
  /// A DCU as the last discovery saw it, with what the limiter needs.
  struct Dcu {
    Device device;
    std::uint32_t cuCount = 0;
    std::string pciBusId;
    std::optional<DrmNodes> nodes;
    std::string problem;  ///< Why it is unhealthy; empty when healthy.
  };

  HygonBackend(BackendParams params, HygonOptions options, sdk::StandardRequestRules rules);
  Status openLibraries();
  Result<std::vector<Dcu>> probe();
  Status loadState();
  Result<const Dcu*> dcuFor(const DeviceGrant& grant);
  /// Every vDCU hydmi lists, id -> DCU index. Ids are node-wide: all of 0..kMaxVdevIds are
  /// asked, not only dmiGetMaxVDeviceCount's (a per-DCU limit).
  Result<std::map<int, int>> hydmiVdevs();
  Result<std::vector<int>> hydmiVdevIds(int device);
  std::filesystem::path confRoot() const;
  Status checkConfDirs(const std::vector<Holding>& holdings) const;
  Status collectStaleConfDirs();
  Result<Holding> createVdev(const ContainerGrant& grant, const DeviceGrant& g, const Dcu& dcu, std::uint32_t cus,
                             std::vector<std::function<void()>>& undo);
  Status undoHolding(const Holding& h);
  Status releaseWhere(const std::function<bool(const ContainerRef&)>& gone);
  /// The container's holdings when they are what `grant` asks for and still there (the
  /// vDCU listed by hydmi, its folder present), one per granted DCU in order; else nullopt.
  std::optional<std::vector<Holding>> heldAsGranted(const ContainerGrant& grant, const std::vector<Dcu>& dcus);
  /// The device nodes, driver mounts and annotation every container's spec carries.
  void finishSpec(ContainerSpec& spec, const ContainerGrant& grant, const std::vector<Dcu>& dcus,
                  const std::filesystem::path& kfd);

  BackendParams params_;
  HygonOptions options_;
  sdk::StandardRequestRules rules_;
  std::vector<ResourceName> resources_;

  std::mutex mutex_;  // guards everything below: discovery, limiter and health share them
  std::unique_ptr<RocmSmi> rsmi_;
  std::unique_ptr<Hydmi> hydmi_;
  std::vector<Dcu> dcus_;
  std::map<std::string, std::pair<Health, std::string>> lastHealth_;
  std::chrono::steady_clock::time_point lastProbe_{};
  bool stateLoaded_ = false;
  std::vector<Holding> holdings_;
};

}  // namespace vgpu::hygon
