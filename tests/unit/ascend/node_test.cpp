// The Ascend backend on the node, against the fake libdcmi.so: discovery and health, the
// vNPUs the limiter creates per container and destroys on release, and per-process usage.
#include <gtest/gtest.h>

#include "ascend_test_support.h"
#include "vgpu/partition.h"

namespace vgpu::ascend {
namespace {

using namespace testing;

std::unique_ptr<AscendBackend> backend(const FakeDcmi& fake) {
  auto b = AscendBackend::create(fake.params());
  EXPECT_TRUE(b.ok()) << b.error().message;
  return std::move(*b);
}

ContainerGrant grantOf(const std::string& holder, const Device& d, std::uint64_t memory, std::uint32_t compute,
                       std::string placement) {
  ContainerGrant g;
  g.container = {holder, "main"};
  g.podNamespace = "default";
  g.podName = "pod-" + holder;
  g.hostDir = "/tmp";
  DeviceGrant dg;
  dg.backend = "ascend";
  dg.deviceId = d.id;
  dg.deviceIndex = d.index;
  dg.memoryMiB = memory;
  dg.compute = compute;
  dg.placement = std::move(placement);
  g.devices.push_back(dg);
  return g;
}

TEST(AscendDiscovery, ListsEachChipWithItsTemplatesAndMemory) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  const Device& d0 = (*devices)[0];
  EXPECT_EQ(d0.id, kChip0);
  EXPECT_EQ(d0.model, "Ascend910B3");
  EXPECT_EQ(d0.memoryMiB, 65536u);
  EXPECT_EQ(d0.splitCount, 4u);  // 20 AI cores, 5 in the smallest template
  EXPECT_EQ(d0.health, Health::kHealthy);
  EXPECT_EQ(d0.attributes.at(kTemplatesAttribute), "vir05_1c_16g,vir10_3c_32g");
  EXPECT_EQ(d0.attributes.at(kMemoryEnforcementAttribute), "driver");
  const Device& d2 = (*devices)[2];
  EXPECT_EQ(d2.model, "Ascend310P3");
  EXPECT_EQ(d2.memoryMiB, 24576u);  // from dcmi_get_device_memory_info_v3: no HBM on a 310P
  EXPECT_EQ(d2.splitCount, 8u);
}

TEST(AscendDiscovery, SplitCountSettingCapsTheVnpusAndVnpuOffGivesWholeChips) {
  FakeDcmi fake(twoTrainingOneInference());
  auto params = fake.params();
  params.settings.splitCount = 2;
  auto b = AscendBackend::create(params);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*(*b)->discover())[0].splitCount, 2u);
  params.settings.splitCount.reset();
  params.settings.options["vnpu"] = "false";
  b = AscendBackend::create(params);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*(*b)->discover())[0].splitCount, 1u);
}

TEST(AscendDiscovery, WithFamiliesEachChipIsCountedByItsFamilysResource) {
  FakeDcmi fake(twoTrainingOneInference());
  auto params = fake.params();
  params.settings.options["families"] = "Ascend310P";
  auto b = AscendBackend::create(params);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto devices = (*b)->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);  // the 910B3 chips belong to no family served here
  EXPECT_EQ((*devices)[0].model, "Ascend310P3");
  EXPECT_EQ((*devices)[0].attributes.at("countResource"), "huawei.com/Ascend310P");
}

TEST(AscendDiscovery, MissingLibraryAndUnhealthyChipsAreSaidInWords) {
  FakeDcmi fake(twoTrainingOneInference());
  auto params = fake.params();
  params.settings.options["libraryPath"] = "/nonexistent/libdcmi.so";
  auto missing = AscendBackend::create(params);
  ASSERT_TRUE(missing.ok());
  auto failed = (*missing)->discover();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("cannot load libdcmi.so"), std::string::npos) << failed.error().message;

  auto b = backend(fake);
  ASSERT_TRUE(b->discover().ok());
  fake.write("chip card=0 device=0 logic=0 phy=0 name=910B3 aicores=20 memoryMB=65536 die=A0 health=2\n");
  auto events = b->waitForHealthEvents(std::chrono::milliseconds(1));
  ASSERT_TRUE(events.ok()) << events.error().message;
  ASSERT_EQ(events->size(), 3u);  // chip 0 alarms, chips 1 and 2 are gone
  EXPECT_EQ((*events)[0].deviceId, kChip0);
  EXPECT_EQ((*events)[0].health, Health::kUnhealthy);
}

TEST(AscendDiscovery, AChipDcmiCannotDescribeIsLeftOutNotTheNode) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  // Card 0 now has one chip, at address 1: DCMI answers nothing for address 0.
  fake.write("chip card=0 device=1 logic=1 phy=1 name=910B3 aicores=20 memoryMB=65536 die=A1\n"
             "chip card=1 device=0 logic=2 phy=4 name=310P3 aicores=8 memoryMB=24576 hbm=0 die=B0\n");
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].model, "Ascend310P3");
}

TEST(AscendLimiter, CreatesTheScheduledVnpuAndDestroysItOnRelease) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf("h1", (*devices)[0], 16384, 25, "vir05_1c_16g"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(fake.vnpus(), (std::vector<std::string>{"0 0 100 vir05_1c_16g 5"}));
  EXPECT_EQ(spec->env.at(kVisibleDevicesEnv), "100");
  EXPECT_EQ(spec->env.at(kRuntimeOptionsEnv), "VIRTUAL");
  ASSERT_GE(spec->devices.size(), 4u);
  EXPECT_EQ(spec->devices[0].containerPath, "/dev/vdavinci100");
  EXPECT_EQ(spec->devices[1].containerPath, "/dev/davinci_manager");
  auto parts = decodePartitions(spec->podAnnotations.at(madePartitionsKey(0)));
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].parent, kChip0);
  EXPECT_EQ((*parts)[0].profile, "vir05_1c_16g");

  // Asked again (an agent restart), the same vNPU; a new backend reads the state file.
  auto again = backend(fake);
  ASSERT_TRUE(again->discover().ok());
  auto spec2 = again->containerSpec(grantOf("h1", (*devices)[0], 16384, 25, "vir05_1c_16g"));
  ASSERT_TRUE(spec2.ok()) << spec2.error().message;
  EXPECT_EQ(*spec2, *spec);
  EXPECT_EQ(fake.vnpus().size(), 1u);

  ASSERT_TRUE(again->release({"h1", "main"}).ok());
  EXPECT_TRUE(fake.vnpus().empty());
  EXPECT_FALSE(std::filesystem::exists(fake.devRoot() / "vdavinci100"));
  EXPECT_TRUE(again->release({"h1", "main"}).ok());
}

TEST(AscendLimiter, AWholeChipGetsItsDavinciNodeAndNoVnpu) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf("h1", (*devices)[2], 24576, 100, "whole"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(fake.vnpus().empty());
  EXPECT_EQ(spec->env.at(kVisibleDevicesEnv), "4");  // the physical id: /dev/davinci4
  EXPECT_EQ(spec->env.count(kRuntimeOptionsEnv), 0u);
  EXPECT_EQ(spec->devices[0].containerPath, "/dev/davinci4");
}

TEST(AscendLimiter, PlansAGrantWithoutTokenAndReconcileDestroysWhatIsGone) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf("h1", (*devices)[2], 6144, 25, ""));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  auto spec2 = b->containerSpec(grantOf("h2", (*devices)[2], 3072, 12, ""));
  ASSERT_TRUE(spec2.ok()) << spec2.error().message;
  EXPECT_EQ(fake.vnpus(), (std::vector<std::string>{"1 0 100 vir02 2", "1 0 101 vir01 1"}));
  auto usage = b->containerUsage();
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 2u);
  EXPECT_EQ((*usage)[0].memoryLimitBytes, 6144ull << 20);
  ASSERT_TRUE(b->reconcile({{"h2", "main"}}).ok());
  EXPECT_EQ(fake.vnpus(), (std::vector<std::string>{"1 0 101 vir01 1"}));
}

TEST(AscendLimiter, RefusesInWordsWhatTheDriverRefuses) {
  FakeDcmi fake(twoTrainingOneInference());
  auto b = backend(fake);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  ASSERT_TRUE(b->containerSpec(grantOf("h1", (*devices)[0], 32768, 50, "vir10_3c_32g")).ok());
  ASSERT_TRUE(b->containerSpec(grantOf("h2", (*devices)[0], 32768, 50, "vir10_3c_32g")).ok());
  auto full = b->containerSpec(grantOf("h3", (*devices)[0], 16384, 25, "vir05_1c_16g"));
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("dcmi_create_vdevice (template vir05_1c_16g)"), std::string::npos)
      << full.error().message;
  auto wrong = b->containerSpec(grantOf("h4", (*devices)[1], 3072, 12, "vir01"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("names vNPU template \"vir01\", which Ascend910B3 does not have"),
            std::string::npos)
      << wrong.error().message;
}

TEST(AscendProcesses, ListsWhatDcmiReportsPerChip) {
  FakeDcmi fake(twoTrainingOneInference());
  fake.append("proc card=0 device=1 pid=4242 bytes=1048576");
  auto b = backend(fake);
  ASSERT_TRUE(b->discover().ok());
  auto procs = b->deviceProcesses();
  ASSERT_TRUE(procs.ok()) << procs.error().message;
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].pid, 4242u);
  EXPECT_EQ((*procs)[0].deviceIndex, 1);
  EXPECT_EQ((*procs)[0].memoryUsedBytes, 1048576u);
}

}  // namespace
}  // namespace vgpu::ascend
