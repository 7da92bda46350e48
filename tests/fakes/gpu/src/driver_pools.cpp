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

// What a pool's export names (the content of the memfd behind its descriptor): the exporting
// process and its pool.
constexpr uint32_t kPoolMagic = 0x56504f4c;     // "VPOL"
constexpr uint32_t kPoolPtrMagic = 0x56505054;  // "VPPT"

struct PoolIdentity {
  uint32_t magic;
  int32_t pid;
  uint64_t pool;
  int32_t dev;
};

// CUmemPoolPtrExportData's 64 bytes: the allocation's memfd in the exporting process.
struct PoolPointer {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t dev;
  uint64_t size;
  uint64_t pool;
};
static_assert(sizeof(PoolPointer) <= sizeof(CUmemPoolPtrExportData));

void closeExports(Pool* p) {
  for (int keep : p->deviceExports) {
    Driver::get().shared()->removeDeviceExport(keep);
    close(keep);
  }
  p->deviceExports.clear();
  if (p->exportFd >= 0) close(p->exportFd);
  p->exportFd = -1;
}

// A descriptor for another process to import `p` from: the memfd naming it, or a device
// node's open file that the shared state maps to that memfd. -1 on failure.
int exportPool(Pool* p) {
  if (p->exportFd < 0) {
    int fd = memfd_create("vgpu-fake-pool", MFD_CLOEXEC);
    PoolIdentity id{kPoolMagic, static_cast<int32_t>(getpid()), reinterpret_cast<uint64_t>(p), p->dev};
    if (fd < 0 || pwrite(fd, &id, sizeof id, 0) != static_cast<ssize_t>(sizeof id)) {
      if (fd >= 0) close(fd);
      return -1;
    }
    p->exportFd = fd;
  }
  if (std::getenv("VGPU_FAKE_EXPORT_DEVICE_FD") == nullptr) return fcntl(p->exportFd, F_DUPFD_CLOEXEC, 0);
  int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int keep = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (keep < 0 || !Driver::get().shared()->addDeviceExport(keep, p->exportFd, p->dev)) {
    if (fd >= 0) close(fd);
    if (keep >= 0) close(keep);
    return -1;
  }
  p->deviceExports.push_back(keep);
  return fd;
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
  p->handleTypes = static_cast<unsigned long long>(props->handleTypes);
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
  closeExports(p);
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

// Pools shared between processes: an exported pool is imported as a pool of its own that
// only maps pointers the exporter exports; an imported pointer takes no device memory (the
// exporter's pool holds it) and is freed with cuMemFree or cuMemFreeAsync.
CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType handleType,
                                          unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  if (!drv.pools.count(p) || p->destroyed || p->imported || handle_out == nullptr || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if ((p->handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = exportPool(p);
  if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  *static_cast<int*>(handle_out) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                            CUmemAllocationHandleType handleType, unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  if (pool_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  int fd = memfdOf(static_cast<int>(reinterpret_cast<intptr_t>(handle)));
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  PoolIdentity id{};
  bool read = pread(fd, &id, sizeof id, 0) == static_cast<ssize_t>(sizeof id);
  close(fd);
  auto& drv = Driver::get();
  if (!read || id.magic != kPoolMagic || id.dev < 0 || static_cast<size_t>(id.dev) >= drv.config().gpus.size())
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(drv.mu);
  auto* p = new Pool();
  p->dev = id.dev;
  p->imported = true;
  p->exporterPid = id.pid;
  p->exporterPool = id.pool;
  drv.pools.insert(p);
  *pool_out = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr) {
  if (CUresult r = checkInit()) return r;
  if (shareData_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.allocations.find(static_cast<uintptr_t>(ptr));
  if (it == drv.allocations.end() || it->second.kind != AllocKind::kAsync || it->second.pool == nullptr ||
      (it->second.pool->handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
    return CUDA_ERROR_INVALID_VALUE;  // only allocations of an exportable pool
  const Allocation& a = it->second;
  PoolPointer pp{kPoolPtrMagic, static_cast<int32_t>(getpid()), a.fd, a.dev, a.size,
                 reinterpret_cast<uint64_t>(a.pool)};
  std::memset(shareData_out, 0, sizeof *shareData_out);
  std::memcpy(shareData_out->reserved, &pp, sizeof pp);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData* shareData) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (ptr_out == nullptr || shareData == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  PoolPointer pp{};
  std::memcpy(&pp, shareData->reserved, sizeof pp);
  {
    std::lock_guard lock(drv.mu);
    auto* p = reinterpret_cast<Pool*>(pool);
    if (!drv.pools.count(p) || !p->imported || pp.magic != kPoolPtrMagic || pp.size == 0 ||
        pp.pid != p->exporterPid || pp.pool != p->exporterPool)
      return CUDA_ERROR_INVALID_VALUE;
  }
  // The exporter or its allocation may be gone.
  Allocation a;
  if (CUresult r = mapOtherProcessMemory(pp.pid, pp.fd, pp.size, CUDA_ERROR_INVALID_VALUE, a)) return r;
  std::lock_guard lock(drv.mu);
  a.dev = pp.dev;
  a.ctx = ctx;
  a.kind = AllocKind::kPoolImport;  // no device memory of its own: the exporter's pool holds it
  drv.allocations[a.base] = a;
  *ptr_out = static_cast<CUdeviceptr>(a.base);
  return CUDA_SUCCESS;
}

}  // extern "C"
