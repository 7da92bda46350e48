#pragma once
/* Test-only entry points of the fake libcuda.so.1. They read the simulated physical device
 * state (shared across processes when VGPU_FAKE_GPU_STATE is set). Product code never calls
 * them; tests dlsym them from the fake. They initialise the fake as cuInit would. */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Busy time of device `dev` so far (kernels that have run, from all processes), in ns. */
uint64_t vgpuFakeDeviceBusyNs(int dev);
/** Device memory in use on `dev` by all processes, in bytes. */
uint64_t vgpuFakeDeviceUsedBytes(int dev);
/** Device memory this process holds on `dev`, in bytes. */
uint64_t vgpuFakeProcessUsedBytes(int dev);
/** Number of simulated devices, or -1 if the fake cannot initialise. */
int vgpuFakeDeviceCount(void);
/** The exported name of the driver function behind `fn`: an entry point cuGetProcAddress
 *  handed out, or the exported symbol itself; NULL for anything else. Needs no cuInit. */
const char* vgpuFakeProcName(const void* fn);

/** Exported by the fake libnvidia-ml.so.1 (dlsym it there), after nvmlInit: sets what the
 *  live process `pid` (one the test started) holds on `dev`, as NVML's process list will
 *  show it; 0 bytes takes it off the list. The slot goes when the process dies, as on real
 *  hardware. Returns 0, or -1 (not initialised, bad device, no free slot, `pid` not running). */
int vgpuFakeNvmlSetProcessUsage(int pid, int dev, unsigned long long bytes);

/** Exported by the fake libnvidia-ml.so.1, after nvmlInit: the SM utilization (0..100)
 *  nvmlDeviceGetProcessUtilization reports for `pid` on `dev` while it is on the process
 *  list, instead of what its kernels measured; -1 takes the setting back. Returns 0, or -1
 *  (not initialised, bad device or percent). */
int vgpuFakeNvmlSetProcessUtilization(int pid, int dev, int percent);

#ifdef __cplusplus
}
#endif
