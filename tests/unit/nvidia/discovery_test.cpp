// Discovery against the fakes: the fake nvidia-smi (always) and the fake libnvidia-ml.so.1
// (when it is built), each scenario in its own process (ctest runs one test per process).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "discovery.h"
#include "mig_test_support.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::setEnv;
using testing::TempDir;

const std::string kH100 = "GPU-11111111-1111-1111-1111-111111111111";
const std::string kA100 = "GPU-22222222-2222-2222-2222-222222222222";
const std::string kT4 = "GPU-33333333-3333-3333-3333-333333333333";

const std::string kThreeModels =
    "gpu uuid=" + kH100 + " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 cc=9.0 pci_bus_id=00000000:3B:00.0 minor=0 numa=0\n"
    "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 cc=8.0 pci_bus_id=00000000:86:00.0 minor=1 numa=1\n"
    "gpu uuid=" + kT4 + " name=\"Tesla T4\" memory_mib=15360 cc=7.5 pci_bus_id=00000000:AF:00.0 minor=2\n";

/// Settings that reach the fakes: the fake nvidia-smi by path, NVML at `nvml` (a path that
/// does not exist means "NVML absent").
DiscoverySettings settings(const std::string& nvml = "/nonexistent/libnvidia-ml.so.1") {
  DiscoverySettings s;
  s.nvmlLibrary = nvml;
  s.nvidiaSmiPath = VGPU_FAKE_NVIDIA_SMI;
  s.nvidiaSmiTimeout = std::chrono::seconds(10);
  s.sysRoot = "/nonexistent-sys";
  return s;
}

const Device* find(const std::vector<Device>& devices, const std::string& id) {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

std::string attribute(const Device& d, const std::string& key) {
  auto it = d.attributes.find(key);
  return it == d.attributes.end() ? "" : it->second;
}

TEST(NvidiaDiscovery, FallsBackToNvidiaSmiWhenNvmlIsAbsentAndReadsSeveralModels) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_THAT(discovery.nvmlUnavailableReason(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
  const Device& h100 = (*devices)[0];
  EXPECT_EQ(h100.id, kH100);
  EXPECT_EQ(h100.index, 0);
  EXPECT_EQ(h100.backend, "nvidia");
  EXPECT_EQ(h100.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.memoryMiB, 81559u);
  EXPECT_EQ(h100.computeUnits, 100u);
  EXPECT_EQ(h100.splitCount, 10u);
  EXPECT_EQ(h100.health, Health::kHealthy);
  EXPECT_EQ(attribute(h100, "minor"), "0");
  EXPECT_EQ(attribute(h100, "pciBusId"), "00000000:3B:00.0");
  EXPECT_EQ(attribute(h100, "migMode"), "disabled");
  EXPECT_EQ(attribute(h100, "discoveredBy"), "nvidia-smi");
  EXPECT_EQ((*devices)[1].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ((*devices)[1].memoryMiB, 40960u);
  EXPECT_EQ((*devices)[2].model, "Tesla T4");
  EXPECT_EQ((*devices)[2].index, 2);
}

TEST(NvidiaDiscovery, AppliesSplitCountAndScalingToThePublishedDevice) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  DiscoverySettings s = settings();
  s.splitCount = 4;
  s.memoryScaling = 1.5;
  s.coreScaling = 2.0;
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].memoryMiB, 122338u);  // floor(81559 x 1.5)
  EXPECT_EQ((*devices)[0].computeUnits, 200u);
  EXPECT_EQ((*devices)[0].splitCount, 4u);
}

TEST(NvidiaDiscovery, ReportsMigModeFromNvidiaSmi) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG",
         dir.write("machine.conf", "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-80GB\" memory_mib=81920 mig=on\n").string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ(attribute((*devices)[0], "migMode"), "enabled");
  EXPECT_EQ((*devices)[0].memoryMiB, 81920u);  // the GPU's, not its MIG instance's
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
}

TEST(NvidiaDiscovery, AGpuThatFailsIsReportedUnhealthyUnderTheIdentityItHad) {
  TempDir dir;
  const auto conf = dir.write("machine.conf", kThreeModels);
  setEnv("VGPU_FAKE_GPU_CONFIG", conf.string());
  NvidiaDiscovery discovery(settings());
  ASSERT_TRUE(discovery.discover().ok());

  dir.write("machine.conf", kThreeModels + "nvml_device_error gpu=1 code=GPU_IS_LOST\n");
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  const Device* lost = find(*devices, kA100);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->health, Health::kUnhealthy);
  EXPECT_THAT(attribute(*lost, "healthReason"), HasSubstr("<uuid>"));
  EXPECT_EQ(find(*devices, kH100)->health, Health::kHealthy);
}

TEST(NvidiaDiscovery, AGpuThatFailsFromTheStartIsStillListed) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "nvml_device_error gpu=2 code=GPU_IS_LOST\n").string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[2].id, "unidentified-gpu-2");
  EXPECT_EQ((*devices)[2].health, Health::kUnhealthy);
}

TEST(NvidiaDiscovery, AGpuThatDisappearsIsReportedUnhealthyNotDropped) {
  TempDir dir;
  const auto conf = dir.write("machine.conf", kThreeModels);
  setEnv("VGPU_FAKE_GPU_CONFIG", conf.string());
  NvidiaDiscovery discovery(settings());
  ASSERT_TRUE(discovery.discover().ok());
  dir.write("machine.conf",
            "gpu uuid=" + kH100 + " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 pci_bus_id=00000000:3B:00.0\n");
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ(find(*devices, kH100)->health, Health::kHealthy);
  for (const auto& gone : {kA100, kT4}) {
    const Device* d = find(*devices, gone);
    ASSERT_NE(d, nullptr) << gone;
    EXPECT_EQ(d->health, Health::kUnhealthy);
    EXPECT_THAT(attribute(*d, "healthReason"), HasSubstr("no longer reported by nvidia-smi"));
    EXPECT_EQ(d->model, gone == kA100 ? "NVIDIA A100-SXM4-40GB" : "Tesla T4");
  }
}

TEST(NvidiaDiscovery, WhenNeitherNvmlNorNvidiaSmiWorksTheErrorGivesBothReasons) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "nvml_init_error code=DRIVER_NOT_LOADED\n").string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("NVML: cannot load NVML (/nonexistent/libnvidia-ml.so.1)"));
  EXPECT_THAT(devices.error().message, HasSubstr("exited with status 9"));
  EXPECT_THAT(devices.error().message, HasSubstr("couldn't communicate with the NVIDIA driver"));
}

TEST(NvidiaDiscovery, BadXmlFromNvidiaSmiIsAnError) {
  TempDir dir;
  setEnv("VGPU_FAKE_NVIDIA_SMI_XML", dir.write("out.xml", "<nvidia_smi_log><gpu id=\"0\"><uuid>GPU-1</uu").string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("not valid XML"));
  EXPECT_THAT(devices.error().message, HasSubstr(VGPU_FAKE_NVIDIA_SMI));
}

TEST(NvidiaDiscovery, MissingFieldsInNvidiaSmiXmlMakeThatGpuUnhealthy) {
  TempDir dir;
  setEnv("VGPU_FAKE_NVIDIA_SMI_XML",
         dir.write("out.xml",
                   "<nvidia_smi_log>"
                   "<gpu id=\"00000000:01:00.0\"><product_name>N/A</product_name><uuid>" + kH100 +
                       "</uuid><fb_memory_usage><total>N/A</total></fb_memory_usage></gpu>"
                       "<gpu id=\"00000000:02:00.0\"><product_name>Tesla T4</product_name><uuid>" + kT4 +
                       "</uuid><fb_memory_usage><total>15360 MiB</total></fb_memory_usage></gpu>"
                       "</nvidia_smi_log>")
             .string());
  NvidiaDiscovery discovery(settings());
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].id, kH100);
  EXPECT_EQ((*devices)[0].health, Health::kUnhealthy);
  EXPECT_THAT(attribute((*devices)[0], "healthReason"), HasSubstr("memory size"));
  EXPECT_EQ((*devices)[0].attributes.count("migMode"), 0u);  // unknown stays unknown
  EXPECT_EQ((*devices)[1].health, Health::kHealthy);
}

TEST(NvidiaDiscovery, ASlowNvidiaSmiIsKilledAtTheTimeout) {
  setEnv("VGPU_FAKE_NVIDIA_SMI_DELAY_MS", "10000");
  DiscoverySettings s = settings();
  s.nvidiaSmiTimeout = std::chrono::milliseconds(300);
  NvidiaDiscovery discovery(s);
  const auto start = std::chrono::steady_clock::now();
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("did not finish within 300 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(NvidiaDiscovery, AMissingNvidiaSmiIsNamed) {
  DiscoverySettings s = settings();
  s.nvidiaSmiPath = "/nonexistent/bin/nvidia-smi";
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("cannot run /nonexistent/bin/nvidia-smi"));
}

TEST(NvidiaDiscovery, NvmlOnlyModeDoesNotTryNvidiaSmi) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  DiscoverySettings s = settings();
  s.source = DiscoverySource::kNvml;
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("nvidia-smi is not tried"));
}

TEST(NvidiaDiscovery, ReadsTheNumaNodeOfAPciGpuFromSysfs) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  dir.write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
  dir.write("sys/bus/pci/devices/0000:86:00.0/numa_node", "-1\n");
  DiscoverySettings s = settings();
  s.sysRoot = (dir.path() / "sys").string();
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].numaNode, 1);
  EXPECT_EQ((*devices)[1].numaNode, -1);
  EXPECT_EQ((*devices)[2].numaNode, -1);  // no sysfs entry at all
}

TEST(NvidiaDiscovery, ConvertsNvmlBusIdsToSysfsNames) {
  EXPECT_EQ(sysfsPciName("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfsPciName("0000:AF:00.0"), "0000:af:00.0");
}

TEST(NvidiaDiscovery, WithoutNvmlTheHealthWaitJustWaits) {
  NvidiaDiscovery discovery(settings());
  const auto start = std::chrono::steady_clock::now();
  auto events = discovery.waitForHealthEvents(std::chrono::milliseconds(100));
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(NvidiaHealthCheckPolicy, FollowsNvidiasDefaultsAndEnvironmentSwitches) {
  const struct {
    const char* disable;
    const char* enable;
    bool enabled;
    std::vector<unsigned long long> critical;
    std::vector<unsigned long long> ignored;
  } cases[] = {
      {nullptr, nullptr, true, {48, 79, 999}, {13, 31, 43, 45, 68, 109}},
      {"all", nullptr, false, {}, {79}},
      {"xids", nullptr, false, {}, {48}},
      {"79, 48", nullptr, true, {94}, {79, 48, 13}},
      {nullptr, "13,31", true, {13, 31}, {43}},
      {nullptr, "all", true, {13, 109}, {}},
      {"", "", true, {79}, {13}},
  };
  for (const auto& c : cases) {
    auto p = HealthCheckPolicy::fromEnvironment(c.disable, c.enable);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->enabled, c.enabled);
    for (auto x : c.critical) EXPECT_TRUE(p->critical(x)) << x;
    for (auto x : c.ignored) EXPECT_FALSE(p->critical(x)) << x;
  }
  auto bad = HealthCheckPolicy::fromEnvironment("79,lots", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("DP_DISABLE_HEALTHCHECKS: \"lots\""));
  auto badEnable = HealthCheckPolicy::fromEnvironment(nullptr, "x1");
  ASSERT_FALSE(badEnable.ok());
  EXPECT_THAT(badEnable.error().message, HasSubstr("DP_ENABLE_HEALTHCHECKS"));
}

#ifdef VGPU_FAKE_NVML_LIBRARY
// The same machine through the fake libnvidia-ml.so.1.

TEST(NvidiaDiscovery, ListsGpusThroughNvml) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels +
                                                               "gpu uuid=GPU-44444444-4444-4444-4444-444444444444 "
                                                               "name=\"NVIDIA A100-SXM4-80GB\" memory_mib=81920 mig=on\n")
                                     .string());
  // The T4 is no NUMA node to NVML; sysfs knows its PCI slot's node.
  dir.write("sys/bus/pci/devices/0000:af:00.0/numa_node", "1\n");
  DiscoverySettings s = settings(VGPU_FAKE_NVML_LIBRARY);
  s.sysRoot = (dir.path() / "sys").string();
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_TRUE(discovery.nvmlUnavailableReason().empty());
  ASSERT_EQ(devices->size(), 4u);
  const Device& h100 = (*devices)[0];
  EXPECT_EQ(h100.id, kH100);
  EXPECT_EQ(h100.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.memoryMiB, 81559u);
  EXPECT_EQ(h100.numaNode, 0);
  EXPECT_EQ(h100.health, Health::kHealthy);
  EXPECT_EQ(attribute(h100, "computeCapability"), "9.0");
  EXPECT_EQ(attribute(h100, "pciBusId"), "00000000:3B:00.0");
  EXPECT_EQ(attribute(h100, "minor"), "0");
  EXPECT_EQ(attribute(h100, "migMode"), "disabled");
  EXPECT_EQ(attribute(h100, "discoveredBy"), "nvml");
  EXPECT_EQ((*devices)[1].numaNode, 1);
  EXPECT_EQ(attribute((*devices)[2], "computeCapability"), "7.5");
  EXPECT_EQ((*devices)[2].numaNode, 1);
  EXPECT_EQ((*devices)[3].numaNode, -1);
  EXPECT_EQ(attribute((*devices)[3], "migMode"), "enabled");
}

TEST(NvidiaDiscovery, AGpuWhoseNvmlQueriesFailIsUnhealthyWithTheNvmlError) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "nvml_device_error gpu=1 code=GPU_IS_LOST\n").string());
  NvidiaDiscovery discovery(settings(VGPU_FAKE_NVML_LIBRARY));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
  EXPECT_EQ((*devices)[1].health, Health::kUnhealthy);
  EXPECT_THAT(attribute((*devices)[1], "healthReason"), HasSubstr("returned 15"));
  EXPECT_EQ((*devices)[2].health, Health::kHealthy);
}

TEST(NvidiaDiscovery, NvmlThatFailsToInitialiseFallsBackToNvidiaSmi) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "nvml_init_error code=UNKNOWN\n").string());
  // nvidia-smi on this node still answers (say, from the host's driver root).
  setEnv("VGPU_FAKE_NVIDIA_SMI_XML",
         dir.write("out.xml", "<nvidia_smi_log><gpu id=\"00000000:3B:00.0\"><product_name>NVIDIA H100 80GB HBM3</product_name>"
                              "<uuid>" + kH100 + "</uuid><fb_memory_usage><total>81559 MiB</total></fb_memory_usage>"
                              "</gpu></nvidia_smi_log>")
             .string());
  NvidiaDiscovery discovery(settings(VGPU_FAKE_NVML_LIBRARY));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_THAT(discovery.nvmlUnavailableReason(), HasSubstr("nvmlInit_v2"));
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ(attribute((*devices)[0], "discoveredBy"), "nvidia-smi");
}

TEST(NvidiaDiscovery, ACriticalXidMakesItsGpuUnhealthyAndStaysSo) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "xid gpu=1 code=13\nxid gpu=1 code=79 delay_ms=50\n").string());
  NvidiaDiscovery discovery(settings(VGPU_FAKE_NVML_LIBRARY));
  ASSERT_TRUE(discovery.discover().ok());
  std::vector<HealthEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (events.empty() && std::chrono::steady_clock::now() < deadline) {
    auto got = discovery.waitForHealthEvents(std::chrono::milliseconds(500));
    ASSERT_TRUE(got.ok()) << got.error().message;
    events = *got;
  }
  ASSERT_EQ(events.size(), 1u);  // Xid 13 is an application error
  EXPECT_EQ(events[0].deviceId, kA100);
  EXPECT_EQ(events[0].health, Health::kUnhealthy);
  EXPECT_THAT(events[0].reason, HasSubstr("Xid 79"));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(find(*devices, kA100)->health, Health::kUnhealthy);
  EXPECT_EQ(find(*devices, kH100)->health, Health::kHealthy);
}

TEST(NvidiaDiscovery, HealthChecksCanBeSwitchedOff) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels + "xid gpu=0 code=79\n").string());
  DiscoverySettings s = settings(VGPU_FAKE_NVML_LIBRARY);
  s.health = *HealthCheckPolicy::fromEnvironment("all", nullptr);
  NvidiaDiscovery discovery(s);
  ASSERT_TRUE(discovery.discover().ok());
  auto events = discovery.waitForHealthEvents(std::chrono::milliseconds(300));
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
}

TEST(NvidiaDiscovery, ListsTheProcessesOnEachGpuWithTheirMemory) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  setEnv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu.state").string());
  NvidiaDiscovery discovery(settings(VGPU_FAKE_NVML_LIBRARY));
  ASSERT_TRUE(discovery.discover().ok());
  auto none = discovery.deviceProcesses();
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());

  // A live process of the test's own holding memory on the A100 (index 1).
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  void* nvml = dlopen(VGPU_FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nvml, nullptr);
  auto setUsage = reinterpret_cast<int (*)(int, int, unsigned long long)>(dlsym(nvml, "vgpuFakeNvmlSetProcessUsage"));
  ASSERT_NE(setUsage, nullptr);
  ASSERT_EQ(setUsage(child, 1, 700ull << 20), 0);
  auto listed = discovery.deviceProcesses();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  dlclose(nvml);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].pid, static_cast<std::uint32_t>(child));
  EXPECT_EQ((*listed)[0].deviceId, kA100);
  EXPECT_EQ((*listed)[0].deviceIndex, 1);
  EXPECT_EQ((*listed)[0].memoryUsedBytes, std::optional<std::uint64_t>(700ull << 20));
  EXPECT_FALSE((*listed)[0].utilizationPercent.has_value()) << "it ran no kernels";
  // The driver freed a dead process's memory.
  auto after = discovery.deviceProcesses();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
}

TEST(NvidiaDiscovery, CannotListProcessesWithoutNvml) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kThreeModels).string());
  NvidiaDiscovery discovery(settings());
  ASSERT_TRUE(discovery.discover().ok());  // through nvidia-smi
  auto listed = discovery.deviceProcesses();
  ASSERT_FALSE(listed.ok());
  EXPECT_THAT(listed.error().message, HasSubstr("lists processes through NVML, which is not in use here"));
}
// MIG: GPUs the operator partitioned, served per the strategy.

const std::string kMigMachine =
    "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb numa=1\n"
    "gpu uuid=" + kH100 + " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 mig=on mig_profiles=h100-80gb numa=0\n";

DiscoverySettings migSettings(MigStrategy strategy) {
  DiscoverySettings s = settings(VGPU_FAKE_NVML_LIBRARY);
  s.migStrategy = strategy;
  return s;
}

TEST(NvidiaMigDiscovery, MixedServesEachMigDeviceInPlaceOfItsGpu) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kMigMachine).string());
  testing::FakeMigControl nvml(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_TRUE(nvml.ok());
  ASSERT_EQ(nvml.partition(0, 9, 4, 4), NVML_SUCCESS);   // 3g.20gb on slices 4-7
  ASSERT_EQ(nvml.partition(0, 14, 0, 2), NVML_SUCCESS);  // 2g.10gb on slices 0-1
  ASSERT_EQ(nvml.partition(0, 19, 2, 1), NVML_SUCCESS);  // 1g.5gb on slice 2
  ASSERT_EQ(nvml.partition(1, 0, 0, 8), NVML_SUCCESS);   // 7g.80gb
  NvidiaDiscovery discovery(migSettings(MigStrategy::kMixed));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 4u);  // the MIG devices, not the GPUs
  std::map<std::string, const Device*> byProfile;
  for (const auto& d : *devices) {
    EXPECT_THAT(d.id, ::testing::StartsWith("MIG-"));
    byProfile[attribute(d, "migProfile")] = &d;
  }
  ASSERT_EQ(byProfile.size(), 4u);
  const Device& big = *byProfile.at("3g.20gb");
  EXPECT_EQ(big.memoryMiB, 19968u);
  EXPECT_EQ(big.computeUnits, 100u);  // the whole MIG device
  EXPECT_EQ(big.model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(big.numaNode, 1);
  EXPECT_EQ(attribute(big, "migParent"), kA100);
  EXPECT_EQ(attribute(big, "migPlacement"), "4:4");
  EXPECT_EQ(attribute(big, "migMode"), "");
  EXPECT_EQ(byProfile.at("1g.5gb")->memoryMiB, 4864u);
  EXPECT_EQ(attribute(*byProfile.at("2g.10gb"), "migPlacement"), "0:2");
  EXPECT_EQ(byProfile.at("7g.80gb")->memoryMiB, 81152u);
  EXPECT_EQ(attribute(*byProfile.at("7g.80gb"), "migParent"), kH100);
  // Core's words for the same (vgpu/partition.h), and the one resource that counts each.
  EXPECT_EQ(attribute(big, "partitionOf"), kA100);
  EXPECT_EQ(attribute(big, "partitionKind"), "mig");
  EXPECT_EQ(attribute(big, "partitionProfile"), "3g.20gb");
  EXPECT_EQ(attribute(big, "partitionPlacement"), "4:4");
  EXPECT_EQ(attribute(big, "partitionInstanceId"), attribute(big, "gpuInstanceId"));
  EXPECT_EQ(attribute(big, "partitionSubInstanceId"), attribute(big, "computeInstanceId"));
  EXPECT_EQ(attribute(big, "countResource"), "nvidia.com/mig-3g.20gb");
  EXPECT_EQ(attribute(*byProfile.at("1g.5gb"), "countResource"), "nvidia.com/mig-1g.5gb");
}

TEST(NvidiaMigDiscovery, MixedNamesTheCountResourceOfWholeGpusToo) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-40GB\" "
                                                           "memory_mib=40960 mig=off mig_profiles=a100-40gb\n")
                                     .string());
  DiscoverySettings s = migSettings(MigStrategy::kMixed);
  s.countResource = "example.com/gpu";
  auto mixed = NvidiaDiscovery(s).discover();
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  ASSERT_EQ(mixed->size(), 1u);
  EXPECT_EQ(attribute((*mixed)[0], "countResource"), "example.com/gpu");
  EXPECT_EQ(attribute((*mixed)[0], "partitionOf"), "");
  // One count resource (single, none): nothing to say.
  auto single = NvidiaDiscovery(migSettings(MigStrategy::kNone)).discover();
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(attribute((*single)[0], "countResource"), "");
}

TEST(NvidiaMigDiscovery, SingleRefusesMigDevicesThatDiffer) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kMigMachine).string());
  testing::FakeMigControl nvml(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(nvml.partition(0, 19, 0, 1), NVML_SUCCESS);
  ASSERT_EQ(nvml.partition(0, 14, 2, 2), NVML_SUCCESS);
  NvidiaDiscovery discovery(migSettings(MigStrategy::kSingle));
  auto devices = discovery.discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("migStrategy is single, but the MIG devices differ"));
  EXPECT_THAT(devices.error().message, HasSubstr("is 1g.5gb"));
  EXPECT_THAT(devices.error().message, HasSubstr("is 2g.10gb"));
}

TEST(NvidiaMigDiscovery, SingleServesAlikeMigDevices) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG",
         dir.write("machine.conf", "gpu uuid=" + kA100 +
                                       " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb\n")
             .string());
  testing::FakeMigControl nvml(VGPU_FAKE_NVML_LIBRARY);
  for (unsigned start : {0u, 2u, 4u}) ASSERT_EQ(nvml.partition(0, 14, start, 2), NVML_SUCCESS);
  NvidiaDiscovery discovery(migSettings(MigStrategy::kSingle));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  for (const auto& d : *devices) EXPECT_EQ(attribute(d, "migProfile"), "2g.10gb");
}

TEST(NvidiaMigDiscovery, WithoutAStrategyTheMigGpuItselfIsListed) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kMigMachine).string());
  testing::FakeMigControl nvml(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(nvml.partition(0, 19, 0, 1), NVML_SUCCESS);
  NvidiaDiscovery discovery(migSettings(MigStrategy::kNone));
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].id, kA100);
  EXPECT_EQ(attribute((*devices)[0], "migMode"), "enabled");
}
#endif

}  // namespace
}  // namespace vgpu::nvidia
