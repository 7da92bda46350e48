// The AMD backend on the node, against the fake libamd_smi.so: discovery (whole GPUs and a
// GPU in CPX mode as one device of 8 partitions), health, the container spec (render node of
// the GPU or of the granted partition, GPU_MAX_HEAP_SIZE for a share) and per-process VRAM.
#include <gtest/gtest.h>

#include <algorithm>

#include "amd_test_support.h"

namespace vgpu::amd {
namespace {

using namespace testing;

std::unique_ptr<AmdBackend> backend(const BackendParams& params) {
  auto b = AmdBackend::create(params);
  EXPECT_TRUE(b.ok()) << b.error().message;
  return std::move(*b);
}

ContainerGrant grantOf(const Device& d, std::uint64_t memory, std::string placement) {
  ContainerGrant g;
  g.container = {"holder", "main"};
  g.podNamespace = "default";
  g.podName = "pod";
  g.hostDir = "/tmp";
  DeviceGrant dg;
  dg.backend = "amd";
  dg.deviceId = d.id;
  dg.deviceIndex = d.index;
  dg.memoryMiB = memory;
  dg.placement = std::move(placement);
  g.devices.push_back(dg);
  return g;
}

bool mounts(const ContainerSpec& spec, const std::string& containerPath) {
  return std::any_of(spec.devices.begin(), spec.devices.end(), [&](const DeviceNode& n) { return n.containerPath == containerPath; });
}

TEST(AmdDiscovery, AWholeGpuIsSharedAndACpxGpuIsItsPartitions) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto b = backend(fake.params());
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  const Device& a = (*devices)[0];
  EXPECT_EQ(a.id, "AMD-A");
  EXPECT_EQ(a.model, "AMD Instinct MI300X");
  EXPECT_EQ(a.memoryMiB, 196608u);
  EXPECT_EQ(a.splitCount, kDefaultSplitCount);
  EXPECT_EQ(a.attributes.at(kComputePartitionAttribute), "SPX");
  const Device& cpx = (*devices)[1];
  EXPECT_EQ(cpx.id, "AMD-B0");
  EXPECT_EQ(cpx.index, 1);
  EXPECT_EQ(cpx.memoryMiB, 8u * 24576);
  EXPECT_EQ(cpx.splitCount, 8u);
  EXPECT_EQ(cpx.numaNode, 1);
  EXPECT_EQ(cpx.attributes.at(kComputePartitionAttribute), "CPX");
  EXPECT_EQ(cpx.attributes.at(kMemoryPartitionAttribute), "NPS4");
  EXPECT_EQ(cpx.attributes.at(kPartitionsAttribute), "8");
  const Device& mi210 = (*devices)[2];
  EXPECT_EQ(mi210.model, "AMD Instinct MI210");
  EXPECT_EQ(mi210.attributes.count(kComputePartitionAttribute), 0u);
}

TEST(AmdDiscovery, SplitCountAndScalingApplyToWholeGpusOnly) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto params = fake.params();
  params.settings.splitCount = 4;
  params.settings.memoryScaling = 2.0;
  auto devices = backend(params)->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].splitCount, 4u);
  EXPECT_EQ((*devices)[0].memoryMiB, 2u * 196608);
  EXPECT_EQ((*devices)[1].splitCount, 8u);
  EXPECT_EQ((*devices)[1].memoryMiB, 8u * 24576);
}

TEST(AmdBackendConfig, RefusesUnknownOptionsAndBadValuesByName) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto params = fake.params();
  params.settings.options["colour"] = "red";
  auto b = AmdBackend::create(params);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("backends.amd.options.colour: unknown option"), std::string::npos);
  params = fake.params();
  params.settings.options["devRoot"] = "dev";
  EXPECT_FALSE(AmdBackend::create(params).ok());
  params = fake.params();
  params.settings.splitCount = 0;
  EXPECT_FALSE(AmdBackend::create(params).ok());
}

TEST(AmdBackendConfig, HamisNamesAndDeviceFilters) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto b = backend(fake.params());
  ContainerResources c{"main", false, {{"amd.com/gpu", 1}, {"amd.com/gpumem", 8000}, {"amd.com/gpucores", 30}}};
  auto q = b->parseRequest(c, {{"amd.com/use-gpu-uuid", "AMD-A,AMD-C"}, {"amd.com/nouse-gputype", "MI210"}});
  ASSERT_TRUE(q.ok()) << q.error().message;
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->memoryMiB, 8000u);
  EXPECT_EQ((*q)->constraints.includeIds, (std::vector<std::string>{"AMD-A", "AMD-C"}));
  EXPECT_EQ((*q)->constraints.excludeModels, (std::vector<std::string>{"MI210"}));
}

TEST(AmdDiscovery, ADriverThatFailsIsAnErrorInWordsAndIsTriedAgain) {
  FakeAmdSmi fake(wholeCpxAndMi210() + "option noDriver=1\n");
  auto b = backend(fake.params());
  auto devices = b->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.error().message.find("amdsmi_init failed"), std::string::npos) << devices.error().message;
  fake.write(wholeCpxAndMi210());
  EXPECT_TRUE(b->discover().ok());
}

TEST(AmdHealth, AGpuAmdSmiNoLongerListsTurnsUnhealthy) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto b = backend(fake.params());
  ASSERT_TRUE(b->discover().ok());
  auto none = b->waitForHealthEvents(std::chrono::milliseconds(1));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  std::string text = wholeCpxAndMi210();
  text.erase(0, text.find('\n') + 1);  // AMD-A falls off the bus
  fake.write(text);
  auto events = b->waitForHealthEvents(std::chrono::milliseconds(1));
  ASSERT_TRUE(events.ok()) << events.error().message;
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].deviceId, "AMD-A");
  EXPECT_EQ((*events)[0].health, Health::kUnhealthy);
}

TEST(AmdLimiter, AShareGetsTheGpusRenderNodeAndItsPartOfTheHeap) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto b = backend(fake.params());
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf((*devices)[0], 49152, ""));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(mounts(*spec, "/dev/kfd"));
  EXPECT_TRUE(mounts(*spec, "/dev/dri/renderD128"));
  EXPECT_TRUE(mounts(*spec, "/dev/dri/card0"));
  EXPECT_EQ(spec->env.at(kHeapSizeEnv), "25");
  // The whole GPU: the runtime's own heap, no variable.
  spec = b->containerSpec(grantOf((*devices)[0], 196608, ""));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->env.count(kHeapSizeEnv), 0u);
}

TEST(AmdLimiter, APartitionGrantGetsThatPartitionsRenderNode) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  auto b = backend(fake.params());
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf((*devices)[1], 24576, "CPX@3"));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(mounts(*spec, "/dev/dri/renderD132"));
  EXPECT_TRUE(mounts(*spec, "/dev/dri/card4"));
  EXPECT_FALSE(mounts(*spec, "/dev/dri/renderD129"));
  EXPECT_EQ(spec->env.count(kHeapSizeEnv), 0u);  // a partition is a GPU of its own
  // A grant without a token (none from this backend's scheduler): the partition the container
  // holds already, else the lowest no live container holds, with a notice.
  auto again = b->containerSpec(grantOf((*devices)[1], 24576, ""));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(mounts(*again, "/dev/dri/renderD132"));
  EXPECT_TRUE(again->notices.empty());
  auto other = grantOf((*devices)[1], 24576, "");
  other.container.holder = "other";
  auto planned = b->containerSpec(other);
  ASSERT_TRUE(planned.ok()) << planned.error().message;
  EXPECT_TRUE(mounts(*planned, "/dev/dri/renderD129"));  // partition 0
  ASSERT_EQ(planned->notices.size(), 1u);
  EXPECT_EQ(planned->notices[0].reason, "AmdPartitionChosenOnNode");
  auto third = other;
  third.container.holder = "third";
  auto next = b->containerSpec(third);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(mounts(*next, "/dev/dri/renderD130"));  // partition 1
  ASSERT_TRUE(b->release(other.container).ok());
  third.container.holder = "fourth";
  next = b->containerSpec(third);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(mounts(*next, "/dev/dri/renderD129"));  // partition 0 again, released
  auto refused = b->containerSpec(grantOf((*devices)[1], 24576, "CPX"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not a partition"), std::string::npos) << refused.error().message;
  refused = b->containerSpec(grantOf((*devices)[0], 1024, "CPX@1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("which is not partitioned now"), std::string::npos);
}

TEST(AmdLimiter, AnOldAmdSmisRenderNodeComesFromTheKfdTopology) {
  // AMD SMI before ROCm 6.4 has no enumeration info: the fake's first processor is KFD node 1.
  FakeAmdSmi fake("gpu uuid=AMD-A bdf=0x100 render=-1\n");
  auto params = fake.params();
  params.settings.options["sysfsRoot"] = (fake.dir() / "sys").string();
  auto b = backend(params);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok());
  auto spec = b->containerSpec(grantOf((*devices)[0], 1024, ""));
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message.find("gives no drm_render_minor"), std::string::npos) << spec.error().message;
  const auto node = fake.dir() / "sys/class/kfd/kfd/topology/nodes/1";
  std::filesystem::create_directories(node);
  std::ofstream(node / "properties") << "cpu_cores_count 0\nsimd_count 1216\ndrm_render_minor 129\n";
  spec = b->containerSpec(grantOf((*devices)[0], 1024, ""));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(mounts(*spec, "/dev/dri/renderD129"));
  EXPECT_FALSE(mounts(*spec, "/dev/dri/card0"));  // the card minor needs the enumeration info
}

TEST(AmdProcesses, EachProcessWithItsVramInBothLayouts) {
  for (const char* version : {"26", "24"}) {
    FakeAmdSmi fake(wholeCpxAndMi210() + "proc uuid=AMD-A pid=41 vramBytes=1048576\nproc uuid=AMD-B5 pid=42 vramBytes=2048\n" +
                    "option version=" + version + "\n");
    auto b = backend(fake.params());
    ASSERT_TRUE(b->discover().ok());
    auto procs = b->deviceProcesses();
    ASSERT_TRUE(procs.ok()) << procs.error().message;
    ASSERT_EQ(procs->size(), 2u) << version;
    EXPECT_EQ((*procs)[0], (DeviceProcess{41, "AMD-A", 0, 1048576, std::nullopt}));
    EXPECT_EQ((*procs)[1], (DeviceProcess{42, "AMD-B0", 1, 2048, std::nullopt}));  // a partition's: its GPU's
  }
}

}  // namespace
}  // namespace vgpu::amd
