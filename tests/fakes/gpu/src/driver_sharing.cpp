// Fake libcuda.so.1: what a process does with memory it shares and reaches rather than
// allocates: the handle behind a mapping (cuMemRetainAllocationHandle), peer access between
// contexts, multicast objects (a handle that can be exported, imported and mapped, to which
// memory is bound). None of it takes device memory.

#include <sys/mman.h>
#include <unistd.h>

#include "driver.h"

namespace {

// The multicast object `mc` exists (and, with `mem`, that allocation handle too).
CUresult checkMulticast(CUmemGenericAllocationHandle mc, CUmemGenericAllocationHandle mem = 0) {
  using namespace vgpu::fakegpu;
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto m = drv.vmmHandles.find(mc);
  if (m == drv.vmmHandles.end() || !m->second.multicast) return CUDA_ERROR_INVALID_VALUE;
  if (mem != 0) {
    auto a = drv.vmmHandles.find(mem);
    if (a == drv.vmmHandles.end() || a->second.multicast) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  using namespace vgpu::fakegpu;
  if (CUresult r = checkInit()) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  uintptr_t p = reinterpret_cast<uintptr_t>(addr);
  auto m = drv.mappings.upper_bound(p);
  if (m == drv.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --m;
  if (p >= m->second.base + m->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto h = drv.vmmHandles.find(m->second.handle);
  if (h == drv.vmmHandles.end()) return CUDA_ERROR_INVALID_VALUE;
  ++h->second.refs;  // released with cuMemRelease, like the handle it names
  *handle = m->second.handle;
  return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int flags) {
  using namespace vgpu::fakegpu;
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* peer = reinterpret_cast<Context*>(peerContext);
  if (flags != 0 || !drv.contexts.count(peer)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;  // the fake's memory is host memory: every context reaches all of it
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  using namespace vgpu::fakegpu;
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (!drv.contexts.count(reinterpret_cast<Context*>(peerContext))) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMulticastCreate(CUmemGenericAllocationHandle* mcHandle, const CUmulticastObjectProp* prop) {
  using namespace vgpu::fakegpu;
  if (CUresult r = checkInit()) return r;
  constexpr size_t kGranularity = 2u << 20;
  if (mcHandle == nullptr || prop == nullptr || prop->numDevices == 0 || prop->size == 0 ||
      prop->size % kGranularity != 0 || prop->flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  // A memfd so that it can be exported, imported and mapped like an allocation; nothing charged.
  int fd = memfd_create("vgpu-fake-mc", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(prop->size)) != 0) {
    if (fd >= 0) close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  VmmHandle h;
  h.fd = fd;
  h.size = prop->size;
  h.multicast = true;
  h.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  h.prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(prop->handleTypes);
  CUmemGenericAllocationHandle id = drv.nextVmmHandle++;
  drv.vmmHandles[id] = h;
  *mcHandle = id;
  return CUDA_SUCCESS;
}


CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice) { return checkMulticast(mcHandle); }

CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t, CUmemGenericAllocationHandle memHandle,
                            size_t, size_t, unsigned long long) {
  return checkMulticast(mcHandle, memHandle);  // binds memory that is already there
}

CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t, CUdeviceptr, size_t,
                             unsigned long long) {
  return checkMulticast(mcHandle);
}

CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice, size_t, size_t) {
  return checkMulticast(mcHandle);
}

}  // extern "C"
