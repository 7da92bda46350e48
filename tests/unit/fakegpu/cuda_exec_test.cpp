// Simulated execution in the fake libcuda.so.1: spin kernels take real time, serially per device.

#include <time.h>

#include <gtest/gtest.h>

#include "child.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

class FakeGpuExec : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = dir_.write("gpus.conf", "gpu memory_mib=1024\ngpu memory_mib=1024\n");
    state_ = dir_.path() + "/state";
  }
  std::map<std::string, std::string> env() const {
    return {{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", state_}};
  }
  TempDir dir_;
  std::string conf_, state_;
};

#define OPEN_SPIN()                                                             \
  void* cuda = test::openLib("libcuda.so.1");                                   \
  CU_FN(cuda, cuInit);                                                          \
  CU_FN(cuda, cuDevicePrimaryCtxRetain);                                        \
  CU_FN(cuda, cuCtxSetCurrent);                                                 \
  CU_FN(cuda, cuModuleLoadData);                                                \
  CU_FN(cuda, cuModuleGetFunction);                                             \
  CU_FN(cuda, cuLaunchKernel);                                                  \
  CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);                                       \
  CUcontext ctx0 = nullptr;                                                     \
  CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx0, 0) == CUDA_SUCCESS);              \
  CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS);                           \
  CUmodule mod = nullptr;                                                       \
  CHILD_CHECK(cuModuleLoadData(&mod, "any image") == CUDA_SUCCESS);             \
  CUfunction spin = nullptr;                                                    \
  CHILD_CHECK(cuModuleGetFunction(&spin, mod, "spin") == CUDA_SUCCESS);         \
  auto* busyNs = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceBusyNs");        \
  CHILD_CHECK(busyNs != nullptr)

TEST_F(FakeGpuExec, OnlyTheSpinKernelExists) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CUfunction f = nullptr;
    CHILD_CHECK(cuModuleGetFunction(&f, mod, "matmul") == CUDA_ERROR_NOT_FOUND);
    uint64_t us = 10;
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel(spin, 0, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuExec, KernelsRunAsynchronouslyForTheirSimulatedTime) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CU_FN(cuda, cuStreamCreate);
    CU_FN(cuda, cuStreamQuery);
    CU_FN(cuda, cuStreamSynchronize);
    CU_FN(cuda, cuCtxSynchronize);
    CUstream s = nullptr;
    CHILD_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    uint64_t us = 100000;
    void* args[] = {&us};
    uint64_t t0 = nowNs();
    for (int i = 0; i < 3; ++i)
      CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(nowNs() - t0 < 150000000ull);  // launching returned long before the 300 ms of work
    CHILD_CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    uint64_t took = nowNs() - t0;
    CHILD_CHECK(took >= 300000000ull && took < 1000000000ull);
    CHILD_CHECK(cuStreamQuery(s) == CUDA_SUCCESS);
    uint64_t busy = busyNs(0);
    CHILD_CHECK(busy == 300000000ull);
    CHILD_CHECK(busyNs(1) == 0);
    // The NULL stream's synchronisation waits for the context's work.
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
    t0 = nowNs();
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS && nowNs() - t0 >= 30000000ull);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuExec, BusyTimeGrowsOnlyAsKernelsRun) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CU_FN(cuda, cuCtxSynchronize);
    uint64_t us = 100000;
    void* args[] = {&us};
    uint64_t t0 = nowNs();
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    uint64_t busy = busyNs(0);
    CHILD_CHECK(busy <= nowNs() - t0);  // never more than the time since launch: not counted when queued
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHILD_CHECK(busyNs(0) == 100000000ull);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuExec, EventsMeasureDeviceTime) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CU_FN(cuda, cuEventCreate);
    CU_FN(cuda, cuEventRecord);
    CU_FN(cuda, cuEventQuery);
    CU_FN(cuda, cuEventSynchronize);
    CU_FN(cuda, cuEventElapsedTime_v2);
    CU_FN(cuda, cuEventDestroy_v2);
    CU_FN(cuda, cuLaunchKernelEx);
    CUevent a = nullptr, b = nullptr, noTiming = nullptr;
    CHILD_CHECK(cuEventCreate(&a, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventCreate(&b, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventCreate(&noTiming, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    float ms = 0;
    CHILD_CHECK(cuEventElapsedTime_v2(&ms, a, b) == CUDA_ERROR_INVALID_HANDLE);  // never recorded
    uint64_t us = 100000;
    void* args[] = {&us};
    CHILD_CHECK(cuEventRecord(a, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CUlaunchConfig cfg{};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    CHILD_CHECK(cuLaunchKernelEx(&cfg, spin, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventRecord(b, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventQuery(b) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(cuEventElapsedTime_v2(&ms, a, b) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(cuEventSynchronize(b) == CUDA_SUCCESS && cuEventQuery(b) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS);
    CHILD_CHECK(ms >= 199.9f && ms < 260.0f);  // device time, plus the host's delay between record and launch
    CHILD_CHECK(cuEventRecord(noTiming, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventElapsedTime_v2(&ms, a, noTiming) == CUDA_ERROR_INVALID_HANDLE);
    CHILD_CHECK(cuEventDestroy_v2(a) == CUDA_SUCCESS && cuEventDestroy_v2(a) == CUDA_ERROR_INVALID_HANDLE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// Two processes on one device run one kernel at a time: their busy time adds up serially.
TEST_F(FakeGpuExec, ProcessesShareTheDeviceOneKernelAtATime) {
  auto body = [] {
    OPEN_SPIN();
    CU_FN(cuda, cuCtxSynchronize);
    uint64_t us = 20000;
    void* args[] = {&us};
    for (int i = 0; i < 5; ++i)
      CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    return 0;
  };
  uint64_t t0 = nowNs();
  int a = test::spawnChild(env(), body);
  int b = test::spawnChild(env(), body);
  auto ra = test::waitChild(a);
  auto rb = test::waitChild(b);
  uint64_t took = nowNs() - t0;
  EXPECT_EQ(ra.exitCode, 0) << ra.stderrText;
  EXPECT_EQ(rb.exitCode, 0) << rb.stderrText;
  EXPECT_GE(took, 200000000ull);  // 2 x 5 x 20 ms, never overlapping
  auto check = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    auto* busyNs = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceBusyNs");
    CHILD_CHECK(busyNs != nullptr && busyNs(0) == 200000000ull);
    return 0;
  });
  EXPECT_EQ(check.exitCode, 0) << check.stderrText;
}

TEST_F(FakeGpuExec, PerThreadStreamVariantsUseTheThreadsStream) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    // The per-thread variants have the signatures of their legacy twins.
    auto* cuLaunchKernel_ptsz = test::sym<decltype(::cuLaunchKernel)>(cuda, "cuLaunchKernel_ptsz");
    auto* cuStreamQuery_ptsz = test::sym<decltype(::cuStreamQuery)>(cuda, "cuStreamQuery_ptsz");
    auto* cuStreamSynchronize_ptsz = test::sym<decltype(::cuStreamSynchronize)>(cuda, "cuStreamSynchronize_ptsz");
    CHILD_CHECK(cuLaunchKernel_ptsz && cuStreamQuery_ptsz && cuStreamSynchronize_ptsz);
    CU_FN(cuda, cuStreamQuery);
    uint64_t us = 200000;
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel_ptsz(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamQuery_ptsz(nullptr) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(cuStreamQuery(CU_STREAM_PER_THREAD) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(cuStreamSynchronize_ptsz(nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamQuery_ptsz(nullptr) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// cuStreamWaitValue32: work queued behind an unsatisfied wait runs only once another stream
// writes the value, as on hardware; events recorded behind it are not complete until then.
TEST_F(FakeGpuExec, StreamWaitValueHoldsLaterWorkUntilAnotherStreamWritesIt) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CU_FN(cuda, cuStreamCreate);
    CU_FN(cuda, cuStreamQuery);
    CU_FN(cuda, cuStreamSynchronize);
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemsetD32_v2);
    CU_FN(cuda, cuStreamWaitValue32);
    CU_FN(cuda, cuStreamWriteValue32);
    CU_FN(cuda, cuEventCreate);
    CU_FN(cuda, cuEventRecord);
    CU_FN(cuda, cuEventQuery);
    CU_FN(cuda, cuEventSynchronize);
    CUstream a = nullptr, b = nullptr;
    CHILD_CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUdeviceptr flag = 0;
    CHILD_CHECK(cuMemAlloc_v2(&flag, 4) == CUDA_SUCCESS && cuMemsetD32_v2(flag, 0, 1) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamWaitValue32(a, flag + 1, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_ERROR_INVALID_VALUE);
    // Already satisfied: nothing waits.
    CHILD_CHECK(cuStreamWaitValue32(a, flag, 0, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamQuery(a) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamWaitValue32(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
    uint64_t us = 20000;
    void* args[] = {&us};
    CUevent done = nullptr;
    CHILD_CHECK(cuEventCreate(&done, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventRecord(done, a) == CUDA_SUCCESS);
    uint64_t t0 = nowNs();
    timespec pause{0, 60'000'000};
    nanosleep(&pause, nullptr);
    CHILD_CHECK(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);  // still waiting, long after 20 ms
    CHILD_CHECK(cuEventQuery(done) == CUDA_ERROR_NOT_READY);
    CHILD_CHECK(busyNs(0) == 0);
    CHILD_CHECK(cuStreamWriteValue32(b, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS);
    CHILD_CHECK(cuEventSynchronize(done) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamSynchronize(a) == CUDA_SUCCESS);
    CHILD_CHECK(nowNs() - t0 >= 80'000'000);  // it ran after the write, for its 20 ms
    CHILD_CHECK(busyNs(0) >= 20'000'000);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuExec, GraphKernelNodesRunWhenLaunched) {
  auto r = runChild(env(), [] {
    OPEN_SPIN();
    CU_FN(cuda, cuGraphCreate);
    CU_FN(cuda, cuGraphAddKernelNode_v2);
    CU_FN(cuda, cuGraphInstantiateWithFlags);
    CU_FN(cuda, cuGraphLaunch);
    CU_FN(cuda, cuStreamSynchronize);
    CUgraph g = nullptr;
    CHILD_CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    uint64_t us = 25000;
    void* args[] = {&us};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = spin;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraphNode n = nullptr;
    CHILD_CHECK(cuGraphAddKernelNode_v2(&n, g, nullptr, 0, &p) == CUDA_SUCCESS);
    us = 1;  // parameters are copied when the node is added
    CUgraphExec e = nullptr;
    CHILD_CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
    CHILD_CHECK(busyNs(0) == 0);
    CHILD_CHECK(cuGraphLaunch(e, nullptr) == CUDA_SUCCESS && cuGraphLaunch(e, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamSynchronize(nullptr) == CUDA_SUCCESS && busyNs(0) == 50000000ull);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
