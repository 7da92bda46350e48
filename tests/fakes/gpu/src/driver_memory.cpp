// Fake libcuda.so.1: every path that takes device memory, and copies (VMM handles:
// driver_vmm.cpp; IPC: driver_ipc.cpp; memory pools and graph memory: driver_pools.cpp).
//
// Device memory is host memory backed by a memfd (so copies work, VMM can map it several times
// and IPC can open it from another process) and charged against the simulated device's
// physical memory in the shared state; an allocation beyond what is free fails with
// CUDA_ERROR_OUT_OF_MEMORY as on the real driver.

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

// The memfd's inode, which names shared memory across processes (syscall: glibc's fstat is
// a GLIBC_2.33 symbol and the fakes also run in older roots).
uint64_t inodeOf(int fd) {
  struct stat st;
  std::memset(&st, 0, sizeof st);
  return syscall(SYS_fstat, fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

size_t pageRound(size_t n) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

CUresult mapOtherProcessMemory(int32_t pid, int32_t fd, size_t size, CUresult gone, Allocation& out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int mine = open(path, O_RDWR | O_CLOEXEC);
  if (mine < 0) return gone;
  size_t len = pageRound(size);
  void* addr = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  if (addr == MAP_FAILED) {
    close(mine);
    return CUDA_ERROR_MAP_FAILED;
  }
  out.base = reinterpret_cast<uintptr_t>(addr);
  out.size = size;
  out.mapLen = len;
  out.fd = mine;
  return CUDA_SUCCESS;
}

// Frees whose stream the device has reached by now: their memory is the pool's to reuse.
void poolSettle(Pool* pool) {
  if (pool->pending.empty()) return;
  uint64_t now = monotonicNs();
  auto& v = pool->pending;
  for (auto it = v.begin(); it != v.end();) {
    if (it->atNs <= now) {
      pool->used -= it->bytes;
      it = v.erase(it);
    } else {
      ++it;
    }
  }
}

// Returns memory the pool holds beyond max(keep, used) to the device. Memory behind a free
// the device has not reached yet still counts as used: the pool cannot release it.
void poolTrim(Pool* pool, uint64_t keep) {
  poolSettle(pool);
  uint64_t floor = std::max(keep, pool->used);
  if (pool->reserved > floor) {
    Driver::get().shared()->uncharge(pool->dev, pool->reserved - floor);
    pool->reserved = floor;
  }
}

namespace {

constexpr size_t kPitchAlignment = 512;

// A shareable, lazily populated mapping of `size` bytes.
bool makeBacking(size_t size, bool low32, const char* name, int& fd, void*& addr, size_t& len) {
  len = pageRound(std::max<size_t>(size, 1));
  fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    close(fd);
    return false;
  }
  int flags = MAP_SHARED | MAP_NORESERVE;
#ifdef MAP_32BIT
  if (low32) flags |= MAP_32BIT;
#endif
  addr = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (addr == MAP_FAILED) {
    close(fd);
    return false;
  }
  return true;
}

// Takes `bytes` for a pool allocation, reusing memory the pool still holds.
bool poolTake(Pool* pool, uint64_t bytes) {
  auto& drv = Driver::get();
  poolSettle(pool);
  uint64_t cached = pool->reserved - pool->used;
  if (cached < bytes) {
    uint64_t grow = bytes - cached;
    if (!drv.shared()->charge(pool->dev, grow)) return false;
    pool->reserved += grow;
  }
  pool->used += bytes;
  pool->reservedHigh = std::max(pool->reservedHigh, pool->reserved);
  pool->usedHigh = std::max(pool->usedHigh, pool->used);
  return true;
}

CUresult allocate(CUdeviceptr* out, size_t bytes, uint64_t charge, AllocKind kind, Pool* pool, Context* ctx) {
  auto& drv = Driver::get();
  int dev = pool ? pool->dev : ctx->dev;
  std::lock_guard lock(drv.mu);
  if (pool != nullptr) {
    if (!poolTake(pool, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  } else if (!drv.shared()->charge(dev, charge)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  int fd = -1;
  void* addr = nullptr;
  size_t len = 0;
  char name[32];
  std::snprintf(name, sizeof name, "vgpu-fake-dev%d", dev);
  if (!makeBacking(bytes, kind == AllocKind::kLegacy32, name, fd, addr, len)) {
    if (pool != nullptr) {
      pool->used -= charge;
    } else {
      drv.shared()->uncharge(dev, charge);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(addr);
  a.size = bytes;
  a.mapLen = len;
  a.charged = pool ? 0 : charge;
  a.dev = dev;
  a.fd = fd;
  a.ctx = ctx;
  a.kind = kind;
  a.pool = pool;
  if (pool != nullptr) a.charged = charge;
  drv.allocations[a.base] = a;
  *out = static_cast<CUdeviceptr>(a.base);
  return CUDA_SUCCESS;
}

CUresult allocChecked(CUdeviceptr* dptr, size_t bytes, AllocKind kind) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  return allocate(dptr, bytes, bytes, kind, nullptr, ctx);
}

CUresult pitchAlloc(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned elem, AllocKind kind) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (height > SIZE_MAX / p) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocate(dptr, p * height, p * height, kind, nullptr, ctx);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

CUresult freeDevice(CUdeviceptr dptr) {
  if (CUresult r = checkInit()) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  auto& drv = Driver::get();
  uint64_t waitFor = 0;
  {
    std::lock_guard lock(drv.mu);
    auto it = drv.allocations.find(static_cast<uintptr_t>(dptr));
    if (it == drv.allocations.end() || it->second.kind == AllocKind::kIpcImport) return CUDA_ERROR_INVALID_VALUE;
    waitFor = it->second.ctx ? it->second.ctx->lastEndNs : 0;
  }
  waitUntil(waitFor);  // cuMemFree synchronises with work that may still use the memory
  std::lock_guard lock(drv.mu);
  auto it = drv.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == drv.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  freeAllocation(it);
  return CUDA_SUCCESS;
}

CUresult asyncAlloc(CUdeviceptr* dptr, size_t bytes, Pool* pool, CUstream stream, bool perThread) {
  if (CUresult r = checkInit()) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  Context* ctx = nullptr;
  {
    std::lock_guard lock(drv.mu);
    StreamState* s = nullptr;
    if (CUresult r = resolveStream(stream, perThread, ctx, s)) return r;
    if (pool == nullptr) pool = drv.currentPools[ctx->dev];
    if (!drv.pools.count(pool) || pool->destroyed || pool->imported) return CUDA_ERROR_INVALID_VALUE;
  }
  return allocate(dptr, bytes, bytes, AllocKind::kAsync, pool, ctx);
}

CUresult asyncFree(CUdeviceptr dptr, CUstream stream, bool perThread) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  Context* ctx = nullptr;
  StreamState* s = nullptr;
  if (CUresult r = resolveStream(stream, perThread, ctx, s)) return r;
  auto it = drv.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == drv.allocations.end() || it->second.kind == AllocKind::kIpcImport) return CUDA_ERROR_INVALID_VALUE;
  // Stream order: the memory goes back to its pool when the device reaches the free (after
  // the stream's earlier work); until then the pool still counts it as used.
  Allocation& a = it->second;
  if (a.pool != nullptr && !a.pool->destroyed) {
    a.pool->pending.push_back({a.charged, s->blocked ? UINT64_MAX : streamDoneAt(s)});
    a.pool = nullptr;  // the pending free now stands for it
    a.charged = 0;
  }
  freeAllocation(it);
  return CUDA_SUCCESS;
}

size_t formatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

// Documented charge of an array level: rows padded to the pitch alignment, times rows, times depth.
uint64_t arrayLevelBytes(size_t w, size_t h, size_t d, size_t elem, unsigned channels) {
  uint64_t row = (static_cast<uint64_t>(w) * elem * channels + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  return row * std::max<size_t>(h, 1) * std::max<size_t>(d, 1);
}

CUresult createArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, bool mip) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (out == nullptr || desc.Width == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t elem = formatBytes(desc.Format);
  if (elem == 0 || (desc.NumChannels != 1 && desc.NumChannels != 2 && desc.NumChannels != 4))
    return CUDA_ERROR_INVALID_VALUE;
  if (desc.Width > (1u << 17) || desc.Height > (1u << 16) || desc.Depth > (1u << 14)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = 0;
  size_t w = desc.Width, h = desc.Height, d = desc.Depth;
  for (unsigned l = 0; l < levels; ++l) {
    bytes += arrayLevelBytes(w, h, d, elem, desc.NumChannels);
    w = std::max<size_t>(w / 2, 1);
    h = h ? std::max<size_t>(h / 2, 1) : 0;
    d = d ? std::max<size_t>(d / 2, 1) : 0;
  }
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.shared()->charge(ctx->dev, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* a = new ArrayObj();
  a->ctx = ctx;
  a->dev = ctx->dev;
  a->bytes = bytes;
  a->desc = desc;
  a->levels = levels;
  a->mipmapped = mip;
  drv.arrays.insert(a);
  *out = reinterpret_cast<CUarray>(a);
  return CUDA_SUCCESS;
}

CUresult destroyArray(void* handle, bool mip) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* a = static_cast<ArrayObj*>(handle);
  if (!drv.arrays.count(a) || a->mipmapped != mip) return CUDA_ERROR_INVALID_HANDLE;
  drv.shared()->uncharge(a->dev, a->bytes);
  drv.arrays.erase(a);
  delete a;
  return CUDA_SUCCESS;
}

// Synchronous copies on the NULL stream wait for the stream's earlier work, as on hardware.
CUresult syncPoint(bool perThread) {
  auto& drv = Driver::get();
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    Context* ctx = nullptr;
    StreamState* s = nullptr;
    if (CUresult r = resolveStream(nullptr, perThread, ctx, s)) return r;
    until = streamDoneAt(s);
  }
  waitUntil(until);
  return CUDA_SUCCESS;
}

CUresult copy(void* dst, const void* src, size_t n, uintptr_t devDst, uintptr_t devSrc, bool perThread) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (dst == nullptr || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(Driver::get().mu);
    if (devDst != 0 && !deviceRangeValid(devDst, n)) return CUDA_ERROR_INVALID_VALUE;
    if (devSrc != 0 && !deviceRangeValid(devSrc, n)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = syncPoint(perThread)) return r;
  std::memmove(dst, src, n);
  return CUDA_SUCCESS;
}

CUresult memsetD8(CUdeviceptr dst, unsigned char v, size_t n, bool perThread) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  {
    std::lock_guard lock(Driver::get().mu);
    if (n != 0 && !deviceRangeValid(static_cast<uintptr_t>(dst), n)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = syncPoint(perThread)) return r;
  if (n != 0) std::memset(reinterpret_cast<void*>(dst), v, n);
  return CUDA_SUCCESS;
}

// Asynchronous copies and sets: the fake performs them when the stream's earlier work is done
// and returns after that (the host waits where hardware would not; the result is the same).
CUresult streamPoint(CUstream stream, bool perThread) {
  auto& drv = Driver::get();
  uint64_t until = 0;
  {
    std::lock_guard lock(drv.mu);
    Context* ctx = nullptr;
    StreamState* s = nullptr;
    if (CUresult r = resolveStream(stream, perThread, ctx, s)) return r;
    until = streamDoneAt(s);
  }
  waitUntil(until);
  return CUDA_SUCCESS;
}

CUresult copyAsync(void* dst, const void* src, size_t n, uintptr_t devDst, uintptr_t devSrc, CUstream stream,
                   bool perThread) {
  if (CUresult r = checkInit()) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (dst == nullptr || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(Driver::get().mu);
    if (devDst != 0 && !deviceRangeValid(devDst, n)) return CUDA_ERROR_INVALID_VALUE;
    if (devSrc != 0 && !deviceRangeValid(devSrc, n)) return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = streamPoint(stream, perThread)) return r;
  std::memmove(dst, src, n);
  return CUDA_SUCCESS;
}

template <typename T>
CUresult setElements(CUdeviceptr dst, T value, size_t n, CUstream stream, bool perThread, bool async) {
  if (async) {
    if (CUresult r = checkInit()) return r;
  } else {
    Context* ctx = nullptr;
    if (CUresult r = requireContext(ctx)) return r;
  }
  if (n != 0) {
    std::lock_guard lock(Driver::get().mu);
    if (dst % sizeof(T) != 0 || n > SIZE_MAX / sizeof(T) ||
        !deviceRangeValid(static_cast<uintptr_t>(dst), n * sizeof(T)))
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = async ? streamPoint(stream, perThread) : syncPoint(perThread)) return r;
  T* p = reinterpret_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = value;
  return CUDA_SUCCESS;
}

CUresult hostRegister(void* p, size_t size, unsigned flags) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
                   CU_MEMHOSTREGISTER_READ_ONLY;
  if (p == nullptr || size == 0 || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (auto& [start, len] : drv.hostRegistered)
    if (a < start + len && start < a + size) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  drv.hostRegistered[a] = size;  // page-locked host memory: nothing on the device
  return CUDA_SUCCESS;
}

}  // namespace

void freeAllocation(std::map<uintptr_t, Allocation>::iterator it) {
  auto& drv = Driver::get();
  Allocation& a = it->second;
  if (a.kind == AllocKind::kGraph) {
    // The address stays reserved by the graph's allocation node; the memory stays mapped by
    // the graph allocator until cuDeviceGraphMemTrim.
    drv.graphPools[a.dev].used -= a.charged;
    drv.graphAllocLive[a.base] = false;
    drv.allocations.erase(it);
    return;
  }
  if (a.pool != nullptr) {
    // Back to the pool, which gives back what it holds beyond its release threshold at the
    // next synchronisation; a destroyed pool gives it back at once.
    a.pool->used -= a.charged;
    if (a.pool->destroyed) poolTrim(a.pool, 0);
  } else if (a.object != 0) {
    drv.shared()->dropObject(a.object);  // exported or opened: the last process frees it
  } else if (a.charged != 0) {
    drv.shared()->uncharge(a.dev, a.charged);
  }
  munmap(reinterpret_cast<void*>(a.base), a.mapLen);
  if (a.fd >= 0) close(a.fd);
  drv.allocations.erase(it);
}

void releasePoolsAtSync() {
  for (Pool* p : Driver::get().pools) poolTrim(p, p->destroyed ? 0 : p->releaseThreshold);
}

std::map<uintptr_t, Allocation>::iterator findAllocation(uintptr_t p, size_t len) {
  auto& drv = Driver::get();
  auto it = drv.allocations.upper_bound(p);
  if (it == drv.allocations.begin()) return drv.allocations.end();
  --it;
  if (p + len < p || p + len > it->second.base + it->second.size) return drv.allocations.end();
  return it;
}

bool deviceRangeValid(uintptr_t p, size_t len) {
  auto& drv = Driver::get();
  if (findAllocation(p, len) != drv.allocations.end()) return true;
  auto it = drv.mappings.upper_bound(p);
  if (it == drv.mappings.begin()) return false;
  --it;
  return p + len >= p && p + len <= it->second.base + it->second.size;
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) { return allocChecked(dptr, bytesize, AllocKind::kDevice); }

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  CUdeviceptr p = 0;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocChecked(&p, bytesize, AllocKind::kLegacy32);
  if (r == CUDA_SUCCESS) *dptr = static_cast<CUdeviceptr_v1>(p);
  return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t width, size_t height, unsigned int elem) {
  return pitchAlloc(dptr, pPitch, width, height, elem, AllocKind::kPitch);
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int width, unsigned int height,
                         unsigned int elem) {
  if (dptr == nullptr || pPitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CUresult r = pitchAlloc(&p, &pitch, width, height, elem, AllocKind::kLegacy32);
  if (r == CUDA_SUCCESS) {
    *dptr = static_cast<CUdeviceptr_v1>(p);
    *pPitch = static_cast<unsigned int>(pitch);
  }
  return r;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  // Managed memory lives in host memory until the device touches it and the driver migrates
  // and evicts it on demand, so it may exceed the device's memory and takes none of it here.
  return allocate(dptr, bytesize, 0, AllocKind::kManaged, nullptr, ctx);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { return freeDevice(dptr); }
CUresult cuMemFree(CUdeviceptr_v1 dptr) { return freeDevice(dptr); }

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* s = Driver::get().shared();
  uint64_t t = s->totalBytes(ctx->dev), u = s->usedBytes(ctx->dev);
  uint64_t f = u >= t ? 0 : t - u;
  s->cgroupView(ctx->dev, t, f);  // a cgroup with a driver memory limit (R615+) sees its own
  *total = t;
  *free = f;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  size_t f = 0, t = 0;
  if (CUresult r = cuMemGetInfo_v2(&f, &t)) return r;
  *free = static_cast<unsigned int>(std::min<size_t>(f, 0xffffffffu));
  *total = static_cast<unsigned int>(std::min<size_t>(t, 0xffffffffu));
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = findAllocation(static_cast<uintptr_t>(dptr), 1);
  if (it == drv.allocations.end()) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = it->second.base;
  if (psize) *psize = it->second.size;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  drv.hostAllocSizes[p] = bytesize;
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void** pp, unsigned int bytesize) { return cuMemAllocHost_v2(pp, bytesize); }

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if ((flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  return cuMemAllocHost_v2(pp, bytesize);
}

CUresult cuMemFreeHost(void* p) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.hostAllocSizes.find(p);
  if (it == drv.hostAllocSizes.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, it->second);
  drv.hostAllocSizes.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return asyncAlloc(dptr, bytesize, nullptr, hStream, false);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return asyncAlloc(dptr, bytesize, nullptr, hStream, true);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return asyncAlloc(dptr, bytesize, reinterpret_cast<Pool*>(pool), hStream, false);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return asyncAlloc(dptr, bytesize, reinterpret_cast<Pool*>(pool), hStream, true);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return asyncFree(dptr, hStream, false); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return asyncFree(dptr, hStream, true); }

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* d) {
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = d->Width;
  desc.Height = d->Height;
  desc.Format = d->Format;
  desc.NumChannels = d->NumChannels;
  return createArray(pHandle, desc, 1, false);
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return createArray(pHandle, *d, 1, false);
}

CUresult cuArrayDestroy(CUarray hArray) { return destroyArray(hArray, false); }

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int levels) {
  if (d == nullptr || pHandle == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  CUarray a = nullptr;
  CUresult r = createArray(&a, *d, levels, true);
  if (r == CUDA_SUCCESS) *pHandle = reinterpret_cast<CUmipmappedArray>(a);
  return r;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) { return destroyArray(h, true); }

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray array, CUdevice dev) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* a = reinterpret_cast<ArrayObj*>(array);
  if (req == nullptr || !drv.arrays.count(a) || a->dev != dev) return CUDA_ERROR_INVALID_VALUE;
  std::memset(req, 0, sizeof *req);
  req->size = a->bytes;
  req->alignment = kPitchAlignment;
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUmipmappedArray mipmap,
                                               CUdevice dev) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* a = reinterpret_cast<ArrayObj*>(mipmap);
  if (req == nullptr || !drv.arrays.count(a) || !a->mipmapped || a->dev != dev) return CUDA_ERROR_INVALID_VALUE;
  std::memset(req, 0, sizeof *req);
  req->size = a->bytes;
  req->alignment = kPitchAlignment;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return copy(reinterpret_cast<void*>(dst), src, n, static_cast<uintptr_t>(dst), 0, false);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return copy(reinterpret_cast<void*>(dst), src, n, static_cast<uintptr_t>(dst), 0, true);
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return copy(dst, reinterpret_cast<const void*>(src), n, 0, static_cast<uintptr_t>(src), false);
}
CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return copy(dst, reinterpret_cast<const void*>(src), n, 0, static_cast<uintptr_t>(src), true);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, static_cast<uintptr_t>(dst),
              static_cast<uintptr_t>(src), false);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, static_cast<uintptr_t>(dst),
              static_cast<uintptr_t>(src), true);
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n) { return memsetD8(dst, uc, n, false); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n) { return memsetD8(dst, uc, n, true); }

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  // Unified addressing: either side may be host or device memory.
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, 0, 0, nullptr, false);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, 0, 0, nullptr, true);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, 0, 0, s, false);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, 0, 0, s, true);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), src, n, static_cast<uintptr_t>(dst), 0, s, false);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), src, n, static_cast<uintptr_t>(dst), 0, s, true);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(dst, reinterpret_cast<const void*>(src), n, 0, static_cast<uintptr_t>(src), s, false);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(dst, reinterpret_cast<const void*>(src), n, 0, static_cast<uintptr_t>(src), s, true);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, static_cast<uintptr_t>(dst),
                   static_cast<uintptr_t>(src), s, false);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n, static_cast<uintptr_t>(dst),
                   static_cast<uintptr_t>(src), s, true);
}
CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
  return setElements<unsigned short>(dst, v, n, nullptr, false, false);
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n) {
  return setElements<unsigned short>(dst, v, n, nullptr, true, false);
}
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  return setElements<unsigned int>(dst, v, n, nullptr, false, false);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return setElements<unsigned int>(dst, v, n, nullptr, true, false);
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return setElements<unsigned char>(dst, v, n, s, false, true);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return setElements<unsigned char>(dst, v, n, s, true, true);
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return setElements<unsigned int>(dst, v, n, s, false, true);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return setElements<unsigned int>(dst, v, n, s, true, true);
}

CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int flags) { return hostRegister(p, bytesize, flags); }
CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  return hostRegister(p, bytesize, flags);
}

CUresult cuMemHostUnregister(void* p) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (drv.hostRegistered.erase(reinterpret_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  return CUDA_SUCCESS;
}

}  // extern "C"
