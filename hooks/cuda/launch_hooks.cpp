// Launch wrappers: pure pass-through while nothing concerns launches; otherwise each launch
// may announce a high-priority tenant's activity, wait while one is active (a low-priority
// tenant), and join the context's current burst while the compute limit applies
// (monitor.cpp, throttle.cpp).
//
// Each wrapper is one test and two tail calls: to the driver on the fast path, or to its
// out-of-line twin (same signature, so no stack frame is built on the fast path) that
// initialises, refuses, holds back or throttles.

#include "monitor.h"
#include "runtime.h"

using namespace vgpu;

namespace {

template <class F>
CUresult launchSlow(CUstream stream, bool ptsz, F&& launch) {
  Ctx c;
  if (!currentContext(&c)) return launch();  // the driver reports the missing context
  monitor::beforeLaunch(c.dev);
  if (!monitor::engaged(c.dev)) return launch();
  return throttle::around(stream, ptsz, launch);
}

}  // namespace

#define VGPU_LAUNCH_WRAPPER(name, ptsz, stream, params, args)                                                      \
  __attribute__((noinline)) static CUresult slow_##name params {                                                   \
    VGPU_ENTER_CUDA(name);                                                                                         \
    return launchSlow(stream, ptsz, [&] { return real::name args; });                                              \
  }                                                                                                                \
  extern "C" CUresult name params {                                                                                \
    if (__builtin_expect(!detail::gLaunchFast.load(std::memory_order_acquire) || real::name == nullptr, 0)) {      \
      return slow_##name args;                                                                                     \
    }                                                                                                              \
    return real::name args;                                                                                        \
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

// Graph launches are throttled like kernels, and a graph with allocation nodes takes memory
// when it is uploaded or runs: what it may take is reserved first, and the graph allocator's
// charge then follows what it really maps (pools.cpp).
namespace {

uintptr_t key(CUgraphExec exec) { return reinterpret_cast<uintptr_t>(exec); }

// Reserves on each device what the executable graph `g` may take beyond what the graph
// allocator holds unused, runs `call`, then charges the allocator for what it maps.
template <class F>
CUresult reservedAround(const Record& g, CUgraphExec exec, F&& call) {
  uint64_t provisional[kLimiterMaxDevices] = {};
  bool single = (g.count & (g.count - 1)) == 0;
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    if ((g.count >> d & 1) == 0) continue;
    Record one = g;
    if (!single) ledger::peek(Kind::kGraphExecDevice, key(exec) | uintptr_t(d) << 56, &one);
    uint64_t spare = pools::graphSpare(d);
    provisional[d] = one.bytes > spare ? one.bytes - spare : 0;
    if (reserveMemory(d, provisional[d]) != CUDA_SUCCESS) {
      for (int e = 0; e < d; ++e) releaseMemory(e, provisional[e]);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  CUresult rc = call();
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    if ((g.count >> d & 1) == 0) continue;
    if (rc == CUDA_SUCCESS) {
      pools::resyncGraph(d, provisional[d]);
    } else {
      releaseMemory(d, provisional[d]);
    }
  }
  if (rc == CUDA_SUCCESS && (g.flags & kMapped) == 0) {
    ledger::update(
        Kind::kGraphExec, key(exec),
        [](Record& r, void*) {
          r.flags |= kMapped;
          return ledger::Keep::kKeep;
        },
        nullptr);
  }
  return rc;
}

template <class F>
CUresult graphLaunch(CUgraphExec exec, CUstream stream, bool ptsz, F&& launch) {
  Record g;
  if (!ledger::peek(Kind::kGraphExec, key(exec), &g)) return launchSlow(stream, ptsz, launch);
  return reservedAround(g, exec, [&] { return launchSlow(stream, ptsz, launch); });
}

// cuGraphUpload maps an executable graph's allocation memory ahead of its first launch: it is
// reserved and charged as that launch's would be. Once an upload or a launch has mapped it,
// an upload maps nothing new.
template <class F>
CUresult graphUpload(CUgraphExec exec, F&& upload) {
  Record g;
  if (!ledger::peek(Kind::kGraphExec, key(exec), &g) || (g.flags & kMapped) != 0) return upload();
  return reservedAround(g, exec, upload);
}

}  // namespace

#define VGPU_GRAPH_LAUNCH_WRAPPER(name, ptsz)                                                             \
  __attribute__((noinline)) static CUresult slow_##name(CUgraphExec hGraphExec, CUstream hStream) {      \
    VGPU_ENTER_CUDA(name);                                                                               \
    return graphLaunch(hGraphExec, hStream, ptsz, [&] { return real::name(hGraphExec, hStream); });      \
  }                                                                                                      \
  extern "C" CUresult name(CUgraphExec hGraphExec, CUstream hStream) {                                   \
    if (__builtin_expect(!detail::gLaunchFast.load(std::memory_order_acquire) || real::name == nullptr || \
                             pools::gGraphAllocs.load(std::memory_order_relaxed),                        \
                         0)) {                                                                           \
      return slow_##name(hGraphExec, hStream);                                                           \
    }                                                                                                    \
    return real::name(hGraphExec, hStream);                                                              \
  }

VGPU_GRAPH_LAUNCH_WRAPPER(cuGraphLaunch, false)
VGPU_GRAPH_LAUNCH_WRAPPER(cuGraphLaunch_ptsz, true)

extern "C" CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_ENTER_CUDA(cuGraphUpload);
  return graphUpload(hGraphExec, [&] { return real::cuGraphUpload(hGraphExec, hStream); });
}

extern "C" CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_ENTER_CUDA(cuGraphUpload_ptsz);
  return graphUpload(hGraphExec, [&] { return real::cuGraphUpload_ptsz(hGraphExec, hStream); });
}
