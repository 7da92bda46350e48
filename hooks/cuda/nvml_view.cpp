// NVML as the library uses it for itself (nvml_view.h).

#include "nvml_view.h"

#include <sys/time.h>

#include "runtime.h"

namespace vgpu::nvmlview {
namespace {

pthread_once_t gOnce = PTHREAD_ONCE_INIT;
bool gReady = false;
std::atomic<nvmlDevice_t> gHandles[kLimiterMaxDevices];

void init() {
  gReady = ensureNvml() == NVML_SUCCESS && real::nvmlInit_v2 != nullptr && real::nvmlInit_v2() == NVML_SUCCESS &&
           real::nvmlDeviceGetHandleByUUID != nullptr;
}

nvmlDevice_t handle(int dev) {
  if (!ready() || dev < 0 || dev >= kLimiterMaxDevices) return nullptr;
  nvmlDevice_t h = gHandles[dev].load(std::memory_order_acquire);
  if (h != nullptr) return h;
  publishDevice(dev);  // learns its UUID
  const char* uuid = runtime().uuids[dev];
  if (uuid[0] == '\0' || real::nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS) return nullptr;
  gHandles[dev].store(h, std::memory_order_release);
  return h;
}

}  // namespace

bool ready() {
  pthread_once(&gOnce, init);
  return gReady;
}

int processes(int dev, Proc* out, int max) {
  nvmlDevice_t h = handle(dev);
  auto fn = real::nvmlDeviceGetComputeRunningProcesses_v3 != nullptr ? real::nvmlDeviceGetComputeRunningProcesses_v3
                                                                    : real::nvmlDeviceGetComputeRunningProcesses_v2;
  if (h == nullptr || fn == nullptr) return -1;
  nvmlProcessInfo_t infos[256];
  unsigned int n = sizeof infos / sizeof infos[0];
  if (fn(h, &n, infos) != NVML_SUCCESS) return -1;
  int k = 0;
  for (unsigned int i = 0; i < n && k < max; ++i) out[k++] = Proc{infos[i].pid, infos[i].usedGpuMemory};
  return k;
}

int activePids(int dev, uint32_t* out, int max, uint64_t windowUs) {
  nvmlDevice_t h = handle(dev);
  if (h == nullptr || real::nvmlDeviceGetProcessUtilization == nullptr) return -1;
  // lastSeenTimeStamp is CPU time in microseconds.
  timeval tv;
  gettimeofday(&tv, nullptr);
  uint64_t nowUs = static_cast<uint64_t>(tv.tv_sec) * 1000000 + static_cast<uint64_t>(tv.tv_usec);
  nvmlProcessUtilizationSample_t samples[256];
  unsigned int n = sizeof samples / sizeof samples[0];
  nvmlReturn_t rc = real::nvmlDeviceGetProcessUtilization(h, samples, &n, nowUs - windowUs);
  if (rc == NVML_ERROR_NOT_FOUND) return 0;  // no samples: nobody ran kernels
  if (rc != NVML_SUCCESS) return -1;
  int k = 0;
  for (unsigned int i = 0; i < n && k < max; ++i) {
    if (samples[i].smUtil > 0) out[k++] = samples[i].pid;
  }
  return k;
}

}  // namespace vgpu::nvmlview
