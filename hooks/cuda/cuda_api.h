#pragma once
// What every translation unit of libvgpu.so sees: vgpu's declarations of the driver API
// (every ABI variant under its own name) and of NVML, the hook list, the table of real
// functions and the exported wrappers.

#include "vgpu/cuda/driver_api.h"
#include "vgpu/cuda/nvml_api.h"

#include "hook_list.h"

#define VGPU_EXPORT __attribute__((visibility("default")))

namespace vgpu::real {
#define VGPU_DECLARE_REAL(name, params) extern CUresult(*name) params;
VGPU_CUDA_HOOKS(VGPU_DECLARE_REAL)
VGPU_CUDA_INTERNAL(VGPU_DECLARE_REAL)
#undef VGPU_DECLARE_REAL
#define VGPU_DECLARE_REAL_NVML(name, params) extern nvmlReturn_t(*name) params;
VGPU_NVML_HOOKS(VGPU_DECLARE_REAL_NVML)
VGPU_NVML_INTERNAL(VGPU_DECLARE_REAL_NVML)
#undef VGPU_DECLARE_REAL_NVML
}  // namespace vgpu::real

extern "C" {
#define VGPU_DECLARE_WRAPPER(name, params) VGPU_EXPORT CUresult name params;
VGPU_CUDA_HOOKS(VGPU_DECLARE_WRAPPER)
#undef VGPU_DECLARE_WRAPPER
#define VGPU_DECLARE_NVML_WRAPPER(name, params) VGPU_EXPORT nvmlReturn_t name params;
VGPU_NVML_HOOKS(VGPU_DECLARE_NVML_WRAPPER)
#undef VGPU_DECLARE_NVML_WRAPPER
}
