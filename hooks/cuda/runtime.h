#pragma once
// Process-wide state of libvgpu.so: configuration, the real driver tables, the shared
// region slot, and the accounting helpers the wrappers share. Nothing here throws, prints
// to stdout or aborts; failures become CUresult values and (rate-limited) log lines.

#include <pthread.h>
#include <stdint.h>

#include <atomic>

#include "cuda_api.h"
#include "ledger.h"
#include "vgpu/limiter_settings.h"
#include "vgpu/shared_region.h"

namespace vgpu {

inline constexpr int kLimiterMaxDevices = VGPU_LIMITER_MAX_DEVICES;
static_assert(kLimiterMaxDevices == kLedgerDevices);

/// Log levels of LIBVGPU_LOG_LEVEL.
enum LogLevel : int { kLogError = 1, kLogWarn = 2, kLogInfo = 3, kLogDebug = 4 };

/// Writes one line to stderr if `level` is enabled; at most 20 lines per second.
void logf(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// The state every wrapper reads. Filled once by ensureCuda()/ensureConfig().
struct Runtime {
  vgpu_limiter_settings cfg;
  bool configOk = false;
  /// The container's region, or (when it cannot be used) a private one that holds this
  /// process's compute bucket; then `regionError` says why and memory is refused.
  vgpu_region* region = nullptr;
  bool regionShared = false;
  char regionError[512] = "";
  std::atomic<int> slot{-1};
  void* cudaHandle = nullptr;
  void* nvmlHandle = nullptr;
  const void* cudaBase = nullptr;  // load address of the real libcuda, to recognise it
  const void* nvmlBase = nullptr;
  bool memoryAny = false;                     // some device has a memory limit
  bool computeAny = false;                    // some device has a compute limit
  std::atomic<uint32_t> publishedDevices{0};  // bit i: device i's UUID/limits published
  char uuids[kLimiterMaxDevices][VGPU_REGION_UUID_LEN] = {};
  /// VGPU_REGION_UNENFORCED_* bits for limits this driver gives no way to enforce (the
  /// same for every device: they come from missing entry points). Set once in ensureCuda.
  uint32_t unenforced = 0;

  uint64_t memoryLimit(int dev) const { return cfg.memory_bytes[dev]; }
  uint32_t smPercent(int dev) const { return cfg.sm_percent[dev]; }
  bool computeLimited(int dev) const { return vgpu_limiter_compute_limited(&cfg, dev) != 0; }
  bool oversubscribe() const { return cfg.oversubscribe != 0; }
};

namespace detail {
extern Runtime* gRuntime;
}
/// The state; valid once ensureConfig() has returned (every wrapper enters through it).
inline Runtime& runtime() { return *detail::gRuntime; }

/// Loads the configuration and maps the region (once). False if the configuration is bad.
bool ensureConfig();

namespace detail {
extern std::atomic<bool> gCudaReady;
/// Launches need nothing of the library now (no throttling, holding or announcing): the
/// launch wrappers then only test this and call the driver (monitor.cpp keeps it current).
extern std::atomic<bool> gLaunchFast;
CUresult ensureCudaSlow();
}  // namespace detail

/// Loads the real libcuda (once). Returns what a wrapper should return instead of
/// proceeding: CUDA_SUCCESS to proceed, else the error (bad configuration, no driver).
/// Inline: after the first call it is one load and one branch on every wrapper.
inline CUresult ensureCuda() {
  if (__builtin_expect(detail::gCudaReady.load(std::memory_order_acquire), 1)) return CUDA_SUCCESS;
  return detail::ensureCudaSlow();
}

/// Same for NVML.
nvmlReturn_t ensureNvml();

/// The wrapper that libvgpu.so exports under `name`, or nullptr if it wraps no such name.
void* wrapperByName(const char* name);

/// The wrapper for a real driver function pointer, or nullptr if `real` is not hooked.
void* wrapperForReal(const void* real);

/// The wrapper to hand out instead of `driverFn`, what the driver's cuGetProcAddress gave for
/// (symbol, cudaVersion, flags); nullptr when that is not a function we wrap (or not one we
/// can be sure of: then the caller gets the driver's own).
void* wrapperForProcAddress(const char* symbol, int cudaVersion, cuuint64_t flags, void* driverFn);

/// Real dlsym, bypassing libvgpu's own export.
void* realDlsym(void* handle, const char* name);

// ---- the current context and its device ----

/// A context and the ordinal of its device.
struct Ctx {
  CUcontext ctx = nullptr;
  int dev = -1;
};

namespace detail {
// The calling thread's last (context, device), valid while gContextEpoch is unchanged: the
// epoch moves whenever a context goes, so a handle the driver reuses is looked up again.
extern __thread CUcontext tCtx __attribute__((tls_model("initial-exec")));
extern __thread int tCtxDev __attribute__((tls_model("initial-exec")));
extern __thread uint32_t tCtxEpoch __attribute__((tls_model("initial-exec")));
extern std::atomic<uint32_t> gContextEpoch;
bool lookupContext(CUcontext ctx, Ctx* out);
}  // namespace detail

/// The calling thread's current context and its device; false when there is none (or its
/// device is beyond what the library limits). One driver call (cuCtxGetCurrent, a TLS read
/// in the driver) and a compare on the common path.
inline bool currentContext(Ctx* out) {
  CUcontext c = nullptr;
  if (real::cuCtxGetCurrent(&c) != CUDA_SUCCESS || c == nullptr) return false;
  if (__builtin_expect(c == detail::tCtx && detail::tCtxEpoch == detail::gContextEpoch.load(std::memory_order_relaxed),
                       1)) {
    out->ctx = c;
    out->dev = detail::tCtxDev;
    return true;
  }
  return detail::lookupContext(c, out);
}

/// A context is going or gone: every thread looks its current context up again.
inline void contextsChanged() { detail::gContextEpoch.fetch_add(1, std::memory_order_acq_rel); }

/// Ordinal of the current context's device, or -1 when there is no current context.
int currentDevice();

// ---- memory accounting ----

/// Records the device's UUID and limits in the region for the node agent (once per device).
void publishDevice(int dev);

namespace detail {
CUresult reserveMemorySlow(int dev, uint64_t bytes);
/// The fast check-and-add added `bytes` but saw the region's counters contradict each other:
/// confirmed, they are taken back and the region is refused from now on; else CUDA_SUCCESS.
CUresult reserveMemorySuspect(int dev, uint64_t bytes);
}

/// Check-and-add `bytes` on `dev` against the limit: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY.
/// Before refusing, memory pools and the graph allocator are trimmed of what they hold unused.
/// Inline: every allocation runs it; the common case is one compare-and-swap.
inline CUresult reserveMemory(int dev, uint64_t bytes) {
  Runtime& rt = runtime();
  int slot = rt.slot.load(std::memory_order_relaxed);
  if (__builtin_expect(slot >= 0 && (rt.publishedDevices.load(std::memory_order_relaxed) >> dev & 1) != 0, 1)) {
    int added = vgpu_region_add_fast(rt.region, slot, dev, bytes, rt.cfg.memory_bytes[dev]);
    if (__builtin_expect(added == 1, 1)) return CUDA_SUCCESS;
    if (added == 2) return detail::reserveMemorySuspect(dev, bytes);
  }
  return detail::reserveMemorySlow(dev, bytes);
}

/// Counts `bytes` the driver has already taken, whatever the limit (the next requests see it).
void forceMemory(int dev, uint64_t bytes);

/// Gives back what reserveMemory or forceMemory took.
inline void releaseMemory(int dev, uint64_t bytes) {
  Runtime& rt = runtime();
  int slot = rt.slot.load(std::memory_order_relaxed);
  if (dev >= 0 && dev < kLimiterMaxDevices && slot >= 0 && bytes != 0) vgpu_region_sub_fast(rt.region, slot, dev, bytes);
}

/// After the driver's answer to freeing memory whose record was taken from the ledger: on
/// success the charge is given back, otherwise the record goes back (the memory is still
/// there).
inline CUresult settleFree(Kind kind, uintptr_t id, const Record& rec, CUresult rc) {
  if (rc == CUDA_SUCCESS)
    releaseMemory(rec.dev, rec.bytes);
  else
    ledger::put(kind, id, rec);
  return rc;
}

/// Gives back the charging records of context `ctx` (it is gone, and its memory with it).
void releaseContextRecords(CUcontext ctx);
/// Context `ctx` is gone: its charging records, what it exported or opened (share.h) and its
/// throttle state go with it.
void contextGone(CUcontext ctx);
/// A primary context's release or reset by `call` (the ABI the application chose): the last
/// release, or a reset, ends the context (contextGone) and its overhead's charge
/// (memory_hooks.cpp).
CUresult primaryReleased(CUdevice dev, CUresult (*call)(CUdevice));
CUresult primaryReset(CUdevice dev, CUresult (*call)(CUdevice));

/// Usage of `dev` by the whole container.
uint64_t containerUsage(int dev);

/// Memory pools and the graph allocator (pools.cpp): what they hold is charged. resync*
/// reads what a pool holds now and moves its charge to it; `provisional` is what the caller
/// reserved for an allocation that may have grown the pool (it becomes part of the charge).
namespace pools {
/// Whether any pool or graph allocator memory is charged in this process.
bool any();
/// A pool this process uses (created, or a device's current pool); `dev` is where it allocates.
void track(CUmemoryPool pool, int dev);
/// Charges `pool` for what it holds now, counting `provisional` as already reserved.
void resync(CUmemoryPool pool, uint64_t provisional);
/// Every tracked pool (after a synchronisation, the driver trims them to their thresholds).
void resyncAll();
/// Whether this process is charged for `pool` (created here, or a device's current pool); *dev
/// gets its device.
bool charged(CUmemoryPool pool, int* dev);
/// A pool is destroyed; `outstanding` bytes of it are still allocated.
void destroyed(CUmemoryPool pool, uint64_t outstanding);
/// An allocation of a destroyed pool was freed.
void freedFromDestroyed(CUmemoryPool pool, uint64_t bytes);
/// Trims the pools and graph memory of `dev` to what is in use, then resyncs them; before a
/// refusal. True if anything was given back.
bool trimDevice(int dev);
/// The graph allocator of `dev`: charged for what it maps, counting `provisional`.
void resyncGraph(int dev, uint64_t provisional);
/// Graph memory the allocator of `dev` holds but no live allocation uses.
uint64_t graphSpare(int dev);
/// Forgets everything (forked child).
void reset();
/// Set once an executable graph with allocation nodes exists: graph launches then reserve.
extern std::atomic<bool> gGraphAllocs;
}  // namespace pools

/// Compute throttling around launches (throttle.cpp). Whether a launch goes through it is the
/// monitor's call (monitor.h).
namespace throttle {

/// What begin() hands to end(): the context's state and the burst the launch joined.
struct Ticket {
  void* ctx = nullptr;  // the context's state; nullptr: not throttled
  uint64_t burst = 0;
  uint64_t generation = 0;
};

/// Runs `launch` inside the current burst, holding the caller back when the container's
/// GPU time is over its share. `ptsz` says the launch used the per-thread default stream.
/// No lock of the library is held while the launch runs or while the caller is held back.
template <class F>
CUresult around(CUstream stream, bool ptsz, F&& launch);
void begin(CUstream stream, bool ptsz, Ticket* ticket);
void end(const Ticket& ticket, CUresult launchResult);
/// The calling thread is about to wait for the device (a synchronisation): the current
/// context's open burst ends here, so the idle time after it is not counted as busy.
void beforeSync();
/// The context is gone (cuCtxDestroy, last release or reset of a primary context), and its
/// events with it: its state is dropped, and made afresh if the handle is used again.
void forget(CUcontext ctx);
/// Forgets per-context state (in a forked child).
void reset();
}  // namespace throttle

template <class F>
CUresult throttle::around(CUstream stream, bool ptsz, F&& launch) {
  Ticket ticket;
  begin(stream, ptsz, &ticket);
  CUresult result = launch();
  end(ticket, result);
  return result;
}

}  // namespace vgpu

// First statement of every CUDA wrapper: initialise once, refuse when misconfigured.
#define VGPU_ENTER_CUDA(name)                                                                \
  do {                                                                                       \
    if (CUresult vgpu_rc_ = ::vgpu::ensureCuda(); vgpu_rc_ != CUDA_SUCCESS) return vgpu_rc_; \
    if (::vgpu::real::name == nullptr) return CUDA_ERROR_NOT_FOUND;                          \
  } while (0)
