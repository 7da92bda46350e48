#pragma once
// Process-wide state of libvgpu.so: configuration, the real driver tables, the shared
// region slot, and the accounting helpers the wrappers share. Nothing here throws, prints
// to stdout or aborts; failures become CUresult values and (rate-limited) log lines.

#include <pthread.h>
#include <stdint.h>

#include <atomic>

#include "cuda_api.h"
#include "vgpu/limiter_settings.h"
#include "vgpu/shared_region.h"

namespace vgpu {

inline constexpr int kLimiterMaxDevices = VGPU_LIMITER_MAX_DEVICES;

/// Log levels of LIBVGPU_LOG_LEVEL.
enum LogLevel : int { kLogError = 1, kLogWarn = 2, kLogInfo = 3, kLogDebug = 4 };

/// Writes one line to stderr if `level` is enabled; at most 20 lines per second.
void logf(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// The state every wrapper reads. Filled once by ensureCuda()/ensureConfig().
struct Runtime {
  vgpu_limiter_settings cfg;
  bool configOk = false;
  vgpu_region* region = nullptr;
  std::atomic<int> slot{-1};
  void* cudaHandle = nullptr;
  void* nvmlHandle = nullptr;
  const void* cudaBase = nullptr;  // load address of the real libcuda, to recognise it
  const void* nvmlBase = nullptr;
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

/// Ordinal of the current context's device, or -1 when there is no current context.
int currentDevice();

/// Records the device's UUID and limits in the region for the node agent (once per device).
void publishDevice(int dev);

/// Check-and-add `bytes` on `dev` against the limit: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY.
CUresult reserveMemory(int dev, uint64_t bytes);

/// Gives back what reserveMemory took.
void releaseMemory(int dev, uint64_t bytes);

/// Usage of `dev` by the whole container, after reclaiming dead processes at most once a second.
uint64_t containerUsage(int dev);

/// What a kind of tracked object is; the ledger keys records by (kind, id).
enum class Kind : uint8_t {
  kPointer,         // cuMemAlloc*, pitch, managed, async, pool
  kIpc,             // cuIpcOpenMemHandle
  kArray,           // cuArrayCreate / cuArray3DCreate
  kMipmap,          // cuMipmappedArrayCreate
  kVmmHandle,       // cuMemCreate on a device
  kImportedHandle,  // cuMemImportFromShareableHandle (counted when mapped)
  kGraphNode,       // cuGraphAddMemAllocNode (owner = graph)
  kContext,         // cuCtxCreate*
};

struct Record {
  int dev = -1;
  uint64_t bytes = 0;
  uintptr_t owner = 0;
};

/// This process's memory objects and what each was charged. Thread-safe.
namespace ledger {
void put(Kind kind, uintptr_t id, const Record& rec);
/// Removes and returns the record; false if there was none.
bool take(Kind kind, uintptr_t id, Record* out);
/// Reads the record without removing it.
bool peek(Kind kind, uintptr_t id, Record* out);
/// Updates bytes of an existing record; false if there is none.
bool setBytes(Kind kind, uintptr_t id, uint64_t bytes);
/// Removes every record of `kind` whose owner is `owner`; returns the bytes per device.
void takeOwned(Kind kind, uintptr_t owner, uint64_t bytesPerDevice[kLimiterMaxDevices]);
/// Removes every record on `dev` except contexts (cuDevicePrimaryCtxReset frees them).
void takeDevice(int dev, uint64_t* bytes);
/// Forgets everything (a forked child owns none of its parent's device memory).
void clear();
}  // namespace ledger

/// Compute throttling around launches (throttle.cpp).
namespace throttle {
/// True when some device has a compute limit; false makes launches pure pass-through.
inline bool active() { return runtime().computeAny; }

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
