#pragma once
// Internal state of the fake libcuda.so.1: objects behind the CUDA handles and the process-wide
// driver. Only the fake's own sources include this.

#include "vgpu/cuda/driver_api.h"  // every versioned symbol under its own name

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "config.h"
#include "shared_state.h"

namespace vgpu::fakegpu {

struct Context;
struct Event;

/// Work queued behind a cuStreamWaitValue32 that is not yet satisfied: a kernel of `durNs`,
/// or (ev set) an event record.
struct DeferredWork {
  uint64_t durNs = 0;
  Event* ev = nullptr;
};

/// Work-completion tracking for one stream (kernels run back to back on the device).
struct StreamState {
  Context* ctx = nullptr;
  unsigned flags = 0;
  uint64_t lastEndNs = 0;
  /// Waiting on a value (cuStreamWaitValue32): kernels and event records queue in `deferred`
  /// until a cuStreamWriteValue32 of this process satisfies the wait.
  bool blocked = false;
  uintptr_t waitAddr = 0;
  uint32_t waitValue = 0;
  unsigned waitFlags = 0;
  std::vector<DeferredWork> deferred;
};

struct Context {
  int dev = 0;
  unsigned flags = 0;
  bool primary = false;
  bool active = false;          ///< false: a primary context that is not retained / was reset
  uint64_t lastEndNs = 0;       ///< end of the last work submitted in this context
  int blockedStreams = 0;       ///< streams of this context waiting on a value
  StreamState legacyStream;     ///< the NULL stream
  std::map<long, StreamState> perThreadStreams;  ///< by thread id: CU_STREAM_PER_THREAD
};

struct Event {
  Context* ctx = nullptr;
  unsigned flags = 0;
  bool recorded = false;
  bool pending = false;         ///< recorded behind an unsatisfied value wait: time not known yet
  uint64_t timeNs = 0;          ///< when the device reaches the record point
};

struct Module {
  Context* ctx = nullptr;
  uint64_t deviceBytes = 0;  ///< device memory its code and globals take (driver_modules.cpp)
};

/// A context-independent module (cuLibraryLoad*): loaded into the context current at load time.
struct Library {
  Module* module = nullptr;  ///< nullptr when there was no context, or it has gone
};

struct Function {
  Module* mod = nullptr;
  std::string name;
};

struct Pool;

enum class AllocKind { kDevice, kPitch, kManaged, kAsync, kGraph, kIpcImport, kLegacy32, kPoolImport };

/// One device-memory allocation, backed by a memfd mapping so copies, IPC and sharing work.
struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;        ///< bytes usable from base
  size_t mapLen = 0;
  uint64_t charged = 0;   ///< bytes charged to the device (0 for imports)
  int dev = 0;
  int fd = -1;
  Context* ctx = nullptr;
  AllocKind kind = AllocKind::kDevice;
  Pool* pool = nullptr;
  int ipcRefs = 0;
  uint64_t object = 0;    ///< exported or opened: the shared object (memfd inode) it holds
};

/// A stream-ordered free (cuMemFreeAsync) that the device has not reached yet.
struct PendingFree {
  uint64_t bytes = 0;
  uint64_t atNs = 0;  ///< when the stream's earlier work is done
};

struct Pool {
  int dev = 0;
  bool isDefault = false;
  bool destroyed = false;
  uint64_t releaseThreshold = 0;
  uint64_t reserved = 0;      ///< bytes charged to the device by this pool
  uint64_t used = 0;          ///< bytes handed out (frees not yet reached by their stream included)
  uint64_t reservedHigh = 0;
  uint64_t usedHigh = 0;
  std::vector<PendingFree> pending;
  unsigned long long handleTypes = 0;  ///< CUmemAllocationHandleType bits it can be exported as
  int exportFd = -1;                   ///< exported: a memfd naming it (driver_pools.cpp)
  std::vector<int> deviceExports;      ///< VGPU_FAKE_EXPORT_DEVICE_FD: this process's exported open files
  bool imported = false;               ///< imported from another process: pointers only
  int32_t exporterPid = 0;             ///< imported: the exporting process and its pool
  uint64_t exporterPool = 0;
};

/// The per-device memory the graph allocator maps for graph allocation nodes: taken when a
/// graph runs, kept after the allocation is freed until cuDeviceGraphMemTrim.
struct GraphPool {
  uint64_t reserved = 0;  ///< bytes charged to the device
  uint64_t used = 0;      ///< bytes of live graph allocations
  uint64_t reservedHigh = 0;
  uint64_t usedHigh = 0;
};

struct ArrayObj {
  Context* ctx = nullptr;
  int dev = 0;
  uint64_t bytes = 0;
  bool mipmapped = false;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  unsigned levels = 1;
};

struct VmmHandle {
  int fd = -1;
  size_t size = 0;
  int dev = -1;               ///< device charged, -1 for host allocations
  bool imported = false;
  uint64_t charged = 0;
  int refs = 1;               ///< the handle itself plus each mapping
  CUmemAllocationProp prop{};
  uint64_t object = 0;        ///< exported or imported: the shared object (memfd inode) it holds
  bool multicast = false;     ///< a multicast object: no memory of its own (bound memory is)
  std::vector<int> deviceExports;  ///< VGPU_FAKE_EXPORT_DEVICE_FD: this process's exported open files
};

struct VmmReservation {
  uintptr_t base = 0;
  size_t size = 0;
};

struct VmmMapping {
  uintptr_t base = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

enum class NodeKind { kMemAlloc, kMemFree, kKernel, kEmpty };

struct GraphNode {
  NodeKind kind = NodeKind::kEmpty;
  uintptr_t dptr = 0;         ///< alloc/free nodes
  size_t size = 0;            ///< alloc nodes
  int dev = 0;                ///< alloc nodes
  uint64_t kernelNs = 0;      ///< kernel nodes
};

struct Graph {
  std::vector<std::unique_ptr<GraphNode>> nodes;
};

struct GraphExec {
  Context* ctx = nullptr;
  std::vector<GraphNode> nodes;
  bool mapped = false;  ///< an upload or a launch has mapped its allocation memory
};

/// The process-wide fake driver.
class Driver {
 public:
  static Driver& get();

  /// cuInit's work; the result is remembered and returned on every later call.
  CUresult init();
  bool initialised() const { return initResult_ == CUDA_SUCCESS && initDone_; }
  const MachineConfig& config() const { return cfg_; }
  SharedState* shared() const { return shared_; }
  /// Attaches the shared state without cuInit (for the test-only control functions).
  SharedState* sharedForControl();

  std::mutex mu;
  std::set<Context*> contexts;
  std::vector<Context*> primary;            ///< one per device, created with the driver
  std::vector<int> primaryRefs;
  std::set<StreamState*> streams;
  std::set<Event*> events;
  std::set<Module*> modules;
  std::set<Function*> functions;
  std::set<Library*> libraries;
  std::map<uintptr_t, Allocation> allocations;  ///< by base address
  std::set<void*> hostAllocs;
  std::map<void*, size_t> hostAllocSizes;
  std::map<uintptr_t, size_t> hostRegistered;   ///< cuMemHostRegister ranges by start
  std::set<Pool*> pools;
  std::vector<Pool*> defaultPools;
  std::vector<Pool*> currentPools;
  std::vector<GraphPool> graphPools;         ///< one per device
  std::set<ArrayObj*> arrays;
  std::map<CUmemGenericAllocationHandle, VmmHandle> vmmHandles;
  CUmemGenericAllocationHandle nextVmmHandle = 1;
  std::map<uintptr_t, VmmReservation> reservations;
  std::map<uintptr_t, VmmMapping> mappings;
  std::set<Graph*> graphs;
  std::set<GraphExec*> graphExecs;
  std::map<uintptr_t, bool> graphAllocLive;    ///< graph allocation address -> memory taken

 private:
  CUresult initResult_ = CUDA_SUCCESS;
  bool initDone_ = false;
  MachineConfig cfg_;
  SharedState* shared_ = nullptr;
  std::once_flag once_;
};

}  // namespace vgpu::fakegpu

namespace vgpu::fakegpu {

/// CUDA_ERROR_NOT_INITIALIZED unless cuInit succeeded.
CUresult checkInit();
/// The calling thread's current context (nullptr if none).
Context* currentContext();
void setCurrentContext(Context* ctx);
/// The current context if cuInit succeeded and it is usable, else the error a real driver gives.
CUresult requireContext(Context*& out);
/// The stream behind a handle: NULL means the legacy stream, or the per-thread stream for the
/// _ptsz/_ptds entry points. Caller holds Driver::mu.
CUresult resolveStream(CUstream handle, bool perThread, Context*& ctx, StreamState*& out);
/// Sleeps until CLOCK_MONOTONIC reaches `ns`.
void waitUntil(uint64_t ns);
/// Sleeps while `blocked()` (evaluated under Driver::mu) is true: work behind a value wait.
template <class F>
void waitWhileBlocked(F&& blocked);
/// Schedules a kernel of `durNs` on the stream's device; returns its end. Caller holds Driver::mu.
uint64_t submitKernel(StreamState* stream, uint64_t durNs);
/// When all work submitted so far on `stream` is done (legacy stream: all work of the context).
uint64_t streamDoneAt(const StreamState* stream);
/// Value waits (cuStreamWaitValue32): a stream that goes away completes its deferred events
/// and drops its deferred kernels; an event that goes away is dropped from every queue; a
/// context that goes away drops all of its streams' deferred work. Caller holds Driver::mu.
void abandonDeferred(StreamState* st);
void forgetDeferredEvent(Event* ev);
void dropDeferredWork(Context* ctx);
/// Releases everything a context owns (allocations, overhead). Caller holds Driver::mu.
/// Stream-ordered and graph allocations are not the context's (they belong to their pool)
/// and survive it, as cuMemCreate's do.
void releaseContextResources(Context* ctx);
/// What a stream, event or context synchronisation does to the memory pools: frees the
/// device has reached become the pool's again, and every pool gives back what it holds
/// beyond its release threshold. Caller holds Driver::mu.
void releasePoolsAtSync();
/// Unloads a module: its functions go and its device memory is given back. Caller holds
/// Driver::mu.
void destroyModule(Module* m);
/// The inode of the file behind `fd` (a memfd names shared memory across processes).
uint64_t inodeOf(int fd);
/// `n` rounded up to whole pages.
size_t pageRound(size_t n);
/// Maps `size` bytes of the memfd another process `pid` holds as descriptor `fd` (an IPC handle
/// or a pool pointer names them) into an allocation of this process: base, size, mapLen and fd
/// filled in, the rest left to the caller. `gone` when that process or its memfd is no more.
CUresult mapOtherProcessMemory(int32_t pid, int32_t fd, size_t size, CUresult gone, Allocation& out);
/// The memfd behind a descriptor another process exported (the memfd itself, or with
/// VGPU_FAKE_EXPORT_DEVICE_FD the exporter's, found by the device node's open file), opened
/// anew; -1 if it is neither.
int memfdOf(int src);
/// Frees the device has reached by now become the pool's to reuse. Caller holds Driver::mu.
void poolSettle(Pool* pool);
/// Gives the device back what the pool holds beyond max(keep, used). Caller holds Driver::mu.
void poolTrim(Pool* pool, uint64_t keep);
/// Frees one allocation (unmap, uncharge). Caller holds Driver::mu.
void freeAllocation(std::map<uintptr_t, Allocation>::iterator it);
/// The allocation containing [p, p+len), or end().
std::map<uintptr_t, Allocation>::iterator findAllocation(uintptr_t p, size_t len);
/// True if [p, p+len) is device memory the process may touch (allocations, VMM mappings).
bool deviceRangeValid(uintptr_t p, size_t len);

}  // namespace vgpu::fakegpu

#include <time.h>

namespace vgpu::fakegpu {
template <class F>
void waitWhileBlocked(F&& blocked) {
  for (;;) {
    {
      std::lock_guard lock(Driver::get().mu);
      if (!blocked()) return;
    }
    timespec ts{0, 500'000};
    nanosleep(&ts, nullptr);
  }
}
}  // namespace vgpu::fakegpu
