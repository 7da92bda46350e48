// The older ABIs of hooked functions that current drivers still export, for programs built
// against an old toolkit (or asking cuGetProcAddress for an old version): each is charged or
// gives back exactly as its current ABI does. (cuMemAllocPitch, cuMemAlloc and cuMemFree v1
// live beside their _v2 in memory_hooks.cpp.)

#include "runtime.h"

using namespace vgpu;

extern "C" {

// CUDA 3.1 and older: 32-bit extents. Widened and created by the _v2 wrapper, which charges
// it; the array is the same kind of object, destroyed by cuArrayDestroy.
CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  VGPU_ENTER_CUDA(cuArrayCreate);
  if (desc == nullptr || real::cuArrayCreate_v2 == nullptr) return real::cuArrayCreate(pHandle, desc);
  CUDA_ARRAY_DESCRIPTOR wide = {desc->Width, desc->Height, desc->Format, desc->NumChannels};
  return cuArrayCreate_v2(pHandle, &wide);
}

CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  VGPU_ENTER_CUDA(cuArray3DCreate);
  if (desc == nullptr || real::cuArray3DCreate_v2 == nullptr) return real::cuArray3DCreate(pHandle, desc);
  CUDA_ARRAY3D_DESCRIPTOR wide = {desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, desc->Flags};
  return cuArray3DCreate_v2(pHandle, &wide);
}

// CUDA 3.2 and older: v1 keeps its own call (its checks on the context are not _v2's); the
// context goes with what was allocated in it, as after cuCtxDestroy_v2.
CUresult cuCtxDestroy(CUcontext ctx) {
  VGPU_ENTER_CUDA(cuCtxDestroy);
  contextsChanged();
  CUresult rc = real::cuCtxDestroy(ctx);
  contextsChanged();
  if (rc == CUDA_SUCCESS) contextGone(ctx);
  return rc;
}

// Before CUDA 11.0: the primary context's release and reset, each by its own call, end the
// context as their _v2 do.
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxRelease);
  return primaryReleased(dev, real::cuDevicePrimaryCtxRelease);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxReset);
  return primaryReset(dev, real::cuDevicePrimaryCtxReset);
}

}  // extern "C"
