#include "runtime.h"
#include "monitor.h"
#include "spin_lock.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <new>

#include "vgpu/limiter_contract.h"

namespace vgpu::real {
#define VGPU_DEFINE_REAL(name, params) CUresult(*name) params = nullptr;
VGPU_CUDA_HOOKS(VGPU_DEFINE_REAL)
VGPU_CUDA_INTERNAL(VGPU_DEFINE_REAL)
#undef VGPU_DEFINE_REAL
#define VGPU_DEFINE_REAL_NVML(name, params) nvmlReturn_t(*name) params = nullptr;
VGPU_NVML_HOOKS(VGPU_DEFINE_REAL_NVML)
VGPU_NVML_INTERNAL(VGPU_DEFINE_REAL_NVML)
#undef VGPU_DEFINE_REAL_NVML
}  // namespace vgpu::real

namespace vgpu {
Runtime* detail::gRuntime = nullptr;
std::atomic<bool> detail::gCudaReady{false};
std::atomic<bool> detail::gLaunchFast{false};
namespace {

std::atomic<int> gLogLevel{kLogError};
using detail::gRuntime;

// Placement storage: the runtime must exist before any static constructor could call us
// and must never be destroyed while other libraries' destructors may still call CUDA.
alignas(Runtime) unsigned char gRuntimeStorage[sizeof(Runtime)];

pthread_once_t gConfigOnce = PTHREAD_ONCE_INIT;
pthread_once_t gCudaOnce = PTHREAD_ONCE_INIT;
pthread_once_t gNvmlOnce = PTHREAD_ONCE_INIT;
std::atomic<CUresult> gCudaStatus{CUDA_ERROR_NOT_INITIALIZED};
std::atomic<nvmlReturn_t> gNvmlStatus{NVML_ERROR_UNINITIALIZED};
__thread bool tInInit = false;  // dlsym calls made while we load the driver pass through

struct HookEntry {
  const char* name;
  void** real;
  void* wrapper;
};

const HookEntry kHooks[] = {
#define VGPU_HOOK_ENTRY(name, params) {#name, reinterpret_cast<void**>(&real::name), reinterpret_cast<void*>(&::name)},
    VGPU_CUDA_HOOKS(VGPU_HOOK_ENTRY) VGPU_NVML_HOOKS(VGPU_HOOK_ENTRY)
#undef VGPU_HOOK_ENTRY
};
constexpr size_t kCudaHookCount = 0
#define VGPU_COUNT(name, params) +1
    VGPU_CUDA_HOOKS(VGPU_COUNT)
#undef VGPU_COUNT
    ;

using DlsymFn = void* (*)(void*, const char*);
std::atomic<DlsymFn> gRealDlsym{nullptr};

DlsymFn findRealDlsym() {
  DlsymFn fn = gRealDlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"}) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  gRealDlsym.store(fn, std::memory_order_release);
  return fn;
}

const void* baseOf(const void* addr) {
  Dl_info info;
  return addr != nullptr && dladdr(addr, &info) != 0 ? info.dli_fbase : nullptr;
}

// LIBVGPU_LOG_LEVEL (0 none .. 4 debug); when it is unset, HAMi-core's LIBCUDA_LOG_LEVEL, where
// errors always show (0 and 1 mean errors only) and anything that is not a number is 0, as
// atoi reads it there. Diagnostics only: a bad value never stops the library.
int logLevelFromEnvironment() {
  if (const char* level = getenv(VGPU_ENV_LOG_LEVEL)) {
    char* end = nullptr;
    long v = strtol(level, &end, 10);
    if (end != level && *end == '\0' && v >= 0 && v <= 4) return static_cast<int>(v);
    return kLogError;
  }
  if (const char* level = getenv(VGPU_ENV_HAMI_LOG_LEVEL)) {
    long v = strtol(level, nullptr, 10);
    return v <= kLogError ? kLogError : v >= kLogDebug ? kLogDebug : static_cast<int>(v);
  }
  return kLogError;
}

void initConfig() {
  tInInit = true;
  new (gRuntimeStorage) Runtime();
  Runtime& rt = *reinterpret_cast<Runtime*>(gRuntimeStorage);
  gLogLevel.store(logLevelFromEnvironment());
  char err[VGPU_LIMITER_PATH_MAX + 512] = "";
  auto env = [](void*, const char* name) -> const char* { return getenv(name); };
  if (vgpu_limiter_settings_load(env, nullptr, nullptr, &rt.cfg, err, sizeof err) != 0) {
    logf(kLogError, "refusing to start: %s", err);
    __atomic_store_n(&gRuntime, &rt, __ATOMIC_RELEASE);
    tInInit = false;
    return;
  }
  rt.configOk = true;
  if (rt.cfg.disable_control_ignored) {
    logf(kLogWarn, "%s=true is ignored: the limits file %s sets this container's limits (only the node agent "
         "can run a container without them)", VGPU_ENV_DISABLE_CONTROL, rt.cfg.limits_file);
  }
  if (rt.cfg.control_disabled) {
    // HAMi's meaning: this container runs without the limiter. Nothing is limited, and the
    // container's region is left alone: a private one holds this process's figures.
    logf(kLogInfo, "%s=true and no limits file: nothing is limited", VGPU_ENV_DISABLE_CONTROL);
    if (vgpu_region_open_private(&rt.region, err, sizeof err) != VGPU_REGION_OK) {
      logf(kLogError, "%s", err);
      rt.configOk = false;
    }
    __atomic_store_n(&gRuntime, &rt, __ATOMIC_RELEASE);
    tInInit = false;
    return;
  }
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    rt.computeAny |= rt.computeLimited(d);
    rt.memoryAny |= rt.memoryLimit(d) != 0;
  }
  // Without the container's region a process would count against a limit of its own: its
  // device memory is refused instead (reserveMemory says why). A private region still holds
  // its compute bucket.
  // The node agent names the region it created (by inode): only that one is used.
  int opened = rt.cfg.region_inode != 0
                   ? vgpu_region_open_existing(rt.cfg.region_path, rt.cfg.region_inode, &rt.region, err, sizeof err)
                   : vgpu_region_open(rt.cfg.region_path, &rt.region, err, sizeof err);
  if (opened == VGPU_REGION_OK) {
    rt.regionShared = true;
  } else {
    snprintf(rt.regionError, sizeof rt.regionError, "%s", err);
    if (rt.memoryAny) logf(kLogError, "%s; device memory is refused to this process", err);
    if (vgpu_region_open_private(&rt.region, err, sizeof err) != VGPU_REGION_OK) {
      logf(kLogError, "%s", err);
      rt.configOk = false;
    }
  }
  // The slot is claimed at the first charge: most processes of a container never use CUDA.
  if (rt.region != nullptr) vgpu_region_publish_priority(rt.region, rt.cfg.priority);
  logf(kLogInfo, "started: region %s, limits file %s", rt.cfg.region_path,
       rt.cfg.limits_file[0] == '\0' ? "(none)" : rt.cfg.limits_file);
  __atomic_store_n(&gRuntime, &rt, __ATOMIC_RELEASE);
  tInInit = false;
}

// Entry points an older driver lacks and the older equivalent with the same parameters it
// has instead (cuEventElapsedTime_v2 came with R570/CUDA 12.8, cuDeviceGetUuid_v2 with 11.4).
// cuGetProcAddress_v2 falls back to v1 in its wrapper (entry_hooks.cpp).
void useOlderEntryPoints() {
  struct Fallback {
    void** newer;
    void* older;
    const char* what;
  };
  const Fallback kFallbacks[] = {
      {reinterpret_cast<void**>(&real::cuEventElapsedTime_v2), reinterpret_cast<void*>(real::cuEventElapsedTime),
       "cuEventElapsedTime_v2"},
      {reinterpret_cast<void**>(&real::cuDeviceGetUuid_v2), reinterpret_cast<void*>(real::cuDeviceGetUuid),
       "cuDeviceGetUuid_v2"},
      {reinterpret_cast<void**>(&real::cuEventDestroy_v2), reinterpret_cast<void*>(real::cuEventDestroy),
       "cuEventDestroy_v2"},
  };
  for (const Fallback& f : kFallbacks) {
    if (*f.newer == nullptr && f.older != nullptr) {
      *f.newer = f.older;
      logf(kLogInfo, "the driver has no %s; using the older entry point", f.what);
    }
  }
}

// A limit that this driver gives no way to enforce is said once, here, at the error level
// (so it shows by default), and published per device in the region for the node agent.
void reportWhatCannotBeEnforced(Runtime& rt) {
  bool anyMemory = false, anyCompute = false;
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    anyMemory |= rt.memoryLimit(d) != 0;
    anyCompute |= rt.computeLimited(d);
  }
  // Without the current context's device no allocation can be charged to one.
  if (anyMemory && real::cuCtxGetDevice == nullptr) {
    rt.unenforced |= VGPU_REGION_UNENFORCED_MEMORY;
    logf(kLogError, "the memory limit is NOT enforced: the driver has no cuCtxGetDevice");
  }
  const char* missing = real::cuCtxGetCurrent == nullptr        ? "cuCtxGetCurrent"
                        : real::cuEventCreate == nullptr        ? "cuEventCreate"
                        : real::cuEventRecord == nullptr        ? "cuEventRecord"
                        : real::cuEventQuery == nullptr         ? "cuEventQuery"
                        : real::cuEventElapsedTime_v2 == nullptr ? "cuEventElapsedTime (nor _v2)"
                                                                : nullptr;
  if (anyCompute && missing != nullptr) {
    rt.unenforced |= VGPU_REGION_UNENFORCED_COMPUTE;
    rt.computeAny = false;  // launches pass straight through rather than half-throttled
    logf(kLogError, "the compute limit is NOT enforced: the driver has no %s", missing);
  }
}

void initCuda() {
  if (!ensureConfig()) {
    gCudaStatus.store(CUDA_ERROR_INVALID_VALUE);
    return;
  }
  Runtime& rt = runtime();
  // Fail closed: without the container's region, limits would be this process's alone (a
  // fresh full memory limit and compute bucket per process). Nothing to enforce: no refusal.
  if (!rt.regionShared && (rt.memoryAny || rt.computeAny)) {
    logf(kLogError, "CUDA refused: the container's shared region %s is unusable (%s); the limits cannot be "
         "enforced without it", rt.cfg.region_path, rt.regionError);
    gCudaStatus.store(CUDA_ERROR_OPERATING_SYSTEM);
    return;
  }
  tInInit = true;
  DlsymFn sym = findRealDlsym();
  rt.cudaHandle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (rt.cudaHandle == nullptr || sym == nullptr) {
    logf(kLogError, "cannot load libcuda.so.1: %s", dlerror());
    gCudaStatus.store(CUDA_ERROR_NOT_INITIALIZED);
    tInInit = false;
    return;
  }
  for (size_t i = 0; i < kCudaHookCount; ++i) *kHooks[i].real = sym(rt.cudaHandle, kHooks[i].name);
#define VGPU_RESOLVE_INTERNAL(name, params) \
  real::name = reinterpret_cast<decltype(real::name)>(sym(rt.cudaHandle, #name));
  VGPU_CUDA_INTERNAL(VGPU_RESOLVE_INTERNAL)
#undef VGPU_RESOLVE_INTERNAL
  useOlderEntryPoints();
  rt.cudaBase = baseOf(reinterpret_cast<const void*>(real::cuInit));
  reportWhatCannotBeEnforced(rt);
  gCudaStatus.store(CUDA_SUCCESS);
  detail::gCudaReady.store(true, std::memory_order_release);
  monitor::configure();
  tInInit = false;
}

void initNvml() {
  if (!ensureConfig()) {
    gNvmlStatus.store(NVML_ERROR_INVALID_ARGUMENT);
    return;
  }
  tInInit = true;
  Runtime& rt = runtime();
  DlsymFn sym = findRealDlsym();
  rt.nvmlHandle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (rt.nvmlHandle == nullptr || sym == nullptr) {
    logf(kLogWarn, "cannot load libnvidia-ml.so.1: %s", dlerror());
    gNvmlStatus.store(NVML_ERROR_UNINITIALIZED);
    tInInit = false;
    return;
  }
  for (size_t i = kCudaHookCount; i < sizeof kHooks / sizeof kHooks[0]; ++i) {
    *kHooks[i].real = sym(rt.nvmlHandle, kHooks[i].name);
  }
#define VGPU_RESOLVE_NVML(name, params) real::name = reinterpret_cast<decltype(real::name)>(sym(rt.nvmlHandle, #name));
  VGPU_NVML_INTERNAL(VGPU_RESOLVE_NVML)
#undef VGPU_RESOLVE_NVML
  rt.nvmlBase = baseOf(reinterpret_cast<const void*>(real::nvmlDeviceGetUUID));
  gNvmlStatus.store(NVML_SUCCESS);
  tInInit = false;
}

constexpr int kSlotGone = -2;      // detached at exit: never attach again
constexpr int kSlotRefused = -3;   // the region was found rewritten: no device memory any more

void atforkChild() {
  // The child holds no device memory of its parent and needs a slot of its own.
  Runtime* rt = __atomic_load_n(&gRuntime, __ATOMIC_ACQUIRE);
  if (rt == nullptr || rt->region == nullptr) return;
  ledger::clear();
  pools::reset();
  throttle::reset();
  monitor::reset();
  if (rt->regionShared) vgpu_region_after_fork(rt->region);
  rt->slot.store(-1);  // attached lazily at its first charge: most forks exec at once
  contextsChanged();
}

// The process's slot, attaching first if it has none yet; -1 while it cannot have one.
int ensureSlot(Runtime& rt) {
  int slot = rt.slot.load(std::memory_order_relaxed);
  if (__builtin_expect(slot >= 0, 1) || slot == kSlotGone || slot == kSlotRefused) return slot;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static int64_t lastTry = 0;
  pthread_mutex_lock(&mu);
  slot = rt.slot.load();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  // All slots taken: tried again at most once a second (each try looks at every slot).
  if (slot == -1 && ts.tv_sec != lastTry) {
    char err[256] = "";
    int rc = vgpu_region_attach(rt.region, &slot, err, sizeof err);
    if (rc == VGPU_REGION_OK) {
      rt.slot.store(slot);
    } else if (rc == VGPU_REGION_TAMPERED) {
      snprintf(rt.regionError, sizeof rt.regionError, "%s", err);
      rt.slot.store(slot = kSlotRefused);
    } else {
      lastTry = ts.tv_sec;
      slot = -1;
      snprintf(rt.regionError, sizeof rt.regionError, "%s", err);
    }
  }
  pthread_mutex_unlock(&mu);
  return slot;
}

__attribute__((constructor)) void onLoad() { pthread_atfork(nullptr, nullptr, atforkChild); }

__attribute__((destructor)) void onUnload() {
  Runtime* rt = __atomic_load_n(&gRuntime, __ATOMIC_ACQUIRE);
  if (rt == nullptr || rt->region == nullptr) return;
  monitor::stop();
  // Late frees from other libraries' destructors must not touch a slot someone may reuse.
  int slot = rt->slot.exchange(kSlotGone);
  vgpu_region_detach(rt->region, slot);
}

}  // namespace

void logf(int level, const char* fmt, ...) {
  if (level > gLogLevel.load(std::memory_order_relaxed)) return;
  // Rate limit: 20 lines per second, so a hot path cannot flood the application's stderr.
  static std::atomic<int64_t> windowStart{0};
  static std::atomic<int> linesInWindow{0};
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t second = ts.tv_sec;
  if (windowStart.exchange(second) != second) linesInWindow.store(0);
  if (linesInWindow.fetch_add(1) >= 20) return;
  char buf[768];
  int n = snprintf(buf, sizeof buf, "libvgpu[%d]: ", static_cast<int>(getpid()));
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, buf, len);
  (void)ignored;
}

bool ensureConfig() {
  if (__atomic_load_n(&gRuntime, __ATOMIC_ACQUIRE) == nullptr) pthread_once(&gConfigOnce, initConfig);
  return gRuntime != nullptr && gRuntime->configOk;
}

CUresult detail::ensureCudaSlow() {
  if (tInInit) return CUDA_ERROR_NOT_INITIALIZED;
  pthread_once(&gCudaOnce, initCuda);
  return gCudaStatus.load();
}

nvmlReturn_t ensureNvml() {
  if (tInInit) return NVML_ERROR_UNINITIALIZED;
  pthread_once(&gNvmlOnce, initNvml);
  return gNvmlStatus.load();
}

void* realDlsym(void* handle, const char* name) {
  DlsymFn fn = findRealDlsym();
  return fn != nullptr ? fn(handle, name) : nullptr;
}

void* wrapperByName(const char* name) {
  for (const HookEntry& h : kHooks) {
    if (strcmp(h.name, name) == 0) return h.wrapper;
  }
  return nullptr;
}

void* wrapperForReal(const void* realFn) {
  if (realFn == nullptr) return nullptr;
  for (const HookEntry& h : kHooks) {
    if (*h.real == realFn) return h.wrapper;
  }
  return nullptr;
}

namespace {

struct AbiRow {
  const char* base;
  int version;
  const char* variant;
  const char* twin;  // "none" when there is none
};
const AbiRow kAbi[] = {
#define VGPU_ABI_ROW(base, version, variant, twin) {#base, version, #variant, #twin},
    VGPU_CUDA_PROC_ABI(VGPU_ABI_ROW)
#undef VGPU_ABI_ROW
};
constexpr int kPerThreadStreamsSince = 7000;  // the _ptsz/_ptds entry points

const HookEntry* hookNamed(const char* name) {
  for (const HookEntry& h : kHooks) {
    if (strcmp(h.name, name) == 0) return &h;
  }
  return nullptr;
}

// Whether the driver has `variant`: a hooked one was resolved at start; one we do not wrap
// is only ever handed back untouched, so it needs no check.
bool driverHas(const char* variant) {
  const HookEntry* h = hookNamed(variant);
  return h == nullptr || *h->real != nullptr;
}

CUresult askDriver(const char* symbol, int cudaVersion, cuuint64_t flags, void** fn) {
  *fn = nullptr;
  if (real::cuGetProcAddress_v2 != nullptr) return real::cuGetProcAddress_v2(symbol, fn, cudaVersion, flags, nullptr);
  if (real::cuGetProcAddress != nullptr) return real::cuGetProcAddress(symbol, fn, cudaVersion, flags);
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

void* wrapperForProcAddress(const char* symbol, int cudaVersion, cuuint64_t flags, void* driverFn) {
  if (symbol == nullptr || driverFn == nullptr) return nullptr;
  // The driver handed out what dlsym gave us: that settles it.
  if (void* w = wrapperForReal(driverFn)) return w;
  // Otherwise by name, as the driver chooses: the newest ABI not above the caller's version
  // that this driver has, and its per-thread twin when the caller asked for those streams.
  const AbiRow* row = nullptr;
  for (const AbiRow& r : kAbi) {
    if (strcmp(r.base, symbol) != 0 || r.version > cudaVersion || !driverHas(r.variant)) continue;
    if (row == nullptr || r.version > row->version) row = &r;
  }
  if (row == nullptr) return nullptr;
  const char* variant = row->variant;
  int version = row->version;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && cudaVersion >= kPerThreadStreamsSince &&
      strcmp(row->twin, "none") != 0) {
    variant = row->twin;
    if (version < kPerThreadStreamsSince) version = kPerThreadStreamsSince;
  }
  const HookEntry* hook = hookNamed(variant);
  if (hook == nullptr || *hook->real == nullptr) return nullptr;  // not wrapped: the driver's own
  // Only when the driver gives the same entry point for exactly that ABI's version is it that
  // ABI (a newer driver may have a newer one this library does not know): else hand back its own.
  void* check = nullptr;
  if (askDriver(symbol, version, flags, &check) != CUDA_SUCCESS || check != driverFn) {
    logf(kLogWarn, "cuGetProcAddress(%s, %d): the driver's entry point is not %s; handed out unwrapped", symbol,
         cudaVersion, variant);
    return nullptr;
  }
  return hook->wrapper;
}

__thread CUcontext detail::tCtx __attribute__((tls_model("initial-exec"))) = nullptr;
__thread int detail::tCtxDev __attribute__((tls_model("initial-exec"))) = -1;
__thread uint32_t detail::tCtxEpoch __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint32_t> detail::gContextEpoch{1};

bool detail::lookupContext(CUcontext ctx, Ctx* out) {
  uint32_t epoch = gContextEpoch.load(std::memory_order_acquire);
  CUdevice dev = -1;
  // ctx is current on this thread: cuCtxGetDevice answers for it.
  if (real::cuCtxGetDevice == nullptr || real::cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= kLimiterMaxDevices) {
    return false;
  }
  tCtx = ctx;
  tCtxDev = dev;
  tCtxEpoch = epoch;
  out->ctx = ctx;
  out->dev = dev;
  return true;
}

int currentDevice() {
  Ctx c;
  return currentContext(&c) ? c.dev : -1;
}

namespace {

// CUDA answers a MIG device's own UUID (cuDeviceGetUuid_v2), but not whether it is one: NVML
// and the metrics name it "MIG-<hex>", a GPU "GPU-<hex>". The container was handed the device
// by that name (NVIDIA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES on a host), so the name is there.
const char* uuidPrefix(const char* hex) {
  constexpr size_t kHexLen = 36;  // 8-4-4-4-12
  for (const char* var : {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    const char* list = getenv(var);
    for (const char* p = list; p != nullptr && (p = strstr(p, "MIG-")) != nullptr; p += 4) {
      const char end = p[4 + strnlen(p + 4, kHexLen)];
      if (strncasecmp(p + 4, hex, kHexLen) == 0 && (end == '\0' || end == ',')) return "MIG-";
    }
  }
  return "GPU-";
}

}  // namespace

void publishDevice(int dev) {
  Runtime& rt = runtime();
  uint32_t bit = 1u << dev;
  if ((rt.publishedDevices.load(std::memory_order_relaxed) & bit) != 0) return;
  CUuuid u;
  CUdevice handle = 0;
  if (real::cuDeviceGet == nullptr || real::cuDeviceGetUuid_v2 == nullptr ||
      real::cuDeviceGet(&handle, dev) != CUDA_SUCCESS || real::cuDeviceGetUuid_v2(&u, handle) != CUDA_SUCCESS) {
    return;
  }
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char hex[40];
  snprintf(hex, sizeof hex, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
           b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  char uuid[VGPU_REGION_UUID_LEN];
  snprintf(uuid, sizeof uuid, "%s%s", uuidPrefix(hex), hex);
  memcpy(rt.uuids[dev], uuid, sizeof uuid);
  vgpu_region_publish_device(rt.region, dev, uuid, rt.memoryLimit(dev), rt.smPercent(dev));
  uint32_t unenforced = 0;
  if (rt.memoryLimit(dev) != 0) unenforced |= rt.unenforced & VGPU_REGION_UNENFORCED_MEMORY;
  if (rt.computeLimited(dev)) unenforced |= rt.unenforced & VGPU_REGION_UNENFORCED_COMPUTE;
  vgpu_region_publish_unenforced(rt.region, dev, unenforced);
  rt.publishedDevices.fetch_or(bit);
}

namespace {

// The reason a process without a slot in the container's region gets no device memory.
// Said once at the error level (so also by default), then at the debug level.
CUresult refuseWithoutRegion(Runtime& rt, int dev, uint64_t bytes) {
  static std::atomic<bool> said{false};
  logf(said.exchange(true) ? kLogDebug : kLogError,
       "device %d: %llu bytes refused: this process is not counted in the container's shared region %s (%s)", dev,
       static_cast<unsigned long long>(bytes), rt.cfg.region_path,
       rt.regionError[0] != '\0' ? rt.regionError : "no slot");
  return CUDA_ERROR_OUT_OF_MEMORY;
}

}  // namespace

namespace {

// Refuses the region for the rest of the process, saying why once at the error level.
CUresult refuseTamperedRegion(Runtime& rt, int dev, uint64_t bytes) {
  int slot = rt.slot.exchange(kSlotRefused);
  if (slot >= 0) vgpu_region_verify(rt.region, slot, rt.regionError, sizeof rt.regionError);
  if (rt.regionError[0] == '\0') snprintf(rt.regionError, sizeof rt.regionError, "the region's counters were rewritten");
  logf(kLogError, "device %d: %llu bytes refused, and all device memory from now on: %s", dev,
       static_cast<unsigned long long>(bytes), rt.regionError);
  return CUDA_ERROR_OUT_OF_MEMORY;
}


}  // namespace

CUresult detail::reserveMemorySuspect(int dev, uint64_t bytes) {
  Runtime& rt = runtime();
  int slot = rt.slot.load();
  if (slot < 0 || vgpu_region_verify(rt.region, slot, nullptr, 0) == VGPU_REGION_OK) return CUDA_SUCCESS;
  vgpu_region_sub(rt.region, slot, dev, bytes);
  return refuseTamperedRegion(rt, dev, bytes);
}

CUresult detail::reserveMemorySlow(int dev, uint64_t bytes) {
  Runtime& rt = runtime();
  if (__builtin_expect((rt.publishedDevices.load(std::memory_order_relaxed) >> dev & 1) == 0, 0)) publishDevice(dev);
  uint64_t limit = rt.memoryLimit(dev);
  int slot = rt.regionShared ? ensureSlot(rt) : -1;
  if (__builtin_expect(slot < 0, 0)) {
    if (limit == 0) return CUDA_SUCCESS;  // nothing to enforce on this device
    return refuseWithoutRegion(rt, dev, bytes);
  }
  int rc = vgpu_region_try_add(rt.region, slot, dev, bytes, limit);
  // What pools and the graph allocator hold unused is given back before anything is refused.
  if (rc == VGPU_REGION_OVER_LIMIT && pools::trimDevice(dev)) rc = vgpu_region_try_add(rt.region, slot, dev, bytes, limit);
  if (rc == VGPU_REGION_OK) return CUDA_SUCCESS;
  if (rc == VGPU_REGION_TAMPERED) return refuseTamperedRegion(rt, dev, bytes);
  if (rc == VGPU_REGION_OVER_LIMIT) {
    logf(kLogWarn, "device %d: %llu bytes refused, %llu of %llu in use", dev, static_cast<unsigned long long>(bytes),
         static_cast<unsigned long long>(vgpu_region_used(rt.region, dev)), static_cast<unsigned long long>(limit));
  } else {
    logf(kLogError, "device %d: the shared region is unusable; refusing %llu bytes", dev,
         static_cast<unsigned long long>(bytes));
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void forceMemory(int dev, uint64_t bytes) {
  if (dev < 0 || dev >= kLimiterMaxDevices || bytes == 0) return;
  Runtime& rt = runtime();
  int slot = rt.regionShared ? ensureSlot(rt) : -1;
  if (slot >= 0) vgpu_region_force_add(rt.region, slot, dev, bytes);
}

void releaseContextRecords(CUcontext ctx) {
  uint64_t bytes[kLimiterMaxDevices] = {};
  ledger::takeContext(reinterpret_cast<uintptr_t>(ctx), bytes);
  for (int d = 0; d < kLimiterMaxDevices; ++d) releaseMemory(d, bytes[d]);
}

uint64_t containerUsage(int dev) { return vgpu_region_used(runtime().region, dev); }

}  // namespace vgpu

// dlsym is exported so that dlsym(<libcuda handle>, "cuMemAlloc_v2") - how cudart and many
// frameworks find the driver - returns the wrapper. Every other lookup goes to the real
// dlsym as a tail call, so RTLD_NEXT still resolves relative to the real caller.
extern "C" VGPU_EXPORT void* dlsym(void* handle, const char* name) {
  using vgpu::gRealDlsym;
  auto fn = gRealDlsym.load(std::memory_order_acquire);
  if (fn == nullptr) fn = vgpu::findRealDlsym();
  // glibc declares `name` nonnull, but a caller may still pass NULL: never crash on it.
  const char* checked = name;
  __asm__("" : "+r"(checked));
  if (handle != RTLD_NEXT && handle != RTLD_DEFAULT && checked != nullptr && !vgpu::tInInit &&
      ((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nvml", 4) == 0)) {
    if (void* w = vgpu::wrapperByName(name)) {
      Dl_info info;
      void* sym = fn(handle, name);
      // Only lookups in the real driver are redirected, and not the driver's own.
      const void* caller = vgpu::baseOf(__builtin_return_address(0));
      if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fbase != vgpu::baseOf(w) && caller != info.dli_fbase) {
        return w;
      }
      return sym;
    }
  }
  return fn(handle, name);
}
