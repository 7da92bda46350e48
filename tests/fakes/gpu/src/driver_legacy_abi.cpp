// Entry points of the oldest ABIs (CUDA 3.1 and older) that current drivers still export and
// the fake did not: cuArrayCreate and cuArray3DCreate with 32-bit descriptors. Each is its
// _v2 with the extents widened, as in the real driver.

#include "driver.h"

extern "C" {

CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR wide = {desc->Width, desc->Height, desc->Format, desc->NumChannels};
  return cuArrayCreate_v2(pHandle, &wide);
}

CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR wide = {desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, desc->Flags};
  return cuArray3DCreate_v2(pHandle, &wide);
}

}  // extern "C"
