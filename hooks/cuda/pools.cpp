// Stream-ordered allocation (cuMemAllocAsync, memory pools) and graph allocation nodes.
//
// A pool keeps memory after it is freed into it (up to its release threshold, until the next
// synchronisation, or until trimmed), and the graph allocator keeps what graph allocations
// used until cuDeviceGraphMemTrim: so what is charged is what they hold, as the driver
// reports it (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
// not what the application has allocated from them. A free is never credited when it is
// queued: the pool gives the memory back later, and the charge follows then.
//
// Never over the limit: before an allocation that may grow a pool, what it may grow by is
// reserved (the request minus what the pool holds unused); after it, the charge moves to
// what the pool really holds. Before any request is refused, pools and the graph allocator
// of the device are trimmed of what they hold unused.

#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "runtime.h"
#include "share.h"
#include "spin_lock.h"

namespace vgpu::pools {
namespace {

struct Pool {
  CUmemoryPool pool;
  int dev;
  bool destroyed;       // destroyed with allocations outstanding: it holds those until freed
  uint64_t charged;     // what it held at the last resync
};

SpinLock gMu;
Pool* gPools = nullptr;
size_t gCount = 0;
size_t gCapacity = 0;
std::atomic<bool> gAny{false};
uint64_t gGraphCharged[kLimiterMaxDevices];  // under gMu

Pool* find(CUmemoryPool pool) {
  for (size_t i = 0; i < gCount; ++i) {
    if (gPools[i].pool == pool) return &gPools[i];
  }
  return nullptr;
}

void removeAt(Pool* p) { *p = gPools[--gCount]; }

bool attribute(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t* v) {
  cuuint64_t value = 0;
  if (real::cuMemPoolGetAttribute == nullptr || real::cuMemPoolGetAttribute(pool, attr, &value) != CUDA_SUCCESS) {
    return false;
  }
  *v = value;
  return true;
}

// Moves a charge by `delta` bytes of which `provisional` were reserved already. Growth beyond
// the reservation is memory the driver has taken: counted whatever the limit.
void settle(int dev, int64_t delta, uint64_t provisional) {
  int64_t adjust = delta - static_cast<int64_t>(provisional);
  if (adjust > 0) {
    forceMemory(dev, static_cast<uint64_t>(adjust));
  } else if (adjust < 0) {
    releaseMemory(dev, static_cast<uint64_t>(-adjust));
  }
}

// The device a pool allocates on: as tracked, else the caller's.
int deviceOf(CUmemoryPool pool, int fallback) {
  SpinGuard g(gMu);
  Pool* p = find(pool);
  return p != nullptr ? p->dev : fallback;
}

// What the pool holds that no allocation uses (an allocation up to that needs no growth).
uint64_t spare(CUmemoryPool pool) {
  uint64_t reserved = 0, used = 0;
  if (!attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) ||
      !attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used)) {
    return 0;
  }
  return reserved > used ? reserved - used : 0;
}

uintptr_t key(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// cuMemAllocAsync / cuMemAllocFromPoolAsync: `pool` is null for the device's current pool.
template <class F>
CUresult allocAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, F&& alloc) {
  Ctx c;
  if (!currentContext(&c) || dptr == nullptr) return alloc();
  int dev = c.dev;
  if (pool == nullptr) {
    if (real::cuDeviceGetMemPool == nullptr || real::cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS) pool = nullptr;
  } else {
    dev = deviceOf(pool, dev);
  }
  if (pool == nullptr) {  // no pool to follow: charged like an ordinary allocation
    if (CUresult rc = reserveMemory(dev, bytes); rc != CUDA_SUCCESS) return rc;
    CUresult rc = alloc();
    if (rc != CUDA_SUCCESS) {
      releaseMemory(dev, bytes);
      return rc;
    }
    Record rec;
    rec.dev = dev;
    rec.bytes = bytes;
    rec.ctx = key(c.ctx);
    ledger::put(Kind::kPointer, *dptr, rec);
    return rc;
  }
  track(pool, dev);
  uint64_t unused = spare(pool);
  uint64_t provisional = bytes > unused ? bytes - unused : 0;
  if (CUresult rc = reserveMemory(dev, provisional); rc != CUDA_SUCCESS) return rc;
  CUresult rc = alloc();
  if (rc != CUDA_SUCCESS) {
    releaseMemory(dev, provisional);
    return rc;
  }
  resync(pool, provisional);
  Record rec;
  rec.dev = dev;
  rec.bytes = bytes;
  rec.owner = key(pool);
  ledger::put(Kind::kPoolPointer, *dptr, rec);
  return rc;
}

// cuMemFreeAsync: nothing is credited now. The memory goes back to the pool when the device
// reaches the free, and to the device when the pool lets it go (resync).
template <class F>
CUresult freeAsync(CUdeviceptr dptr, F&& free) {
  Record rec;
  if (ledger::take(Kind::kPoolPointer, dptr, &rec)) {
    CUresult rc = free();
    if (rc != CUDA_SUCCESS) {
      ledger::put(Kind::kPoolPointer, dptr, rec);
    } else {
      freedFromDestroyed(reinterpret_cast<CUmemoryPool>(rec.owner), rec.bytes);
    }
    return rc;
  }
  if (ledger::take(Kind::kPointer, dptr, &rec))  // allocated without a pool to follow
    return settleFree(Kind::kPointer, dptr, rec, free());
  return free();
}

// After a synchronisation: the pools may have given memory back.
template <class F>
CUresult synchronised(F&& sync) {
  if (monitor::anyEngaged()) throttle::beforeSync();
  CUresult rc = sync();
  if (gAny.load(std::memory_order_relaxed)) resyncAll();
  return rc;
}

}  // namespace

std::atomic<bool> gGraphAllocs{false};

bool any() { return gAny.load(std::memory_order_relaxed); }

void track(CUmemoryPool pool, int dev) {
  SpinGuard g(gMu);
  if (find(pool) != nullptr) return;
  if (gCount == gCapacity) {
    size_t capacity = gCapacity == 0 ? 16 : gCapacity * 2;
    auto* grown = static_cast<Pool*>(realloc(gPools, capacity * sizeof(Pool)));
    if (grown == nullptr) return;  // untracked: its allocations are still reserved before they are made
    gPools = grown;
    gCapacity = capacity;
  }
  gPools[gCount++] = Pool{pool, dev, false, 0};
  gAny.store(true, std::memory_order_relaxed);
}

bool charged(CUmemoryPool pool, int* dev) {
  SpinGuard g(gMu);
  Pool* p = find(pool);
  if (p == nullptr || p->destroyed) return false;
  *dev = p->dev;
  return true;
}

void resync(CUmemoryPool pool, uint64_t provisional) {
  uint64_t now = 0;
  bool known = attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now);
  int dev = -1;
  int64_t delta = 0;
  {
    SpinGuard g(gMu);
    Pool* p = find(pool);
    if (p != nullptr && known && !p->destroyed) {
      dev = p->dev;
      delta = static_cast<int64_t>(now) - static_cast<int64_t>(p->charged);
      p->charged = now;
    } else if (p != nullptr) {
      dev = p->dev;  // cannot be read: keep the charge, drop the reservation
    }
  }
  if (dev >= 0) settle(dev, delta, provisional);
}

void resyncAll() {
  CUmemoryPool list[64];
  size_t n = 0;
  {
    SpinGuard g(gMu);
    for (size_t i = 0; i < gCount && n < 64; ++i) {
      if (!gPools[i].destroyed) list[n++] = gPools[i].pool;
    }
  }
  for (size_t i = 0; i < n; ++i) resync(list[i], 0);
}

void destroyed(CUmemoryPool pool, uint64_t outstanding) {
  int dev = -1;
  uint64_t release = 0;
  {
    SpinGuard g(gMu);
    Pool* p = find(pool);
    if (p == nullptr) return;
    dev = p->dev;
    // What it holds beyond its outstanding allocations goes back with it.
    release = p->charged > outstanding ? p->charged - outstanding : 0;
    if (outstanding == 0) {
      removeAt(p);
    } else {
      p->destroyed = true;
      p->charged -= release;
    }
  }
  releaseMemory(dev, release);
}

void freedFromDestroyed(CUmemoryPool pool, uint64_t bytes) {
  int dev = -1;
  uint64_t release = 0;
  {
    SpinGuard g(gMu);
    Pool* p = find(pool);
    if (p == nullptr || !p->destroyed) return;
    dev = p->dev;
    release = bytes < p->charged ? bytes : p->charged;
    p->charged -= release;
    if (p->charged == 0) removeAt(p);
  }
  releaseMemory(dev, release);
}

bool trimDevice(int dev) {
  if (!gAny.load(std::memory_order_relaxed)) return false;
  uint64_t before = vgpu_region_used(runtime().region, dev);
  CUmemoryPool list[64];
  size_t n = 0;
  bool graph = false;
  {
    SpinGuard g(gMu);
    for (size_t i = 0; i < gCount && n < 64; ++i) {
      if (!gPools[i].destroyed && gPools[i].dev == dev) list[n++] = gPools[i].pool;
    }
    graph = gGraphCharged[dev] != 0;
  }
  for (size_t i = 0; i < n; ++i) {
    if (real::cuMemPoolTrimTo(list[i], 0) == CUDA_SUCCESS) resync(list[i], 0);
  }
  if (graph && real::cuDeviceGraphMemTrim != nullptr && real::cuDeviceGraphMemTrim(dev) == CUDA_SUCCESS) {
    resyncGraph(dev, 0);
  }
  return vgpu_region_used(runtime().region, dev) < before;
}

void resyncGraph(int dev, uint64_t provisional) {
  cuuint64_t now = 0;
  int64_t delta = 0;
  if (real::cuDeviceGetGraphMemAttribute != nullptr &&
      real::cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) == CUDA_SUCCESS) {
    SpinGuard g(gMu);
    delta = static_cast<int64_t>(now) - static_cast<int64_t>(gGraphCharged[dev]);
    gGraphCharged[dev] = now;
    gAny.store(true, std::memory_order_relaxed);
  }
  settle(dev, delta, provisional);
}

uint64_t graphSpare(int dev) {
  cuuint64_t reserved = 0, used = 0;
  if (real::cuDeviceGetGraphMemAttribute == nullptr ||
      real::cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
      real::cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS) {
    return 0;
  }
  return reserved > used ? reserved - used : 0;
}

void reset() {
  gMu.reset();
  gCount = 0;
  memset(gGraphCharged, 0, sizeof gGraphCharged);
  gAny.store(false);
}

}  // namespace vgpu::pools

using namespace vgpu;
using pools::allocAsync;
using pools::freeAsync;
using pools::synchronised;

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocAsync);
  return allocAsync(dptr, bytesize, nullptr, [&] { return real::cuMemAllocAsync(dptr, bytesize, hStream); });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocAsync_ptsz);
  return allocAsync(dptr, bytesize, nullptr, [&] { return real::cuMemAllocAsync_ptsz(dptr, bytesize, hStream); });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync);
  if (pool == nullptr) return real::cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
  return allocAsync(dptr, bytesize, pool,
                    [&] { return real::cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream); });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync_ptsz);
  if (pool == nullptr) return real::cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream);
  return allocAsync(dptr, bytesize, pool,
                    [&] { return real::cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream); });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemFreeAsync);
  return freeAsync(dptr, [&] { return real::cuMemFreeAsync(dptr, hStream); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemFreeAsync_ptsz);
  return freeAsync(dptr, [&] { return real::cuMemFreeAsync_ptsz(dptr, hStream); });
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  VGPU_ENTER_CUDA(cuMemPoolCreate);
  CUresult rc = real::cuMemPoolCreate(pool, poolProps);
  if (rc != CUDA_SUCCESS || pool == nullptr || poolProps == nullptr) return rc;
  int dev = poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? poolProps->location.id : currentDevice();
  if (dev >= 0 && dev < kLimiterMaxDevices) {
    pools::freedFromDestroyed(*pool, UINT64_MAX);  // a handle the driver reused: the old pool is gone
    pools::track(*pool, dev);
    pools::resync(*pool, 0);
  }
  return rc;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  VGPU_ENTER_CUDA(cuMemPoolDestroy);
  // Its outstanding allocations stay valid (and in the pool) until they are freed.
  cuuint64_t outstanding = 0;
  if (real::cuMemPoolGetAttribute != nullptr) {
    real::cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &outstanding);
  }
  CUresult rc = real::cuMemPoolDestroy(pool);
  if (rc != CUDA_SUCCESS) return rc;
  pools::destroyed(pool, outstanding);
  if (shares::any()) shares::poolGone(pool);  // exported or imported: its share entry is let go
  return rc;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  VGPU_ENTER_CUDA(cuMemPoolTrimTo);
  CUresult rc = real::cuMemPoolTrimTo(pool, minBytesToKeep);
  if (rc == CUDA_SUCCESS) pools::resync(pool, 0);
  return rc;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  VGPU_ENTER_CUDA(cuMemPoolSetAttribute);
  CUresult rc = real::cuMemPoolSetAttribute(pool, attr, value);
  if (rc == CUDA_SUCCESS && attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) pools::resync(pool, 0);
  return rc;
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
  VGPU_ENTER_CUDA(cuDeviceGraphMemTrim);
  CUresult rc = real::cuDeviceGraphMemTrim(device);
  if (rc == CUDA_SUCCESS && device >= 0 && device < kLimiterMaxDevices) pools::resyncGraph(device, 0);
  return rc;
}

CUresult cuCtxSynchronize(void) {
  VGPU_ENTER_CUDA(cuCtxSynchronize);
  return synchronised([] { return real::cuCtxSynchronize(); });
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  VGPU_ENTER_CUDA(cuCtxSynchronize_v2);
  return synchronised([&] { return real::cuCtxSynchronize_v2(ctx); });
}

CUresult cuStreamSynchronize(CUstream hStream) {
  VGPU_ENTER_CUDA(cuStreamSynchronize);
  return synchronised([&] { return real::cuStreamSynchronize(hStream); });
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  VGPU_ENTER_CUDA(cuStreamSynchronize_ptsz);
  return synchronised([&] { return real::cuStreamSynchronize_ptsz(hStream); });
}

CUresult cuEventSynchronize(CUevent hEvent) {
  VGPU_ENTER_CUDA(cuEventSynchronize);
  return synchronised([&] { return real::cuEventSynchronize(hEvent); });
}

}  // extern "C"
