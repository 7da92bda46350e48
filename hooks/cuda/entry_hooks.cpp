// Entry points (cuInit, cuGetProcAddress) and what the container is told about memory
// (cuMemGetInfo, cuDeviceTotalMem, NVML's memory info).

#include <string.h>
#include <time.h>

#include "runtime.h"

using namespace vgpu;

namespace {

// Usage once processes that are gone are reclaimed (at most once a second): a nearly full
// container must not be shown memory that a dead process still appears to hold.
__attribute__((noinline)) uint64_t usageAfterReclaim(int dev) {
  static std::atomic<int64_t> lastReclaim{0};
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (lastReclaim.exchange(ts.tv_sec) != ts.tv_sec) vgpu_region_reclaim_dead(runtime().region);
  return containerUsage(dev);
}

// What the container may see of a device: total is the limit (never more than the
// device has, unless oversubscription makes the limit real), free is what is left of it.
inline void virtualize(int dev, uint64_t physTotal, uint64_t physFree, uint64_t* total, uint64_t* free) {
  const Runtime& rt = runtime();
  uint64_t limit = rt.memoryLimit(dev);
  bool over = rt.oversubscribe();
  uint64_t t = over || limit < physTotal ? limit : physTotal;
  uint64_t used = __atomic_load_n(&rt.region->devices[dev].memory_used, __ATOMIC_RELAXED);
  if (__builtin_expect(used > t - t / 8, 0)) used = usageAfterReclaim(dev);
  uint64_t f = used >= t ? 0 : t - used;
  *total = t;
  *free = !over && f > physFree ? physFree : f;
}

inline bool limited(int dev) { return dev >= 0 && runtime().memoryLimit(dev) != 0; }

// How many devices the driver shows this process (fixed from cuInit on); 0 until known.
std::atomic<int> gDeviceCount{0};

// The device of the current context, for a call that has just succeeded and so had one
// (cuMemGetInfo fails without a current context). A process that sees one device (the
// usual container) needs no driver call to know it is device 0; otherwise cuCtxGetCurrent
// says, so contexts switched by any means (cuCtxSetCurrent, push/pop, cudart) are followed.
// -1: none, or a device beyond what the library limits.
inline int deviceOfCurrentContext() {
  int n = gDeviceCount.load(std::memory_order_relaxed);
  if (__builtin_expect(n == 0, 0)) {
    if (real::cuDeviceGetCount == nullptr || real::cuDeviceGetCount(&n) != CUDA_SUCCESS || n <= 0) n = 0;
    gDeviceCount.store(n, std::memory_order_relaxed);
  }
  if (__builtin_expect(n == 1, 1)) return 0;
  Ctx c;
  return currentContext(&c) ? c.dev : -1;
}

// The CUDA ordinal of an NVML device, matched by UUID (the one index space is CUDA's).
int ordinalOfNvmlDevice(nvmlDevice_t device) {
  char uuid[96] = "";
  if (real::nvmlDeviceGetUUID == nullptr || real::nvmlDeviceGetUUID(device, uuid, sizeof uuid) != NVML_SUCCESS) {
    return -1;
  }
  Runtime& rt = runtime();
  for (int pass = 0; pass < 2; ++pass) {
    for (int d = 0; d < kLimiterMaxDevices; ++d) {
      if (rt.uuids[d][0] != '\0' && strcmp(rt.uuids[d], uuid) == 0) return d;
      if (rt.region->devices[d].uuid[0] != '\0' && strcmp(rt.region->devices[d].uuid, uuid) == 0) {
        return d;
      }
    }
    // Not seen yet in this container: ask the driver which ordinal has this UUID.
    if (pass == 0 && ensureCuda() == CUDA_SUCCESS && real::cuInit(0) == CUDA_SUCCESS) {
      int count = 0;
      if (real::cuDeviceGetCount(&count) != CUDA_SUCCESS) return -1;
      for (int d = 0; d < count && d < kLimiterMaxDevices; ++d) publishDevice(d);
    }
  }
  return -1;
}

CUresult procAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags, CUresult rc) {
  // Whatever variant the driver picked for this version and these flags, hand out the
  // wrapper of exactly that variant; functions we do not wrap come back untouched.
  if (rc == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
    if (void* w = wrapperForProcAddress(symbol, cudaVersion, flags, *pfn)) *pfn = w;
  }
  return rc;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int Flags) {
  VGPU_ENTER_CUDA(cuInit);
  return real::cuInit(Flags);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  if (CUresult rc = ensureCuda(); rc != CUDA_SUCCESS) return rc;
  if (real::cuGetProcAddress_v2 != nullptr) {
    return procAddress(symbol, pfn, cudaVersion, flags,
                       real::cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus));
  }
  // A driver before 12.0 has only v1, which says nothing about why a symbol was not found.
  if (real::cuGetProcAddress == nullptr) return CUDA_ERROR_NOT_FOUND;
  CUresult rc = procAddress(symbol, pfn, cudaVersion, flags, real::cuGetProcAddress(symbol, pfn, cudaVersion, flags));
  if (symbolStatus != nullptr) {
    *symbolStatus = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return rc;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  if (CUresult rc = ensureCuda(); rc != CUDA_SUCCESS) return rc;
  if (real::cuGetProcAddress != nullptr) {
    return procAddress(symbol, pfn, cudaVersion, flags, real::cuGetProcAddress(symbol, pfn, cudaVersion, flags));
  }
  if (real::cuGetProcAddress_v2 == nullptr) return CUDA_ERROR_NOT_FOUND;
  return procAddress(symbol, pfn, cudaVersion, flags,
                     real::cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, nullptr));
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  VGPU_ENTER_CUDA(cuMemGetInfo_v2);
  CUresult rc = real::cuMemGetInfo_v2(free, total);
  if (rc != CUDA_SUCCESS || free == nullptr || total == nullptr) return rc;
  int dev = deviceOfCurrentContext();
  if (!limited(dev)) return rc;
  uint64_t t = 0, f = 0;
  virtualize(dev, *total, *free, &t, &f);
  *total = t;
  *free = f;
  return rc;
}

CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  VGPU_ENTER_CUDA(cuMemGetInfo);
  CUresult rc = real::cuMemGetInfo(free, total);
  if (rc != CUDA_SUCCESS || free == nullptr || total == nullptr) return rc;
  int dev = deviceOfCurrentContext();
  if (!limited(dev)) return rc;
  uint64_t t = 0, f = 0;
  virtualize(dev, *total, *free, &t, &f);
  *total = t > 0xffffffffu ? 0xffffffffu : static_cast<unsigned int>(t);
  *free = f > 0xffffffffu ? 0xffffffffu : static_cast<unsigned int>(f);
  return rc;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  VGPU_ENTER_CUDA(cuDeviceTotalMem_v2);
  CUresult rc = real::cuDeviceTotalMem_v2(bytes, dev);
  if (rc != CUDA_SUCCESS || bytes == nullptr || dev < 0 || dev >= kLimiterMaxDevices || !limited(dev)) {
    return rc;
  }
  uint64_t limit = runtime().memoryLimit(dev);
  if (runtime().oversubscribe() || limit < *bytes) *bytes = limit;
  return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (nvmlReturn_t rc = ensureNvml(); rc != NVML_SUCCESS) return rc;
  if (real::nvmlDeviceGetMemoryInfo == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = real::nvmlDeviceGetMemoryInfo(device, memory);
  if (rc != NVML_SUCCESS || memory == nullptr) return rc;
  int dev = ordinalOfNvmlDevice(device);
  if (!limited(dev)) return rc;
  uint64_t t = 0, f = 0;
  virtualize(dev, memory->total, memory->free, &t, &f);
  memory->total = t;
  memory->free = f;
  memory->used = t - f;
  return rc;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (nvmlReturn_t rc = ensureNvml(); rc != NVML_SUCCESS) return rc;
  if (real::nvmlDeviceGetMemoryInfo_v2 == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = real::nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (rc != NVML_SUCCESS || memory == nullptr) return rc;
  int dev = ordinalOfNvmlDevice(device);
  if (!limited(dev)) return rc;
  uint64_t t = 0, f = 0;
  virtualize(dev, memory->total, memory->free, &t, &f);
  memory->total = t;
  memory->reserved = 0;  // the driver's reservation is outside the container's slice
  memory->free = f;
  memory->used = t - f;
  return rc;
}

}  // extern "C"
