// Measuring what the driver took (driver_taken.h).

#include "driver_taken.h"

#include <unistd.h>

#include "nvml_view.h"

namespace vgpu::taken {

namespace {

// The pid NVML reports for this process: the one learnt at the first context creation
// (memory_hooks.cpp publishes it in our region slot), else our own.
uint32_t driverPid() {
  Runtime& rt = runtime();
  int slot = rt.slot.load(std::memory_order_relaxed);
  if (slot >= 0) {
    uint32_t pid = __atomic_load_n(&rt.region->procs[slot].flags, __ATOMIC_RELAXED) & VGPU_REGION_PROC_DRIVER_PID_MASK;
    if (pid != 0) return pid;
  }
  return static_cast<uint32_t>(getpid());
}

uint64_t slotCharged(int dev) {
  Runtime& rt = runtime();
  int slot = rt.slot.load(std::memory_order_relaxed);
  return slot >= 0 ? __atomic_load_n(&rt.region->procs[slot].memory_used[dev], __ATOMIC_RELAXED) : 0;
}

}  // namespace

Mark mark(int dev) {
  Mark m;
  nvmlview::Proc procs[128];
  int n = nvmlview::processes(dev, procs, 128);
  if (n >= 0) {
    uint32_t pid = driverPid();
    for (int i = 0; i < n; ++i) {
      if (procs[i].pid != pid) continue;
      m.driver = procs[i].used;
      m.charged = slotCharged(dev);
      m.scope = 1;
      return m;
    }
  }
  // NVML cannot say which process is us: the device's used memory (other tenants' work in
  // the same moment disturbs it; the container's own is subtracted).
  size_t free = 0, total = 0;
  if (real::cuMemGetInfo_v2 != nullptr && real::cuMemGetInfo_v2(&free, &total) == CUDA_SUCCESS && total >= free) {
    m.driver = total - free;
    m.charged = containerUsage(dev);
    m.scope = 2;
  }
  return m;
}

uint64_t grown(const Mark& before, const Mark& after) {
  if (before.scope == 0 || before.scope != after.scope || after.driver <= before.driver) return 0;
  uint64_t driver = after.driver - before.driver;
  uint64_t charged = after.charged > before.charged ? after.charged - before.charged : 0;
  return driver > charged ? driver - charged : 0;
}

}  // namespace vgpu::taken
