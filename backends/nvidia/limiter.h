#pragma once
// Node side: what the kubelet must do so a container gets exactly its slice of its GPUs:
// NVIDIA_VISIBLE_DEVICES, libvgpu.so preloaded with its limits (vgpu/limiter_contract.h),
// or, on r615+ drivers with cgroup v2, the driver's own memory cap.

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/container_spec.h"
#include "vgpu/limiter.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

enum class MemoryEnforcement : std::uint8_t {
  kLibvgpu,  ///< libvgpu.so counts every allocation against CUDA_DEVICE_MEMORY_LIMIT_<i>
  kDriver,   ///< NVIDIA_GPU_MEMORY_REQUEST/LIMIT for the toolkit's cgroup hook; refused if unsupported
  kAuto,     ///< the driver's cap where supported, libvgpu.so elsewhere
};

/// Pod annotation naming the containers (comma list, or "true" / "*" for all) that run
/// without libvgpu.so preloaded. Their limits are still written, for programs that load it.
/// Honoured only where the operator allows it (allowOptOut); refused otherwise, by the
/// webhook (admission) and again here.
inline constexpr const char* kOptOutAnnotation = "nvidia.com/disable-control";

/// Pod annotation the backend sets: what enforces the memory limit of the pod's NVIDIA
/// containers on its node, "libvgpu.so" or "driver" (the kernel cap through the CDI hook).
inline constexpr const char* kMemoryEnforcerAnnotation = "nvidia.com/vgpu-memory-enforcer";

/// Environment the container gets: the NVIDIA container toolkit's visibility variable (which
/// GPUs its runtime hook mounts) and its kernel memory cap (driver enforcer).
inline constexpr const char* kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";
inline constexpr const char* kDriverMemoryRequestEnv = "NVIDIA_GPU_MEMORY_REQUEST";
inline constexpr const char* kDriverMemoryLimitEnv = "NVIDIA_GPU_MEMORY_LIMIT";

/// Where things appear inside the container.
inline constexpr const char* kContainerRegionDir = "/var/run/vgpu";
inline constexpr const char* kContainerRegionFile = "/var/run/vgpu/shared-region";
inline constexpr const char* kContainerPreloadFile = "/etc/ld.so.preload";
/// The node's activity board (vgpu/activity_board.h), where high-priority tenants say they run.
inline constexpr const char* kContainerActivityBoard = "/var/run/vgpu-board";
/// Inside the grant's host folder: the limits file, and the folder holding the shared region.
/// Both the agent's (0755); only the region file (0666) is mounted writable, alone, so a
/// container can create nothing in the host folder (docs/security.md, "The agent's files").
inline constexpr const char* kHostLimitsFile = "limits.env";
inline constexpr const char* kHostRegionDir = "shared";

struct LimiterSettings {
  std::string backend = "nvidia";
  MemoryEnforcement memory = MemoryEnforcement::kLibvgpu;
  std::string libvgpuHostPath = "/usr/local/vgpu/libvgpu.so";
  std::string libvgpuContainerPath = "/usr/local/vgpu/libvgpu.so";  ///< what ld.so.preload names
  std::string ldPreloadHostPath = "/usr/local/vgpu/ld.so.preload";
  double memoryScaling = 1.0;  ///< > 1: memory is oversubscribed
  std::string corePolicy;      ///< GPU_CORE_UTILIZATION_POLICY; empty = libvgpu's default
  std::string logLevel;        ///< LIBVGPU_LOG_LEVEL; empty = libvgpu's default
  /// What a CUDA context takes on this node's GPUs, as measured by the operator: written to
  /// the limits file (VGPU_CONTEXT_OVERHEAD) as what libvgpu.so charges a context before it
  /// has measured one itself. 0 = not given (libvgpu.so measures).
  std::uint64_t contextOverheadMiB = 0;
  bool allowOptOut = false;  ///< the operator's consent to nvidia.com/disable-control
  /// Node-wide host folder for libvgpu.so's activity board: mounted into every container,
  /// writable only for high-priority ones (task priority 0), so that low-priority tenants
  /// wait while a high-priority one runs. Empty: priorities are not acted on.
  std::string activityBoardHostPath;
  /// Non-empty: also ask the runtime for the GPUs as CDI devices of this kind (e.g.
  /// "k8s.device-plugin.nvidia.com/gpu", whose spec carries the toolkit's memory-limit hook),
  /// through the annotation kCdiAnnotation. The driver's memory cap is applied only through
  /// that hook: without a kind, memory is libvgpu.so's to enforce (see memory).
  std::string cdiKind;
  /// Non-empty: the driver's cap is applied by vgpu-cdi-hook at this host path, a
  /// createContainer hook of a CDI spec the node agent writes for the container (no cdiKind
  /// needed, cgroup v1 or v2); libvgpu.so keeps its own memory limit beside it. Empty: the
  /// NVIDIA container toolkit's hook of cdiKind's spec, as above.
  std::string cdiHookPath;
  /// The soft limit vgpu-cdi-hook sets: "none" (0) or "hard" (the slice is guaranteed).
  std::string driverSoftLimit = "none";
  /// NVML for vgpu-cdi-hook: the nvmlLibrary option where it is a path (a host path, e.g.
  /// under /run/nvidia/driver); empty: the hook loads libnvidia-ml.so.1 as the host finds it.
  std::string hookNvmlLibrary;
};

/// Whether `containers` (the opt-out annotation's value) names `container`.
bool optOutNames(const std::string& containers, const std::string& container);

/// The CDI annotation (containerd / CRI-O read `cdi.k8s.io/*` as CDI device requests).
inline constexpr const char* kCdiAnnotation = "cdi.k8s.io/vgpu-nvidia";

/// Whether this node can cap GPU memory in the kernel: the driver exports
/// nvmlDeviceSetMemoryLimits_v1 (r615+) and, where `needCgroupV2` (the toolkit's hook),
/// cgroup v2 is mounted at <sysRoot>/fs/cgroup. The error says what is missing.
Status kernelMemoryCapSupport(bool nvmlHasSetMemoryLimits, const std::string& sysRoot, bool needCgroupV2 = true);

/// The argv of vgpu-cdi-hook for `devices` (UUID, MiB): what the CDI spec's hook runs.
/// `mustApply`: a failure fails the container's start (memoryEnforcement driver); otherwise
/// it only warns and libvgpu.so alone holds memory (auto).
std::vector<std::string> cdiHookArgs(const std::vector<std::pair<std::string, std::uint64_t>>& devices,
                                     const std::string& softLimit, bool mustApply, const std::string& nvmlLibrary = "");

class NvidiaLimiter {
 public:
  /// `kernelCapSupport` is asked (once) whether the driver's memory cap is usable here.
  NvidiaLimiter(LimiterSettings settings, std::function<Status()> kernelCapSupport);

  /// Errors: no devices, no host folder, more than 16 GPUs, a device id that cannot be put
  /// in NVIDIA_VISIBLE_DEVICES, a forbidden opt-out, the driver cap asked for but unsupported,
  /// or the limits file cannot be written.
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant);
  Status release(const ContainerRef& container);
  Status reconcile(const std::vector<ContainerRef>& live);
  /// Containers whose files this limiter wrote, with their host folders.
  std::map<ContainerRef, std::string> held() const;

 private:
  /// The cached answer of kernelCapSupport.
  const Status& kernelCap();
  std::string memoryEnforcerNote(const ContainerGrant& grant, bool driverCap, bool optOut) const;

  LimiterSettings settings_;
  std::function<Status()> probe_;
  mutable std::mutex mutex_;
  std::optional<Status> kernelCap_;
  std::map<ContainerRef, std::string> held_;
};

}  // namespace vgpu::nvidia
