#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <map>

#include "cluster_file.h"
#include "sim_run.h"
#include "test_support.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;
using testing::runSim;
using testing::SimRun;
using testing::TempDir;

std::uint64_t u64(const boost::json::value& v) { return boost::json::value_to<std::uint64_t>(v); }

const std::string kExamples = std::string("--cluster ") + VGPU_EXAMPLES_DIR + "/cluster.yaml --pods " +
                              VGPU_EXAMPLES_DIR + "/pods.yaml";

TEST(VgpuSim, PlacesTheExampleWorkloadWithinEveryDevicesCapacity) {
  const SimRun run = runSim(kExamples + " --output json");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  const auto doc = boost::json::parse(run.out).as_object();
  std::map<std::string, std::string> status;
  for (const auto& p : doc.at("pods").as_array())
    status[std::string(p.at("pod").as_string())] = std::string(p.at("status").as_string());
  EXPECT_EQ(status.size(), 34u);
  EXPECT_EQ(status["inference/llm-serve-0"], "placed");
  EXPECT_EQ(status["class/student-09"], "placed");
  EXPECT_EQ(status["research/train-ddp-2"], "placed");
  EXPECT_EQ(status["default/web-frontend"], "no-device-request");
  EXPECT_EQ(status["research/too-big"], "pending");
  EXPECT_EQ(status["research/bad-cores"], "invalid");
  std::map<std::string, std::uint64_t> memoryById;
  for (const auto& d : doc.at("devices").as_array()) {
    const auto& o = d.as_object();
    EXPECT_LE(u64(o.at("usedMemoryMiB")), u64(o.at("memoryMiB"))) << o.at("id");
    EXPECT_LE(u64(o.at("usedCompute")), u64(o.at("computeUnits")));
    EXPECT_LE(u64(o.at("usedShares")), u64(o.at("splitCount")));
    if (o.at("health") != "healthy") {
      EXPECT_EQ(u64(o.at("usedShares")), 0) << o.at("id");
    }
  }
  for (const auto& p : doc.at("pods").as_array()) {
    if (p.at("pod") != "research/h100-finetune-0") continue;
    for (const auto& c : p.at("containers").as_array())
      for (const auto& d : c.at("devices").as_array()) EXPECT_THAT(std::string(d.at("id").as_string()), HasSubstr("h100"));
  }
}

TEST(VgpuSim, TextReportSaysWhyPodsArePending) {
  const SimRun run = runSim(kExamples);
  ASSERT_EQ(run.exitCode, 0);
  EXPECT_THAT(run.out, HasSubstr("Placements (node policy binpack, device policy spread)"));
  EXPECT_THAT(run.out, HasSubstr("research/too-big: no node fits"));
  EXPECT_THAT(run.out, HasSubstr("asks for 100000 MiB but the whole device has 81920 MiB"));
  // What the pod's condition will say: vgpu-scheduler's categories, counted (issue 27 item 8).
  EXPECT_THAT(run.out, ::testing::ContainsRegex("kube-scheduler says: 0/[0-9]+ nodes are available: [0-9]+ vgpu: "
                                                "devices too small for the request"));
  EXPECT_THAT(run.out, HasSubstr("research/bad-cores: invalid request"));
  EXPECT_THAT(run.out, HasSubstr("nvidia.com/gpucores must be between 0 and 100, got 150"));
  EXPECT_THAT(run.out, HasSubstr("GPU-h100-2-0"));
  EXPECT_THAT(run.out, HasSubstr("cordoned"));
}

/// A node of two 80 GiB devices, 5 shares each, full of 20 % pods of priority 10 (devices
/// are spread over first), then a pod of priority 1000 asking 50 % of one device.
std::string preemptionScenario(const TempDir& dir, const std::string& urgentClass = "high") {
  dir.write("device-config.yaml",
            "version: 1\nbackends:\n  sim:\n    enabled: true\n    resources: {count: nvidia.com/gpu, memory: "
            "nvidia.com/gpumem, cores: nvidia.com/gpucores}\n    splitCount: 5\n");
  const auto cluster = dir.write("cluster.yaml", "nodes:\n  - name: n1\n    devices:\n      - {backend: sim, "
                                                 "memoryMiB: 81920, count: 2}\n");
  std::string pods =
      "kind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n---\n"
      "kind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n";
  for (int i = 0; i < 10; ++i)
    pods += "---\nkind: Pod\nmetadata: {name: low-" + std::to_string(i) +
            "}\nspec:\n  priorityClassName: low\n  containers:\n    - name: main\n      resources: {limits: "
            "{nvidia.com/gpu: 1, nvidia.com/gpumem: 16384, nvidia.com/gpucores: 20}}\n";
  pods += "---\nkind: Pod\nmetadata: {name: urgent}\nspec:\n  priorityClassName: " + urgentClass +
          "\n  containers:\n    - name: main\n      resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 40960, "
          "nvidia.com/gpucores: 50}}\n";
  const auto podsFile = dir.write("pods.yaml", pods);
  return "--cluster " + cluster.string() + " --pods " + podsFile.string();
}

TEST(VgpuSim, ExplainPreemptionNamesTheFewestPodsOfLowerPriorityOnOneDevice) {
  TempDir dir;
  const SimRun run = runSim(preemptionScenario(dir) + " --explain-preemption default/urgent");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("Preemption for default/urgent (priority 1000), pending:"));
  EXPECT_THAT(run.out, ::testing::ContainsRegex("n1: evict default/low-[0-9] \\(priority 10\\), default/low-[0-9] "
                                                "\\(priority 10\\), default/low-[0-9] \\(priority 10\\); then main -> "
                                                "n1-sim-[01] \\(40960 MiB, 50%\\)"));
  EXPECT_THAT(run.out, HasSubstr("kube-scheduler would choose n1"));
}

TEST(VgpuSim, ExplainPreemptionNeverEvictsPodsOfTheSamePriority) {
  TempDir dir;
  const SimRun run = runSim(preemptionScenario(dir, "low") + " --explain-preemption urgent");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("n1: no victims help"));
  EXPECT_THAT(run.out, HasSubstr("No node: preemption does not help this pod."));
}

TEST(VgpuSim, ExplainPreemptionRefusesUnknownPodsAndClasses) {
  TempDir dir;
  EXPECT_EQ(runSim(preemptionScenario(dir) + " --explain-preemption default/nobody").exitCode, 2);
  EXPECT_EQ(runSim(preemptionScenario(dir) + " --explain-preemption low-0").exitCode, 0);  // placed: nothing to do
  EXPECT_EQ(runSim(preemptionScenario(dir, "missing")).exitCode, 2);                      // undefined class
}

TEST(VgpuSim, BadInputIsAClearErrorAndExitCode2) {
  TempDir dir;
  const auto cluster = dir.write("cluster.yaml", "nodes:\n  - name: n\n    devices:\n      - {backend: sim, memoryMiB: x}\n");
  dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n");
  const auto pods = dir.write("pods.yaml", "kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n");
  EXPECT_EQ(runSim("--cluster " + cluster.string() + " --pods " + pods.string()).exitCode, 2);
  EXPECT_EQ(runSim("--cluster " + cluster.string()).exitCode, 2);
  EXPECT_EQ(runSim(kExamples + " --output yaml").exitCode, 2);
  const auto notPod = dir.write("deploy.yaml", "kind: Deployment\nmetadata: {name: d}\n");
  EXPECT_EQ(runSim(std::string("--cluster ") + VGPU_EXAMPLES_DIR + "/cluster.yaml --pods " + notPod.string()).exitCode, 2);
}

TEST(ClusterFile, ExpandsDeviceGroupsWithConfigDefaults) {
  DeviceConfig config;
  BackendConfig sim{"sim", true, {}, {}};
  sim.settings.splitCount = 4;
  sim.settings.memoryScaling = 2.0;
  config.backends.push_back(sim);
  auto nodes = simulator::parseClusterFile(
      "nodes:\n  - name: n1\n    devices:\n      - {backend: sim, model: M, memoryMiB: 1000, count: 4, numaNodes: 2, "
      "unhealthy: [1], attributes: {mode: x}}\n    cordoned: [n1-sim-3]\n",
      "c.yaml", config);
  ASSERT_TRUE(nodes.ok()) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 1u);
  const auto& d = (*nodes)[0].devices;
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].id, "n1-sim-0");
  EXPECT_EQ(d[0].memoryMiB, 2000u);
  EXPECT_EQ(d[0].splitCount, 4u);
  EXPECT_EQ(d[1].health, Health::kUnhealthy);
  EXPECT_EQ(d[2].numaNode, 1);
  EXPECT_TRUE((*nodes)[0].cordoned.contains("n1-sim-3"));
  EXPECT_EQ(d[3].attributes.at("mode"), "x");
}

TEST(VgpuSim, ExplainsWhichLinkedSetItChoseAndWhatItKeptWhole) {
  const std::string args = std::string("--cluster ") + VGPU_EXAMPLES_DIR + "/topology/cluster.yaml --pods " +
                           VGPU_EXAMPLES_DIR + "/topology/pods.yaml";
  const SimRun run = runSim(args);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("ml/notebook on nvlink-node: lab: device 3; 4-7 kept whole (direct x4 all-to-all)"));
  EXPECT_THAT(run.out, HasSubstr("ml/train-b on nvlink-node: trainer: devices 4-7: direct x4 all-to-all"));
  const SimRun json = runSim(args + " --output json");
  ASSERT_EQ(json.exitCode, 0) << json.out;
  const auto doc = boost::json::parse(json.out);
  const auto& notebook = doc.at("pods").as_array()[1].as_object();
  EXPECT_EQ(notebook.at("links").as_array()[0].as_string(), "lab: device 3; 4-7 kept whole (direct x4 all-to-all)");
}

TEST(ClusterFile, DeviceGroupLinksBecomeInventoryLinks) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  auto r = simulator::parseClusterFile(
      "nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5, count: 4, idPrefix: g,\n"
      "         links: {groupsOf: 2, within: direct, lanes: 2, across: cross-numa}}\n",
      "c.yaml", config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& devices = (*r)[0].devices;
  ASSERT_EQ(devices.size(), 4u);
  EXPECT_EQ(devices[0].links, (std::vector<DeviceLink>{{"g-1", LinkClass::kDirect, 2, standardLinkRank(LinkClass::kDirect, 2)},
                                                       {"g-2", LinkClass::kCrossNuma, 0, 10},
                                                       {"g-3", LinkClass::kCrossNuma, 0, 10}}));
}

// Issue 41 item 4: topologies islands cannot describe, pair by pair.
const char* const kStarNode =
    "nodes:\n  - name: star\n    devices:\n      - backend: sim\n        memoryMiB: 1000\n        count: 6\n"
    "        idPrefix: g\n        links:\n          matrix:\n"
    "            - ['-', direct x4, direct x2, same-numa, same-numa, same-numa]\n"
    "            - [direct x4, '-', direct x4, same-numa, same-numa, none]\n"
    "            - [direct x2, direct x4, '-', same-numa, same-numa, same-numa]\n"
    "            - [same-numa, same-numa, same-numa, '-', pcie-switch, same-numa]\n"
    "            - [same-numa, same-numa, same-numa, pcie-switch, '-', same-numa]\n"
    "            - [same-numa, none, same-numa, same-numa, same-numa, '-']\n";

TEST(ClusterFile, ALinkMatrixDescribesAStarWithMixedNvlinkCounts) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  auto r = simulator::parseClusterFile(kStarNode, "c.yaml", config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& devices = (*r)[0].devices;
  ASSERT_EQ(devices.size(), 6u);
  const auto rank = [](LinkClass c, std::uint32_t lanes = 0) { return standardLinkRank(c, lanes); };
  EXPECT_EQ(devices[0].links, (std::vector<DeviceLink>{{"g-1", LinkClass::kDirect, 4, rank(LinkClass::kDirect, 4)},
                                                       {"g-2", LinkClass::kDirect, 2, rank(LinkClass::kDirect, 2)},
                                                       {"g-3", LinkClass::kSameNuma, 0, rank(LinkClass::kSameNuma)},
                                                       {"g-4", LinkClass::kSameNuma, 0, rank(LinkClass::kSameNuma)},
                                                       {"g-5", LinkClass::kSameNuma, 0, rank(LinkClass::kSameNuma)}}));
  ASSERT_EQ(devices[5].links.size(), 4u);  // "none" to g-1: not published
  EXPECT_EQ(devices[5].links[0].peer, "g-0");
  EXPECT_EQ(devices[5].links[1].peer, "g-2");
}

TEST(VgpuSim, PlacesOnAnExactTopologyAsTheScheduler) {
  TempDir dir;
  const auto cluster = dir.write("cluster.yaml", kStarNode);
  dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n");
  const auto pods = dir.write(
      "pods.yaml",
      "kind: Pod\nmetadata: {name: pair, annotations: {vgpu.io/device-scheduler-policy: topology}}\n"
      "spec: {containers: [{name: c, resources: {limits: {vgpu.io/sim: 2}}}]}\n---\n"
      "kind: Pod\nmetadata: {name: three, annotations: {vgpu.io/device-scheduler-policy: topology}}\n"
      "spec: {containers: [{name: c, resources: {limits: {vgpu.io/sim: 2}}}]}\n");
  const SimRun run = runSim("--cluster " + cluster.string() + " --pods " + pods.string());
  ASSERT_EQ(run.exitCode, 0) << run.out;
  // The x4 pairs are 0-1 and 1-2: the first takes 0-1 (lower positions), which leaves 3-4
  // on one PCIe switch as the best pair left for the next.
  EXPECT_THAT(run.out, HasSubstr("default/pair on star: c: devices 0,1: direct x4"));
  EXPECT_THAT(run.out, HasSubstr("default/three on star: c: devices 3,4: pcie-switch"));
}

TEST(ClusterFile, ALinkMatrixThatDoesNotFitIsAClearError) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  const std::string head = "nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5, count: 2, links: ";
  const std::pair<std::string, const char*> cases[] = {
      {"{matrix: [['-', direct]]}}", "links.matrix: expected a list of 2 rows"},
      {"{matrix: [['-', direct], [direct]]}}", "links.matrix[1]: expected a row of 2 links"},
      {"{matrix: [['-', direct], [pcie-switch, '-']]}}",
       "links.matrix[1][0]: \"pcie-switch\" differs from nodes[0].devices[0].links.matrix[0][1] (\"direct\")"},
      {"{matrix: [['-', nvlink], [nvlink, '-']]}}", "links.matrix[0][1]: \"nvlink\" is not a link"},
      {"{matrix: [['-', direct xfour], [direct xfour, '-']]}}", "lanes after \" x\" must be a whole number"},
      {"{matrix: [[direct, direct], [direct, '-']]}}", "links.matrix[0][0]: a device's link to itself is written \"-\""},
      {"{groupsOf: 1, within: direct, matrix: [['-', direct], [direct, '-']]}}", "not both"},
  };
  for (const auto& [links, expected] : cases) {
    auto r = simulator::parseClusterFile(head + links + "\n", "c.yaml", config);
    ASSERT_FALSE(r.ok()) << links;
    EXPECT_THAT(r.error().message, HasSubstr(expected)) << links;
  }
}

// Issue 41 item 3: a split count neither the file nor the config gives is said to be assumed.
TEST(ClusterFile, SaysWhereItAssumedASplitCount) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  const std::string yaml =
      "nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5}\n"
      "      - {backend: sim, memoryMiB: 5, splitCount: 8, idPrefix: x}\n  - name: b\n    devices:\n"
      "      - {backend: sim, memoryMiB: 5}\n";
  auto r = simulator::parseClusterFile(yaml, "c.yaml", config);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)[0].devices[1].splitCount, 8u);
  const auto warnings = simulator::splitCountWarnings(*r);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("backend \"sim\": splitCount assumed 10 at nodes[0].devices[0] and 1 more"));
  EXPECT_THAT(warnings[0], HasSubstr("set splitCount"));
  config.backends[0].settings.splitCount = 8;  // the config gives it: nothing assumed
  auto given = simulator::parseClusterFile(yaml, "c.yaml", config);
  ASSERT_TRUE(given.ok());
  EXPECT_TRUE(simulator::splitCountWarnings(*given).empty());

  // A backend that cannot tell (no split_count slot, or 0 for the model) leaves it assumed.
  config.backends[0].settings.splitCount.reset();
  auto untold = simulator::parseClusterFile(yaml, "c.yaml", config, [](const std::string&, const std::string&) {
    return std::optional<std::uint32_t>();
  });
  ASSERT_TRUE(untold.ok());
  EXPECT_EQ(simulator::splitCountWarnings(*untold).size(), 1u);

  TempDir dir;
  const auto cluster = dir.write("cluster.yaml", yaml);
  dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n");
  const auto pods = dir.write("pods.yaml", "kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n");
  // vgpu-sim asks the loaded sim backend, which states its split count (ABI 1.10): nothing assumed.
  const SimRun json = runSim("--cluster " + cluster.string() + " --pods " + pods.string() + " --output json");
  ASSERT_EQ(json.exitCode, 0) << json.out;
  EXPECT_FALSE(boost::json::parse(json.out).as_object().contains("assumptions")) << json.out;
}

// Issue 45 item 1: vgpu-sim takes the split count the backend states for a device's model
// (ABI 1.10), as the node would publish it, unless the file or a per-node setting gives one.
TEST(ClusterFile, TakesTheSplitCountTheBackendStatesForTheModel) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  const std::string yaml =
      "nodes:\n  - name: a\n    devices:\n      - {backend: sim, model: Small, memoryMiB: 5}\n"
      "      - {backend: sim, model: Big, memoryMiB: 5, idPrefix: y}\n"
      "      - {backend: sim, model: Small, memoryMiB: 5, splitCount: 2, idPrefix: x}\n"
      "  - name: b\n    devices:\n      - {backend: sim, model: Small, memoryMiB: 5}\n";
  const simulator::SplitCountSource states = [](const std::string& backend, const std::string& model) {
    EXPECT_EQ(backend, "sim");
    return model == "Small" ? std::optional<std::uint32_t>(7) : std::nullopt;
  };
  auto r = simulator::parseClusterFile(yaml, "c.yaml", config, states);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)[0].devices[0].splitCount, 7u);  // the backend's
  EXPECT_EQ((*r)[0].devices[1].splitCount, 10u);  // not told for Big: assumed, and said
  EXPECT_EQ((*r)[0].devices[2].splitCount, 2u);  // the file's own
  const auto warnings = simulator::splitCountWarnings(*r);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("at nodes[0].devices[1]:"));
  // A per-node setting is one the backend, created with the shared settings, cannot know.
  NodeOverride node;
  node.name = "b";
  node.backends["sim"].splitCount = 3;
  config.nodes.push_back(node);
  auto perNode = simulator::parseClusterFile(yaml, "c.yaml", config, states);
  ASSERT_TRUE(perNode.ok());
  EXPECT_EQ((*perNode)[1].devices[0].splitCount, 3u);
  EXPECT_EQ((*perNode)[0].devices[0].splitCount, 7u);
}

TEST(ClusterFile, ErrorsNameFileKeyAndLine) {
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  const std::pair<const char*, const char*> cases[] = {
      {"nodes: 5", "c.yaml:1: nodes: expected a top-level `nodes:` list"},
      {"nodes:\n  - name: a\n  - name: a\n", "duplicate node \"a\""},
      {"nodes:\n  - name: a\n    devices:\n      - {backend: other, memoryMiB: 5}\n", "\"other\" has no section"},
      {"nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: -5}\n", "c.yaml:4: nodes[0].devices[0].memoryMiB"},
      {"nodes:\n  - name: a\n    gpus: 3\n", "nodes[0].gpus: unknown key"},
      {"nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5, count: 2, unhealthy: [9]}\n",
       "position 9 is beyond count"},
      {"nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5, links: {groupsOf: 2, within: nvlink}}\n",
       "nodes[0].devices[0].links.within: expected cross-numa"},
      {"nodes:\n  - name: a\n    devices:\n      - {backend: sim, memoryMiB: 5, links: {within: direct}}\n",
       "needs groupsOf"},
  };
  for (const auto& [yaml, expected] : cases) {
    auto r = simulator::parseClusterFile(yaml, "c.yaml", config);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_THAT(r.error().message, HasSubstr(expected)) << yaml;
  }
}

}  // namespace
}  // namespace vgpu
