// Fake libcuda.so.1: stream-ordered memory pools (what a pool holds and hands out, its
// attributes, the device's default and current pools), the graph allocator's memory, and pools
// shared with other processes (cuMemPoolExportToShareableHandle and friends).

#include "driver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vgpu::fakegpu {
namespace {

CUresult poolAttr(CUmemoryPool pool, CUmemPool_attribute attr, void* value, bool set) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  if (!drv.pools.count(p) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* v64 = static_cast<cuuint64_t*>(value);
  poolSettle(p);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      // Memory beyond the threshold goes back at the next synchronisation (releasePoolsAtSync).
      if (set) {
        p->releaseThreshold = *v64;
      } else {
        *v64 = p->releaseThreshold;
      }
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      if (set) return CUDA_ERROR_INVALID_VALUE;
      *v64 = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (set) {
        if (*v64 != 0) return CUDA_ERROR_INVALID_VALUE;
        p->reservedHigh = p->reserved;
      } else {
        *v64 = p->reservedHigh;
      }
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      if (set) return CUDA_ERROR_INVALID_VALUE;
      *v64 = p->used;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (set) {
        if (*v64 != 0) return CUDA_ERROR_INVALID_VALUE;
        p->usedHigh = p->used;
      } else {
        *v64 = p->usedHigh;
      }
      return CUDA_SUCCESS;
    default:
      if (!set) std::memset(value, 0, sizeof(int));
      return CUDA_SUCCESS;  // reuse policies do not change what the fake charges
  }
}

}  // namespace
}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (CUresult r = checkInit()) return r;
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      props->location.id < 0 || static_cast<size_t>(props->location.id) >= drv.config().gpus.size())
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  auto* p = new Pool();
  p->dev = props->location.id;
  drv.pools.insert(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  if (!drv.pools.count(p) || p->isDefault || p->destroyed) return CUDA_ERROR_INVALID_VALUE;
  // Outstanding allocations stay valid until freed; what the pool holds beyond them goes back now.
  p->destroyed = true;
  poolTrim(p, 0);
  for (auto& cur : drv.currentPools)
    if (cur == p) cur = drv.defaultPools[p->dev];
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  if (!drv.pools.count(p)) return CUDA_ERROR_INVALID_VALUE;
  poolTrim(p, minBytesToKeep);
  return CUDA_SUCCESS;
}

// The graph allocator's memory (graph allocation nodes): what live graph allocations use and
// what stays mapped for them until trimmed.
CUresult cuDeviceGraphMemTrim(CUdevice device) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (device < 0 || static_cast<size_t>(device) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(drv.mu);
  GraphPool& g = drv.graphPools[device];
  if (g.reserved > g.used) drv.shared()->uncharge(device, g.reserved - g.used);
  g.reserved = g.used;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (device < 0 || static_cast<size_t>(device) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  const GraphPool& g = drv.graphPools[device];
  auto* v = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *v = g.used; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *v = g.usedHigh; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *v = g.reserved; return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *v = g.reservedHigh; return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (device < 0 || static_cast<size_t>(device) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr || *static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  GraphPool& g = drv.graphPools[device];
  // Only the high watermarks can be set, and only back to the current value (by passing 0).
  if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) {
    g.usedHigh = g.used;
  } else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) {
    g.reservedHigh = g.reserved;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  return poolAttr(pool, attr, value, true);
}
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  return poolAttr(pool, attr, value, false);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (pool == nullptr || dev < 0 || static_cast<size_t>(dev) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(drv.defaultPools[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (pool == nullptr || dev < 0 || static_cast<size_t>(dev) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  *pool = reinterpret_cast<CUmemoryPool>(drv.currentPools[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  if (!drv.pools.count(p) || p->destroyed || p->dev != dev) return CUDA_ERROR_INVALID_VALUE;
  drv.currentPools[dev] = p;
  return CUDA_SUCCESS;
}

}  // extern "C"
