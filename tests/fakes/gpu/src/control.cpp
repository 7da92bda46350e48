// Test-only control functions of the fake libcuda.so.1 (../fake_gpu_control.h).

#include "../fake_gpu_control.h"

#include <unistd.h>

#include <atomic>

#include "driver.h"

using namespace vgpu::fakegpu;

namespace {

SharedState* stateFor(int dev) {
  SharedState* s = Driver::get().sharedForControl();
  if (s == nullptr || dev < 0 || static_cast<unsigned>(dev) >= s->deviceCount()) return nullptr;
  return s;
}

}  // namespace

extern "C" {

uint64_t vgpuFakeDeviceBusyNs(int dev) {
  SharedState* s = stateFor(dev);
  return s ? s->busyNs(dev, monotonicNs()) : 0;
}

uint64_t vgpuFakeDeviceUsedBytes(int dev) {
  SharedState* s = stateFor(dev);
  return s ? s->usedBytes(dev) : 0;
}

uint64_t vgpuFakeProcessUsedBytes(int dev) {
  SharedState* s = stateFor(dev);
  if (s == nullptr) return 0;
  int32_t pid = static_cast<int32_t>(getpid());
  for (auto& p : s->raw()->procs) {
    if (std::atomic_ref<int32_t>(p.pid).load() == pid) return std::atomic_ref<uint64_t>(p.used_bytes[dev]).load();
  }
  return 0;
}

int vgpuFakeDeviceCount(void) {
  SharedState* s = Driver::get().sharedForControl();
  return s ? static_cast<int>(s->deviceCount()) : -1;
}

}  // extern "C"
