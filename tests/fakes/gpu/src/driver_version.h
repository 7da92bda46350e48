#pragma once
// Which driver the fake libcuda.so.1 / libnvidia-ml.so.1 pretend to be. The default build is
// an R580 driver (CUDA 13.0); the "R470-like" build (CMake target vgpu_fake_cuda_r470) sets
// these to an R470 driver (CUDA 11.4): its version script hides every entry point newer than
// 11.4 and cuGetProcAddress knows no row newer than that.

#ifndef VGPU_FAKE_CUDA_DRIVER_VERSION
#define VGPU_FAKE_CUDA_DRIVER_VERSION 13000
#endif
#ifndef VGPU_FAKE_NVML_DRIVER_VERSION
#define VGPU_FAKE_NVML_DRIVER_VERSION "580.82.07"
#endif
