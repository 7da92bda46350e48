#include "vgpu/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace vgpu {
namespace {

std::string errorOf(const std::string& yaml) {
  auto r = parseDeviceConfig(yaml, "test.yaml");
  return r.ok() ? "<parsed>" : r.error().message;
}

// The message names the file, the line, the key path and what was expected.
void expectError(const std::string& yaml, const std::string& part) {
  std::string message = errorOf(yaml);
  EXPECT_NE(message, "<parsed>") << yaml;
  EXPECT_EQ(message.rfind("test.yaml", 0), 0u) << message;
  EXPECT_NE(message.find(part), std::string::npos) << "input:\n" << yaml << "\nmessage: " << message;
}

TEST(ConfigParse, TheDocumentedExampleParses) {
  auto r = loadDeviceConfig(std::filesystem::path(VGPU_DOCS_DIR) / "device-config.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const DeviceConfig& c = *r;
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.scheduler.nodePolicy, NodePolicy::kBinpack);
  EXPECT_EQ(c.scheduler.devicePolicy, DevicePolicy::kSpread);
  EXPECT_EQ(c.scheduler.heartbeatTimeout, std::chrono::seconds{90});
  ASSERT_EQ(c.backends.size(), 4u);
  EXPECT_EQ(c.backends[0].name, "sim");  // file order is kept
  ASSERT_EQ(c.enabledBackends().size(), 1u);
  EXPECT_EQ(c.enabledBackends()[0]->name, "sim");
  EXPECT_EQ(c.backend("sim")->settings.options.at("devicesFile"), "/etc/vgpu/sim-devices.yaml");

  const BackendConfig* nvidia = c.backend("nvidia");
  ASSERT_NE(nvidia, nullptr);
  EXPECT_FALSE(nvidia->enabled);
  EXPECT_EQ(nvidia->resources.count, "nvidia.com/gpu");
  EXPECT_EQ(nvidia->resources.memory, "nvidia.com/gpumem");
  EXPECT_EQ(nvidia->resources.memoryPercent, "nvidia.com/gpumem-percentage");
  EXPECT_EQ(nvidia->resources.cores, "nvidia.com/gpucores");
  EXPECT_EQ(nvidia->resources.priority, "nvidia.com/priority");
  EXPECT_EQ(nvidia->settings.splitCount, 10u);

  const BackendConfig* cambricon = c.backend("cambricon");
  ASSERT_NE(cambricon, nullptr);
  EXPECT_EQ(cambricon->resources.count, "cambricon.com/vmlu");
  EXPECT_EQ(cambricon->resources.memory, "cambricon.com/mlu.smlu.vmemory");
  EXPECT_EQ(cambricon->resources.cores, "cambricon.com/mlu.smlu.vcore");
  EXPECT_EQ(cambricon->settings.memoryUnitMiB, 256u);
  EXPECT_FALSE(cambricon->resources.memoryPercent.has_value());

  const BackendConfig* hygon = c.backend("hygon");
  ASSERT_NE(hygon, nullptr);
  EXPECT_EQ(hygon->resources.count, "hygon.com/dcunum");
  EXPECT_EQ(hygon->resources.memory, "hygon.com/dcumem");
  EXPECT_EQ(hygon->resources.cores, "hygon.com/dcucores");
  EXPECT_FALSE(hygon->settings.splitCount.has_value());

  ASSERT_EQ(c.nodes.size(), 1u);
  BackendSettings onNode = c.settingsFor("sim", c.nodes[0].name);
  EXPECT_EQ(onNode.splitCount, 8u);
  EXPECT_EQ(onNode.memoryScaling, 1.5);
  EXPECT_EQ(onNode.coreScaling, 1.0);  // not overridden: the section's value
  EXPECT_EQ(onNode.options.at("devicesFile"), "/etc/vgpu/sim-devices-large.yaml");
  BackendSettings elsewhere = c.settingsFor("sim", "another-node");
  EXPECT_EQ(elsewhere.splitCount, 4u);
  EXPECT_EQ(c.settingsFor("sim", ""), elsewhere);
}

TEST(ConfigParse, MinimalConfigTakesDefaults) {
  auto r = parseDeviceConfig("backends:\n  sim:\n    enabled: true\n", "x.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->scheduler, SchedulerConfig{});
  EXPECT_EQ(r->backends[0].settings, BackendSettings{});
  EXPECT_EQ(r->backends[0].resources, ResourceNamesConfig{});
  EXPECT_TRUE(r->nodes.empty());
  EXPECT_EQ(r->backend("nvidia"), nullptr);
  EXPECT_EQ(r->settingsFor("nvidia", "n"), BackendSettings{});
}

// An operator moving from HAMi keeps its chart value (gpuSchedulerPolicy: topology-aware).
TEST(ConfigParse, HamisTopologyAwareDevicePolicyIsOurTopology) {
  auto r = parseDeviceConfig("version: 1\nscheduler: {devicePolicy: topology-aware}\n", "t.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->scheduler.devicePolicy, DevicePolicy::kTopology);
}

TEST(ConfigParse, EveryTypedKeyIsRead) {
  auto r = parseDeviceConfig(R"(
version: 1
scheduler: {nodePolicy: spread, devicePolicy: binpack, heartbeatTimeout: 1h2m3s}
backends:
  a:
    enabled: True
    resources: {count: a.io/n, memory: a.io/mem, memoryPercentage: a.io/pct, cores: a.io/c, priority: a.io/p}
    splitCount: +3
    memoryScaling: 2.5
    coreScaling: 0.5
    memoryUnitMiB: 256
    defaultMemory: 1024
    defaultCores: 30
    defaultCount: 2
    options: {x: 1, y: "two", z: "", w: yes}
  b: {}
  c:
nodes:
  - name: n1
    backends:
      a: {defaultCores: 50, options: {x: 9, new: v}}
  - name: n2
)",
                             "t.yaml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->scheduler.nodePolicy, NodePolicy::kSpread);
  EXPECT_EQ(r->scheduler.devicePolicy, DevicePolicy::kBinpack);
  EXPECT_EQ(r->scheduler.heartbeatTimeout, std::chrono::seconds{3723});
  const BackendConfig& a = r->backends[0];
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.resources.priority, "a.io/p");
  EXPECT_EQ(a.settings.splitCount, 3u);
  EXPECT_EQ(a.settings.memoryScaling, 2.5);
  EXPECT_EQ(a.settings.coreScaling, 0.5);
  EXPECT_EQ(a.settings.memoryUnitMiB, 256u);
  EXPECT_EQ(a.settings.defaultMemoryMiB, 1024u);
  EXPECT_EQ(a.settings.defaultCores, 30u);
  EXPECT_EQ(a.settings.defaultCount, 2u);
  EXPECT_EQ(a.settings.options, (std::map<std::string, std::string>{{"x", "1"}, {"y", "two"}, {"z", ""}, {"w", "yes"}}));
  EXPECT_EQ(r->backends.size(), 3u);
  EXPECT_FALSE(r->backends[2].enabled);
  BackendSettings n1 = r->settingsFor("a", "n1");
  EXPECT_EQ(n1.defaultCores, 50u);
  EXPECT_EQ(n1.splitCount, 3u);
  EXPECT_EQ(n1.options, (std::map<std::string, std::string>{{"x", "9"}, {"y", "two"}, {"z", ""}, {"w", "yes"}, {"new", "v"}}));
  EXPECT_EQ(r->settingsFor("a", "n2"), a.settings);
}

TEST(ConfigParse, OverriddenByTakesOnlySetFields) {
  BackendSettings base;
  base.splitCount = 4;
  base.memoryScaling = 1.0;
  base.options = {{"a", "1"}, {"b", "2"}};
  BackendSettings over;
  over.memoryScaling = 2.0;
  over.defaultCount = 3;
  over.options = {{"b", "20"}, {"c", "30"}};
  BackendSettings r = base.overriddenBy(over);
  EXPECT_EQ(r.splitCount, 4u);
  EXPECT_EQ(r.memoryScaling, 2.0);
  EXPECT_EQ(r.defaultCount, 3u);
  EXPECT_FALSE(r.coreScaling.has_value());
  EXPECT_EQ(r.options, (std::map<std::string, std::string>{{"a", "1"}, {"b", "20"}, {"c", "30"}}));
  EXPECT_EQ(base.overriddenBy(BackendSettings{}), base);
}

TEST(ConfigParse, PolicyNamesRoundTrip) {
  for (auto p : {NodePolicy::kBinpack, NodePolicy::kSpread}) EXPECT_EQ(parseNodePolicy(toString(p)), p);
  for (auto p : {DevicePolicy::kBinpack, DevicePolicy::kSpread, DevicePolicy::kTopology}) EXPECT_EQ(parseDevicePolicy(toString(p)), p);
  EXPECT_FALSE(parseNodePolicy("Binpack").has_value());
  EXPECT_FALSE(parseDevicePolicy("").has_value());
}

struct BadConfig {
  const char* yaml;
  const char* part;
};

class ConfigInvalid : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigInvalid, NamesFileLineKeyAndExpectation) { expectError(GetParam().yaml, GetParam().part); }

INSTANTIATE_TEST_SUITE_P(
    ConfigTable, ConfigInvalid,
    ::testing::Values(
        BadConfig{"", "test.yaml: holds no settings"}, BadConfig{"# only a comment\n", "holds no settings"},
        BadConfig{",", "holds no settings"}, BadConfig{"- a\n,\n", "expected a map"}, BadConfig{"~", "holds no settings"},
        BadConfig{"- a\n- b\n", "test.yaml:1:1: expected a map with keys version"},
        BadConfig{"just text", "expected a map"}, BadConfig{"a: 1\n---\nb: 2\n", "holds more than one YAML document"},
        BadConfig{"backends: [\n", "test.yaml:2:1: not valid YAML"},
        BadConfig{"version: 2\n", "test.yaml:1:1: version: unsupported version 2"},
        BadConfig{"version: one\n", "version: expected an integer"},
        BadConfig{"colour: blue\n", "test.yaml:1:1: colour: unknown key \"colour\" (expected one of: version"},
        BadConfig{"version: 1\nversion: 1\n", "test.yaml:2:1: version: duplicate key"},
        BadConfig{"scheduler: [binpack]\n", "scheduler: expected a map, got a list"},
        BadConfig{"scheduler:\n  nodePolicy: pack\n", "test.yaml:2:3: scheduler.nodePolicy: expected binpack or spread"},
        BadConfig{"scheduler:\n  devicePolicy: [spread]\n", "scheduler.devicePolicy: expected binpack, spread or topology, got a list"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 90\n", "scheduler.heartbeatTimeout: expected a duration"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 1.5m\n", "heartbeatTimeout: expected a duration"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 30s2m\n", "heartbeatTimeout: expected a duration"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 0s\n", "heartbeatTimeout: must be longer than 0s"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 300ms\n", "heartbeatTimeout: expected a duration"},
        BadConfig{"scheduler:\n  heartbeatTimeout: 99999999999999h\n", "heartbeatTimeout: expected a duration"},
        BadConfig{"scheduler:\n  nodepolicy: spread\n", "scheduler.nodepolicy: unknown key"},
        BadConfig{"backends: [sim]\n", "backends: expected a map, got a list"},
        BadConfig{"backends:\n  Sim: {}\n", "test.yaml:2:3: backends.Sim: backend name \"Sim\" must be"},
        BadConfig{"backends:\n  my_gpu: {}\n", "backend name \"my_gpu\""},
        BadConfig{"backends:\n  sim: true\n", "backends.sim: expected a map (the backend's settings)"},
        BadConfig{"backends:\n  sim:\n    enabled: yes\n", "test.yaml:3:5: backends.sim.enabled: expected true or false"},
        BadConfig{"backends:\n  sim:\n    enabled: \"true\"\n", "backends.sim.enabled: expected true or false"},
        BadConfig{"backends:\n  sim:\n    splitCount: 0\n", "backends.sim.splitCount: must be at least 1"},
        BadConfig{"backends:\n  sim:\n    splitCount: -2\n", "backends.sim.splitCount: expected an integer from 1"},
        BadConfig{"backends:\n  sim:\n    splitCount: 2.5\n", "backends.sim.splitCount: expected an integer"},
        BadConfig{"backends:\n  sim:\n    splitCount: \"4\"\n", "splitCount: expected an integer from 1 to 4294967295, got the quoted string"},
        BadConfig{"backends:\n  sim:\n    splitCount: 4294967296\n", "splitCount: expected an integer from 1 to 4294967295"},
        BadConfig{"backends:\n  sim:\n    splitCount: 0x10\n", "splitCount: expected an integer"},
        BadConfig{"backends:\n  sim:\n    splitCount:\n", "backends.sim.splitCount: expected an integer from 1 to 4294967295, got nothing"},
        BadConfig{"backends:\n  sim:\n    splitCount: [1]\n", "splitCount: expected an integer from 1 to 4294967295, got a list"},
        BadConfig{"backends:\n  sim:\n    memoryScaling: 0\n", "backends.sim.memoryScaling: expected a number greater than 0"},
        BadConfig{"backends:\n  sim:\n    memoryScaling: -1.5\n", "memoryScaling: expected a number greater than 0"},
        BadConfig{"backends:\n  sim:\n    coreScaling: .nan\n", "coreScaling: expected a number greater than 0"},
        BadConfig{"backends:\n  sim:\n    coreScaling: inf\n", "coreScaling: expected a number greater than 0"},
        BadConfig{"backends:\n  sim:\n    coreScaling: 1e999\n", "coreScaling: expected a number greater than 0"},
        BadConfig{"backends:\n  sim:\n    memoryUnitMiB: 0\n", "memoryUnitMiB: expected an integer from 1"},
        BadConfig{"backends:\n  sim:\n    defaultMemory: -1\n", "defaultMemory: expected an integer from 0"},
        BadConfig{"backends:\n  sim:\n    defaultMemory: 1Gi\n", "defaultMemory: expected an integer from 0"},
        BadConfig{"backends:\n  sim:\n    defaultCores: 1.5\n", "defaultCores: expected an integer"},
        BadConfig{"backends:\n  sim:\n    defaultCount: 0\n", "defaultCount: expected an integer from 1"},
        BadConfig{"backends:\n  sim:\n    split: 2\n", "backends.sim.split: unknown key \"split\" (expected one of: enabled"},
        BadConfig{"backends:\n  sim:\n    resources:\n      gpu: a.io/b\n", "test.yaml:4:7: backends.sim.resources.gpu: unknown key"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: gpu\n", "backends.sim.resources.count: expected an extended resource name"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: a.io/\n", "expected an extended resource name"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: A.io/x\n", "expected an extended resource name"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: a.io/x y\n", "expected an extended resource name"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: \"\"\n", "resources.count: must not be empty"},
        BadConfig{"backends:\n  sim:\n    resources:\n      count: [a.io/x]\n", "resources.count: expected a string, got a list"},
        BadConfig{"backends:\n  a:\n    resources: {count: x.io/g}\n  b:\n    resources: {memory: x.io/g}\n",
                  "test.yaml:5:17: backends.b.resources.memory: resource name \"x.io/g\" is already used by backends.a.resources.count"},
        BadConfig{"backends:\n  sim:\n    options: [a]\n", "backends.sim.options: expected a map, got a list"},
        BadConfig{"backends:\n  sim:\n    options:\n      nested: {a: 1}\n", "test.yaml:4:7: backends.sim.options.nested: expected a scalar"},
        BadConfig{"backends:\n  sim:\n    options:\n      empty:\n", "backends.sim.options.empty: expected a scalar"},
        BadConfig{"backends:\n  sim:\n    options:\n      a: 1\n      a: 2\n", "test.yaml:5:7: backends.sim.options.a: duplicate key"},
        BadConfig{"backends:\n  sim: {}\n  sim: {}\n", "backends.sim: duplicate key"},
        BadConfig{"backends:\n  ? [a]\n  : 1\n", "backends: keys must be strings, got a list"},
        BadConfig{"nodes: {name: a}\n", "nodes: expected a list"},
        BadConfig{"nodes:\n  - just-a-name\n", "test.yaml:2:5: nodes[0]: expected a map with keys name, backends"},
        BadConfig{"nodes:\n  - backends: {}\n", "test.yaml:2:5: nodes[0]: missing name"},
        BadConfig{"nodes:\n  - name: \"\"\n", "nodes[0].name: must not be empty"},
        BadConfig{"nodes:\n  - name: a\n  - name: a\n", "test.yaml:3:5: nodes[1].name: duplicate node name \"a\""},
        BadConfig{"nodes:\n  - name: a\n    labels: {}\n", "nodes[0].labels: unknown key"},
        BadConfig{"nodes:\n  - name: a\n    backends:\n      sim: {splitCount: 2}\n",
                  "test.yaml:4:7: nodes[0].backends.sim: overrides backend \"sim\", which has no section under backends"},
        BadConfig{"backends: {sim: {}}\nnodes:\n  - name: a\n    backends:\n      sim: {enabled: true}\n",
                  "nodes[0].backends.sim.enabled: unknown key \"enabled\""},
        BadConfig{"backends: {sim: {}}\nnodes:\n  - name: a\n    backends:\n      sim: {splitCount: 0}\n",
                  "nodes[0].backends.sim.splitCount: must be at least 1"},
        BadConfig{"backends: {sim: {}}\nnodes:\n  - name: a\n    backends:\n      sim: 3\n",
                  "nodes[0].backends.sim: expected a map of settings"}),
    [](const auto& info) { return std::to_string(info.index); });

TEST(ConfigParse, UnknownKeysSuggestTheNearestKnownOne) {
  expectError("scheduler:\n  heartbeatTimout: 90s\n", "did you mean heartbeatTimeout?");
  expectError("scheduler:\n  nodepolicy: spread\n", "did you mean nodePolicy?");
  expectError("backends:\n  sim:\n    splitcount: 2\n", "did you mean splitCount?");
  expectError("backends:\n  sim:\n    resources: {memoryPercent: a.io/x}\n", "unknown key \"memoryPercent\"");
  std::string far = errorOf("backends:\n  sim:\n    colour: blue\n");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(ConfigParse, StrayCommasEndInAnErrorNotAHang) {
  // yaml-cpp 0.7's LoadAll loops forever on these (jbeder/yaml-cpp#1040).
  for (const char* text : {",", "  ,", "# c\n,", "---\n,", "- a\n,", ",backends: 4"}) {
    EXPECT_FALSE(parseDeviceConfig(text, "t").ok()) << text;
  }
}

TEST(ConfigParse, NodeOverridesMayPrecedeTheirBackendSection) {
  auto r = parseDeviceConfig("nodes:\n  - name: a\n    backends: {sim: {splitCount: 2}}\nbackends:\n  sim: {}\n", "t");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->settingsFor("sim", "a").splitCount, 2u);
}

TEST(ConfigLoad, MissingOrUnreadableFilesAreErrors) {
  auto missing = loadDeviceConfig("/nonexistent/vgpu/device-config.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/vgpu/device-config.yaml"), std::string::npos);
  auto dir = loadDeviceConfig(std::filesystem::temp_directory_path());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("not a regular file"), std::string::npos) << dir.error().message;
}

TEST(ConfigLoad, ErrorsNameTheFilePath) {
  auto path = std::filesystem::temp_directory_path() /
              ("vgpu-config-test-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(path);
    out << "backends:\n  sim:\n    splitCount: 0\n";
  }
  auto r = loadDeviceConfig(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind(path.string() + ":3:5: backends.sim.splitCount", 0), 0u) << r.error().message;
}

}  // namespace
}  // namespace vgpu
