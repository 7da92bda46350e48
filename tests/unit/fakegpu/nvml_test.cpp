// The fake libnvidia-ml.so.1: identity from the config, usage from the shared state, faults.

#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "child.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

class FakeGpuNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = dir_.write("gpus.conf",
                       "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"NVIDIA H100 80GB HBM3\" "
                       "memory_mib=1024 sm_count=132 cc=9.0 pci_bus_id=00000000:3B:00.0 minor=4 numa=1 mig=on\n"
                       "gpu uuid=GPU-00000000-0000-0000-0000-000000000001 memory_mib=2048\n"
                       "nvml_device_error gpu=1 code=GPU_IS_LOST\n"
                       "xid gpu=0 code=79 delay_ms=50\n"
                       "xid gpu=0 code=48 delay_ms=10\n");
    state_ = dir_.path() + "/state";
  }
  std::map<std::string, std::string> env() const {
    return {{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", state_}};
  }
  TempDir dir_;
  std::string conf_, state_;
};

#define OPEN_NVML()                                               \
  void* nvml = test::openLib("libnvidia-ml.so.1");                \
  NVML_FN(nvml, nvmlInit_v2);                                     \
  NVML_FN(nvml, nvmlDeviceGetHandleByIndex_v2);                   \
  CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);                     \
  nvmlDevice_t dev0 = nullptr, dev1 = nullptr;                    \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &dev0) == NVML_SUCCESS); \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(1, &dev1) == NVML_SUCCESS)

TEST_F(FakeGpuNvml, ReportsTheConfiguredIdentity) {
  auto r = runChild(env(), [] {
    OPEN_NVML();
    NVML_FN(nvml, nvmlDeviceGetCount_v2);
    NVML_FN(nvml, nvmlDeviceGetUUID);
    NVML_FN(nvml, nvmlDeviceGetName);
    NVML_FN(nvml, nvmlDeviceGetIndex);
    NVML_FN(nvml, nvmlDeviceGetMinorNumber);
    NVML_FN(nvml, nvmlDeviceGetPciInfo_v3);
    NVML_FN(nvml, nvmlDeviceGetCudaComputeCapability);
    NVML_FN(nvml, nvmlDeviceGetMigMode);
    NVML_FN(nvml, nvmlDeviceGetNumaNodeId);
    NVML_FN(nvml, nvmlDeviceGetHandleByUUID);
    NVML_FN(nvml, nvmlDeviceGetHandleByPciBusId_v2);
    NVML_FN(nvml, nvmlSystemGetDriverVersion);
    NVML_FN(nvml, nvmlSystemGetCudaDriverVersion_v2);
    unsigned n = 0;
    CHILD_CHECK(nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS && n == 2);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    CHILD_CHECK(nvmlDeviceGetUUID(dev0, buf, sizeof buf) == NVML_SUCCESS &&
                std::string(buf) == "GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20");
    CHILD_CHECK(nvmlDeviceGetUUID(dev0, buf, 10) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHILD_CHECK(nvmlDeviceGetName(dev0, buf, sizeof buf) == NVML_SUCCESS && std::string(buf) == "NVIDIA H100 80GB HBM3");
    unsigned v = 0;
    CHILD_CHECK(nvmlDeviceGetIndex(dev0, &v) == NVML_SUCCESS && v == 0);
    CHILD_CHECK(nvmlDeviceGetMinorNumber(dev0, &v) == NVML_SUCCESS && v == 4);
    nvmlPciInfo_t pci{};
    CHILD_CHECK(nvmlDeviceGetPciInfo_v3(dev0, &pci) == NVML_SUCCESS);
    CHILD_CHECK(std::string(pci.busId) == "00000000:3B:00.0" && pci.bus == 0x3b && pci.domain == 0);
    int major = 0, minor = 0;
    CHILD_CHECK(nvmlDeviceGetCudaComputeCapability(dev0, &major, &minor) == NVML_SUCCESS && major == 9 && minor == 0);
    unsigned cur = 9, pend = 9;
    CHILD_CHECK(nvmlDeviceGetMigMode(dev0, &cur, &pend) == NVML_SUCCESS && cur == NVML_DEVICE_MIG_ENABLE);
    CHILD_CHECK(nvmlDeviceGetNumaNodeId(dev0, &v) == NVML_SUCCESS && v == 1);
    nvmlDevice_t h = nullptr;
    CHILD_CHECK(nvmlDeviceGetHandleByUUID("GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20", &h) == NVML_SUCCESS && h == dev0);
    CHILD_CHECK(nvmlDeviceGetHandleByUUID("GPU-nope", &h) == NVML_ERROR_NOT_FOUND);
    CHILD_CHECK(nvmlDeviceGetHandleByPciBusId_v2("0000:3b:00.0", &h) == NVML_SUCCESS && h == dev0);
    CHILD_CHECK(nvmlSystemGetDriverVersion(buf, sizeof buf) == NVML_SUCCESS && buf[0] != '\0');
    int cudaVersion = 0;
    CHILD_CHECK(nvmlSystemGetCudaDriverVersion_v2(&cudaVersion) == NVML_SUCCESS && cudaVersion == 13000);
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(2, &h) == NVML_ERROR_INVALID_ARGUMENT);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvml, InjectedDeviceFaultFailsThatDevicesQueries) {
  auto r = runChild(env(), [] {
    OPEN_NVML();
    NVML_FN(nvml, nvmlDeviceGetUUID);
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo);
    NVML_FN(nvml, nvmlErrorString);
    char buf[96];
    CHILD_CHECK(nvmlDeviceGetUUID(dev1, buf, sizeof buf) == NVML_ERROR_GPU_IS_LOST);
    nvmlMemory_t m{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev1, &m) == NVML_ERROR_GPU_IS_LOST);
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev0, &m) == NVML_SUCCESS);
    CHILD_CHECK(std::string(nvmlErrorString(NVML_ERROR_GPU_IS_LOST)) == "GPU is lost");
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvml, InitFailsWithTheInjectedReturnAndIsRefCounted) {
  auto r = runChild(env(), [] {
    void* nvml = test::openLib("libnvidia-ml.so.1");
    NVML_FN(nvml, nvmlInit_v2);
    NVML_FN(nvml, nvmlInitWithFlags);
    NVML_FN(nvml, nvmlShutdown);
    NVML_FN(nvml, nvmlDeviceGetCount_v2);
    unsigned n = 0;
    CHILD_CHECK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED);
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlInitWithFlags(0) == NVML_SUCCESS);
    CHILD_CHECK(nvmlShutdown() == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS);
    CHILD_CHECK(nvmlShutdown() == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED);
    CHILD_CHECK(nvmlShutdown() == NVML_ERROR_UNINITIALIZED);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  std::string conf = dir_.write("fail.conf", "gpu\nnvml_init_error code=DRIVER_NOT_LOADED\n");
  auto f = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}}, [] {
    void* nvml = test::openLib("libnvidia-ml.so.1");
    NVML_FN(nvml, nvmlInit_v2);
    CHILD_CHECK(nvmlInit_v2() == NVML_ERROR_DRIVER_NOT_LOADED);
    return 0;
  });
  EXPECT_EQ(f.exitCode, 0) << f.stderrText;
}

TEST_F(FakeGpuNvml, MemoryInfoMatchesWhatLibcudaHoldsInAnyProcess) {
  int toHolder[2], fromHolder[2];
  ASSERT_EQ(pipe(toHolder), 0);
  ASSERT_EQ(pipe(fromHolder), 0);
  int holder = test::spawnChild(env(), [&] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuMemAlloc_v2);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 300 * kMiB) == CUDA_SUCCESS);
    char ch = 'r';
    CHILD_CHECK(write(fromHolder[1], &ch, 1) == 1);
    CHILD_CHECK(read(toHolder[0], &ch, 1) == 1);
    return 0;
  });
  char ch = 0;
  ASSERT_EQ(read(fromHolder[0], &ch, 1), 1);
  auto r = runChild(env(), [holder] {
    // This process holds memory too, through the fake libcuda loaded beside NVML.
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuMemAlloc_v2);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 100 * kMiB) == CUDA_SUCCESS);
    OPEN_NVML();
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo);
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo_v2);
    NVML_FN(nvml, nvmlDeviceGetComputeRunningProcesses_v3);
    nvmlMemory_t m{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev0, &m) == NVML_SUCCESS);
    CHILD_CHECK(m.total == 1024 * kMiB && m.used == 400 * kMiB && m.free == 624 * kMiB);
    nvmlMemory_v2_t m2{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo_v2(dev0, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = nvmlMemory_v2;
    CHILD_CHECK(nvmlDeviceGetMemoryInfo_v2(dev0, &m2) == NVML_SUCCESS && m2.used == 400 * kMiB &&
                m2.total == 1024 * kMiB && m2.free == 624 * kMiB);
    unsigned count = 0;
    CHILD_CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev0, &count, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE);
    CHILD_CHECK(count == 2);
    nvmlProcessInfo_t infos[4]{};
    count = 4;
    CHILD_CHECK(nvmlDeviceGetComputeRunningProcesses_v3(dev0, &count, infos) == NVML_SUCCESS && count == 2);
    bool sawHolder = false, sawSelf = false;
    for (unsigned i = 0; i < count; ++i) {
      if (infos[i].pid == static_cast<unsigned>(holder)) sawHolder = infos[i].usedGpuMemory == 300 * kMiB;
      if (infos[i].pid == static_cast<unsigned>(getpid())) sawSelf = infos[i].usedGpuMemory == 100 * kMiB;
      CHILD_CHECK(infos[i].gpuInstanceId == 0xFFFFFFFFu);
    }
    CHILD_CHECK(sawHolder && sawSelf);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  ASSERT_EQ(write(toHolder[1], &ch, 1), 1);
  EXPECT_EQ(test::waitChild(holder).exitCode, 0);
  for (int fd : {toHolder[0], toHolder[1], fromHolder[0], fromHolder[1]}) close(fd);
}

TEST_F(FakeGpuNvml, WithoutAStateFileNvmlSeesItsOwnProcess) {
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", ""}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuMemAlloc_v2);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 64 * kMiB) == CUDA_SUCCESS);
    OPEN_NVML();
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo);
    nvmlMemory_t m{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev0, &m) == NVML_SUCCESS && m.used == 64 * kMiB);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvml, InjectedXidsReachARegisteredEventSetInTimeOrder) {
  auto r = runChild(env(), [] {
    OPEN_NVML();
    NVML_FN(nvml, nvmlEventSetCreate);
    NVML_FN(nvml, nvmlDeviceGetSupportedEventTypes);
    NVML_FN(nvml, nvmlDeviceRegisterEvents);
    NVML_FN(nvml, nvmlEventSetWait_v2);
    NVML_FN(nvml, nvmlEventSetFree);
    nvmlEventSet_t set = nullptr;
    CHILD_CHECK(nvmlEventSetCreate(&set) == NVML_SUCCESS);
    unsigned long long types = 0;
    CHILD_CHECK(nvmlDeviceGetSupportedEventTypes(dev0, &types) == NVML_SUCCESS);
    CHILD_CHECK((types & nvmlEventTypeXidCriticalError) != 0);
    nvmlEventData_t e{};
    CHILD_CHECK(nvmlEventSetWait_v2(set, &e, 20) == NVML_ERROR_TIMEOUT);  // nothing registered yet
    CHILD_CHECK(nvmlDeviceRegisterEvents(dev0, types & nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceRegisterEvents(dev0, nvmlEventTypePState, set) == NVML_ERROR_NOT_SUPPORTED);
    CHILD_CHECK(nvmlEventSetWait_v2(set, &e, 2000) == NVML_SUCCESS);
    CHILD_CHECK(e.device == dev0 && e.eventType == nvmlEventTypeXidCriticalError && e.eventData == 48);
    CHILD_CHECK(e.gpuInstanceId == 0xFFFFFFFFu && e.computeInstanceId == 0xFFFFFFFFu);
    CHILD_CHECK(nvmlEventSetWait_v2(set, &e, 2000) == NVML_SUCCESS && e.eventData == 79);
    CHILD_CHECK(nvmlEventSetWait_v2(set, &e, 20) == NVML_ERROR_TIMEOUT);
    CHILD_CHECK(nvmlDeviceRegisterEvents(dev1, nvmlEventTypeXidCriticalError, set) == NVML_ERROR_GPU_IS_LOST);
    CHILD_CHECK(nvmlEventSetFree(set) == NVML_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvml, UtilizationFollowsKernelBusyTime) {
  auto r = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuModuleLoadData);
    CU_FN(cuda, cuModuleGetFunction);
    CU_FN(cuda, cuLaunchKernel);
    CU_FN(cuda, cuCtxSynchronize);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CUmodule mod = nullptr;
    CUfunction spin = nullptr;
    CHILD_CHECK(cuModuleLoadData(&mod, "x") == CUDA_SUCCESS && cuModuleGetFunction(&spin, mod, "spin") == CUDA_SUCCESS);
    OPEN_NVML();
    NVML_FN(nvml, nvmlDeviceGetUtilizationRates);
    NVML_FN(nvml, nvmlDeviceGetProcessUtilization);
    nvmlUtilization_t u{};
    CHILD_CHECK(nvmlDeviceGetUtilizationRates(dev0, &u) == NVML_SUCCESS && u.gpu == 0);
    uint64_t us = 250000;  // a quarter of NVML's one-second window
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetUtilizationRates(dev0, &u) == NVML_SUCCESS && u.gpu >= 24 && u.gpu <= 26);
    // Process utilization is not available with MIG on, as with real NVML.
    unsigned n = 0;
    CHILD_CHECK(nvmlDeviceGetProcessUtilization(dev0, nullptr, &n, 0) == NVML_ERROR_NOT_SUPPORTED);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvml, ProcessUtilizationSamplesThePidsThatRan) {
  conf_ = dir_.write("nomig.conf", "gpu memory_mib=1024\n");
  auto r = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuModuleLoadData);
    CU_FN(cuda, cuModuleGetFunction);
    CU_FN(cuda, cuLaunchKernel);
    CU_FN(cuda, cuCtxSynchronize);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CUmodule mod = nullptr;
    CUfunction spin = nullptr;
    CHILD_CHECK(cuModuleLoadData(&mod, "x") == CUDA_SUCCESS && cuModuleGetFunction(&spin, mod, "spin") == CUDA_SUCCESS);
    void* nvml = test::openLib("libnvidia-ml.so.1");
    NVML_FN(nvml, nvmlInit_v2);
    NVML_FN(nvml, nvmlDeviceGetHandleByIndex_v2);
    NVML_FN(nvml, nvmlDeviceGetProcessUtilization);
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    nvmlDevice_t d = nullptr;
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
    uint64_t us = 100000;
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    unsigned n = 0;
    CHILD_CHECK(nvmlDeviceGetProcessUtilization(d, nullptr, &n, 0) == NVML_SUCCESS && n == 1);
    nvmlProcessUtilizationSample_t s[2]{};
    n = 2;
    CHILD_CHECK(nvmlDeviceGetProcessUtilization(d, s, &n, 0) == NVML_SUCCESS && n == 1);
    CHILD_CHECK(s[0].pid == static_cast<unsigned>(getpid()) && s[0].smUtil >= 9 && s[0].smUtil <= 11);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
