#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim_backend.h"
#include "test_support.h"

namespace vgpu::sim {
namespace {

using ::testing::HasSubstr;
using vgpu::testing::TempDir;

const char* kDevices = R"(devices:
  - {id: SIM-0, model: Sim A100, memoryMiB: 40000, numa: 0}
  - {id: SIM-1, model: Sim A100, memoryMiB: 40000, numa: 1, health: unhealthy}
)";

std::unique_ptr<SimBackend> make(const std::string& devicesFile, BackendSettings settings = {}) {
  BackendParams p;
  p.name = "sim";
  p.settings = std::move(settings);
  p.settings.options["devicesFile"] = devicesFile;
  auto b = SimBackend::create(p);
  EXPECT_TRUE(b.ok());
  return b.ok() ? std::move(b).value() : nullptr;
}

TEST(SimBackend, DiscoversDevicesWithSplitAndScaling) {
  TempDir dir;
  BackendSettings s;
  s.splitCount = 4;
  s.memoryScaling = 1.5;
  auto b = make(dir.write("devices.yaml", kDevices), s);
  auto devices = b->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].id, "SIM-0");
  EXPECT_EQ((*devices)[0].memoryMiB, 60000u);
  EXPECT_EQ((*devices)[0].splitCount, 4u);
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
  EXPECT_EQ((*devices)[1].health, Health::kUnhealthy);
  EXPECT_EQ((*devices)[1].numaNode, 1);
}

TEST(SimBackend, BadDevicesFilesAreClearErrors) {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"devices: {}", "expected a `devices:` list"},
      {"devices:\n  - {id: A, memoryMiB: lots}", "devices[0].memoryMiB (line 2): expected a number"},
      {"devices:\n  - {memoryMiB: 5}", "`id` is required"},
      {"devices:\n  - {id: A, memoryMiB: 5, colour: red}", "devices[0].colour (line 2): unknown key"},
      {"devices:\n  - {id: A, memoryMiB: 5}\n  - {id: A, memoryMiB: 5}", "duplicate device id A"},
      {"devices:\n  - {id: A, memoryMiB: 5, health: meh}", "expected healthy or unhealthy"},
      {"devices: [", "sim devices file"},
  };
  for (const auto& [text, expected] : cases) {
    auto b = make(dir.write("bad.yaml", text));
    auto r = b->discover();
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_THAT(r.error().message, HasSubstr(expected)) << text;
  }
  auto none = make("");
  EXPECT_THAT(none->discover().error().message, HasSubstr("options.devicesFile"));
}

TEST(SimBackend, ReportsHealthChangesFromTheFile) {
  TempDir dir;
  const auto path = dir.write("devices.yaml", kDevices);
  auto b = make(path);
  auto first = b->waitForHealthEvents(std::chrono::milliseconds(0));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->empty());  // the first look only learns the current health
  dir.write("devices.yaml", R"(devices:
  - {id: SIM-0, model: Sim A100, memoryMiB: 40000, health: unhealthy}
  - {id: SIM-1, model: Sim A100, memoryMiB: 40000}
)");
  auto events = b->waitForHealthEvents(std::chrono::milliseconds(500));
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0], (HealthEvent{"SIM-0", Health::kUnhealthy, "devices file says unhealthy"}));
  EXPECT_EQ((*events)[1].health, Health::kHealthy);
}

TEST(SimBackend, ContainerSpecNamesDevicesAndLimitsAndReconcileForgets) {
  TempDir dir;
  auto b = make(dir.write("devices.yaml", kDevices));
  ContainerGrant g;
  g.container = {"uid-1", "main"};
  g.devices = {{"sim", "SIM-0", 0, 3000, 30, 2}, {"sim", "SIM-1", 1, 4000, 30, 0}};
  g.hostDir = (dir.path() / "c1").string();
  auto spec = b->containerSpec(g);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->env.at("VGPU_SIM_VISIBLE_DEVICES"), "SIM-0,SIM-1");
  EXPECT_EQ(spec->env.at("VGPU_SIM_MEMORY_LIMIT_1"), "4000m");
  EXPECT_EQ(spec->env.at("VGPU_SIM_CORE_LIMIT"), "30");
  ASSERT_EQ(spec->mounts.size(), 1u);
  EXPECT_EQ(spec->mounts[0].hostPath, g.hostDir);
  EXPECT_EQ(b->held().size(), 1u);
  ASSERT_TRUE(b->reconcile({{"uid-2", "main"}}).ok());
  EXPECT_TRUE(b->held().empty());
  EXPECT_FALSE(b->containerSpec(ContainerGrant{}).ok());
}

TEST(SimBackend, FilterAnnotationsFollowTheCountResourceDomain) {
  BackendParams p;
  p.name = "sim";
  p.resources.count = "nvidia.com/gpu";
  auto b = SimBackend::create(p);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->rules().annotations.includeModels, "nvidia.com/use-gputype");
  EXPECT_EQ((*b)->rules().annotations.numaBind, "nvidia.com/numa-bind");
}

}  // namespace
}  // namespace vgpu::sim
