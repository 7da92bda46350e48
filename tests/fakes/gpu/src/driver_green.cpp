// Green contexts in the fake: cuGreenCtxCreate / cuGreenCtxDestroy. As the driver API reference
// says of the real one, creating a green context retains the device's primary context (which
// takes its overhead if it was not active) and the green context is released with it; its own
// state takes device memory like a context's: the device's context_mib. Any non-NULL resource
// descriptor is accepted (the fake has no SM partitions).

#include <set>

#include "driver.h"

namespace vgpu::fakegpu {
namespace {

struct GreenContext {
  int dev = 0;
  uint64_t overhead = 0;
};

std::set<GreenContext*> gGreen;  // guarded by Driver::mu

constexpr unsigned kDefaultStream = 0x1;  // CU_GREEN_CTX_DEFAULT_STREAM, the only flag

}  // namespace
}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  if (CUresult r = checkInit()) return r;
  if (phCtx == nullptr || desc == nullptr || (flags & ~kDefaultStream) != 0) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  if (dev < 0 || static_cast<size_t>(dev) >= drv.config().gpus.size()) return CUDA_ERROR_INVALID_DEVICE;
  CUcontext primary = nullptr;
  if (CUresult r = cuDevicePrimaryCtxRetain(&primary, dev)) return r;
  uint64_t overhead = drv.config().gpus[dev].contextMib << 20;
  {
    std::lock_guard lock(drv.mu);
    if (overhead == 0 || drv.shared()->charge(dev, overhead)) {
      auto* g = new GreenContext{dev, overhead};
      gGreen.insert(g);
      *phCtx = reinterpret_cast<CUgreenCtx>(g);
      return CUDA_SUCCESS;
    }
  }
  cuDevicePrimaryCtxRelease_v2(dev);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  int dev = 0;
  {
    std::lock_guard lock(drv.mu);
    auto* g = reinterpret_cast<GreenContext*>(hCtx);
    if (!gGreen.erase(g)) return CUDA_ERROR_INVALID_HANDLE;
    dev = g->dev;
    if (g->overhead != 0) drv.shared()->uncharge(dev, g->overhead);
    delete g;
  }
  return cuDevicePrimaryCtxRelease_v2(dev);
}

}  // extern "C"
