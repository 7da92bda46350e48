// Green contexts (CUDA 12.4): cuGreenCtxCreate / cuGreenCtxDestroy. A green context has a
// context's state of its own and retains the device's primary context inside the driver
// (activating it, with its overhead, when no one had): what the creation took is measured
// and charged (driver_taken.h), a creation that does not fit is destroyed again and refused
// with CUDA_ERROR_OUT_OF_MEMORY, and cuGreenCtxDestroy gives it back.

#include "driver_taken.h"
#include "runtime.h"

using namespace vgpu;

extern "C" {

CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  VGPU_ENTER_CUDA(cuGreenCtxCreate);
  if (phCtx == nullptr || real::cuGreenCtxDestroy == nullptr) return real::cuGreenCtxCreate(phCtx, desc, dev, flags);
  // Owned by no context: it is not one of the contexts the ledger follows, and only its own
  // destruction ends it.
  return taken::chargeOn(
      Kind::kGreenContext, static_cast<int>(dev), 0, [&] { return real::cuGreenCtxCreate(phCtx, desc, dev, flags); },
      [&] { real::cuGreenCtxDestroy(*phCtx); }, [&] { return *phCtx; });
}

CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  VGPU_ENTER_CUDA(cuGreenCtxDestroy);
  return taken::release(Kind::kGreenContext, hCtx, [&] { return real::cuGreenCtxDestroy(hCtx); });
}

}  // extern "C"
