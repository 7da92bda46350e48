// Fake libcuda.so.1: virtual memory management. A cuMemCreate handle is a memfd charged to its
// device until its last reference (the handle, each mapping) goes; exported as a file
// descriptor (the memfd, or with VGPU_FAKE_EXPORT_DEVICE_FD a device node's open file, as the
// real driver's /dev/nvidiactl exports) and imported by another process, it is held there too.

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

constexpr size_t kVmmGranularity = 2u << 20;

VmmHandle* findVmm(CUmemGenericAllocationHandle h) {
  auto& drv = Driver::get();
  auto it = drv.vmmHandles.find(h);
  return it == drv.vmmHandles.end() ? nullptr : &it->second;
}

void dropVmmRef(CUmemGenericAllocationHandle h) {
  auto& drv = Driver::get();
  auto it = drv.vmmHandles.find(h);
  if (it == drv.vmmHandles.end() || --it->second.refs > 0) return;
  for (int keep : it->second.deviceExports) {
    drv.shared()->removeDeviceExport(keep);
    close(keep);
  }
  if (it->second.object != 0) {
    // Shared: the last process frees it. Holders are processes, so this one lets go only with
    // its last handle of the object (its own and an import of its export are two).
    bool stillHeld = false;
    for (const auto& [id, other] : drv.vmmHandles)
      if (id != h && other.object == it->second.object) stillHeld = true;
    if (!stillHeld) drv.shared()->dropObject(it->second.object);
  } else if (it->second.charged != 0) {
    drv.shared()->uncharge(it->second.dev, it->second.charged);
  }
  close(it->second.fd);
  drv.vmmHandles.erase(it);
}

}  // namespace

// The memfd behind an exported descriptor: the memfd itself, or (a device-node export) the
// exporter's, found by the open file. -1 if it is neither.
int memfdOf(int src) {
  struct stat st;
  std::memset(&st, 0, sizeof st);
  if (src < 0 || syscall(SYS_fstat, src, &st) != 0) return -1;
  if (!S_ISCHR(st.st_mode)) return fcntl(src, F_DUPFD_CLOEXEC, 0);
  int32_t pid = 0, memfd = -1, dev = -1;
  if (!Driver::get().shared()->findDeviceExport(src, &pid, &memfd, &dev)) return -1;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, memfd);
  return open(path, O_RDWR | O_CLOEXEC);
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  if (CUresult r = checkInit()) return r;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 || size % kVmmGranularity != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  int dev = -1;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (prop->location.id < 0 || static_cast<size_t>(prop->location.id) >= drv.config().gpus.size())
      return CUDA_ERROR_INVALID_DEVICE;
    dev = prop->location.id;
  } else if (prop->location.type != CU_MEM_LOCATION_TYPE_HOST &&
             prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
             prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard lock(drv.mu);
  if (dev >= 0 && !drv.shared()->charge(dev, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  char name[32];
  std::snprintf(name, sizeof name, "vgpu-fake-vmm-dev%d", dev);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    if (dev >= 0) drv.shared()->uncharge(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  VmmHandle h;
  h.fd = fd;
  h.size = size;
  h.dev = dev;
  h.charged = dev >= 0 ? size : 0;
  h.prop = *prop;
  CUmemGenericAllocationHandle id = drv.nextVmmHandle++;
  drv.vmmHandles[id] = h;
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (findVmm(handle) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  dropVmmRef(handle);  // physical memory goes back once no mapping uses it either
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  size_t align = std::max(alignment, kVmmGranularity);
  if ((align & (align - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  // Over-reserve so an aligned start can be carved out; `addr` is only a hint, as documented.
  (void)addr;
  size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + align - 1) & ~(align - 1);
  if (start > reinterpret_cast<uintptr_t>(raw)) munmap(raw, start - reinterpret_cast<uintptr_t>(raw));
  uintptr_t end = start + size, rawEnd = reinterpret_cast<uintptr_t>(raw) + span;
  if (rawEnd > end) munmap(reinterpret_cast<void*>(end), rawEnd - end);
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  drv.reservations[start] = {start, size};
  *ptr = start;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.reservations.find(static_cast<uintptr_t>(ptr));
  if (it == drv.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [base, m] : drv.mappings)
    if (base >= it->second.base && base < it->second.base + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  munmap(reinterpret_cast<void*>(ptr), size);
  drv.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  VmmHandle* h = findVmm(handle);
  if (h == nullptr || flags != 0 || size == 0 || offset != 0 || size > h->size) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t p = static_cast<uintptr_t>(ptr);
  auto r = drv.reservations.upper_bound(p);
  if (r == drv.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (p + size > r->second.base + r->second.size) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [base, m] : drv.mappings)
    if (p < base + m.size && base < p + size) return CUDA_ERROR_ALREADY_MAPPED;
  void* got = mmap(reinterpret_cast<void*>(p), size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0);
  if (got == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  drv.mappings[p] = {p, size, handle};
  ++h->refs;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.mappings.find(static_cast<uintptr_t>(ptr));
  if (it == drv.mappings.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  CUmemGenericAllocationHandle h = it->second.handle;
  drv.mappings.erase(it);
  dropVmmRef(h);
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (CUresult r = checkInit()) return r;
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!deviceRangeValid(static_cast<uintptr_t>(ptr), size)) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  VmmHandle* h = findVmm(handle);
  if (h == nullptr || shareableHandle == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if ((h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) return CUDA_ERROR_INVALID_VALUE;
  int fd = -1;
  if (std::getenv("VGPU_FAKE_EXPORT_DEVICE_FD") != nullptr) {
    // As the real driver: a descriptor of a device node that every export shares, with the
    // object attached to the open file (this process keeps one of its own of it).
    fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int keep = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (keep < 0 || !drv.shared()->addDeviceExport(keep, h->fd, h->dev)) {
      if (fd >= 0) close(fd);
      if (keep >= 0) close(keep);
      return CUDA_ERROR_OPERATING_SYSTEM;
    }
    h->deviceExports.push_back(keep);
  } else {
    fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
  }
  if (h->object == 0 && h->dev >= 0 && h->charged != 0 &&
      drv.shared()->exportObject(inodeOf(h->fd), h->dev, h->charged))
    h->object = inodeOf(h->fd);
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}


CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  if (CUresult r = checkInit()) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  int fd = memfdOf(static_cast<int>(reinterpret_cast<intptr_t>(osHandle)));
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  // The memfd's size (lseek: the memfd is only ever mapped, so moving its offset changes nothing).
  off_t size = lseek(fd, 0, SEEK_END);
  // The exporter named the memfd after the device; that is how the importer learns it.
  char link[64], target[256] = {};
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  int dev = -1;
  bool multicast = n > 0 && std::strncmp(target, "/memfd:vgpu-fake-mc", 19) == 0;
  if (size < 0 || (!multicast && (n <= 0 || std::sscanf(target, "/memfd:vgpu-fake-vmm-dev%d", &dev) != 1))) {
    close(fd);
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  VmmHandle h;
  h.fd = fd;
  h.size = static_cast<size_t>(size);
  h.dev = dev;
  h.imported = true;
  h.multicast = multicast;
  if (dev >= 0 && drv.shared()->holdObject(inodeOf(fd))) h.object = inodeOf(fd);
  h.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  h.prop.location.type = dev >= 0 ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  h.prop.location.id = dev >= 0 ? dev : 0;
  h.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle id = drv.nextVmmHandle++;
  drv.vmmHandles[id] = h;
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  VmmHandle* h = findVmm(handle);
  // A multicast object is not an allocation (this fake's choice; the reference does not say).
  if (h == nullptr || prop == nullptr || h->multicast) return CUDA_ERROR_INVALID_VALUE;
  *prop = h->prop;
  return CUDA_SUCCESS;
}

}  // extern "C"
