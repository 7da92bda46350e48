#include "nvml.h"

#include <dlfcn.h>

namespace vgpu::nvidia {
namespace {

template <class F>
bool resolve(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  return out != nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlSession>> NvmlSession::open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return makeError("cannot load NVML (" + library + "): " + (why ? why : "unknown dlopen error") +
                     "; is the NVIDIA driver installed and the library on the loader path?");
  }
  NvmlFunctions fn;
  struct Required {
    const char* symbol;
    bool ok;
  };
  const Required required[] = {
      {"nvmlInit_v2", resolve(handle, "nvmlInit_v2", fn.init)},
      {"nvmlShutdown", resolve(handle, "nvmlShutdown", fn.shutdown)},
      {"nvmlErrorString", resolve(handle, "nvmlErrorString", fn.errorString)},
      {"nvmlDeviceGetCount_v2", resolve(handle, "nvmlDeviceGetCount_v2", fn.deviceGetCount)},
      {"nvmlDeviceGetHandleByIndex_v2", resolve(handle, "nvmlDeviceGetHandleByIndex_v2", fn.deviceGetHandleByIndex)},
      {"nvmlDeviceGetUUID", resolve(handle, "nvmlDeviceGetUUID", fn.deviceGetUUID)},
      {"nvmlDeviceGetName", resolve(handle, "nvmlDeviceGetName", fn.deviceGetName)},
      {"nvmlDeviceGetMemoryInfo", resolve(handle, "nvmlDeviceGetMemoryInfo", fn.deviceGetMemoryInfo)},
  };
  for (const auto& r : required) {
    if (!r.ok) {
      dlclose(handle);
      return makeError("NVML library " + library + " lacks the symbol " + r.symbol +
                       " (the driver is too old or this is not libnvidia-ml)");
    }
  }
  resolve(handle, "nvmlSystemGetDriverVersion", fn.systemGetDriverVersion);
  resolve(handle, "nvmlDeviceGetIndex", fn.deviceGetIndex);
  resolve(handle, "nvmlDeviceGetMinorNumber", fn.deviceGetMinorNumber);
  resolve(handle, "nvmlDeviceGetPciInfo_v3", fn.deviceGetPciInfo);
  resolve(handle, "nvmlDeviceGetCudaComputeCapability", fn.deviceGetCudaComputeCapability);
  resolve(handle, "nvmlDeviceGetMigMode", fn.deviceGetMigMode);
  resolve(handle, "nvmlDeviceGetNumaNodeId", fn.deviceGetNumaNodeId);
  resolve(handle, "nvmlDeviceGetTopologyCommonAncestor", fn.deviceGetTopologyCommonAncestor);
  resolve(handle, "nvmlDeviceGetNvLinkState", fn.deviceGetNvLinkState);
  resolve(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", fn.deviceGetNvLinkRemotePciInfo);
  resolve(handle, "nvmlEventSetCreate", fn.eventSetCreate);
  resolve(handle, "nvmlDeviceGetSupportedEventTypes", fn.deviceGetSupportedEventTypes);
  resolve(handle, "nvmlDeviceRegisterEvents", fn.deviceRegisterEvents);
  resolve(handle, "nvmlEventSetWait_v2", fn.eventSetWait);
  resolve(handle, "nvmlEventSetFree", fn.eventSetFree);
  resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", fn.deviceGetComputeRunningProcesses);
  resolve(handle, "nvmlDeviceGetGraphicsRunningProcesses_v3", fn.deviceGetGraphicsRunningProcesses);
  resolve(handle, "nvmlDeviceGetProcessUtilization", fn.deviceGetProcessUtilization);
  resolve(handle, "nvmlDeviceGetGpuInstanceProfileInfo", fn.deviceGetGpuInstanceProfileInfo);
  resolve(handle, "nvmlDeviceGetGpuInstanceProfileInfoV", fn.deviceGetGpuInstanceProfileInfoV);
  resolve(handle, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", fn.deviceGetGpuInstancePossiblePlacements);
  resolve(handle, "nvmlDeviceCreateGpuInstanceWithPlacement", fn.deviceCreateGpuInstanceWithPlacement);
  resolve(handle, "nvmlGpuInstanceDestroy", fn.gpuInstanceDestroy);
  resolve(handle, "nvmlDeviceGetGpuInstances", fn.deviceGetGpuInstances);
  resolve(handle, "nvmlDeviceGetHandleByUUID", fn.deviceGetHandleByUUID);
  resolve(handle, "nvmlDeviceGetGpuInstanceById", fn.deviceGetGpuInstanceById);
  resolve(handle, "nvmlGpuInstanceGetInfo", fn.gpuInstanceGetInfo);
  resolve(handle, "nvmlGpuInstanceGetComputeInstanceProfileInfo", fn.gpuInstanceGetComputeInstanceProfileInfo);
  resolve(handle, "nvmlGpuInstanceCreateComputeInstance", fn.gpuInstanceCreateComputeInstance);
  resolve(handle, "nvmlGpuInstanceGetComputeInstances", fn.gpuInstanceGetComputeInstances);
  resolve(handle, "nvmlComputeInstanceDestroy", fn.computeInstanceDestroy);
  resolve(handle, "nvmlComputeInstanceGetInfo_v2", fn.computeInstanceGetInfo);
  resolve(handle, "nvmlDeviceGetMaxMigDeviceCount", fn.deviceGetMaxMigDeviceCount);
  resolve(handle, "nvmlDeviceGetMigDeviceHandleByIndex", fn.deviceGetMigDeviceHandleByIndex);
  resolve(handle, "nvmlDeviceGetGpuInstanceId", fn.deviceGetGpuInstanceId);
  resolve(handle, "nvmlDeviceGetComputeInstanceId", fn.deviceGetComputeInstanceId);
  resolve(handle, "nvmlDeviceGetAttributes_v2", fn.deviceGetAttributes);
  resolve(handle, "nvmlDeviceSetMemoryLimits_v1", fn.deviceSetMemoryLimits);
  resolve(handle, "nvmlDeviceGetMemoryLimits_v1", fn.deviceGetMemoryLimits);

  const nvml::Return rc = fn.init();
  if (rc != nvml::kSuccess) {
    const char* text = fn.errorString(rc);
    // The text lives in the library: copy it before unloading.
    std::string message = "nvmlInit_v2 in " + library + " returned " + std::to_string(rc) + " (" +
                          (text ? text : "unknown error") + ")";
    dlclose(handle);
    return makeError(std::move(message));
  }
  return std::unique_ptr<NvmlSession>(new NvmlSession(handle, library, fn));
}

NvmlSession::~NvmlSession() {
  fn_.shutdown();
  dlclose(handle_);
}

std::string NvmlSession::describe(const char* function, nvml::Return rc) const {
  const char* text = fn_.errorString(rc);
  return std::string(function) + " returned " + std::to_string(rc) + " (" + (text ? text : "unknown error") + ")";
}

}  // namespace vgpu::nvidia
