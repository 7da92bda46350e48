#pragma once
// The Cambricon MLU backend. Splitting: the standard rules plus "a card not in sMLU mode is
// given only whole". Discovery: cnDev (libcndev.so, opened with dlopen on first use, so the
// scheduler never needs it). Enforcement: the driver's sMLU partitions: one profile
// (compute quota + memory) and one instance of it per partially granted card; the
// container gets the card's device nodes and the instance's node.

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cndev_library.h"
#include "smlu_state.h"
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

namespace vgpu::cambricon {

/// Device attribute: "on" when the card is in sMLU mode, "off" when it is offered whole.
inline constexpr const char* kSmluAttribute = "smluMode";
/// Device attribute: number of MLULink ports, when the card has any.
inline constexpr const char* kMluLinkAttribute = "mlulinkPorts";

/// Refusal: a partial request on a card that is not in sMLU mode.
inline constexpr int kReasonNotSmlu = VGPU_REASON_BACKEND + 1;

/// Pod annotations Cambricon's own device plugin (dynamic-smlu mode) reads. The plugin's
/// key really is spelled ASSIGHED.
inline constexpr const char* kVendorProfileKey = "CAMBRICON_DSMLU_PROFILE";
inline constexpr const char* kVendorAssignedKey = "CAMBRICON_DSMLU_ASSIGHED";
inline constexpr const char* kVendorInstanceKey = "CAMBRICON_DSMLU_PROFILE_INSTANCE";
/// Environment a container gets: the MLUs (or sMLU instances) it may see, and its
/// virtual-device split for the vendor's libraries.
inline constexpr const char* kVisibleDevicesEnv = "CAMBRICON_VISIBLE_DEVICES";
inline constexpr const char* kVirtualDevicesEnv = "VIRTUAL_DEVICES";

struct CambriconOptions {
  std::vector<std::string> libraryPaths{"libcndev.so", "/usr/local/neuware/lib64/libcndev.so"};
  std::filesystem::path stateDir = "/var/lib/vgpu/cambricon";
  bool vendorAnnotations = false;
  /// Where the MLU device nodes are looked for (the host's /dev; tests point it elsewhere).
  std::filesystem::path devRoot = "/dev";
  /// The kubelet's device-plugin folder, where Cambricon's own plugin puts its sockets.
  std::filesystem::path kubeletPluginDir = "/var/lib/kubelet/device-plugins";
  /// More than one sMLU instance per container (on different cards). Off: no cnDev call
  /// says whether the driver and the container runtime accept it.
  bool multiCardSmlu = false;
};

/// A socket of Cambricon's own device plugin that answers in `pluginDir`, or nullopt.
/// Its sockets are cambricon.sock and one per resource it registers (real-mlu-counts,
/// the *.smlu.* resources of dynamic-smlu mode); a file nobody listens on does not count.
std::optional<std::filesystem::path> runningVendorPluginSocket(const std::filesystem::path& pluginDir);

class CambriconBackend {
 public:
  static Result<std::unique_ptr<CambriconBackend>> create(const BackendParams& params);
  ~CambriconBackend();

  // Allocator
  const std::vector<ResourceName>& resources() const { return resources_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const;
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const;
  /// The standard rules' fields and the attributes (whether the card runs sMLU).
  std::uint32_t fitReads() const { return sdk::kStandardFitReads | VGPU_FIT_READS_ATTRIBUTES; }
  std::string explain(const vgpu_fit_result& result) const;
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const;
  /// CAMBRICON_VISIBLE_DEVICES in no container, VIRTUAL_DEVICES in containers with MLU
  /// resources: the two variables containerSpec sets.
  std::vector<ProtectedEnv> protectedEnv() const;

  // Discovery
  Result<std::vector<Device>> discover();
  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout);

  // Limiter
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  Status reconcile(const std::vector<ContainerRef>& live);

  /// Per-container usage: cnDev's per-instance MAX/USAGE for an sMLU, the card's own memory
  /// and utilization for a card held whole.
  Result<std::vector<ContainerUsage>> containerUsage();

  const sdk::StandardRequestRules& rules() const { return rules_; }
  const CambriconOptions& options() const { return options_; }
  std::filesystem::path statePath() const { return options_.stateDir / "smlu-instances.json"; }

 private:
  CambriconBackend(BackendParams params, sdk::StandardRequestRules rules, CambriconOptions options);

  Result<CndevLibrary*> library();
  Result<std::vector<CardInfo>> cards();
  Device toDevice(const CardInfo& card) const;
  /// Refuses to go on while Cambricon's own plugin runs on the node: its resync destroys
  /// every sMLU instance no pod annotation of its own names.
  Status checkNoVendorPlugin() const;
  /// The card's device nodes that exist on the host (cambricon_dev<N> must).
  Result<std::vector<DeviceNode>> cardNodes(int index) const;
  DeviceNode nodeAt(const std::string& containerPath) const;
  std::uint64_t publishedMemoryMiB(const CardInfo& card) const;
  /// Destroys `records`' instances and then the profiles this backend created that no
  /// instance uses any more; removes from `state` what it destroyed. Keeps going after an
  /// error and returns the first.
  Status destroyRecords(const std::vector<InstanceRecord>& records, const std::vector<CardInfo>& cards,
                        SmluState& state);

  BackendParams params_;
  sdk::StandardRequestRules rules_;
  CambriconOptions options_;
  std::vector<ResourceName> resources_;

  std::mutex libraryMutex_;
  std::unique_ptr<CndevLibrary> library_;
  std::mutex limiterMutex_;
  std::map<std::string, Health> lastHealth_;
};

}  // namespace vgpu::cambricon
