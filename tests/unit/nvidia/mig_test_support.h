#pragma once
// Partitions GPUs of the fake libnvidia-ml.so.1 as an operator would (nvidia-smi mig -cgi ...
// -C): a GPU instance at a placement and one compute instance that fills it. The test talks
// to NVML itself, as nvidia-smi does; the backend only sees what NVML then reports.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "vgpu/cuda/nvml_api.h"

namespace vgpu::nvidia::testing {

class FakeMigControl {
 public:
  explicit FakeMigControl(const std::string& library) {
    lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    auto init = sym<decltype(::nvmlInit_v2)>("nvmlInit_v2");
    ok_ = init != nullptr && init() == NVML_SUCCESS;
  }
  ~FakeMigControl() {
    if (lib_ == nullptr) return;
    if (ok_) sym<decltype(::nvmlShutdown)>("nvmlShutdown")();
    dlclose(lib_);
  }
  FakeMigControl(const FakeMigControl&) = delete;
  FakeMigControl& operator=(const FakeMigControl&) = delete;

  bool ok() const { return ok_; }

  /// A GPU instance of `profileId` at memory slice `start` with a compute instance filling
  /// it; the NVML return of the first call that fails.
  nvmlReturn_t partition(unsigned gpu, unsigned profileId, unsigned start, unsigned size) {
    nvmlDevice_t dev = nullptr;
    if (auto r = sym<decltype(::nvmlDeviceGetHandleByIndex_v2)>("nvmlDeviceGetHandleByIndex_v2")(gpu, &dev)) return r;
    nvmlGpuInstancePlacement_t placement{start, size};
    nvmlGpuInstance_t gi = nullptr;
    if (auto r = sym<decltype(::nvmlDeviceCreateGpuInstanceWithPlacement)>("nvmlDeviceCreateGpuInstanceWithPlacement")(
            dev, profileId, &placement, &gi))
      return r;
    nvmlGpuInstanceInfo_t info{};
    sym<decltype(::nvmlGpuInstanceGetInfo)>("nvmlGpuInstanceGetInfo")(gi, &info);
    // The compute instance profile whose slices fill the GPU instance (the -C default).
    for (unsigned p = NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE + 1; p-- > 0;) {
      nvmlComputeInstanceProfileInfo_t ci{};
      if (sym<decltype(::nvmlGpuInstanceGetComputeInstanceProfileInfo)>("nvmlGpuInstanceGetComputeInstanceProfileInfo")(
              gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci) != NVML_SUCCESS)
        continue;
      nvmlComputeInstance_t handle = nullptr;
      return sym<decltype(::nvmlGpuInstanceCreateComputeInstance)>("nvmlGpuInstanceCreateComputeInstance")(gi, ci.id,
                                                                                                          &handle);
    }
    return NVML_ERROR_NOT_SUPPORTED;
  }

  /// How many MIG devices `gpu` has now.
  unsigned migDevices(unsigned gpu) {
    nvmlDevice_t dev = nullptr;
    sym<decltype(::nvmlDeviceGetHandleByIndex_v2)>("nvmlDeviceGetHandleByIndex_v2")(gpu, &dev);
    unsigned n = 0;
    for (unsigned i = 0; i < 7; ++i) {
      nvmlDevice_t mig = nullptr;
      if (sym<decltype(::nvmlDeviceGetMigDeviceHandleByIndex)>("nvmlDeviceGetMigDeviceHandleByIndex")(dev, i, &mig) ==
          NVML_SUCCESS)
        ++n;
    }
    return n;
  }

 private:
  template <class F>
  F* sym(const char* name) const {
    return reinterpret_cast<F*>(dlsym(lib_, name));
  }
  void* lib_ = nullptr;
  bool ok_ = false;
};

}  // namespace vgpu::nvidia::testing
