// The backend as the daemons see it: options, and libvgpu-backend-nvidia.so through the real
// loader (dlopen, the C table, the adapter), against the fake nvidia-smi.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nvidia_backend.h"
#include "nvidia_test_support.h"
#include "vgpu/backend_loader.h"
#include "vgpu/c_views.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::params;
using testing::setEnv;
using testing::TempDir;

const std::string kH100 = "GPU-11111111-1111-1111-1111-111111111111";
const std::string kA100 = "GPU-22222222-2222-2222-2222-222222222222";

std::map<std::string, std::string> fakeOptions() {
  return {{"nvidiaSmiPath", VGPU_FAKE_NVIDIA_SMI}, {"nvmlLibrary", "/nonexistent/libnvidia-ml.so.1"}};
}

Result<std::unique_ptr<Backend>> load(const BackendParams& p) {
  return loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), p);
}

TEST(NvidiaOptions, DefaultsAreTheDocumentedOnes) {
  auto o = parseOptions(params(), nullptr, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->discovery.source, DiscoverySource::kAuto);
  EXPECT_EQ(o->discovery.nvmlLibrary, "libnvidia-ml.so.1");
  EXPECT_EQ(o->discovery.nvidiaSmiPath, "nvidia-smi");
  EXPECT_EQ(o->discovery.nvidiaSmiTimeout, std::chrono::seconds(10));
  EXPECT_EQ(o->discovery.sysRoot, "/sys");
  EXPECT_EQ(o->discovery.splitCount, 10u);
  EXPECT_EQ(o->limiter.memory, MemoryEnforcement::kLibvgpu);
  EXPECT_EQ(o->limiter.libvgpuHostPath, "/usr/local/vgpu/libvgpu.so");
  EXPECT_EQ(o->limiter.ldPreloadHostPath, "/usr/local/vgpu/ld.so.preload");
  EXPECT_FALSE(o->limiter.allowOptOut);  // opting out of the limits needs the operator's consent
  EXPECT_TRUE(o->limiter.cdiKind.empty());
  EXPECT_TRUE(o->limiter.activityBoardHostPath.empty());  // priorities not acted on unless configured
  EXPECT_TRUE(o->discovery.health.enabled);
}

TEST(NvidiaOptions, ReadsEveryOption) {
  BackendParams p = params({{"discovery", "nvidia-smi"},
                            {"nvmlLibrary", "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1"},
                            {"nvidiaSmiPath", "/run/nvidia/driver/usr/bin/nvidia-smi"},
                            {"nvidiaSmiTimeout", "500ms"},
                            {"hostSysRoot", "/host/sys"},
                            {"memoryEnforcement", "auto"},
                            {"libvgpuPath", "/opt/vgpu/libvgpu.so"},
                            {"libvgpuContainerPath", "/usr/lib/vgpu/libvgpu.so"},
                            {"ldPreloadPath", "/opt/vgpu/ld.so.preload"},
                            {"corePolicy", "force"},
                            {"logLevel", "4"},
                            {"allowOptOut", "true"},
                            {"cdiKind", "k8s.device-plugin.nvidia.com/gpu"},
                            {"activityBoardPath", "/var/lib/vgpu/activity-board"}});
  p.settings.memoryScaling = 2.0;
  p.settings.coreScaling = 1.5;
  p.settings.splitCount = 3;
  auto o = parseOptions(p, nullptr, nullptr);
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->discovery.source, DiscoverySource::kNvidiaSmi);
  EXPECT_EQ(o->discovery.nvmlLibrary, "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1");
  EXPECT_EQ(o->discovery.nvidiaSmiPath, "/run/nvidia/driver/usr/bin/nvidia-smi");
  EXPECT_EQ(o->discovery.nvidiaSmiTimeout, std::chrono::milliseconds(500));
  EXPECT_EQ(o->discovery.sysRoot, "/host/sys");
  EXPECT_EQ(o->discovery.splitCount, 3u);
  EXPECT_EQ(o->discovery.memoryScaling, 2.0);
  EXPECT_EQ(o->discovery.coreScaling, 1.5);
  EXPECT_EQ(o->limiter.memoryScaling, 2.0);
  EXPECT_EQ(o->limiter.memory, MemoryEnforcement::kAuto);
  EXPECT_EQ(o->limiter.activityBoardHostPath, "/var/lib/vgpu/activity-board");
  EXPECT_EQ(o->limiter.libvgpuHostPath, "/opt/vgpu/libvgpu.so");
  EXPECT_EQ(o->limiter.libvgpuContainerPath, "/usr/lib/vgpu/libvgpu.so");
  EXPECT_EQ(o->limiter.ldPreloadHostPath, "/opt/vgpu/ld.so.preload");
  EXPECT_EQ(o->limiter.corePolicy, "force");
  EXPECT_EQ(o->limiter.logLevel, "4");
  EXPECT_TRUE(o->limiter.allowOptOut);
  EXPECT_EQ(o->limiter.cdiKind, "k8s.device-plugin.nvidia.com/gpu");
}

// The driver's memory cap reaches a container only through a CDI hook, vgpu-cdi-hook's or
// that of cdiKind's spec: "driver" with neither would leave memory to nobody, so it is
// refused at start.
TEST(NvidiaOptions, DriverMemoryEnforcementNeedsACdiKindOrTheHook) {
  auto o = parseOptions(params({{"memoryEnforcement", "driver"}}), nullptr, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message, HasSubstr("backends.nvidia.options.memoryEnforcement is driver, which needs "
                                           "backends.nvidia.options.cdiHookPath (vgpu-cdi-hook on the host) or "
                                           "backends.nvidia.options.cdiKind"));
  auto hooked = parseOptions(params({{"memoryEnforcement", "driver"}, {"cdiHookPath", "/usr/local/vgpu/vgpu-cdi-hook"},
                                     {"driverSoftLimit", "hard"}}),
                             nullptr, nullptr);
  ASSERT_TRUE(hooked.ok()) << hooked.error().message;
  EXPECT_EQ(hooked->limiter.cdiHookPath, "/usr/local/vgpu/vgpu-cdi-hook");
  EXPECT_EQ(hooked->limiter.driverSoftLimit, "hard");
  EXPECT_THAT(parseOptions(params({{"cdiHookPath", "vgpu-cdi-hook"}}), nullptr, nullptr).error().message,
              HasSubstr("expected an absolute path"));
  EXPECT_THAT(parseOptions(params({{"driverSoftLimit", "half"}}), nullptr, nullptr).error().message,
              HasSubstr("driverSoftLimit: expected none or hard"));
  EXPECT_TRUE(parseOptions(params({{"memoryEnforcement", "driver"}, {"cdiKind", "k8s.device-plugin.nvidia.com/gpu"}}),
                           nullptr, nullptr)
                  .ok());
  EXPECT_TRUE(parseOptions(params({{"memoryEnforcement", "auto"}}), nullptr, nullptr).ok());
}

TEST(NvidiaOptions, RefusesUnknownKeysAndBadValuesNamingTheKey) {
  const struct {
    std::map<std::string, std::string> options;
    const char* mentions;
  } cases[] = {
      {{{"nvmlPath", "x"}}, "backends.nvidia.options.nvmlPath: unknown option"},
      {{{"discovery", "dcgm"}}, "backends.nvidia.options.discovery: expected auto, nvml or nvidia-smi, got \"dcgm\""},
      {{{"memoryEnforcement", "kernel"}}, "backends.nvidia.options.memoryEnforcement: expected libvgpu, driver or auto"},
      {{{"nvidiaSmiTimeout", "10"}}, "backends.nvidia.options.nvidiaSmiTimeout: expected a duration"},
      {{{"nvidiaSmiTimeout", "0s"}}, "backends.nvidia.options.nvidiaSmiTimeout"},
      {{{"libvgpuPath", "libvgpu.so"}}, "backends.nvidia.options.libvgpuPath: expected an absolute path"},
      {{{"hostSysRoot", ""}}, "backends.nvidia.options.hostSysRoot: expected a path"},
      {{{"corePolicy", "strict"}}, "backends.nvidia.options.corePolicy"},
      {{{"logLevel", "9"}}, "backends.nvidia.options.logLevel"},
      {{{"allowOptOut", "yes"}}, "backends.nvidia.options.allowOptOut: expected true or false"},
      {{{"cdiKind", "nvidia.com"}}, "backends.nvidia.options.cdiKind: expected a CDI kind"},
      {{{"cdiKind", "nvidia.com/gpu=all"}}, "backends.nvidia.options.cdiKind"},
      {{{"migStrategy", "auto"}}, "backends.nvidia.options.migStrategy: expected none, single or mixed"},
      {{{"migStrategy", "mixed"}}, "migStrategy is mixed, which needs backends.nvidia.options.migProfiles"},
      {{{"migProfiles", "1g.5gb"}}, "migProfiles names the resources of migStrategy mixed, but migStrategy is none"},
      {{{"migStrategy", "mixed"}, {"migProfiles", "1g.5gb,3G 20GB"}}, "backends.nvidia.options.migProfiles: expected"},
      {{{"migManaged", "0,1"}}, "backends.nvidia.options.migManaged: expected all, or GPU UUIDs"},
      {{{"migStateDir", "mig"}}, "backends.nvidia.options.migStateDir: expected an absolute path"},
      {{{"migAllowedProfiles", ","}}, "backends.nvidia.options.migAllowedProfiles: expected MIG profile names"},
  };
  for (const auto& c : cases) {
    auto o = parseOptions(params(c.options), nullptr, nullptr);
    ASSERT_FALSE(o.ok()) << c.mentions;
    EXPECT_THAT(o.error().message, HasSubstr(c.mentions));
  }
  BackendParams scaled = params();
  scaled.settings.memoryScaling = 0.0;
  auto o = parseOptions(scaled, nullptr, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message, HasSubstr("backends.nvidia.memoryScaling"));
}

TEST(NvidiaOptions, NamesTheSectionItWasLoadedAs) {
  BackendParams p = params({{"bogus", "1"}});
  p.name = "nvidia-lab";
  auto o = parseOptions(p, nullptr, nullptr);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message, HasSubstr("backends.nvidia-lab.options.bogus"));
}

TEST(NvidiaBackendLibrary, LoadsThroughTheLoaderWithAllThreeInterfaces) {
  auto backend = load(params(fakeOptions()));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  EXPECT_EQ((*backend)->name(), "nvidia");
  EXPECT_NE((*backend)->discovery(), nullptr);
  EXPECT_NE((*backend)->limiter(), nullptr);
  ASSERT_EQ((*backend)->allocator().resources().size(), 5u);
  EXPECT_EQ((*backend)->allocator().resources()[0].name, "nvidia.com/gpu");
  EXPECT_TRUE((*backend)->allocator().resources()[0].advertised);
}

// nvidia.com/disable-control lifts a container's limits: the webhook asks the backend
// (admissionDefaults) and it refuses unless the operator allowed opting out.
TEST(NvidiaBackendLibrary, AdmissionRefusesAnOptOutWithoutTheOperatorsConsent) {
  ContainerResources c;
  c.name = "train";
  c.limits = {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 4000}};
  auto byDefault = load(params(fakeOptions()));
  ASSERT_TRUE(byDefault.ok()) << byDefault.error().message;
  for (const char* value : {"train", "true", "*", "debug,train"}) {
    auto refused = (*byDefault)->allocator().admissionDefaults(c, {{"nvidia.com/disable-control", value}});
    ASSERT_FALSE(refused.ok()) << value;
    EXPECT_THAT(refused.error().message, HasSubstr("container \"train\""));
    EXPECT_THAT(refused.error().message, HasSubstr("backends.nvidia.options.allowOptOut is false"));
  }
  // Naming another container, or no annotation: nothing to refuse.
  EXPECT_TRUE((*byDefault)->allocator().admissionDefaults(c, {{"nvidia.com/disable-control", "debug"}}).ok());
  EXPECT_TRUE((*byDefault)->allocator().admissionDefaults(c, {}).ok());

  auto options = fakeOptions();
  options["allowOptOut"] = "true";
  auto consenting = load(params(options));
  ASSERT_TRUE(consenting.ok()) << consenting.error().message;
  EXPECT_TRUE((*consenting)->allocator().admissionDefaults(c, {{"nvidia.com/disable-control", "train"}}).ok());
}

TEST(NvidiaBackendLibrary, RefusesAnUnknownOptionAtLoad) {
  auto backend = load(params({{"nvidiaSmi", "/usr/bin/nvidia-smi"}}));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.error().message, HasSubstr("backends.nvidia.options.nvidiaSmi: unknown option"));
}

TEST(NvidiaBackendLibrary, RefusesABadHealthCheckSwitchAtLoad) {
  setEnv("DP_DISABLE_HEALTHCHECKS", "sometimes");
  auto backend = load(params(fakeOptions()));
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.error().message, HasSubstr("DP_DISABLE_HEALTHCHECKS"));
}

TEST(NvidiaBackendLibrary, DiscoversThroughTheCTable) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG",
         dir.write("machine.conf", "gpu uuid=" + kH100 + " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559\n"
                                   "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-80GB\" memory_mib=81920 mig=on\n")
             .string());
  BackendParams p = params(fakeOptions());
  p.settings.memoryScaling = 2.0;
  auto backend = load(p);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].id, kH100);
  EXPECT_EQ((*devices)[0].backend, "nvidia");
  EXPECT_EQ((*devices)[0].memoryMiB, 163118u);
  EXPECT_EQ((*devices)[1].attributes.at("migMode"), "enabled");
}

TEST(NvidiaBackendLibrary, ReportsDiscoveryFailureAsAnError) {
  BackendParams p = params(fakeOptions());
  p.settings.options["nvidiaSmiPath"] = "/nonexistent/nvidia-smi";
  auto backend = load(p);
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("/nonexistent/nvidia-smi"));
}

TEST(NvidiaBackendLibrary, FitsAndExplainsMigThroughTheCTable) {
  auto backend = load(params(fakeOptions()));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  const Allocator& allocator = (*backend)->allocator();
  ContainerResources c;
  c.name = "main";
  c.limits = {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 4000}, {"nvidia.com/gpucores", 25}};
  auto parsed = allocator.parseRequest(c, {});
  ASSERT_TRUE(parsed.ok() && parsed->has_value());
  const RequestRecord request(**parsed);
  Device mig = testing::gpu(kA100);
  mig.attributes["migMode"] = "enabled";
  const DeviceRecord migRecord(mig);
  vgpu_fit_result r{};
  allocator.fit(request.c(), migRecord.c(), {}, r);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.reason, kReasonMigEnabled);
  EXPECT_THAT(allocator.explain(r), HasSubstr("MIG mode"));

  const DeviceRecord plain(testing::gpu(kH100));
  allocator.fit(request.c(), plain.c(), {}, r);
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.take.memory_mib, 4000u);
  EXPECT_EQ(r.take.compute, 25u);
}

TEST(NvidiaBackendLibrary, BuildsTheContainerSpecThroughTheCTable) {
  auto backend = load(params(fakeOptions()));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  TempDir dir;
  ContainerGrant g;
  g.container = {"uid-7", "serve"};
  g.podNamespace = "default";
  g.podName = "llm";
  g.devices = {{"nvidia", kH100, 0, 20000, 25, 1}, {"nvidia", kA100, 1, 20000, 25, 1}};
  g.hostDir = dir.path().string();
  auto spec = (*backend)->limiter()->containerSpec(g);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env.at("NVIDIA_VISIBLE_DEVICES"), kH100 + "," + kA100);
  EXPECT_EQ(spec->env.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "20000m");
  EXPECT_EQ(spec->mounts.size(), 4u);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "limits.env"));
  ASSERT_TRUE((*backend)->limiter()->release(g.container).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "limits.env"));

  g.hostDir = "";
  auto refused = (*backend)->limiter()->containerSpec(g);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("host folder"));
}

TEST(NvidiaBackendLibrary, DriverModeThatCannotWorkHereSaysSoInTheInventoryAndAtAllocate) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", "gpu uuid=" + kH100 + " memory_mib=81559\n").string());
  auto options = fakeOptions();
  options["memoryEnforcement"] = "driver";
  options["cdiKind"] = "k8s.device-plugin.nvidia.com/gpu";
  options["hostSysRoot"] = dir.path().string();
  auto backend = load(params(options));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_THAT((*devices)[0].attributes.at("kernelMemoryLimit"), HasSubstr("unsupported"));

  ContainerGrant g;
  g.container = {"uid-8", "main"};
  g.devices = {{"nvidia", kH100, 0, 20000, 25, 0}};
  g.hostDir = dir.path().string();
  auto spec = (*backend)->limiter()->containerSpec(g);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("cannot cap GPU memory in the kernel"));
}

// vgpu-cdi-hook through the loaded library (ABI 1.8 hook slot): on an R615 driver every GPU is
// "driver" in the inventory (vgpu_device_memory_enforcement) and the spec carries the hook; on
// an older driver nothing changes: "preload", no hook, libvgpu.so's limits.
TEST(NvidiaBackendLibrary, TheVgpuHookIsDeclaredWhereTheDriverHasTheCallAndNothingChangesElsewhere) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", "gpu uuid=" + kH100 + " memory_mib=81559\n").string());
  for (const bool newer : {true, false}) {
    auto options = fakeOptions();
    options["memoryEnforcement"] = "auto";
    options["cdiHookPath"] = VGPU_CDI_HOOK_BINARY;
    options["nvmlLibrary"] = newer ? VGPU_FAKE_NVML_LIBRARY : VGPU_FAKE_GPU_NO_MEMLIMITS_LIB_DIR "/libnvidia-ml.so.1";
    auto backend = load(params(options));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    auto devices = (*backend)->discovery()->discover();
    ASSERT_TRUE(devices.ok()) << devices.error().message;
    EXPECT_EQ((*devices)[0].attributes.at(kMemoryEnforcementAttribute), newer ? "driver" : "preload");
    ContainerGrant g;
    g.container = {"uid-9", "main"};
    g.devices = {{"nvidia", kH100, 0, 20000, 100, 0}};
    TempDir host;
    g.hostDir = host.path().string();
    auto spec = (*backend)->limiter()->containerSpec(g);
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    EXPECT_EQ(spec->env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "20000m");
    if (newer) {
      ASSERT_EQ(spec->hooks.size(), 1u);
      EXPECT_EQ(spec->hooks[0].path, VGPU_CDI_HOOK_BINARY);
      EXPECT_EQ(spec->hooks[0].args[3], kH100 + "=20000");
      // The NVML the backend was given by path, for the hook too.
      EXPECT_EQ(spec->hooks[0].args.back(), VGPU_FAKE_NVML_LIBRARY);
    } else {
      EXPECT_TRUE(spec->hooks.empty());
    }
  }
}

// The runtime cannot start a container whose hook it cannot run: where cdiHookPath names no
// executable the driver's cap is not used, and the inventory says why.
TEST(NvidiaBackendLibrary, AMissingHookLeavesMemoryToLibvgpu) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", "gpu uuid=" + kH100 + " memory_mib=81559\n").string());
  auto options = fakeOptions();
  options["memoryEnforcement"] = "auto";
  options["cdiHookPath"] = (dir.path() / "no-such-hook").string();
  options["nvmlLibrary"] = VGPU_FAKE_NVML_LIBRARY;
  auto backend = load(params(options));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].attributes.at(kMemoryEnforcementAttribute), "preload");
  EXPECT_THAT((*devices)[0].attributes.at("kernelMemoryLimit"), HasSubstr("vgpu-cdi-hook is not an executable file"));
}

}  // namespace
}  // namespace vgpu::nvidia
