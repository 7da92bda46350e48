// Issue 41: vgpu-sim and vgpu-scheduler choose the same devices for the same inputs. Each
// row of docs/placement.md's tie-break table, on nodes of equal links, of two islands and
// without links, is run through both: a sequence of pods placed one after another (each
// sees the ones before), through the built vgpu-sim binary and through /filter + /bind of a
// running scheduler; every pod must get the same device indices from both.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "../core/test_support.h"
#include "cluster_builder.h"
#include "json_body.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

struct Shape {
  const char* name;
  const char* matrix;  // the cluster file's links, or "" for none
  std::function<LinkClass(int, int)> link;  // kUnknown: no link
};

const Shape kShapes[] = {
    {"equal", "{matrix: [['-', direct x4, direct x4, direct x4], [direct x4, '-', direct x4, direct x4], "
              "[direct x4, direct x4, '-', direct x4], [direct x4, direct x4, direct x4, '-']]}",
     [](int, int) { return LinkClass::kDirect; }},
    {"islands", "{groupsOf: 2, within: direct, lanes: 4, across: cross-numa}",
     [](int a, int b) { return a / 2 == b / 2 ? LinkClass::kDirect : LinkClass::kCrossNuma; }},
    {"unlinked", "", [](int, int) { return LinkClass::kUnknown; }},
};

const char* const kRows[] = {"spread",         "binpack",          "numa,spread",
                             "spread,numa",    "numa,binpack",     "binpack,numa",
                             "topology-aware", "binpack,topology-aware", "numa,spread,topology-aware"};

struct Step {
  const char* name;
  int count, memory, cores;
  const char* weights;  // "" for none
};
const Step kSteps[] = {{"a", 1, 20000, 30, ""},
                       {"b", 1, 10000, 10, ""},
                       {"c", 2, 5000, 10, ""},
                       {"d", 1, 30000, 20, "slot=0,core=1,memory=3"},
                       {"e", 2, 1000, 5, ""}};

std::vector<Device> devicesOf(const std::string& node, const Shape& shape) {
  std::vector<Device> out = gpus(node, 4);
  for (Device& d : out) {
    d.numaNode = d.index / 2;
    d.computeUnits = 100;
    for (int p = 0; p < 4; ++p) {
      const LinkClass c = shape.link(d.index, p);
      if (p == d.index || c == LinkClass::kUnknown) continue;
      const std::uint32_t lanes = c == LinkClass::kDirect ? 4 : 0;
      d.links.push_back({"GPU-" + node + "-" + std::to_string(p), c, lanes, standardLinkRank(c, lanes)});
    }
  }
  return out;
}

json::object stepPod(const std::string& name, const std::string& row, const Step& s) {
  json::object ann{{std::string(keys::kHamiPodDevicePolicy), row}};
  if (*s.weights) ann[std::string(keys::kHamiDeviceScoringWeights)] = s.weights;
  return podJson("default", name,
                 {{"main",
                   {{"nvidia.com/gpu", std::to_string(s.count)},
                    {"nvidia.com/gpumem", std::to_string(s.memory)},
                    {"nvidia.com/gpucores", std::to_string(s.cores)}}}},
                 "vgpu-scheduler", ann);
}

/// What vgpu-sim gives each pod of the sequence: pod name -> device indices.
std::map<std::string, std::vector<int>> simChoices(const std::string& node, const Shape& shape, const std::string& row) {
  TempDir dir;
  dir.write("device-config.yaml",
            "version: 1\nbackends:\n  sim:\n    enabled: true\n    splitCount: 10\n    resources:\n"
            "      count: nvidia.com/gpu\n      memory: nvidia.com/gpumem\n"
            "      memoryPercentage: nvidia.com/gpumem-percentage\n      cores: nvidia.com/gpucores\n");
  std::string cluster = "nodes:\n  - name: " + node +
                        "\n    devices:\n      - {backend: sim, model: NVIDIA A100-SXM4-80GB, memoryMiB: 81920, "
                        "count: 4, numaNodes: 2, idPrefix: GPU-" + node;
  if (*shape.matrix) cluster += ", links: " + std::string(shape.matrix);
  cluster += "}\n";
  const auto clusterPath = dir.write("cluster.yaml", cluster);
  std::string pods;
  for (const Step& s : kSteps) pods += json::serialize(stepPod(s.name, row, s)) + "\n---\n";
  const auto podsPath = dir.write("pods.yaml", pods);
  const std::string command = std::string(VGPU_SIM_BINARY) + " --backend-dir " + VGPU_BACKEND_DIR + " --cluster " +
                              clusterPath.string() + " --pods " + podsPath.string() + " --output json";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    pclose(pipe);
  }
  std::map<std::string, std::vector<int>> choices;
  boost::system::error_code ec;
  const auto doc = json::parse(out, ec);
  if (ec) {
    ADD_FAILURE() << "vgpu-sim did not answer JSON: " << out;
    return choices;
  }
  for (const auto& p : doc.at("pods").as_array()) {
    std::string name(p.at("pod").as_string());
    name = name.substr(name.find('/') + 1);
    auto& got = choices[name];
    if (p.as_object().contains("containers"))
      for (const auto& c : p.at("containers").as_array())
        for (const auto& d : c.at("devices").as_array()) got.push_back(static_cast<int>(d.at("index").as_int64()));
    std::sort(got.begin(), got.end());
  }
  return choices;
}

TEST(SchedulerSimParity, EveryRowOfTheTieBreakTableChoosesAsTheSimulatorDoes) {
  SchedulerHarness h;
  AgentDouble agent(h.api->url());
  TestHttpClient http(h.service->extenderPort());
  int nodeCount = 0;
  for (const Shape& shape : kShapes) {
    for (const std::string row : kRows) {
      const std::string node = std::string(shape.name) + "-" + std::to_string(nodeCount);
      h.createNode(nodeJson(node, devicesOf(node, shape)));
      ASSERT_TRUE(h.awaitNodes(static_cast<std::size_t>(++nodeCount)));
      const auto expected = simChoices(node, shape, row);
      std::uint64_t memory = 0;  // what the pods so far hold on the node, to wait for
      for (const Step& s : kSteps) {
        const std::string name = node + "-" + s.name;
        const auto pod = h.createPod(stepPod(name, row, s));
        const auto filtered = parse(http.post("/filter", extenderArgs(pod, {node})).body);
        ASSERT_EQ(filtered.at("NodeNames").as_array().size(), 1u) << name << ": " << filtered;
        ASSERT_EQ(parse(http.post("/bind", bindingArgs(pod, node)).body).at("Error"), "") << name;
        std::vector<int> got;
        ASSERT_TRUE(eventually([&] {
          const auto stored = h.api->get("pods", "default", name);
          if (!stored) return false;
          const auto text = k8s::annotation(*stored, keys::kPodAssignment);
          if (!text) return false;
          auto a = decodeAssignment(*text);
          if (!a.ok()) return false;
          got.clear();
          for (const auto& c : a->containers)
            for (const auto& d : c.devices) got.push_back(d.deviceIndex);
          return true;
        }));
        std::sort(got.begin(), got.end());
        const auto sim = expected.find(s.name);
        ASSERT_NE(sim, expected.end()) << "vgpu-sim did not report pod " << s.name;
        EXPECT_EQ(got, sim->second) << shape.name << " node, policy \"" << row << "\", pod " << s.name;
        // The next pod must see this one: wait until the cache counts its memory.
        memory += static_cast<std::uint64_t>(s.memory) * static_cast<std::uint64_t>(s.count);
        ASSERT_TRUE(eventually([&] {
          std::uint64_t held = 0;
          for (int i = 0; i < 4; ++i)
            if (auto u = h.service->cache().deviceUsage(node, "GPU-" + node + "-" + std::to_string(i))) held += u->memoryMiB;
          return held == memory;
        })) << name;
      }
    }
  }
}

}  // namespace
}  // namespace vgpu::scheduler
