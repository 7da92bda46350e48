#pragma once
// Per-process GPU usage from NVML, for the node agent's watchdog (backend ABI 1.3).

#include <vector>

#include "nvml.h"
#include "vgpu/device_process.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// Every process NVML lists on every GPU (its compute list, and its graphics list where the
/// driver has one), one entry per process and GPU, with the memory it holds and, where NVML
/// samples it (not under MIG), its SM utilization over the last second. A GPU whose list
/// fails makes the whole answer an error naming it: a partial list would hide processes.
/// Errors: the driver lacks nvmlDeviceGetComputeRunningProcesses_v3, or a query fails.
Result<std::vector<DeviceProcess>> listDeviceProcesses(const NvmlSession& nvml);

}  // namespace vgpu::nvidia
