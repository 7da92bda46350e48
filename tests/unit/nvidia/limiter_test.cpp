#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "limiter.h"
#include "nvidia_test_support.h"
#include "vgpu/limiter_contract.h"
#ifdef VGPU_HAVE_LIMITER_CONFIG
#include "vgpu/limiter_config.h"
#endif

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

const std::string kGpu0 = "GPU-11111111-0000-0000-0000-000000000000";
const std::string kGpu1 = "GPU-22222222-0000-0000-0000-000000000000";

ContainerGrant grantOf(const TempDir& dir, std::vector<DeviceGrant> devices, Annotations annotations = {}) {
  ContainerGrant g;
  g.container = {"pod-uid-1", "train"};
  g.podNamespace = "ml";
  g.podName = "trainer";
  g.devices = std::move(devices);
  g.hostDir = dir.path().string();
  g.podAnnotations = std::move(annotations);
  return g;
}

DeviceGrant dev(const std::string& id, std::uint64_t memoryMiB, std::uint32_t compute, int index = 0) {
  return {"nvidia", id, index, memoryMiB, compute, 0};
}

Status supported() { return {}; }
Status unsupported() { return makeError("the NVIDIA driver's NVML has no nvmlDeviceSetMemoryLimits_v1"); }

NvidiaLimiter limiter(LimiterSettings s = {}, std::function<Status()> probe = unsupported) {
  return NvidiaLimiter(std::move(s), std::move(probe));
}

bool hasMount(const ContainerSpec& spec, const std::string& containerPath) {
  for (const auto& m : spec.mounts)
    if (m.containerPath == containerPath) return true;
  return false;
}

TEST(NvidiaLimiter, GivesASingleGpuContainerItsUuidLimitsAndLibvgpu) {
  TempDir dir;
  auto l = limiter();
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30, 3)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const std::map<std::string, std::string> env{
      {"NVIDIA_VISIBLE_DEVICES", kGpu0},
      {"CUDA_DEVICE_MEMORY_LIMIT_0", "10000m"},
      {"CUDA_DEVICE_SM_LIMIT_0", "30"},
      {"CUDA_DEVICE_SM_LIMIT", "30"},
      {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/var/run/vgpu/shared-region"},
      {"GPU_CORE_UTILIZATION_POLICY", "default"}};
  EXPECT_EQ(spec->env, env);
  const std::vector<Mount> mounts{
      {(dir.path() / "shared" / "shared-region").string(), "/var/run/vgpu/shared-region", false},
      {(dir.path() / "limits.env").string(), "/etc/vgpu/limits.env", true},
      {"/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", true},
      {"/usr/local/vgpu/ld.so.preload", "/etc/ld.so.preload", true}};
  EXPECT_EQ(spec->mounts, mounts);
  EXPECT_TRUE(spec->devices.empty());
}

// A MIG device is the container's GPU 0: the toolkit mounts it by its MIG UUID and libvgpu.so
// splits its memory further.
TEST(NvidiaLimiter, PointsLibvgpuAtAMigDevice) {
  TempDir dir;
  auto l = limiter();
  const std::string mig = "MIG-3c6b1f7c-0f4e-4a8e-9d2c-3a5b01010900";
  auto spec = l.containerSpec(grantOf(dir, {dev(mig, 3000, 50, 0)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env.at("NVIDIA_VISIBLE_DEVICES"), mig);
  EXPECT_EQ(spec->env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(spec->env.at("CUDA_DEVICE_SM_LIMIT_0"), "50");
}

TEST(NvidiaLimiter, PassesTheTaskPriorityToLibvgpu) {
  TempDir dir;
  auto l = limiter();
  DeviceGrant low = dev(kGpu0, 1000, 10);
  low.priority = 1;
  auto spec = l.containerSpec(grantOf(dir, {low}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env.at("CUDA_TASK_PRIORITY"), "1");
}

// The node's activity board: every container reads it, only a high-priority one (0) writes it.
TEST(NvidiaLimiter, MountsTheActivityBoardWritableOnlyForHighPriorityTenants) {
  TempDir dir, board;
  LimiterSettings s;
  s.activityBoardHostPath = (board.path() / "activity").string();
  auto l = limiter(s);
  for (int priority : {0, 1, -1}) {
    DeviceGrant d = dev(kGpu0, 1000, 10);
    d.priority = priority;
    auto spec = l.containerSpec(grantOf(dir, {d}));
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->env.at("VGPU_ACTIVITY_BOARD"), "/var/run/vgpu-board");
    EXPECT_THAT(spec->mounts, ::testing::Contains(Mount{s.activityBoardHostPath, "/var/run/vgpu-board", priority != 0}))
        << priority;
  }
  struct stat st{};
  ASSERT_EQ(stat(s.activityBoardHostPath.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777u);  // whatever user the container runs as
  // Without a board folder configured, nothing is mounted and priorities are not acted on.
  auto plain = limiter().containerSpec(grantOf(dir, {dev(kGpu0, 1000, 10)}));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(hasMount(*plain, "/var/run/vgpu-board"));
  EXPECT_EQ(plain->env.count("VGPU_ACTIVITY_BOARD"), 0u);
}

TEST(NvidiaLimiter, IndexesLimitsByTheContainersOwnOrdinalsForSeveralGpus) {
  TempDir dir;
  auto l = limiter();
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu1, 20000, 50, 5), dev(kGpu0, 30000, 50, 2)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["NVIDIA_VISIBLE_DEVICES"], kGpu1 + "," + kGpu0);
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "20000m");
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_1"], "30000m");
  EXPECT_EQ(spec->env["CUDA_DEVICE_SM_LIMIT_1"], "50");
  EXPECT_FALSE(spec->env.contains("CUDA_DEVICE_MEMORY_LIMIT_5"));
}

TEST(NvidiaLimiter, WritesTheLimitsFileReadOnlyAndOutsideTheWritableMount) {
  TempDir dir;
  auto l = limiter();
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const auto file = dir.path() / "limits.env";
  const std::string text = testing::readFile(file);
  EXPECT_THAT(text, HasSubstr("\nCUDA_DEVICE_MEMORY_LIMIT_0=10000m\n"));
  EXPECT_THAT(text, HasSubstr("\nCUDA_DEVICE_SM_LIMIT=30\n"));
  EXPECT_THAT(text, Not(HasSubstr("NVIDIA_VISIBLE_DEVICES")));
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  ASSERT_EQ(stat((dir.path() / "shared").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  for (const auto& m : spec->mounts) {
    if (!m.readOnly) {
      EXPECT_NE(m.hostPath, dir.path().string()) << "the container could rewrite its limits";
    }
  }
}

#ifdef VGPU_HAVE_LIMITER_CONFIG
// Issue 26: with no core policy configured the key was left out of the file, so the
// container's GPU_CORE_UTILIZATION_POLICY=disable turned throttling off.
TEST(NvidiaLimiterSecurity, TheEnvironmentCannotTurnTheComputeLimitOff) {
  TempDir dir;
  auto l = limiter();  // no corePolicy set by the operator
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(testing::readFile(dir.path() / "limits.env"), HasSubstr("\nGPU_CORE_UTILIZATION_POLICY=default\n"));
  auto config = loadLimiterConfig(
      [](const char* name) -> const char* {
        return std::string(name) == "GPU_CORE_UTILIZATION_POLICY" ? "disable" : nullptr;
      },
      (dir.path() / "limits.env").c_str());
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->corePolicy, CorePolicy::kDefault);
  EXPECT_EQ(config->devices[0].smPercent, 30u);
}

// The region is the tenant's to write; what libvgpu.so needs to trust comes from the
// read-only file: the region the agent made (by inode) and the measured context overhead.
TEST(NvidiaLimiterSecurity, TheRegionsInodeAndTheContextOverheadAreInTheReadOnlyFile) {
  TempDir dir;
  LimiterSettings s;
  s.contextOverheadMiB = 300;
  auto l = limiter(s);
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "shared" / "shared-region").c_str(), &st), 0) << "the agent made the region";
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  const std::string text = testing::readFile(dir.path() / "limits.env");
  EXPECT_THAT(text, HasSubstr("\nVGPU_REGION_INODE=" + std::to_string(st.st_ino) + "\n"));
  auto config = loadLimiterConfig([](const char*) -> const char* { return nullptr; }, (dir.path() / "limits.env").c_str());
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->contextOverhead, 300ull << 20);
  EXPECT_EQ(spec->env.count("VGPU_REGION_INODE"), 0u) << "the file's alone";
}

TEST(NvidiaLimiter, LimitsFileIsWhatLibvgpuReads) {
  TempDir dir;
  LimiterSettings s;
  s.memoryScaling = 1.5;
  s.corePolicy = "force";
  auto l = limiter(s);
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30), dev(kGpu1, 12000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  // A process that clears its environment still gets the limits: the file wins.
  auto config = loadLimiterConfig([](const char*) -> const char* { return nullptr; },
                                  (dir.path() / "limits.env").c_str());
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->devices[0].memoryBytes, 10000ull << 20);
  EXPECT_EQ(config->devices[1].memoryBytes, 12000ull << 20);
  EXPECT_EQ(config->devices[0].smPercent, 30u);
  EXPECT_EQ(config->devices[1].smPercent, 30u);
  EXPECT_EQ(config->regionPath, "/var/run/vgpu/shared-region");
  EXPECT_TRUE(config->oversubscribe);
  EXPECT_EQ(config->corePolicy, CorePolicy::kForce);
}
#endif

TEST(NvidiaLimiter, OversubscribedMemoryLetsLibvgpuSpillToManagedMemory) {
  TempDir dir;
  LimiterSettings s;
  s.memoryScaling = 2.0;
  auto l = limiter(s);
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 100000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["CUDA_OVERSUBSCRIBE"], "true");
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "100000m");
  EXPECT_THAT(testing::readFile(dir.path() / "limits.env"), HasSubstr("CUDA_OVERSUBSCRIBE=true"));

  TempDir plain;
  auto l2 = limiter();
  auto spec2 = l2.containerSpec(grantOf(plain, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec2.ok());
  EXPECT_FALSE(spec2->env.contains("CUDA_OVERSUBSCRIBE"));
}

constexpr const char* kCdiKind = "k8s.device-plugin.nvidia.com/gpu";

TEST(NvidiaLimiter, DriverModeCapsMemoryInTheKernelAndPreloadsOnlyForCompute) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kDriver;
  s.cdiKind = kCdiKind;
  auto l = limiter(s, supported);
  TempDir slice;
  auto spec = l.containerSpec(grantOf(slice, {dev(kGpu0, 10000, 30), dev(kGpu1, 8000, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["NVIDIA_GPU_MEMORY_REQUEST"], "8000");
  EXPECT_EQ(spec->env["NVIDIA_GPU_MEMORY_LIMIT"], "8000");
  EXPECT_FALSE(spec->env.contains("CUDA_DEVICE_MEMORY_LIMIT_0"));
  EXPECT_EQ(spec->env["CUDA_DEVICE_SM_LIMIT"], "30");
  EXPECT_TRUE(hasMount(*spec, "/etc/ld.so.preload"));  // compute still needs libvgpu.so

  TempDir whole;
  auto wholeSpec = l.containerSpec(grantOf(whole, {dev(kGpu0, 81920, 100)}));
  ASSERT_TRUE(wholeSpec.ok()) << wholeSpec.error().message;
  EXPECT_EQ(wholeSpec->env["NVIDIA_GPU_MEMORY_LIMIT"], "81920");
  EXPECT_FALSE(hasMount(*wholeSpec, "/etc/ld.so.preload"));
  EXPECT_FALSE(hasMount(*wholeSpec, "/usr/local/vgpu/libvgpu.so"));
}

// vgpu-cdi-hook (issue 40): the spec carries a createContainer hook with each GPU's slice;
// libvgpu.so keeps its own memory limit beside the driver's and stays preloaded.
TEST(NvidiaLimiter, WithTheVgpuHookTheContainerGetsACreateContainerHookAndLibvgpuToo) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kDriver;
  s.cdiHookPath = "/usr/local/vgpu/vgpu-cdi-hook";
  s.driverSoftLimit = "hard";
  auto l = limiter(s, supported);
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 100), dev(kGpu1, 8000, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->hooks.size(), 1u);
  EXPECT_EQ(spec->hooks[0].hookName, "createContainer");
  EXPECT_EQ(spec->hooks[0].path, "/usr/local/vgpu/vgpu-cdi-hook");
  EXPECT_EQ(spec->hooks[0].args,
            (std::vector<std::string>{"vgpu-cdi-hook", "memory-limits", "--device", std::string(kGpu0) + "=10000",
                                      "--device", std::string(kGpu1) + "=8000", "--soft-limit", "hard",
                                      "--on-failure", "fail"}));
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "10000m");
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_1"], "8000m");
  EXPECT_FALSE(spec->env.contains("NVIDIA_GPU_MEMORY_LIMIT"));  // not the toolkit's hook
  EXPECT_TRUE(hasMount(*spec, "/etc/ld.so.preload"));
  EXPECT_TRUE(spec->annotations.empty());
  EXPECT_EQ(spec->podAnnotations.at(kMemoryEnforcerAnnotation), "driver");
  EXPECT_THAT(spec->notices[0].message, HasSubstr("per-cgroup cap vgpu-cdi-hook sets"));

  // auto: a hook that fails only warns (libvgpu.so holds memory then).
  s.memory = MemoryEnforcement::kAuto;
  auto a = limiter(s, supported);
  TempDir dir2;
  auto autoSpec = a.containerSpec(grantOf(dir2, {dev(kGpu0, 10000, 100)}));
  ASSERT_TRUE(autoSpec.ok());
  ASSERT_EQ(autoSpec->hooks.size(), 1u);
  EXPECT_EQ(autoSpec->hooks[0].args.back(), "preload-only");
}

// Older drivers and MIG devices keep today's behaviour: no hook, libvgpu.so alone.
TEST(NvidiaLimiter, WithTheVgpuHookOlderDriversAndMigDevicesKeepLibvgpuAlone) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kAuto;
  s.cdiHookPath = "/usr/local/vgpu/vgpu-cdi-hook";
  auto older = limiter(s, unsupported);
  TempDir dir;
  auto spec = older.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 100)}));
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->hooks.empty());
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "10000m");
  EXPECT_EQ(spec->podAnnotations.at(kMemoryEnforcerAnnotation), "libvgpu.so");

  auto newer = limiter(s, supported);
  TempDir dir2;
  auto mig = newer.containerSpec(grantOf(dir2, {dev("MIG-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20", 5000, 100)}));
  ASSERT_TRUE(mig.ok());
  EXPECT_TRUE(mig->hooks.empty());
  EXPECT_EQ(mig->podAnnotations.at(kMemoryEnforcerAnnotation), "libvgpu.so");

  s.memory = MemoryEnforcement::kDriver;
  auto refused = limiter(s, unsupported);
  TempDir dir3;
  auto r = refused.containerSpec(grantOf(dir3, {dev(kGpu0, 10000, 100)}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("nvmlDeviceSetMemoryLimits_v1"));
}

TEST(NvidiaLimiter, AsksForCdiDevicesWhenAKindIsConfigured) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kDriver;
  s.cdiKind = "k8s.device-plugin.nvidia.com/gpu";
  auto l = limiter(s, supported);
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 100), dev(kGpu1, 10000, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->annotations, (std::map<std::string, std::string>{
                                   {"cdi.k8s.io/vgpu-nvidia", "k8s.device-plugin.nvidia.com/gpu=" + kGpu0 +
                                                                  ",k8s.device-plugin.nvidia.com/gpu=" + kGpu1}}));

  auto plain = limiter();
  TempDir other;
  auto noCdi = plain.containerSpec(grantOf(other, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(noCdi.ok());
  EXPECT_TRUE(noCdi->annotations.empty());
}

// Memory is always enforced by someone: without a CDI kind nothing would apply the driver's
// cap, so auto mode leaves memory to libvgpu.so even where the driver could cap it, and the
// pod says which one enforces it.
TEST(NvidiaLimiter, WithoutACdiKindMemoryStaysLibvgpusEvenWhereTheDriverCouldCapIt) {
  int asked = 0;
  LimiterSettings s;
  s.memory = MemoryEnforcement::kAuto;
  auto l = limiter(s, [&] {
    ++asked;
    return supported();
  });
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "10000m");
  EXPECT_FALSE(spec->env.contains("NVIDIA_GPU_MEMORY_LIMIT"));
  EXPECT_TRUE(hasMount(*spec, "/etc/ld.so.preload"));  // a whole GPU, but its memory is limited
  EXPECT_EQ(spec->podAnnotations.at(kMemoryEnforcerAnnotation), "libvgpu.so");
  ASSERT_EQ(spec->notices.size(), 1u);
  EXPECT_EQ(spec->notices[0].reason, "VgpuMemoryEnforcer");
  EXPECT_EQ(spec->notices[0].message, "memory limit (10000 MiB on " + std::string(kGpu0) +
                                          ") enforced by libvgpu.so in the container");
  EXPECT_EQ(asked, 0);

  LimiterSettings driver;
  driver.memory = MemoryEnforcement::kDriver;  // (parseOptions refuses this without a kind)
  auto refused = limiter(driver, supported).containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("no cdiKind"));

  s.cdiKind = kCdiKind;
  auto withKind = limiter(s, supported);
  TempDir other;
  auto capped = withKind.containerSpec(grantOf(other, {dev(kGpu0, 10000, 100)}));
  ASSERT_TRUE(capped.ok()) << capped.error().message;
  EXPECT_EQ(capped->env["NVIDIA_GPU_MEMORY_LIMIT"], "10000");
  EXPECT_EQ(capped->podAnnotations.at(kMemoryEnforcerAnnotation), "driver");
  ASSERT_EQ(capped->notices.size(), 1u);
  EXPECT_THAT(capped->notices[0].message, HasSubstr("enforced by the NVIDIA driver, a cap applied through the CDI kind"));
}

TEST(NvidiaLimiter, AWholeGpuUnderCoreScalingIsNotThrottled) {
  // With coreScaling 2 a container that wants the GPU alone is granted all 200 units.
  TempDir dir;
  auto l = limiter();
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 81920, 200)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["CUDA_DEVICE_SM_LIMIT"], "100");
  EXPECT_EQ(spec->env["CUDA_DEVICE_SM_LIMIT_0"], "100");
}

TEST(NvidiaLimiter, DriverModeWithOversubscriptionProtectsOnlyThePhysicalShare) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kDriver;
  s.cdiKind = kCdiKind;
  s.memoryScaling = 2.0;
  auto l = limiter(s, supported);
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 0)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env["NVIDIA_GPU_MEMORY_REQUEST"], "5000");
  EXPECT_EQ(spec->env["NVIDIA_GPU_MEMORY_LIMIT"], "10000");
  EXPECT_FALSE(spec->env.contains("CUDA_OVERSUBSCRIBE"));
}

TEST(NvidiaLimiter, DriverModeAskedForButUnsupportedIsRefusedSayingWhy) {
  LimiterSettings s;
  s.memory = MemoryEnforcement::kDriver;
  s.cdiKind = kCdiKind;
  auto l = limiter(s, unsupported);
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("memoryEnforcement is driver"));
  EXPECT_THAT(spec.error().message, HasSubstr("nvmlDeviceSetMemoryLimits_v1"));
  EXPECT_THAT(spec.error().message, HasSubstr("ml/trainer"));
}

TEST(NvidiaLimiter, AutoModeUsesTheDriverCapOnlyWhereSupportedAndAsksOnce) {
  int asked = 0;
  LimiterSettings s;
  s.memory = MemoryEnforcement::kAuto;
  s.cdiKind = kCdiKind;
  auto without = limiter(s, [&] {
    ++asked;
    return unsupported();
  });
  TempDir a, b;
  auto first = without.containerSpec(grantOf(a, {dev(kGpu0, 10000, 30)}));
  auto second = without.containerSpec(grantOf(b, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "10000m");
  EXPECT_FALSE(first->env.contains("NVIDIA_GPU_MEMORY_LIMIT"));
  EXPECT_EQ(asked, 1);

  auto with = limiter(s, supported);
  TempDir c;
  auto spec = with.containerSpec(grantOf(c, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->env["NVIDIA_GPU_MEMORY_LIMIT"], "10000");
  EXPECT_FALSE(spec->env.contains("CUDA_DEVICE_MEMORY_LIMIT_0"));
}

TEST(NvidiaLimiter, AContainerThatOptsOutRunsWithoutThePreloadButKeepsItsLimits) {
  LimiterSettings s;
  s.allowOptOut = true;
  auto l = limiter(s);
  const struct {
    const char* annotation;
    bool preloaded;
  } cases[] = {{"train", false}, {"debug, train", false}, {"true", false}, {"*", false}, {"debug", true}, {"", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.annotation);
    TempDir dir;
    auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}, {{kOptOutAnnotation, c.annotation}}));
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(hasMount(*spec, "/etc/ld.so.preload"), c.preloaded);
    EXPECT_EQ(hasMount(*spec, "/usr/local/vgpu/libvgpu.so"), c.preloaded);
    EXPECT_EQ(spec->env["CUDA_DEVICE_MEMORY_LIMIT_0"], "10000m");
    EXPECT_TRUE(hasMount(*spec, "/etc/vgpu/limits.env"));
    // The pod is told when nothing holds the container to its memory.
    ASSERT_EQ(spec->notices.size(), 1u);
    EXPECT_EQ(spec->notices[0].message.find(") NOT enforced: the pod opted out") != std::string::npos, !c.preloaded);
  }
}

// Images and scripts built around HAMi-core read HAMi's names (issue 28): the log level and
// the opt-out mark are set under those too, in the environment only (the limits file takes
// neither, and libvgpu.so ignores CUDA_DISABLE_CONTROL beside it).
TEST(NvidiaLimiter, SetsHamisLogLevelAndOptOutMarkForImagesThatReadThem) {
  LimiterSettings s;
  s.allowOptOut = true;
  s.logLevel = "3";
  auto l = limiter(s);
  TempDir optedOut, limited;
  auto out = l.containerSpec(grantOf(optedOut, {dev(kGpu0, 10000, 30)}, {{kOptOutAnnotation, "train"}}));
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->env["LIBCUDA_LOG_LEVEL"], "3");
  EXPECT_EQ(out->env["CUDA_DISABLE_CONTROL"], "true");
  std::ifstream file(optedOut.path() / "limits.env");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, Not(HasSubstr("CUDA_DISABLE_CONTROL")));
  EXPECT_THAT(text, Not(HasSubstr("LIBCUDA_LOG_LEVEL")));
  auto in = l.containerSpec(grantOf(limited, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ(in->env.count("CUDA_DISABLE_CONTROL"), 0u);
  EXPECT_EQ(limiter().containerSpec(grantOf(limited, {dev(kGpu0, 10000, 30)}))->env.count("LIBCUDA_LOG_LEVEL"), 0u);
}

TEST(NvidiaLimiter, RefusesAnOptOutTheOperatorForbids) {
  auto l = limiter();  // allowOptOut is false unless the operator sets it
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}, {{kOptOutAnnotation, "train"}}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("allowOptOut is false"));
}

TEST(NvidiaLimiter, TakesPathsPolicyAndLogLevelFromSettings) {
  LimiterSettings s;
  s.libvgpuHostPath = "/opt/vgpu/lib/libvgpu.so.1";
  s.libvgpuContainerPath = "/opt/vgpu/libvgpu.so";
  s.ldPreloadHostPath = "/opt/vgpu/ld.so.preload";
  s.corePolicy = "disable";
  s.logLevel = "3";
  auto l = limiter(s);
  TempDir dir;
  auto spec = l.containerSpec(grantOf(dir, {dev(kGpu0, 10000, 30)}));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(spec->mounts, ::testing::Contains(Mount{"/opt/vgpu/lib/libvgpu.so.1", "/opt/vgpu/libvgpu.so", true}));
  EXPECT_THAT(spec->mounts, ::testing::Contains(Mount{"/opt/vgpu/ld.so.preload", "/etc/ld.so.preload", true}));
  EXPECT_EQ(spec->env["GPU_CORE_UTILIZATION_POLICY"], "disable");
  EXPECT_EQ(spec->env["LIBVGPU_LOG_LEVEL"], "3");
}

TEST(NvidiaLimiter, RefusesGrantsItCannotEnforce) {
  TempDir dir;
  std::vector<DeviceGrant> seventeen;
  for (int i = 0; i < 17; ++i) seventeen.push_back(dev("GPU-" + std::to_string(i), 1000, 10, i));
  const struct {
    const char* description;
    ContainerGrant grant;
    const char* mentions;
  } cases[] = {
      {"no devices", grantOf(dir, {}), "was granted no nvidia GPUs"},
      {"17 devices", grantOf(dir, seventeen), "at most 16"},
      {"a comma in an id", grantOf(dir, {dev("GPU-a,GPU-b", 1000, 10)}), "cannot be passed in NVIDIA_VISIBLE_DEVICES"},
      {"the same GPU twice", grantOf(dir, {dev(kGpu0, 1000, 10), dev(kGpu0, 1000, 10)}), "twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    auto l = limiter();
    auto spec = l.containerSpec(c.grant);
    ASSERT_FALSE(spec.ok());
    EXPECT_THAT(spec.error().message, HasSubstr(c.mentions));
  }
  for (const std::string hostDir : {"", "relative/dir", "/nonexistent/vgpu-host-dir"}) {
    auto g = grantOf(dir, {dev(kGpu0, 1000, 10)});
    g.hostDir = hostDir;
    auto l = limiter();
    auto spec = l.containerSpec(g);
    ASSERT_FALSE(spec.ok()) << hostDir;
    EXPECT_THAT(spec.error().message, HasSubstr("host folder"));
  }
}

TEST(NvidiaLimiter, ReleaseAndReconcileRemoveWhatItWrote) {
  TempDir a, b;
  auto l = limiter();
  auto ga = grantOf(a, {dev(kGpu0, 1000, 10)});
  auto gb = grantOf(b, {dev(kGpu1, 1000, 10)});
  gb.container = {"pod-uid-2", "serve"};
  ASSERT_TRUE(l.containerSpec(ga).ok());
  ASSERT_TRUE(l.containerSpec(gb).ok());
  EXPECT_EQ(l.held().size(), 2u);

  ASSERT_TRUE(l.reconcile({gb.container}).ok());
  EXPECT_FALSE(std::filesystem::exists(a.path() / "limits.env"));
  EXPECT_FALSE(std::filesystem::exists(a.path() / "shared"));
  EXPECT_TRUE(std::filesystem::exists(b.path() / "limits.env"));
  EXPECT_EQ(l.held().size(), 1u);

  ASSERT_TRUE(l.release(gb.container).ok());
  ASSERT_TRUE(l.release(gb.container).ok());  // twice, and unknown containers, are fine
  EXPECT_FALSE(std::filesystem::exists(b.path() / "limits.env"));
  EXPECT_TRUE(l.held().empty());
}

TEST(NvidiaLimiter, DetectsTheKernelMemoryCapFromDriverAndCgroupV2) {
  TempDir sys;
  auto noSymbol = kernelMemoryCapSupport(false, sys.path().string());
  ASSERT_FALSE(noSymbol.ok());
  EXPECT_THAT(noSymbol.error().message, HasSubstr("r615"));

  auto noCgroup2 = kernelMemoryCapSupport(true, sys.path().string());
  ASSERT_FALSE(noCgroup2.ok());
  EXPECT_THAT(noCgroup2.error().message, HasSubstr("cgroup v2"));

  sys.write("fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids dmem\n");
  EXPECT_TRUE(kernelMemoryCapSupport(true, sys.path().string()).ok());
}

}  // namespace
}  // namespace vgpu::nvidia
