// Fake libcuda.so.1: initialisation, errors, devices and contexts.

#include "driver.h"
#include "driver_version.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vgpu::fakegpu {
namespace {

thread_local std::vector<Context*> tStack;
// The top of tStack, kept beside it in static TLS: reading the current context is a TLS read,
// as in a real driver (the vector lives in dynamic TLS, a __tls_get_addr call away).
__thread Context* tTop __attribute__((tls_model("initial-exec"))) = nullptr;

void syncTop() { tTop = tStack.empty() ? nullptr : tStack.back(); }

// Set once cuInit has succeeded: what every entry point checks first, one load.
std::atomic<bool> gInitialised{false};

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
#define X(code, text) {code, #code, text},
constexpr ErrorText kErrors[] = {
#include "cu_result_names.inc"
};
#undef X

const ErrorText* findError(CUresult r) {
  for (const auto& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

bool validDevice(CUdevice d) {
  auto& drv = Driver::get();
  return d >= 0 && static_cast<size_t>(d) < drv.config().gpus.size();
}

CUresult checkDevice(CUdevice d) {
  if (CUresult r = checkInit()) return r;
  return validDevice(d) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult createContext(CUcontext* out, unsigned flags, CUdevice dev) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  auto& drv = Driver::get();
  uint64_t overhead = drv.config().gpus[dev].contextMib << 20;
  std::lock_guard lock(drv.mu);
  if (overhead != 0 && !drv.shared()->charge(dev, overhead)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* ctx = new Context();
  ctx->dev = dev;
  ctx->flags = flags;
  ctx->active = true;
  ctx->legacyStream.ctx = ctx;
  drv.contexts.insert(ctx);
  drv.shared()->setContext(dev, true);
  tStack.push_back(ctx);
  syncTop();
  *out = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

CUresult destroyContext(CUcontext c) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  auto* ctx = reinterpret_cast<Context*>(c);
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    if (ctx == nullptr || !drv.contexts.count(ctx) || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
    until = ctx->lastEndNs;
  }
  waitUntil(until);  // its work finishes first, without holding up other threads meanwhile
  std::lock_guard lock(drv.mu);
  if (!drv.contexts.count(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  releaseContextResources(ctx);
  drv.contexts.erase(ctx);
  tStack.erase(std::remove(tStack.begin(), tStack.end(), ctx), tStack.end());
  syncTop();
  delete ctx;
  return CUDA_SUCCESS;
}

CUresult pushContext(CUcontext c) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  auto* ctx = reinterpret_cast<Context*>(c);
  std::lock_guard lock(drv.mu);
  if (ctx == nullptr || !drv.contexts.count(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  tStack.push_back(ctx);
  syncTop();
  return CUDA_SUCCESS;
}

CUresult popContext(CUcontext* out) {
  if (CUresult r = checkInit()) return r;
  if (tStack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (out != nullptr) *out = reinterpret_cast<CUcontext>(tStack.back());
  tStack.pop_back();
  syncTop();
  return CUDA_SUCCESS;
}

CUresult primaryRelease(CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  auto& drv = Driver::get();
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    if (drv.primaryRefs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (drv.primaryRefs[dev] == 1) until = drv.primary[dev]->lastEndNs;
  }
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  if (drv.primaryRefs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--drv.primaryRefs[dev] == 0) releaseContextResources(drv.primary[dev]);
  return CUDA_SUCCESS;
}

CUresult primaryReset(CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  auto& drv = Driver::get();
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    until = drv.primary[dev]->lastEndNs;
  }
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  Context* ctx = drv.primary[dev];
  // "Resetting the primary context does not release it": who retained it still releases it
  // (the driver API reference); the next retain makes it active again.
  if (ctx->active) releaseContextResources(ctx);
  return CUDA_SUCCESS;
}

CUresult primarySetFlags(CUdevice dev, unsigned flags) {
  if (CUresult r = checkDevice(dev)) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  drv.primary[dev]->flags = flags;
  return CUDA_SUCCESS;
}

CUresult deviceUuid(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(dev)) return r;
  std::memcpy(uuid->bytes, Driver::get().config().gpus[dev].uuidBytes, 16);
  return CUDA_SUCCESS;
}

CUresult elapsed(float* ms, CUevent a, CUevent b) {
  if (CUresult r = checkInit()) return r;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ea = reinterpret_cast<Event*>(a);
  auto* eb = reinterpret_cast<Event*>(b);
  if (!drv.events.count(ea) || !drv.events.count(eb)) return CUDA_ERROR_INVALID_HANDLE;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->recorded || !eb->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (ea->pending || eb->pending) return CUDA_ERROR_NOT_READY;
  uint64_t now = monotonicNs();
  if (ea->timeNs > now || eb->timeNs > now) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((static_cast<double>(eb->timeNs) - static_cast<double>(ea->timeNs)) / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

Driver& Driver::get() {
  static Driver* d = new Driver();  // never destroyed: other libraries' destructors may still call in
  return *d;
}

CUresult Driver::init() {
  std::call_once(once_, [this] {
    cfg_ = loadMachineConfig();
    if (!cfg_.error.empty()) {
      std::fprintf(stderr, "%s\n", cfg_.error.c_str());
      initResult_ = CUDA_ERROR_UNKNOWN;
      return;
    }
    if (cfg_.cuInitError != 0) {
      initResult_ = static_cast<CUresult>(cfg_.cuInitError);
      return;
    }
    if (cfg_.gpus.empty()) {
      initResult_ = CUDA_ERROR_NO_DEVICE;
      return;
    }
    std::string err;
    shared_ = SharedState::attach(cfg_, "libnvidia-ml.so.1", err);
    if (shared_ == nullptr) {
      std::fprintf(stderr, "%s\n", err.c_str());
      initResult_ = CUDA_ERROR_UNKNOWN;
      return;
    }
    for (size_t d = 0; d < cfg_.gpus.size(); ++d) {
      auto* ctx = new Context();
      ctx->dev = static_cast<int>(d);
      ctx->primary = true;
      ctx->legacyStream.ctx = ctx;
      primary.push_back(ctx);
      contexts.insert(ctx);
      primaryRefs.push_back(0);
      auto* pool = new Pool();
      pool->dev = static_cast<int>(d);
      pool->isDefault = true;
      pools.insert(pool);
      defaultPools.push_back(pool);
      currentPools.push_back(pool);
    }
    graphPools.resize(cfg_.gpus.size());
    initDone_ = true;
    gInitialised.store(true, std::memory_order_release);
  });
  return initResult_;
}

SharedState* Driver::sharedForControl() {
  if (init() == CUDA_SUCCESS) return shared_;
  return nullptr;
}

CUresult checkInit() {
  return gInitialised.load(std::memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

Context* currentContext() { return tTop; }

void setCurrentContext(Context* ctx) {
  if (ctx == nullptr) {
    if (!tStack.empty()) tStack.pop_back();
  } else if (tStack.empty()) {
    tStack.push_back(ctx);
  } else {
    tStack.back() = ctx;
  }
  syncTop();
}

CUresult requireContext(Context*& out) {
  if (CUresult r = checkInit()) return r;
  Context* ctx = currentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.contexts.count(ctx)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (!ctx->active) return CUDA_ERROR_INVALID_CONTEXT;
  out = ctx;
  return CUDA_SUCCESS;
}

void waitUntil(uint64_t ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(ns % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void releaseContextResources(Context* ctx) {
  auto& drv = Driver::get();
  dropDeferredWork(ctx);
  for (auto it = drv.allocations.begin(); it != drv.allocations.end();) {
    auto next = std::next(it);
    if (it->second.ctx == ctx) {
      // cuCtxDestroy does not free stream-ordered (pool) or graph allocations: they are not
      // associated with a context (the driver API reference on cuCtxDestroy).
      if (it->second.kind == AllocKind::kAsync || it->second.kind == AllocKind::kGraph) {
        it->second.ctx = nullptr;
      } else {
        freeAllocation(it);
      }
    }
    it = next;
  }
  for (auto it = drv.arrays.begin(); it != drv.arrays.end();) {
    ArrayObj* a = *it;
    if (a->ctx == ctx) {
      drv.shared()->uncharge(a->dev, a->bytes);
      delete a;
      it = drv.arrays.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = drv.streams.begin(); it != drv.streams.end();) {
    if ((*it)->ctx == ctx) {
      delete *it;
      it = drv.streams.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = drv.events.begin(); it != drv.events.end();) {
    if ((*it)->ctx == ctx) {
      delete *it;
      it = drv.events.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = drv.modules.begin(); it != drv.modules.end();) {
    Module* m = *it++;
    if (m->ctx == ctx) destroyModule(m);  // its functions and device memory too
  }
  uint64_t overhead = drv.config().gpus[ctx->dev].contextMib << 20;
  if (ctx->active && overhead != 0) drv.shared()->uncharge(ctx->dev, overhead);
  ctx->active = false;
  bool other = false;
  for (Context* c : drv.contexts) other = other || (c != ctx && c->active && c->dev == ctx->dev);
  if (!other) drv.shared()->setContext(ctx->dev, false);
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return Driver::get().init();
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = VGPU_FAKE_CUDA_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = findError(error);
  *str = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = findError(error);
  *str = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult r = checkInit()) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (CUresult r = checkInit()) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(Driver::get().config().gpus.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const std::string& n = Driver::get().config().gpus[dev].name;
  size_t k = std::min(n.size(), static_cast<size_t>(len - 1));
  std::memcpy(name, n.data(), k);
  name[k] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = Driver::get().config().gpus[dev].memoryMib << 20;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t b = 0;
  if (CUresult r = cuDeviceTotalMem_v2(&b, dev)) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = static_cast<unsigned int>(std::min<size_t>(b, 0xffffffffu));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return deviceUuid(uuid, dev); }
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) { return deviceUuid(uuid, dev); }

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  if (pi == nullptr || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  const GpuSpec& g = Driver::get().config().gpus[dev];
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = g.smCount; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = g.ccMajor; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = g.ccMinor; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = static_cast<int>(g.pciBus); break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = static_cast<int>(g.pciDevice); break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = static_cast<int>(g.pciDomain); break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: v = 512; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1500000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: v = g.numa; break;
    default: v = 0; break;  // a capability the fake does not model reads as absent
  }
  *pi = v;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const GpuSpec& g = Driver::get().config().gpus[dev];
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04X:%02X:%02X.%X", g.pciDomain, g.pciBus, g.pciDevice, g.pciFunction);
  std::snprintf(pciBusId, static_cast<size_t>(len), "%s", buf);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  if (CUresult r = checkInit()) return r;
  if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned dom = 0, bus = 0, d = 0, fn = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &d, &fn) != 4) return CUDA_ERROR_INVALID_VALUE;
  const auto& gpus = Driver::get().config().gpus;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].pciDomain == dom && gpus[i].pciBus == bus && gpus[i].pciDevice == d && gpus[i].pciFunction == fn) {
      *dev = static_cast<CUdevice>(i);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) { return createContext(pctx, flags, dev); }
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) { return createContext(pctx, flags, dev); }
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int numParams, unsigned int flags, CUdevice dev) {
  if (numParams < 0 || (numParams > 0 && params == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return createContext(pctx, flags, dev);
}
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  (void)params;  // affinity / CIG parameters do not change the simulated device
  return createContext(pctx, flags, dev);
}

CUresult cuCtxDestroy(CUcontext ctx) { return destroyContext(ctx); }
CUresult cuCtxDestroy_v2(CUcontext ctx) { return destroyContext(ctx); }
CUresult cuCtxPushCurrent(CUcontext ctx) { return pushContext(ctx); }
CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return pushContext(ctx); }
CUresult cuCtxPopCurrent(CUcontext* pctx) { return popContext(pctx); }
CUresult cuCtxPopCurrent_v2(CUcontext* pctx) { return popContext(pctx); }

CUresult cuCtxSetCurrent(CUcontext c) {
  if (CUresult r = checkInit()) return r;
  auto* ctx = reinterpret_cast<Context*>(c);
  if (ctx != nullptr) {
    auto& drv = Driver::get();
    std::lock_guard lock(drv.mu);
    if (!drv.contexts.count(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  setCurrentContext(ctx);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (CUresult r = checkInit()) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(currentContext());
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = ctx->dev;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext c, unsigned int* version) {
  if (CUresult r = checkInit()) return r;
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (c == nullptr && currentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  uint64_t until = 0;
  auto& drv = Driver::get();
  waitWhileBlocked([&] {
    if (!drv.contexts.count(ctx)) return false;
    if (ctx->blockedStreams > 0) return true;  // as on hardware: it waits for the write
    until = ctx->lastEndNs;
    return false;
  });
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  releasePoolsAtSync();
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult r = checkDevice(dev)) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = drv.primary[dev];
  if (!ctx->active) {
    uint64_t overhead = drv.config().gpus[dev].contextMib << 20;
    if (overhead != 0 && !drv.shared()->charge(dev, overhead)) return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->active = true;
    drv.shared()->setContext(dev, true);
  }
  ++drv.primaryRefs[dev];
  *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primaryRelease(dev); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primaryRelease(dev); }
CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primaryReset(dev); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primaryReset(dev); }
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) { return primarySetFlags(dev, flags); }
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) { return primarySetFlags(dev, flags); }

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (CUresult r = checkDevice(dev)) return r;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  *flags = drv.primary[dev]->flags;
  *active = drv.primary[dev]->active ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) { return elapsed(ms, a, b); }
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) { return elapsed(ms, a, b); }

}  // extern "C"

// Process exit returns this process's device memory, as the real driver does.
__attribute__((destructor)) static void vgpuFakeCudaAtExit() {
  auto& drv = Driver::get();
  if (drv.initialised()) drv.shared()->releaseSelf();
}

extern "C" {

CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext c) {
  if (c == nullptr) return cuCtxGetDevice(device);
  if (CUresult r = checkInit()) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ctx = reinterpret_cast<Context*>(c);
  if (!drv.contexts.count(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->dev;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext c) {
  if (c == nullptr) return cuCtxSynchronize();
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    auto* ctx = reinterpret_cast<Context*>(c);
    if (!drv.contexts.count(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    until = ctx->lastEndNs;
  }
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  releasePoolsAtSync();
  return CUDA_SUCCESS;
}

}  // extern "C"
