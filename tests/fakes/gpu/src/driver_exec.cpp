// Fake libcuda.so.1: streams, events, modules, kernel launches and graphs.
//
// A launched kernel occupies its device for real wall-clock time: the shared schedule puts it
// after everything already queued on the device by any process, and waiting for it sleeps until
// its end. Launches return at once, as on hardware.

#include "driver.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace vgpu::fakegpu {

// Every stream of this process, created or implicit (legacy, per-thread).
template <class F>
void forEachStream(F&& f) {
  auto& drv = Driver::get();
  for (StreamState* st : drv.streams) f(st);
  for (Context* ctx : drv.contexts) {
    f(&ctx->legacyStream);
    for (auto& [tid, st] : ctx->perThreadStreams) f(&st);
  }
}

namespace {

constexpr uint64_t kMaxKernelUs = 3600ull * 1000000ull;
constexpr const char* kSpinKernel = "spin";

long threadId() { return static_cast<long>(syscall(SYS_gettid)); }

CUresult streamSync(CUstream s, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  uint64_t until = 0;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  {
    std::lock_guard lock(drv.mu);
    if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  }
  // Work behind an unsatisfied value wait does not finish until another stream writes it.
  waitWhileBlocked([&] {
    if (!drv.contexts.count(ctx)) return false;
    if (st == &ctx->legacyStream ? ctx->blockedStreams > 0 : (drv.streams.count(st) || st->ctx == ctx) && st->blocked)
      return true;
    until = streamDoneAt(st);
    return false;
  });
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  releasePoolsAtSync();
  return CUDA_SUCCESS;
}

CUresult streamQuery(CUstream s, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if (st->blocked || (st == &ctx->legacyStream && ctx->blockedStreams > 0)) return CUDA_ERROR_NOT_READY;
  return monotonicNs() >= streamDoneAt(st) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult streamDestroy(CUstream s) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* st = reinterpret_cast<StreamState*>(s);
  if (!drv.streams.count(st)) return CUDA_ERROR_INVALID_HANDLE;
  drv.streams.erase(st);  // queued work still completes: it lives in the device schedule
  abandonDeferred(st);
  delete st;
  return CUDA_SUCCESS;
}

bool valueSatisfies(uint32_t current, uint32_t value, unsigned flags) {
  switch (flags & 0x3u) {
    case CU_STREAM_WAIT_VALUE_GEQ: return static_cast<int32_t>(current - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return current == value;
    case CU_STREAM_WAIT_VALUE_AND: return (current & value) != 0;
    default: return ~(current | value) != 0;  // NOR
  }
}

// Runs what queued behind a satisfied wait, in order: it starts no earlier than now.
void unblock(StreamState* st) {
  st->blocked = false;
  --st->ctx->blockedStreams;
  std::vector<DeferredWork> work;
  work.swap(st->deferred);
  for (const DeferredWork& w : work) {
    if (w.ev != nullptr) {
      w.ev->pending = false;
      w.ev->timeNs = std::max(monotonicNs(), streamDoneAt(st));
    } else if (w.durNs > 0) {
      submitKernel(st, w.durNs);
    }
  }
}

CUresult streamWaitValue(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned flags, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if ((flags & ~(0x3u | CU_STREAM_WAIT_VALUE_FLUSH)) != 0 || (addr & 3) != 0 || !deviceRangeValid(addr, 4))
    return CUDA_ERROR_INVALID_VALUE;
  if (st->blocked) return CUDA_ERROR_NOT_SUPPORTED;  // one wait at a time per stream here
  uint32_t current = __atomic_load_n(reinterpret_cast<uint32_t*>(addr), __ATOMIC_ACQUIRE);
  if (valueSatisfies(current, value, flags)) return CUDA_SUCCESS;
  st->blocked = true;
  st->waitAddr = addr;
  st->waitValue = value;
  st->waitFlags = flags;
  ++ctx->blockedStreams;
  return CUDA_SUCCESS;
}

CUresult streamWriteValue(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned flags, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if ((flags & ~unsigned{CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER}) != 0 || (addr & 3) != 0 ||
      !deviceRangeValid(addr, 4))
    return CUDA_ERROR_INVALID_VALUE;
  if (st->blocked) return CUDA_ERROR_NOT_SUPPORTED;  // a write queued behind a wait: not modelled
  // Written when enqueued (the host sees it early); what it releases starts after the
  // writing stream's earlier work, which the device runs first anyway.
  __atomic_store_n(reinterpret_cast<uint32_t*>(addr), value, __ATOMIC_RELEASE);
  forEachStream([&](StreamState* other) {
    if (other->blocked && other->waitAddr == addr && valueSatisfies(value, other->waitValue, other->waitFlags))
      unblock(other);
  });
  return CUDA_SUCCESS;
}

CUresult eventRecord(CUevent e, CUstream s, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ev = reinterpret_cast<Event*>(e);
  if (!drv.events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if (ctx != ev->ctx) return CUDA_ERROR_INVALID_HANDLE;
  ev->recorded = true;
  ev->pending = st->blocked;
  if (st->blocked) {
    st->deferred.push_back({0, ev});
    return CUDA_SUCCESS;
  }
  ev->timeNs = std::max(monotonicNs(), streamDoneAt(st));
  return CUDA_SUCCESS;
}

CUresult eventDestroy(CUevent e) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ev = reinterpret_cast<Event*>(e);
  if (!drv.events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  drv.events.erase(ev);
  forgetDeferredEvent(ev);
  delete ev;
  return CUDA_SUCCESS;
}

// The run time of a spin kernel from its arguments: kernelParams[0] or the packed buffer in extra.
CUresult spinDuration(void** params, void** extra, uint64_t& ns) {
  uint64_t us = 0;
  if (params != nullptr) {
    if (params[0] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(&us, params[0], sizeof us);
  } else if (extra != nullptr) {
    void* buf = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) size = *static_cast<size_t*>(extra[i + 1]);
      else return CUDA_ERROR_INVALID_VALUE;
    }
    if (buf == nullptr || size < sizeof us) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(&us, buf, sizeof us);
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (us > kMaxKernelUs) return CUDA_ERROR_INVALID_VALUE;
  ns = us * 1000;
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                CUstream s, void** params, void** extra, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* fn = reinterpret_cast<Function*>(f);
  if (!drv.functions.count(fn)) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<uint64_t>(bx) * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if (fn->mod->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t ns = 0;
  if (CUresult r = spinDuration(params, extra, ns)) return r;
  submitKernel(st, ns);
  return CUDA_SUCCESS;
}

CUresult launchEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool perThread) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->hStream,
                params, extra, perThread);
}

GraphNode* addNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t nDeps, CUresult& err) {
  auto& drv = Driver::get();
  auto* graph = reinterpret_cast<Graph*>(g);
  err = CUDA_SUCCESS;
  if (out == nullptr || !drv.graphs.count(graph) || (nDeps > 0 && deps == nullptr)) {
    err = CUDA_ERROR_INVALID_VALUE;
    return nullptr;
  }
  for (size_t i = 0; i < nDeps; ++i) {
    bool found = false;
    for (auto& n : graph->nodes) found = found || reinterpret_cast<CUgraphNode>(n.get()) == deps[i];
    if (!found) {
      err = CUDA_ERROR_INVALID_VALUE;
      return nullptr;
    }
  }
  // Nodes run in the order they were added, which respects every dependency given at creation.
  graph->nodes.push_back(std::make_unique<GraphNode>());
  *out = reinterpret_cast<CUgraphNode>(graph->nodes.back().get());
  return graph->nodes.back().get();
}

CUresult instantiate(CUgraphExec* out, CUgraph g) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* graph = reinterpret_cast<Graph*>(g);
  if (out == nullptr || !drv.graphs.count(graph)) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new GraphExec();
  exec->ctx = currentContext();
  for (auto& n : graph->nodes) exec->nodes.push_back(*n);
  drv.graphExecs.insert(exec);
  *out = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

CUresult graphLaunch(CUgraphExec e, CUstream s, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* exec = reinterpret_cast<GraphExec*>(e);
  if (!drv.graphExecs.count(exec)) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  std::vector<uintptr_t> taken;
  auto rollback = [&] {
    for (uintptr_t p : taken) {
      auto it = drv.allocations.find(p);
      if (it != drv.allocations.end()) freeAllocation(it);
    }
  };
  // Memory nodes take and give back device memory when the graph runs, as on the real driver.
  for (const GraphNode& n : exec->nodes) {
    switch (n.kind) {
      case NodeKind::kMemAlloc: {
        if (drv.graphAllocLive[n.dptr]) {
          rollback();
          return CUDA_ERROR_INVALID_VALUE;  // the previous launch's allocation was never freed
        }
        // From the graph allocator's memory, which grows only by what it does not hold yet.
        GraphPool& pool = drv.graphPools[n.dev];
        uint64_t spare = pool.reserved - pool.used;
        if (spare < n.size) {
          if (!drv.shared()->charge(n.dev, n.size - spare)) {
            rollback();
            return CUDA_ERROR_OUT_OF_MEMORY;
          }
          pool.reserved += n.size - spare;
        }
        pool.used += n.size;
        pool.reservedHigh = std::max(pool.reservedHigh, pool.reserved);
        pool.usedHigh = std::max(pool.usedHigh, pool.used);
        Allocation a;
        a.base = n.dptr;
        a.size = n.size;
        a.charged = n.size;
        a.dev = n.dev;
        a.ctx = ctx;
        a.kind = AllocKind::kGraph;
        drv.allocations[a.base] = a;
        drv.graphAllocLive[n.dptr] = true;
        taken.push_back(n.dptr);
        break;
      }
      case NodeKind::kMemFree: {
        auto it = drv.allocations.find(n.dptr);
        if (it == drv.allocations.end() || it->second.kind != AllocKind::kGraph) {
          rollback();
          return CUDA_ERROR_INVALID_VALUE;
        }
        freeAllocation(it);
        break;
      }
      case NodeKind::kKernel:
        submitKernel(st, n.kernelNs);
        break;
      case NodeKind::kEmpty:
        break;
    }
  }
  exec->mapped = true;
  return CUDA_SUCCESS;
}

// An upload maps the memory of the graph's allocation nodes ahead of its first launch (the
// graph allocator grows by what it does not hold unused), which then takes it from there.
CUresult graphUpload(CUgraphExec e, CUstream s, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* exec = reinterpret_cast<GraphExec*>(e);
  if (!drv.graphExecs.count(exec)) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  if (exec->mapped) return CUDA_SUCCESS;
  std::map<int, uint64_t> need;
  for (const GraphNode& n : exec->nodes)
    if (n.kind == NodeKind::kMemAlloc) need[n.dev] += n.size;
  std::map<int, uint64_t> grown;
  for (auto& [dev, bytes] : need) {
    GraphPool& pool = drv.graphPools[dev];
    uint64_t spare = pool.reserved - pool.used;
    uint64_t grow = bytes > spare ? bytes - spare : 0;
    if (grow != 0 && !drv.shared()->charge(dev, grow)) {
      for (auto& [d, g] : grown) {
        drv.shared()->uncharge(d, g);
        drv.graphPools[d].reserved -= g;
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pool.reserved += grow;
    pool.reservedHigh = std::max(pool.reservedHigh, pool.reserved);
    grown[dev] = grow;
  }
  exec->mapped = true;
  return CUDA_SUCCESS;
}

CUresult streamWaitEvent(CUstream s, CUevent e, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.events.count(reinterpret_cast<Event*>(e))) return CUDA_ERROR_INVALID_HANDLE;
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  // One kernel at a time per device: later work already runs after the event's point.
  return resolveStream(s, perThread, ctx, st);
}

}  // namespace

// A blocked stream that goes away: its deferred events complete now, its kernels never run.
void abandonDeferred(StreamState* st) {
  for (DeferredWork& w : st->deferred)
    if (w.ev != nullptr) {
      w.ev->pending = false;
      w.ev->timeNs = monotonicNs();
    }
  st->deferred.clear();
  if (st->blocked && st->ctx != nullptr) --st->ctx->blockedStreams;
  st->blocked = false;
}

void forgetDeferredEvent(Event* ev) {
  forEachStream([&](StreamState* st) {
    for (DeferredWork& w : st->deferred)
      if (w.ev == ev) {
        w.ev = nullptr;
        w.durNs = 0;
      }
  });
}

void dropDeferredWork(Context* ctx) {
  auto& drv = Driver::get();
  for (StreamState* st : drv.streams)
    if (st->ctx == ctx) abandonDeferred(st);
  abandonDeferred(&ctx->legacyStream);
  for (auto& [tid, st] : ctx->perThreadStreams) abandonDeferred(&st);
  ctx->blockedStreams = 0;
}

CUresult resolveStream(CUstream handle, bool perThread, Context*& ctx, StreamState*& out) {
  auto& drv = Driver::get();
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    ctx = currentContext();
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (!drv.contexts.count(ctx)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (!ctx->active) return CUDA_ERROR_INVALID_CONTEXT;
    bool pt = handle == CU_STREAM_PER_THREAD || (handle == nullptr && perThread);
    if (pt) {
      StreamState& s = ctx->perThreadStreams[threadId()];
      s.ctx = ctx;
      out = &s;
    } else {
      out = &ctx->legacyStream;
    }
    return CUDA_SUCCESS;
  }
  auto* st = reinterpret_cast<StreamState*>(handle);
  if (!drv.streams.count(st)) return CUDA_ERROR_INVALID_HANDLE;
  if (!st->ctx->active) return CUDA_ERROR_INVALID_CONTEXT;
  ctx = st->ctx;
  out = st;
  return CUDA_SUCCESS;
}

uint64_t submitKernel(StreamState* stream, uint64_t durNs) {
  Context* ctx = stream->ctx;
  if (stream->blocked) {
    stream->deferred.push_back({durNs, nullptr});
    return 0;
  }
  uint64_t end = Driver::get().shared()->scheduleKernel(ctx->dev, durNs);
  stream->lastEndNs = end;
  ctx->lastEndNs = std::max(ctx->lastEndNs, end);
  return end;
}

uint64_t streamDoneAt(const StreamState* stream) {
  const Context* ctx = stream->ctx;
  // The legacy NULL stream waits for all blocking work in its context.
  return stream == &ctx->legacyStream ? ctx->lastEndNs : stream->lastEndNs;
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (phStream == nullptr || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* st = new StreamState();
  st->ctx = ctx;
  st->flags = flags;
  drv.streams.insert(st);
  *phStream = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  (void)priority;  // one kernel at a time: priorities do not reorder the simulated device
  return cuStreamCreate(phStream, flags);
}

CUresult cuStreamDestroy(CUstream s) { return streamDestroy(s); }
CUresult cuStreamDestroy_v2(CUstream s) { return streamDestroy(s); }
CUresult cuStreamSynchronize(CUstream s) { return streamSync(s, false); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { return streamSync(s, true); }
CUresult cuStreamQuery(CUstream s) { return streamQuery(s, false); }
CUresult cuStreamQuery_ptsz(CUstream s) { return streamQuery(s, true); }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  (void)flags;
  return streamWaitEvent(s, e, false);
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  (void)flags;
  return streamWaitEvent(s, e, true);
}

CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWaitValue(s, addr, value, flags, false);
}
CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWaitValue(s, addr, value, flags, false);
}
CUresult cuStreamWaitValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWaitValue(s, addr, value, flags, true);
}
CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWriteValue(s, addr, value, flags, false);
}
CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWriteValue(s, addr, value, flags, false);
}
CUresult cuStreamWriteValue32_v2_ptsz(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  return streamWriteValue(s, addr, value, flags, true);
}

CUresult cuEventCreate(CUevent* phEvent, unsigned int flags) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (phEvent == nullptr || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ev = new Event();
  ev->ctx = ctx;
  ev->flags = flags;
  drv.events.insert(ev);
  *phEvent = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s) { return eventRecord(e, s, false); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return eventRecord(e, s, true); }
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  (void)flags;
  return eventRecord(e, s, false);
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  (void)flags;
  return eventRecord(e, s, true);
}

CUresult cuEventQuery(CUevent e) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* ev = reinterpret_cast<Event*>(e);
  if (!drv.events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->pending) return CUDA_ERROR_NOT_READY;
  return !ev->recorded || monotonicNs() >= ev->timeNs ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  uint64_t until = 0;
  auto* ev = reinterpret_cast<Event*>(e);
  {
    std::lock_guard lock(drv.mu);
    if (!drv.events.count(ev)) return CUDA_ERROR_INVALID_HANDLE;
  }
  waitWhileBlocked([&] {
    if (!drv.events.count(ev)) return false;
    if (ev->pending) return true;
    until = ev->recorded ? ev->timeNs : 0;
    return false;
  });
  waitUntil(until);
  std::lock_guard lock(drv.mu);
  releasePoolsAtSync();
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e) { return eventDestroy(e); }
CUresult cuEventDestroy_v2(CUevent e) { return eventDestroy(e); }

// cuModuleLoadData and the other loaders: driver_modules.cpp.

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  if (CUresult r = checkInit()) return r;
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* m = reinterpret_cast<Module*>(hmod);
  if (!drv.modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  if (std::strcmp(name, kSpinKernel) != 0) return CUDA_ERROR_NOT_FOUND;
  auto* f = new Function();
  f->mod = m;
  f->name = name;
  drv.functions.insert(f);
  *hfunc = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream s, void** params,
                        void** extra) {
  (void)sharedMemBytes;
  return launch(f, gx, gy, gz, bx, by, bz, s, params, extra, false);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream s,
                             void** params, void** extra) {
  (void)sharedMemBytes;
  return launch(f, gx, gy, gz, bx, by, bz, s, params, extra, true);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launchEx(config, f, params, extra, false);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launchEx(config, f, params, extra, true);
}

CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  if (CUresult r = checkInit()) return r;
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* g = new Graph();
  drv.graphs.insert(g);
  *phGraph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (!drv.graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;
  drv.graphs.erase(g);
  delete g;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* deps, size_t nDeps,
                                CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (p == nullptr || p->bytesize == 0 || p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      p->poolProps.location.id < 0 || static_cast<size_t>(p->poolProps.location.id) >= drv.config().gpus.size())
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  CUresult err = CUDA_SUCCESS;
  GraphNode* n = addNode(phGraphNode, hGraph, deps, nDeps, err);
  if (n == nullptr) return err;
  // The address is fixed when the node is made; the memory behind it is taken at launch.
  void* addr = mmap(nullptr, p->bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (addr == MAP_FAILED) {
    reinterpret_cast<Graph*>(hGraph)->nodes.pop_back();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  n->kind = NodeKind::kMemAlloc;
  n->dptr = reinterpret_cast<uintptr_t>(addr);
  n->size = p->bytesize;
  n->dev = p->poolProps.location.id;
  drv.graphAllocLive[n->dptr] = false;
  p->dptr = static_cast<CUdeviceptr>(n->dptr);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* deps, size_t nDeps,
                               CUdeviceptr dptr) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.graphAllocLive.count(static_cast<uintptr_t>(dptr))) return CUDA_ERROR_INVALID_VALUE;
  CUresult err = CUDA_SUCCESS;
  GraphNode* n = addNode(phGraphNode, hGraph, deps, nDeps, err);
  if (n == nullptr) return err;
  n->kind = NodeKind::kMemFree;
  n->dptr = static_cast<uintptr_t>(dptr);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* deps, size_t nDeps,
                                 const CUDA_KERNEL_NODE_PARAMS* p) {
  if (CUresult r = checkInit()) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.functions.count(reinterpret_cast<Function*>(p->func))) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ns = 0;
  if (CUresult r = spinDuration(p->kernelParams, p->extra, ns)) return r;  // values are copied now
  CUresult err = CUDA_SUCCESS;
  GraphNode* n = addNode(phGraphNode, hGraph, deps, nDeps, err);
  if (n == nullptr) return err;
  n->kind = NodeKind::kKernel;
  n->kernelNs = ns;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  (void)flags;
  return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                            size_t bufferSize) {
  if (phErrorNode) *phErrorNode = nullptr;
  if (logBuffer && bufferSize) logBuffer[0] = '\0';
  return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                               size_t bufferSize) {
  return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(phGraphExec, hGraph);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  p->hErrNode_out = nullptr;
  return r;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return cuGraphInstantiateWithParams(phGraphExec, hGraph, p);
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return graphLaunch(e, s, false); }
CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return graphLaunch(e, s, true); }
CUresult cuGraphUpload(CUgraphExec e, CUstream s) { return graphUpload(e, s, false); }
CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s) { return graphUpload(e, s, true); }

CUresult cuGraphExecDestroy(CUgraphExec e) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* exec = reinterpret_cast<GraphExec*>(e);
  if (!drv.graphExecs.count(exec)) return CUDA_ERROR_INVALID_VALUE;
  drv.graphExecs.erase(exec);
  delete exec;
  return CUDA_SUCCESS;
}

}  // extern "C"

extern "C" {

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream s,
                                   void** params) {
  (void)sharedMemBytes;
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, gx, gy, gz, bx, by, bz, s, params, nullptr, false);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int sharedMemBytes,
                                        CUstream s, void** params) {
  (void)sharedMemBytes;
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, gx, gy, gz, bx, by, bz, s, params, nullptr, true);
}

// Stream capture is not simulated, so no stream is ever capturing.
static CUresult isCapturing(CUstream s, CUstreamCaptureStatus* status, bool perThread) {
  if (CUresult r = checkInit()) return r;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = nullptr;
  StreamState* st = nullptr;
  if (CUresult r = resolveStream(s, perThread, ctx, st)) return r;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) { return isCapturing(s, status, false); }
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) { return isCapturing(s, status, true); }

CUresult cuGraphDestroyNode(CUgraphNode node) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  for (Graph* g : drv.graphs) {
    for (auto it = g->nodes.begin(); it != g->nodes.end(); ++it) {
      if (reinterpret_cast<CUgraphNode>(it->get()) == node) {
        g->nodes.erase(it);
        return CUDA_SUCCESS;
      }
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
