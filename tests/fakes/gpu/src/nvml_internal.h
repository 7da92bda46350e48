#pragma once
// What the fake NVML's MIG part (nvml_mig.cpp) shares with the rest of it (nvml.cpp).

#include <string>

#include "vgpu/cuda/nvml_api.h"

#include "config.h"
#include "shared_state.h"

/// A device handle: a whole GPU (gi = ci = -1), or a MIG device, i.e. one compute instance
/// (the slots of its GPU instance and compute instance in the shared MIG state).
struct nvmlDevice_st {
  unsigned index = 0;
  int gi = -1;
  int ci = -1;
};

namespace vgpu::fakegpu {

bool nvmlReady();
const MachineConfig& nvmlMachine();
SharedState* nvmlShared();
nvmlDevice_t gpuHandle(unsigned index);
/// Checks init and that `h` is a whole GPU's handle, and applies an injected fault.
nvmlReturn_t gpuDevice(nvmlDevice_t h, const GpuSpec*& g);
nvmlReturn_t copyNvmlString(const std::string& s, char* out, unsigned len);

/// Whether `h` is one of the MIG device handles nvml_mig.cpp hands out (live or not).
bool isMigHandle(nvmlDevice_t h);
/// "MIG-..." of a live MIG device; INVALID_ARGUMENT once its instance is gone.
nvmlReturn_t migDeviceUuid(nvmlDevice_t h, char* out, unsigned len);
/// The MIG device's memory: its GPU instance's (used: 0; the fake libcuda charges the GPU).
nvmlReturn_t migDeviceMemory(nvmlDevice_t h, nvmlMemory_t* mem);

}  // namespace vgpu::fakegpu
