// Launch wrappers: pure pass-through unless a device has a compute limit; then each
// launch joins the context's current burst (throttle.cpp).
//
// Each wrapper is one test and two tail calls: to the driver on the fast path, or to its
// out-of-line twin (same signature, so no stack frame is built on the fast path) that
// initialises, refuses, or throttles.

#include "runtime.h"

using namespace vgpu;

#define VGPU_LAUNCH_WRAPPER(name, ptsz, stream, params, args)                                                         \
  __attribute__((noinline)) static CUresult slow_##name params {                                                      \
    VGPU_ENTER_CUDA(name);                                                                                            \
    if (!throttle::active()) return real::name args;                                                                  \
    return throttle::around(stream, ptsz, [&] { return real::name args; });                                           \
  }                                                                                                                   \
  extern "C" CUresult name params {                                                                                   \
    if (__builtin_expect(                                                                                             \
            !detail::gCudaReady.load(std::memory_order_acquire) || real::name == nullptr || throttle::active(), 0)) { \
      return slow_##name args;                                                                                        \
    }                                                                                                                 \
    return real::name args;                                                                                           \
  }

#define VGPU_KERNEL_PARAMS                                                                                             \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX,          \
   unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, \
   void** extra)
#define VGPU_KERNEL_ARGS \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra)
#define VGPU_COOP_PARAMS                                                                                      \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
   unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams)
#define VGPU_COOP_ARGS \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams)
#define VGPU_EX_PARAMS (const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra)
#define VGPU_EX_ARGS (config, f, kernelParams, extra)

VGPU_LAUNCH_WRAPPER(cuLaunchKernel, false, hStream, VGPU_KERNEL_PARAMS, VGPU_KERNEL_ARGS)
VGPU_LAUNCH_WRAPPER(cuLaunchKernel_ptsz, true, hStream, VGPU_KERNEL_PARAMS, VGPU_KERNEL_ARGS)
VGPU_LAUNCH_WRAPPER(cuLaunchCooperativeKernel, false, hStream, VGPU_COOP_PARAMS, VGPU_COOP_ARGS)
VGPU_LAUNCH_WRAPPER(cuLaunchCooperativeKernel_ptsz, true, hStream, VGPU_COOP_PARAMS, VGPU_COOP_ARGS)
// A null config is the driver's error to report; it has no stream to throttle on.
VGPU_LAUNCH_WRAPPER(cuLaunchKernelEx, false, config != nullptr ? config->hStream : nullptr, VGPU_EX_PARAMS,
                    VGPU_EX_ARGS)
VGPU_LAUNCH_WRAPPER(cuLaunchKernelEx_ptsz, true, config != nullptr ? config->hStream : nullptr, VGPU_EX_PARAMS,
                    VGPU_EX_ARGS)
VGPU_LAUNCH_WRAPPER(cuGraphLaunch, false, hStream, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))
VGPU_LAUNCH_WRAPPER(cuGraphLaunch_ptsz, true, hStream, (CUgraphExec hGraphExec, CUstream hStream),
                    (hGraphExec, hStream))
