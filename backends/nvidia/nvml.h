#pragma once
// The part of NVML this backend calls, and a long-lived session on libnvidia-ml.so.1. The
// types and values come from vgpu/cuda/nvml_api.h (the project's one declaration of NVML;
// no nvml.h is needed); the library is opened with dlopen, never linked.

#include <memory>
#include <string>

#include "vgpu/cuda/nvml_api.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// Short names for the NVML types and values the backend uses.
namespace nvml {

using Return = nvmlReturn_t;
using Device = nvmlDevice_t;
using EventSet = nvmlEventSet_t;
using Memory = nvmlMemory_t;
using PciInfo = nvmlPciInfo_t;
using EventData = nvmlEventData_t;
using ProcessInfo = nvmlProcessInfo_t;
using ProcessUtilization = nvmlProcessUtilizationSample_t;
using TopologyLevel = nvmlGpuTopologyLevel_t;
using EnableState = nvmlEnableState_t;

inline constexpr Return kSuccess = NVML_SUCCESS;
inline constexpr Return kErrorNotSupported = NVML_ERROR_NOT_SUPPORTED;
inline constexpr Return kErrorInsufficientSize = NVML_ERROR_INSUFFICIENT_SIZE;
inline constexpr Return kErrorTimeout = NVML_ERROR_TIMEOUT;
inline constexpr Return kErrorNotFound = NVML_ERROR_NOT_FOUND;
/// usedGpuMemory when the driver cannot tell (nvml.h's NVML_VALUE_NOT_AVAILABLE).
inline constexpr unsigned long long kValueNotAvailable = ~0ull;

inline constexpr unsigned kMaxNvLinks = NVML_NVLINK_MAX_LINKS;

inline constexpr unsigned kMigDisable = NVML_DEVICE_MIG_DISABLE;
inline constexpr unsigned kMigEnable = NVML_DEVICE_MIG_ENABLE;
inline constexpr unsigned kUuidBufferSize = NVML_DEVICE_UUID_V2_BUFFER_SIZE;
inline constexpr unsigned kNameBufferSize = NVML_DEVICE_NAME_V2_BUFFER_SIZE;
inline constexpr unsigned kDriverVersionBufferSize = NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE;

inline constexpr unsigned long long kEventSingleBitEcc = nvmlEventTypeSingleBitEccError;
inline constexpr unsigned long long kEventDoubleBitEcc = nvmlEventTypeDoubleBitEccError;
inline constexpr unsigned long long kEventXidCritical = nvmlEventTypeXidCriticalError;

}  // namespace nvml

/// Function pointers resolved from libnvidia-ml.so.1, by their versioned symbol names.
/// The optional ones are null when the driver does not have them.
struct NvmlFunctions {
  decltype(&::nvmlInit_v2) init = nullptr;
  decltype(&::nvmlShutdown) shutdown = nullptr;
  decltype(&::nvmlErrorString) errorString = nullptr;
  decltype(&::nvmlSystemGetDriverVersion) systemGetDriverVersion = nullptr;
  decltype(&::nvmlDeviceGetCount_v2) deviceGetCount = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) deviceGetHandleByIndex = nullptr;
  decltype(&::nvmlDeviceGetUUID) deviceGetUUID = nullptr;
  decltype(&::nvmlDeviceGetName) deviceGetName = nullptr;
  decltype(&::nvmlDeviceGetIndex) deviceGetIndex = nullptr;
  decltype(&::nvmlDeviceGetMinorNumber) deviceGetMinorNumber = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) deviceGetMemoryInfo = nullptr;
  decltype(&::nvmlDeviceGetPciInfo_v3) deviceGetPciInfo = nullptr;
  // Optional:
  decltype(&::nvmlDeviceGetCudaComputeCapability) deviceGetCudaComputeCapability = nullptr;
  decltype(&::nvmlDeviceGetMigMode) deviceGetMigMode = nullptr;
  decltype(&::nvmlDeviceGetNumaNodeId) deviceGetNumaNodeId = nullptr;
  // Optional, for the link matrix (topology.h):
  decltype(&::nvmlDeviceGetTopologyCommonAncestor) deviceGetTopologyCommonAncestor = nullptr;
  decltype(&::nvmlDeviceGetNvLinkState) deviceGetNvLinkState = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemotePciInfo_v2) deviceGetNvLinkRemotePciInfo = nullptr;
  decltype(&::nvmlEventSetCreate) eventSetCreate = nullptr;
  decltype(&::nvmlDeviceGetSupportedEventTypes) deviceGetSupportedEventTypes = nullptr;
  decltype(&::nvmlDeviceRegisterEvents) deviceRegisterEvents = nullptr;
  decltype(&::nvmlEventSetWait_v2) eventSetWait = nullptr;
  decltype(&::nvmlEventSetFree) eventSetFree = nullptr;
  // Optional, for the node agent's watchdog (per-process usage):
  decltype(&::nvmlDeviceGetComputeRunningProcesses_v3) deviceGetComputeRunningProcesses = nullptr;
  /// nvmlDeviceGetGraphicsRunningProcesses_v3: the same signature as the compute list.
  decltype(&::nvmlDeviceGetComputeRunningProcesses_v3) deviceGetGraphicsRunningProcesses = nullptr;
  decltype(&::nvmlDeviceGetProcessUtilization) deviceGetProcessUtilization = nullptr;
  // Optional, for MIG (mig.h): static MIG devices and instances made on demand.
  decltype(&::nvmlDeviceGetGpuInstanceProfileInfo) deviceGetGpuInstanceProfileInfo = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceProfileInfoV) deviceGetGpuInstanceProfileInfoV = nullptr;
  decltype(&::nvmlDeviceGetGpuInstancePossiblePlacements_v2) deviceGetGpuInstancePossiblePlacements = nullptr;
  decltype(&::nvmlDeviceCreateGpuInstanceWithPlacement) deviceCreateGpuInstanceWithPlacement = nullptr;
  decltype(&::nvmlGpuInstanceDestroy) gpuInstanceDestroy = nullptr;
  decltype(&::nvmlDeviceGetGpuInstances) deviceGetGpuInstances = nullptr;
  decltype(&::nvmlDeviceGetHandleByUUID) deviceGetHandleByUUID = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceById) deviceGetGpuInstanceById = nullptr;
  decltype(&::nvmlGpuInstanceGetInfo) gpuInstanceGetInfo = nullptr;
  decltype(&::nvmlGpuInstanceGetComputeInstanceProfileInfo) gpuInstanceGetComputeInstanceProfileInfo = nullptr;
  decltype(&::nvmlGpuInstanceCreateComputeInstance) gpuInstanceCreateComputeInstance = nullptr;
  decltype(&::nvmlGpuInstanceGetComputeInstances) gpuInstanceGetComputeInstances = nullptr;
  decltype(&::nvmlComputeInstanceDestroy) computeInstanceDestroy = nullptr;
  decltype(&::nvmlComputeInstanceGetInfo_v2) computeInstanceGetInfo = nullptr;
  decltype(&::nvmlDeviceGetMaxMigDeviceCount) deviceGetMaxMigDeviceCount = nullptr;
  decltype(&::nvmlDeviceGetMigDeviceHandleByIndex) deviceGetMigDeviceHandleByIndex = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceId) deviceGetGpuInstanceId = nullptr;
  decltype(&::nvmlDeviceGetComputeInstanceId) deviceGetComputeInstanceId = nullptr;
  decltype(&::nvmlDeviceGetAttributes_v2) deviceGetAttributes = nullptr;
  /// Optional, r615+: the driver's per-cgroup memory cap (probed by the backend, called by
  /// vgpu-cdi-hook when a container is created).
  decltype(&::nvmlDeviceSetMemoryLimits_v1) deviceSetMemoryLimits = nullptr;
  decltype(&::nvmlDeviceGetMemoryLimits_v1) deviceGetMemoryLimits = nullptr;
};

/// One NVML session: dlopen + nvmlInit_v2 at open, nvmlShutdown + dlclose when destroyed.
/// nvmlInit serialises across processes on a node, so the backend keeps one for its life.
class NvmlSession {
 public:
  /// Opens `library` (a soname or a path). Errors say which file could not be opened, which
  /// required symbol is missing, or what nvmlInit_v2 returned.
  static Result<std::unique_ptr<NvmlSession>> open(const std::string& library);
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  /// "nvmlDeviceGetUUID returned 15 (GPU is lost)".
  std::string describe(const char* function, nvml::Return rc) const;
  const std::string& library() const { return library_; }

 private:
  NvmlSession(void* handle, std::string library, NvmlFunctions fn)
      : handle_(handle), library_(std::move(library)), fn_(fn) {}
  void* handle_;
  std::string library_;
  NvmlFunctions fn_;
};

}  // namespace vgpu::nvidia
