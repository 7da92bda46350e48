// Fake libcuda.so.1: what a process does with memory it shares and reaches rather than
// allocates: the handle behind a mapping (cuMemRetainAllocationHandle) and peer access
// between contexts. None of it takes device memory.

#include "driver.h"

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

}  // extern "C"
