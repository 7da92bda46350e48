// Discovery through the fake ROCm-SMI/hydmi libraries and a fake sysfs/dev tree.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "drm_nodes.h"
#include "fake_node.h"
#include "hygon_backend.h"

namespace vgpu::hygon {
namespace {

using fake::FakeDcu;
using fake::FakeNode;
using ::testing::HasSubstr;

std::unique_ptr<HygonBackend> make(const BackendParams& p) {
  auto b = HygonBackend::create(p);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

std::string attr(const Device& d, const std::string& key) {
  auto it = d.attributes.find(key);
  return it == d.attributes.end() ? "<none>" : it->second;
}

TEST(HygonDiscovery, FindsDevicesWithSerialIdsModelsMemoryNumaAndNodes) {
  FakeNode node({{.serial = "SN01", .pciId = "54b7", .vramMiB = 16368, .cus = 60, .numa = 0},
                 {.serial = "SN02", .pciId = "6210", .vramMiB = 65520, .cus = 120, .numa = 1}});
  auto b = make(node.params());
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  const Device& z = (*devices)[0];
  EXPECT_EQ(z.id, "DCU-SN01");
  EXPECT_EQ(z.model, "DCU-Z100");
  EXPECT_EQ(z.memoryMiB, 16368u);
  EXPECT_EQ(z.computeUnits, 100u);
  EXPECT_EQ(z.splitCount, kDefaultSplitCount);
  EXPECT_EQ(z.numaNode, 0);
  EXPECT_EQ(z.health, Health::kHealthy);
  EXPECT_EQ(z.backend, "hygon");
  EXPECT_EQ(attr(z, "cuCount"), "60");
  EXPECT_EQ(attr(z, "cardNode"), "card0");
  EXPECT_EQ(attr(z, "renderNode"), "renderD128");
  EXPECT_EQ(attr(z, "pciBusId"), "0000:10:00.0");
  const Device& k = (*devices)[1];
  EXPECT_EQ(k.id, "DCU-SN02");
  EXPECT_EQ(k.index, 1);
  EXPECT_EQ(k.model, "DCU-K100_AI");
  EXPECT_EQ(k.memoryMiB, 65520u);
  EXPECT_EQ(k.numaNode, 1);
  EXPECT_EQ(attr(k, "cuCount"), "120");
  EXPECT_EQ(attr(k, "renderNode"), "renderD129");
  EXPECT_EQ(attr(k, "cardNode"), "card1");
}

TEST(HygonDiscovery, SplitCountAndMemoryScalingComeFromConfig) {
  FakeNode node({{.serial = "SN01", .vramMiB = 16000}});
  auto p = node.params();
  p.settings.splitCount = 8;
  p.settings.memoryScaling = 0.5;
  auto devices = make(p)->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].splitCount, 8u);
  EXPECT_EQ((*devices)[0].memoryMiB, 8000u);
}

TEST(HygonDiscovery, ComputeUnitsComeFromHydmiBeforeTheModelTable) {
  FakeNode node({{.serial = "SN01", .pciId = "54b7", .cus = 56}});
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ(attr((*devices)[0], "cuCount"), "56");
}

TEST(HygonDiscovery, FallsBackToTheModelTableWithoutHydmi) {
  FakeNode node({{.serial = "SN01", .pciId = "62b7", .cus = 56}});
  const auto onlyRocm = node.root() / "rocm-only";
  std::filesystem::create_directories(onlyRocm);
  std::filesystem::create_symlink(std::string(VGPU_FAKE_ROCM_DIR) + "/librocm_smi64.so", onlyRocm / "librocm_smi64.so");
  auto devices = make(node.params("vdev-file", {{"driverDir", onlyRocm.string()}}))->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].model, "DCU-K100");
  EXPECT_EQ(attr((*devices)[0], "cuCount"), "120");
}

TEST(HygonDiscovery, HydmiEnforcementNeedsHydmi) {
  FakeNode node({{.serial = "SN01"}});
  const auto onlyRocm = node.root() / "rocm-only";
  std::filesystem::create_directories(onlyRocm);
  std::filesystem::create_symlink(std::string(VGPU_FAKE_ROCM_DIR) + "/librocm_smi64.so", onlyRocm / "librocm_smi64.so");
  auto devices = make(node.params("hydmi", {{"driverDir", onlyRocm.string()}}))->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("libhydmi.so"));
  EXPECT_THAT(devices.error().message, HasSubstr((onlyRocm / "libhydmi.so").string()));
}

TEST(HygonDiscovery, UnknownPciIdUsesTheDeviceNameAndLeavesCuCountToHydmi) {
  FakeNode node({{.serial = "SN01", .pciId = "1234", .cus = 64, .name = "Hygon-X9"}});
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].model, "DCU-Hygon-X9");
  EXPECT_EQ(attr((*devices)[0], "cuCount"), "64");
}

TEST(HygonDiscovery, IdFallsBackToThePciAddressWithoutASerial) {
  FakeNode node({{.serial = ""}});
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].id, "DCU-0000:10:00.0");
}

TEST(HygonDiscovery, HealthIsJudgedPerDevice) {
  FakeNode node({{.serial = "OK"}, {.serial = "LOST", .lost = true}, {.serial = "NONODE", .withNodes = false}});
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
  EXPECT_EQ((*devices)[1].health, Health::kUnhealthy);
  EXPECT_THAT(attr((*devices)[1], "unhealthyReason"), HasSubstr("rsmi_dev_busy_percent_get(1)"));
  EXPECT_THAT(attr((*devices)[1], "unhealthyReason"), HasSubstr("RSMI_STATUS_AMDGPU_RESTART_ERR"));
  EXPECT_EQ((*devices)[2].health, Health::kUnhealthy);
  EXPECT_THAT(attr((*devices)[2], "unhealthyReason"), HasSubstr("renderD130"));
}

TEST(HygonDiscovery, MissingKfdMakesEveryDeviceUnhealthy) {
  FakeNode node({{.serial = "A"}, {.serial = "B"}});
  std::filesystem::remove(node.dev() / "kfd");
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  for (const auto& d : *devices) {
    EXPECT_EQ(d.health, Health::kUnhealthy) << d.id;
    EXPECT_THAT(attr(d, "unhealthyReason"), HasSubstr("kfd does not exist"));
  }
}

TEST(HygonDiscovery, MissingLibraryNamesEveryPathTried) {
  FakeNode node({{.serial = "A"}});
  const std::string a = (node.root() / "nowhere-1").string(), c = (node.root() / "nowhere-2").string();
  auto devices = make(node.params("vdev-file", {{"driverDir", a + ":" + c}}))->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("librocm_smi64.so"));
  EXPECT_THAT(devices.error().message, HasSubstr(a + "/librocm_smi64.so: not found"));
  EXPECT_THAT(devices.error().message, HasSubstr(c + "/librocm_smi64.so: not found"));
  EXPECT_THAT(devices.error().message, HasSubstr("driverDir"));
}

TEST(HygonDiscovery, RsmiInitFailureIsReportedWithItsStatus) {
  FakeNode node({{.serial = "A"}});
  node.writeConfig("fail rsmi_init 8\n");
  auto devices = make(node.params())->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("rsmi_init failed: status 8 (RSMI_STATUS_INIT_ERROR)"));
}

TEST(HygonDiscovery, ALibraryCallThatFailsIsNamedWithItsStatus) {
  FakeNode node({{.serial = "A"}});
  node.writeConfig("fail rsmi_num_monitor_devices 3\n");
  auto devices = make(node.params())->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("rsmi_num_monitor_devices failed: status 3 (RSMI_STATUS_FILE_ERROR)"));
}

TEST(HygonDiscovery, HealthEventsFollowADeviceThatIsLostAndComesBack) {
  FakeNode node({{.serial = "A"}, {.serial = "B"}});
  auto b = make(node.params());
  ASSERT_TRUE(b->discover().ok());
  auto quiet = b->waitForHealthEvents(std::chrono::milliseconds(0));
  ASSERT_TRUE(quiet.ok());
  EXPECT_TRUE(quiet->empty());

  node.dcus()[1].lost = true;
  node.writeConfig();
  auto lost = b->waitForHealthEvents(std::chrono::seconds(5));
  ASSERT_TRUE(lost.ok()) << lost.error().message;
  ASSERT_EQ(lost->size(), 1u);
  EXPECT_EQ((*lost)[0].deviceId, "DCU-B");
  EXPECT_EQ((*lost)[0].health, Health::kUnhealthy);
  EXPECT_THAT((*lost)[0].reason, HasSubstr("rsmi_dev_busy_percent_get"));

  node.dcus()[1].lost = false;
  node.writeConfig();
  auto back = b->waitForHealthEvents(std::chrono::seconds(5));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].health, Health::kHealthy);
}

TEST(HygonDiscovery, WithoutARenderMinorTheNodesFollowTheVendorSortedOrder) {
  FakeNode node({{.serial = "A", .renderMinor = -1}, {.serial = "B", .renderMinor = -1}});
  auto devices = make(node.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ(attr((*devices)[1], "cardNode"), "card1");
  EXPECT_EQ(attr((*devices)[1], "renderNode"), "renderD129");
  EXPECT_EQ(hygonDrmEntries(node.sys(), node.dev()),
            (std::vector<std::string>{"card0", "card1", "renderD128", "renderD129"}));
}

TEST(HygonDiscovery, NaturalOrderComparesNumbersAsNumbers) {
  EXPECT_TRUE(naturalLess("card2", "card10"));
  EXPECT_FALSE(naturalLess("card10", "card2"));
  EXPECT_TRUE(naturalLess("card9", "renderD128"));
  EXPECT_TRUE(naturalLess("renderD128", "renderD1000"));
  EXPECT_FALSE(naturalLess("card1", "card1"));
}

struct OptionCase {
  const char* description;
  std::map<std::string, std::string> options;
  std::optional<double> coreScaling, memoryScaling;
  std::optional<std::uint32_t> splitCount;
  const char* error;
};

TEST(HygonDiscovery, RefusesBadOptionsAndSettingsNamingTheKey) {
  const OptionCase cases[] = {
      {"unknown option", {{"bogus", "1"}}, {}, {}, {}, "backends.hygon.options.bogus: unknown option"},
      {"bad enforcement", {{"enforcement", "magic"}}, {}, {}, {}, "backends.hygon.options.enforcement: expected vdev-file"},
      {"empty sysfs root", {{"sysfsRoot", ""}}, {}, {}, {}, "backends.hygon.options.sysfsRoot: must not be empty"},
      {"empty driver dir", {{"driverDir", ":"}}, {}, {}, {}, "backends.hygon.options.driverDir"},
      {"core scaling", {}, 2.0, {}, {}, "backends.hygon.coreScaling: must be 1"},
      {"memory scaling", {}, {}, 1.5, {}, "backends.hygon.memoryScaling"},
      {"split count", {}, {}, {}, 50, "backends.hygon.splitCount: must be between 1 and 20"},
  };
  for (const auto& c : cases) {
    BackendParams p;
    p.name = "hygon";
    p.settings.options = c.options;
    p.settings.coreScaling = c.coreScaling;
    p.settings.memoryScaling = c.memoryScaling;
    p.settings.splitCount = c.splitCount;
    auto b = HygonBackend::create(p);
    ASSERT_FALSE(b.ok()) << c.description;
    EXPECT_THAT(b.error().message, HasSubstr(c.error)) << c.description;
  }
}

TEST(HygonDiscovery, TheSchedulerSideNeedsNoLibraries) {
  BackendParams p;
  p.name = "hygon";
  p.settings.options = {{"driverDir", "/nonexistent"}};
  auto b = HygonBackend::create(p);
  ASSERT_TRUE(b.ok()) << b.error().message;
  ContainerResources c{"app", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 1000}}};
  auto r = (*b)->parseRequest(c, {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->has_value());
}

}  // namespace
}  // namespace vgpu::hygon
