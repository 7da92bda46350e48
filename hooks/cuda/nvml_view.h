#pragma once
// What the library asks NVML for itself: which processes hold memory on a device and how
// much (its own context overhead, per process), and which processes ran kernels lately
// (whether another tenant shares the device). NVML reports pids as the driver sees them
// (the host's PID namespace on a Kubernetes node): see learnDriverPid in memory_hooks.cpp.

#include <stdint.h>

namespace vgpu::nvmlview {

/// NVML initialised for the library's own use (once); false when there is none.
bool ready();

struct Proc {
  uint32_t pid;
  uint64_t used;  // bytes
};

/// The processes holding a context or memory on CUDA ordinal `dev`: how many were written
/// (at most `max`), or -1 when NVML cannot say.
int processes(int dev, Proc* out, int max);

/// The pids that ran kernels on `dev` within the last `windowUs`: how many (at most `max`),
/// or -1 when NVML cannot say.
int activePids(int dev, uint32_t* out, int max, uint64_t windowUs);

}  // namespace vgpu::nvmlview
