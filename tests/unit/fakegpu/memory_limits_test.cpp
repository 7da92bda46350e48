// The fake driver's per-cgroup memory limits (R615+): NVML records them per cgroup sysfs path,
// and the fake libcuda refuses what a process of a limited cgroup asks beyond the hard limit.

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "child.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

class FakeGpuCgroupLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = dir_.write("gpus.conf", "gpu memory_mib=1024\ngpu memory_mib=1024\n");
    state_ = dir_.path() + "/state";
    sys_ = dir_.path() + "/sys";
    ns_ = sys_ + "/fs/cgroup/kubepods.slice/pod1.slice/cri-containerd-c1.scope";
    std::filesystem::create_directories(ns_);
    std::filesystem::create_directories(sys_ + "/fs/cgroup/memory/kubepods/pod1/c1");
    v2_ = dir_.write("cgroup-v2", "0::/kubepods.slice/pod1.slice/cri-containerd-c1.scope\n");
    v1_ = dir_.write("cgroup-v1", "5:devices:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n0::/\n");
    outside_ = dir_.write("cgroup-outside", "0::/system.slice/other.service\n");
  }
  std::map<std::string, std::string> env(const std::string& procCgroup = "") const {
    return {{"VGPU_FAKE_GPU_CONFIG", conf_},
            {"VGPU_FAKE_GPU_STATE", state_},
            {"VGPU_FAKE_GPU_SYSFS", sys_},
            {"VGPU_FAKE_GPU_PROC_CGROUP", procCgroup}};
  }
  TempDir dir_;
  std::string conf_, state_, sys_, ns_, v2_, v1_, outside_;
};

#define OPEN_LIMITS()                                                   \
  void* nvml = test::openLib("libnvidia-ml.so.1");                      \
  NVML_FN(nvml, nvmlInit_v2);                                           \
  NVML_FN(nvml, nvmlDeviceGetHandleByIndex_v2);                         \
  NVML_FN(nvml, nvmlDeviceSetMemoryLimits_v1);                          \
  NVML_FN(nvml, nvmlDeviceGetMemoryLimits_v1);                          \
  CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);                           \
  nvmlDevice_t dev0 = nullptr, dev1 = nullptr;                          \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &dev0) == NVML_SUCCESS); \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(1, &dev1) == NVML_SUCCESS)

#define OPEN_CUDA0()                                                   \
  void* cuda = test::openLib("libcuda.so.1");                          \
  CU_FN(cuda, cuInit);                                                 \
  CU_FN(cuda, cuDevicePrimaryCtxRetain);                               \
  CU_FN(cuda, cuCtxSetCurrent);                                        \
  CU_FN(cuda, cuMemAlloc_v2);                                          \
  CU_FN(cuda, cuMemGetInfo_v2);                                        \
  CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);                              \
  CUcontext ctx0 = nullptr;                                            \
  CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx0, 0) == CUDA_SUCCESS);     \
  CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS)

// Sets `hard` MiB (soft half of it) on device 0 for `ns` in a child of its own (root).
int setLimit(const std::string& ns, uint64_t hardMiB) {
  OPEN_LIMITS();
  nvmlSetMemoryLimits_v1_t set{ns.c_str(), hardMiB / 2 * kMiB, hardMiB * kMiB};
  CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &set) == NVML_SUCCESS);
  (void)dev1;
  return 0;
}

TEST_F(FakeGpuCgroupLimits, RecordsLimitsPerDeviceAndCgroupAndClearsThem) {
  auto r = runChild(env(), [this] {
    OPEN_LIMITS();
    nvmlGetMemoryLimits_v1_t got{ns_.c_str(), 1, 1, 1};
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev0, &got) == NVML_SUCCESS);
    CHILD_CHECK(got.softLimit == 0 && got.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX && got.currentUsed == 0);
    nvmlSetMemoryLimits_v1_t set{ns_.c_str(), 100 * kMiB, 300 * kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &set) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev0, &got) == NVML_SUCCESS);
    CHILD_CHECK(got.softLimit == 100 * kMiB && got.hardLimit == 300 * kMiB);
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev1, &got) == NVML_SUCCESS);  // per device
    CHILD_CHECK(got.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    // Clearing: soft 0, hard all ones.
    nvmlSetMemoryLimits_v1_t clear{ns_.c_str(), 0, NVML_DEVICE_MEMORY_LIMIT_MAX};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &clear) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev0, &got) == NVML_SUCCESS);
    CHILD_CHECK(got.softLimit == 0 && got.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    // Bad arguments.
    nvmlSetMemoryLimits_v1_t inverted{ns_.c_str(), 300 * kMiB, 100 * kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &inverted) == NVML_ERROR_INVALID_ARGUMENT);
    nvmlSetMemoryLimits_v1_t relative{"kubepods/x", 0, kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &relative) == NVML_ERROR_INVALID_ARGUMENT);
    nvmlSetMemoryLimits_v1_t none{nullptr, 0, kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &none) == NVML_ERROR_INVALID_ARGUMENT);
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, nullptr) == NVML_ERROR_INVALID_ARGUMENT);
    const std::string missing = sys_ + "/fs/cgroup/no-such";
    nvmlSetMemoryLimits_v1_t gone{missing.c_str(), 0, kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &gone) == NVML_ERROR_NOT_FOUND);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuCgroupLimits, RemovingTheCgroupClearsItsLimits) {
  ASSERT_EQ(runChild(env(), [this] { return setLimit(ns_, 300); }).exitCode, 0);
  std::filesystem::remove(ns_);  // the container is gone
  auto r = runChild(env(), [this] {
    OPEN_LIMITS();
    nvmlGetMemoryLimits_v1_t got{ns_.c_str(), 0, 0, 0};
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev0, &got) == NVML_SUCCESS);
    CHILD_CHECK(got.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuCgroupLimits, OnlyRootMaySetLimits) {
  auto r = runChild(env(), [this] {
    OPEN_LIMITS();
    if (geteuid() == 0) CHILD_CHECK(setgid(65534) == 0 && setuid(65534) == 0);
    nvmlSetMemoryLimits_v1_t set{ns_.c_str(), 0, 300 * kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(dev0, &set) == NVML_ERROR_NO_PERMISSION);
    (void)dev1;
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuCgroupLimits, MigDeviceHandlesAreNotSupported) {
  const std::string conf = dir_.write("mig.conf", "gpu memory_mib=40960 mig=on mig_profiles=a100-40gb\n");
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}, {"VGPU_FAKE_GPU_STATE", dir_.path() + "/mig-state"}}, [this] {
    void* nvml = test::openLib("libnvidia-ml.so.1");
    NVML_FN(nvml, nvmlInit_v2);
    NVML_FN(nvml, nvmlDeviceGetHandleByIndex_v2);
    NVML_FN(nvml, nvmlDeviceCreateGpuInstance);
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceProfileInfo);
    NVML_FN(nvml, nvmlGpuInstanceCreateComputeInstance);
    NVML_FN(nvml, nvmlDeviceGetMigDeviceHandleByIndex);
    NVML_FN(nvml, nvmlDeviceSetMemoryLimits_v1);
    NVML_FN(nvml, nvmlDeviceGetMemoryLimits_v1);
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);
    nvmlDevice_t gpu = nullptr, mig = nullptr;
    CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &gpu) == NVML_SUCCESS);
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    nvmlGpuInstanceProfileInfo_t profile{};
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &profile) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(gpu, profile.id, &gi) == NVML_SUCCESS);
    CHILD_CHECK(nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig) == NVML_SUCCESS);
    nvmlSetMemoryLimits_v1_t set{ns_.c_str(), 0, 300 * kMiB};
    CHILD_CHECK(nvmlDeviceSetMemoryLimits_v1(mig, &set) == NVML_ERROR_NOT_SUPPORTED);
    nvmlGetMemoryLimits_v1_t got{ns_.c_str(), 0, 0, 0};
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(mig, &got) == NVML_ERROR_NOT_SUPPORTED);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// The acceptance scenario of issue 40 in small: a program with no preload, in a limited
// cgroup, gets out-of-memory at the hard limit, whatever the device still has.
void expectAllocationsStopAtTheLimit(const std::map<std::string, std::string>& env, const std::string& ns,
                                     const std::map<std::string, std::string>& outsideEnv) {
  ASSERT_EQ(runChild(env, [&ns] { return setLimit(ns, 256); }).exitCode, 0);
  auto inside = runChild(env, [&ns] {
    OPEN_CUDA0();
    size_t freeB = 0, total = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && total == 256 * kMiB && freeB == 256 * kMiB);
    CUdeviceptr a = 0, b = 0;
    CHILD_CHECK(cuMemAlloc_v2(&a, 200 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAlloc_v2(&b, 100 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemAlloc_v2(&b, 56 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAlloc_v2(&b, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && freeB == 0);
    // NVML in the cgroup sees the same; the limit's currentUsed counts the cgroup's processes.
    OPEN_LIMITS();
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo);
    nvmlMemory_t mem{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev0, &mem) == NVML_SUCCESS && mem.total == 256 * kMiB && mem.free == 0);
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(dev1, &mem) == NVML_SUCCESS && mem.total == 1024 * kMiB);
    nvmlGetMemoryLimits_v1_t got{ns.c_str(), 0, 0, 0};
    CHILD_CHECK(nvmlDeviceGetMemoryLimits_v1(dev0, &got) == NVML_SUCCESS && got.currentUsed == 256 * kMiB);
    return 0;
  });
  EXPECT_EQ(inside.exitCode, 0) << inside.stderrText;
  auto outside = runChild(outsideEnv, [] {
    OPEN_CUDA0();
    CUdeviceptr a = 0;
    CHILD_CHECK(cuMemAlloc_v2(&a, 700 * kMiB) == CUDA_SUCCESS);  // another cgroup: the device's memory
    return 0;
  });
  EXPECT_EQ(outside.exitCode, 0) << outside.stderrText;
}

TEST_F(FakeGpuCgroupLimits, AllocationsStopAtTheHardLimitOfACgroupV2) {
  expectAllocationsStopAtTheLimit(env(v2_), ns_, env(outside_));
}

TEST_F(FakeGpuCgroupLimits, AllocationsStopAtTheHardLimitOfACgroupV1MemoryController) {
  expectAllocationsStopAtTheLimit(env(v1_), sys_ + "/fs/cgroup/memory/kubepods/pod1/c1", env(outside_));
}

TEST_F(FakeGpuCgroupLimits, AProcessInACgroupBelowTheLimitedOneIsLimitedToo) {
  std::filesystem::create_directories(ns_ + "/sub");
  const std::string below = dir_.write("cgroup-below", "0::/kubepods.slice/pod1.slice/cri-containerd-c1.scope/sub\n");
  ASSERT_EQ(runChild(env(), [this] { return setLimit(ns_, 64); }).exitCode, 0);
  auto r = runChild(env(below), [] {
    OPEN_CUDA0();
    CUdeviceptr a = 0;
    CHILD_CHECK(cuMemAlloc_v2(&a, 65 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemAlloc_v2(&a, 64 * kMiB) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// Without VGPU_FAKE_GPU_PROC_CGROUP / VGPU_FAKE_GPU_SYSFS: the process's real cgroup, as read
// from /proc/self/cgroup, under /sys.
TEST_F(FakeGpuCgroupLimits, FindsTheProcessOwnCgroupInProcSelfCgroup) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, memory, unified;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) unified = line.substr(3);
    if (auto at = line.find(":memory:"); at != std::string::npos) memory = line.substr(at + 8);
  }
  std::string ns = !memory.empty() ? "/sys/fs/cgroup/memory" + memory : "/sys/fs/cgroup" + unified;
  while (ns.size() > 1 && ns.back() == '/') ns.pop_back();
  if (access(ns.c_str(), F_OK) != 0) GTEST_SKIP() << "this machine's cgroup " << ns << " is not in /sys";
  const std::map<std::string, std::string> own{{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", state_}};
  expectAllocationsStopAtTheLimit(own, ns, env(outside_));
}

TEST(FakeGpuOlderDriver, NvmlWithoutTheMemoryLimitCallsExportsNeither) {
  for (const std::string dir : {VGPU_FAKE_GPU_NO_MEMLIMITS_LIB_DIR, VGPU_FAKE_GPU_R470_LIB_DIR}) {
    void* lib = dlopen((dir + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    EXPECT_NE(dlsym(lib, "nvmlInit_v2"), nullptr) << dir;
    EXPECT_EQ(dlsym(lib, "nvmlDeviceSetMemoryLimits_v1"), nullptr) << dir;
    EXPECT_EQ(dlsym(lib, "nvmlDeviceGetMemoryLimits_v1"), nullptr) << dir;
    dlclose(lib);
  }
}

}  // namespace
}  // namespace vgpu::fakegpu
