// Launch wrappers: pure pass-through unless a device has a compute limit; then each
// launch joins the context's current burst (throttle.cpp).

#include "runtime.h"

using namespace vgpu;

extern "C" {

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) {
  VGPU_ENTER_CUDA(cuLaunchKernel);
  if (!throttle::active()) {
    return real::cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                sharedMemBytes, hStream, kernelParams, extra);
  }
  return throttle::around(hStream, false, [&] {
    return real::cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                sharedMemBytes, hStream, kernelParams, extra);
  });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void** kernelParams, void** extra) {
  VGPU_ENTER_CUDA(cuLaunchKernel_ptsz);
  if (!throttle::active()) {
    return real::cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                     blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
  }
  return throttle::around(hStream, true, [&] {
    return real::cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                     blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
  });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) {
  VGPU_ENTER_CUDA(cuLaunchKernelEx);
  if (!throttle::active() || config == nullptr) {
    return real::cuLaunchKernelEx(config, f, kernelParams, extra);
  }
  return throttle::around(config->hStream, false,
                          [&] { return real::cuLaunchKernelEx(config, f, kernelParams, extra); });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) {
  VGPU_ENTER_CUDA(cuLaunchKernelEx_ptsz);
  if (!throttle::active() || config == nullptr) {
    return real::cuLaunchKernelEx_ptsz(config, f, kernelParams, extra);
  }
  return throttle::around(config->hStream, true, [&] {
    return real::cuLaunchKernelEx_ptsz(config, f, kernelParams, extra);
  });
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void** kernelParams) {
  VGPU_ENTER_CUDA(cuLaunchCooperativeKernel);
  if (!throttle::active()) {
    return real::cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                           blockDimZ, sharedMemBytes, hStream, kernelParams);
  }
  return throttle::around(hStream, false, [&] {
    return real::cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                           blockDimZ, sharedMemBytes, hStream, kernelParams);
  });
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams) {
  VGPU_ENTER_CUDA(cuLaunchCooperativeKernel_ptsz);
  if (!throttle::active()) {
    return real::cuLaunchCooperativeKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                                                blockDimY, blockDimZ, sharedMemBytes, hStream,
                                                kernelParams);
  }
  return throttle::around(hStream, true, [&] {
    return real::cuLaunchCooperativeKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                                                blockDimY, blockDimZ, sharedMemBytes, hStream,
                                                kernelParams);
  });
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_ENTER_CUDA(cuGraphLaunch);
  if (!throttle::active()) return real::cuGraphLaunch(hGraphExec, hStream);
  return throttle::around(hStream, false, [&] { return real::cuGraphLaunch(hGraphExec, hStream); });
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_ENTER_CUDA(cuGraphLaunch_ptsz);
  if (!throttle::active()) return real::cuGraphLaunch_ptsz(hGraphExec, hStream);
  return throttle::around(hStream, true,
                          [&] { return real::cuGraphLaunch_ptsz(hGraphExec, hStream); });
}

}  // extern "C"
