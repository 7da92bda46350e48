// The topology device policy on the three node shapes of issue 23 (links given as the
// inventory carries them; tests/unit/nvidia/topology_test.cpp derives the same shapes from
// the fake NVML).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/link_sets.h"
#include "vgpu/placement.h"

namespace vgpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using LinkOf = std::function<DeviceLink(int a, int b)>;

DeviceLink link(LinkClass c, std::uint32_t lanes = 0) { return {"", c, lanes, standardLinkRank(c, lanes)}; }

/// Eight (or `count`) whole-GPU sim devices, split 1, four per NUMA node (0-3 on node 0,
/// 4-7 on node 1...), linked by `linkOf`.
std::vector<Device> eightGpus(const LinkOf& linkOf, int count = 8) {
  std::vector<Device> out = testing::simDevices(count, "", 81920, "sim", 1, [](int i) { return i / 4; });
  for (Device& d : out) {
    for (int p = 0; p < count; ++p) {
      if (p == d.index) continue;
      DeviceLink l = linkOf(d.index, p);
      l.peer = "gpu" + std::to_string(p);
      d.links.push_back(l);
    }
  }
  return out;
}

/// DGX-like: every GPU reaches every other through the switch fabric, 18 links each.
DeviceLink fabric(int, int) { return link(LinkClass::kSwitchFabric, 18); }
/// Two islands of four, NVLink all-to-all inside (4 links a pair), PCIe across sockets.
DeviceLink islands(int a, int b) {
  return a / 4 == b / 4 ? link(LinkClass::kDirect, 4) : link(LinkClass::kCrossNuma);
}
/// PCIe only, two sockets; pairs (0,1), (2,3)... share a PCIe switch.
DeviceLink pcie(int a, int b) {
  if (a / 4 != b / 4) return link(LinkClass::kCrossNuma);
  return a / 2 == b / 2 ? link(LinkClass::kPcieSwitch) : link(LinkClass::kSameNuma);
}

class TopologyPlacementTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backends_.add(testing::loadSim()).ok()); }

  NodeState node(const std::string& name, std::vector<Device> devs) {
    return NodeState(name, std::make_shared<const NodeInventory>(std::move(devs), backends_));
  }
  PreparedPod pod(std::int64_t gpus, Annotations annotations = {{std::string(keys::kPodDevicePolicy), "topology"}}) {
    auto request = buildPodRequest(backends_, "default", "p", {{"train", false, {{"vgpu.io/sim", gpus}}}}, annotations);
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, backends_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }
  /// Places the pod and returns the indices it got (sorted).
  std::vector<int> place(const PreparedPod& p, NodeState& n) {
    auto a = engine_.assign(p, n);
    EXPECT_TRUE(a.ok()) << a.error().message;
    if (!a.ok()) return {};
    EXPECT_TRUE(n.add(*a).ok());
    std::vector<int> out;
    for (const auto& g : a->containers[0].devices) out.push_back(g.deviceIndex);
    std::sort(out.begin(), out.end());
    return out;
  }
  /// Occupies the devices of `indices` with whole-GPU pods.
  void occupy(NodeState& n, std::vector<int> indices) {
    Assignment a{n.name, {{"c", false, {}}}};
    for (int i : indices) a.containers[0].devices.push_back({"sim", "gpu" + std::to_string(i), i, 81920, 100, -1, -1});
    ASSERT_TRUE(n.add(a).ok());
  }

  BackendSet backends_;
  PlacementEngine engine_;
};

TEST_F(TopologyPlacementTest, IslandNodeGivesAFourGpuPodOneWholeIsland) {
  auto n = node("n", eightGpus(islands));
  occupy(n, {0});  // island 0-3 has 3 free, island 4-7 has 4
  EXPECT_THAT(place(pod(4), n), ElementsAre(4, 5, 6, 7));
}

TEST_F(TopologyPlacementTest, SpreadWouldHaveSplitTheIslands) {
  // The same request under spread takes the lowest idle devices, across both islands.
  auto n = node("n", eightGpus(islands));
  occupy(n, {0});
  EXPECT_THAT(place(pod(4, {{std::string(keys::kPodDevicePolicy), "spread"}}), n), ElementsAre(1, 2, 3, 4));
}

TEST_F(TopologyPlacementTest, OneGpuPodDoesNotBreakAWholeIsland) {
  auto n = node("n", eightGpus(islands));
  occupy(n, {4, 5, 6});  // island 0-3 whole, 7 alone on the other island
  EXPECT_THAT(place(pod(1), n), ElementsAre(7));
  auto m = node("m", eightGpus(islands));
  occupy(m, {0, 1, 2});  // 3 alone, 4-7 whole
  EXPECT_THAT(place(pod(1), m), ElementsAre(3));
}

TEST_F(TopologyPlacementTest, TwoGpuPodTakesThePairLeftOnABrokenIsland) {
  auto n = node("n", eightGpus(islands));
  occupy(n, {4, 5});  // 0-3 whole, 6-7 left on the other island
  EXPECT_THAT(place(pod(2), n), ElementsAre(6, 7));
}

TEST_F(TopologyPlacementTest, SwitchFabricNodeLeavesTheLargestRemainderLinked) {
  // All pairs are equal: the lowest devices, and every later pod still gets fabric links.
  auto n = node("n", eightGpus(fabric));
  EXPECT_THAT(place(pod(2), n), ElementsAre(0, 1));
  EXPECT_THAT(place(pod(4), n), ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(place(pod(2), n), ElementsAre(6, 7));
}

TEST_F(TopologyPlacementTest, PcieNodeKeepsAPairOnOneSwitchAndASetOnOneSocket) {
  auto n = node("n", eightGpus(pcie));
  occupy(n, {0, 2});  // switches (0,1) and (2,3) each have one left; (4,5) and (6,7) whole
  EXPECT_THAT(place(pod(2), n), ElementsAre(4, 5));
  auto m = node("m", eightGpus(pcie));
  occupy(m, {0});
  // Four GPUs: one socket's worth beats 1,2,3 + one across the socket link.
  EXPECT_THAT(place(pod(4), m), ElementsAre(4, 5, 6, 7));
  // One GPU: the one whose switch partner is already taken.
  auto k = node("k", eightGpus(pcie));
  occupy(k, {0});
  EXPECT_THAT(place(pod(1), k), ElementsAre(1));
}

TEST_F(TopologyPlacementTest, HamisTopologyAwareAnnotationSelectsThePolicy) {
  auto n = node("n", eightGpus(islands));
  occupy(n, {0});
  EXPECT_THAT(place(pod(4, {{std::string(keys::kHamiPodDevicePolicy), "topology-aware"}}), n), ElementsAre(4, 5, 6, 7));
  auto request = buildPodRequest(backends_, "default", "p", {{"train", false, {{"vgpu.io/sim", 1}}}},
                                 {{std::string(keys::kHamiPodDevicePolicy), "fastest"}});
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(request.error().message, HasSubstr("hami.io/gpu-scheduler-policy \"fastest\": \"fastest\" is not one of binpack, spread"));
  EXPECT_THAT(request.error().message, HasSubstr("\"fastest\""));
}

TEST_F(TopologyPlacementTest, NodeScorePrefersTheNodeWithTheBetterLinkedSet) {
  std::vector<NodeState> nodes{node("pcie", eightGpus(pcie)), node("islands", eightGpus(islands))};
  occupy(nodes[0], {0, 2});  // the busier node: binpack alone would choose it
  auto placement = engine_.place(pod(2), nodes);
  ASSERT_TRUE(placement.chosen);
  EXPECT_EQ(nodes[*placement.chosen].name, "islands");
}

TEST_F(TopologyPlacementTest, NodeWithoutLinksStillPlacesByTheNodePolicy) {
  auto devs = eightGpus(fabric);
  for (auto& d : devs) d.links.clear();
  auto n = node("n", std::move(devs));
  EXPECT_THAT(place(pod(2), n), ElementsAre(0, 1));
}

TEST_F(TopologyPlacementTest, NumaBindingRestrictsTheSearchToOneSocket) {
  auto n = node("n", eightGpus(pcie));
  occupy(n, {4, 5, 6});
  auto p = pod(2, {{std::string(keys::kPodDevicePolicy), "topology"}, {"vgpu.io/numa-bind", "true"}});
  const auto got = place(p, n);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LT(got[1], 4);  // never 7 with one of 0-3
}

TEST_F(TopologyPlacementTest, NodesTooLargeForATableAreSearchedPerPodWithTheSameRules) {
  // Twelve GPUs in three islands: more than LinkTable::kMaxDevices.
  ASSERT_GT(12u, LinkTable::kMaxDevices);
  auto n = node("n", eightGpus(islands, 12));
  ASSERT_EQ(n.inventory->group("sim")->linkTable, nullptr);
  occupy(n, {0, 4, 5, 6});  // 1-3 left on island 0, 7 alone, 8-11 whole
  EXPECT_THAT(place(pod(1), n), ElementsAre(7));
  EXPECT_THAT(place(pod(4), n), ElementsAre(8, 9, 10, 11));
  EXPECT_THAT(place(pod(2), n), ElementsAre(1, 2));
}

TEST(LinkSets, TheTableAnswersAsTheSearchDoes) {
  BackendSet backends;
  ASSERT_TRUE(backends.add(testing::loadSim()).ok());
  for (const LinkOf& shape : {LinkOf(fabric), LinkOf(islands), LinkOf(pcie)}) {
    const NodeInventory inventory(eightGpus(shape), backends);
    const auto* group = inventory.group("sim");
    ASSERT_NE(group->linkTable, nullptr);
    for (std::uint32_t mask = 1; mask < 256; ++mask) {
      std::vector<std::uint32_t> fitting;
      for (std::uint32_t i = 0; i < 8; ++i)
        if (mask >> i & 1u) fitting.push_back(i);
      for (std::size_t count = 1; count <= fitting.size(); ++count) {
        std::vector<std::uint64_t> tied;
        const auto searched = bestLinkedSet(inventory, fitting, {}, count, nullptr, &tied);
        ASSERT_TRUE(searched.has_value());
        auto toGroup = [&](std::uint64_t set) {
          std::uint32_t out = 0;
          for (std::size_t k = 0; k < fitting.size(); ++k)
            if (set >> k & 1u) out |= 1u << fitting[k];
          return out;
        };
        const auto answer = group->linkTable->best(mask, count, false);
        ASSERT_FALSE(answer.empty());
        EXPECT_EQ(answer.front(), toGroup(*searched)) << "mask " << mask << " count " << count;
        std::vector<std::uint32_t> expected, got(answer.begin(), answer.end());
        for (std::uint64_t set : tied) expected.push_back(toGroup(set));
        std::sort(expected.begin(), expected.end());
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, expected) << "mask " << mask << " count " << count;
      }
    }
  }
}

TEST(LinkSets, DescribesTheChoiceAndTheIslandsLeftWhole) {
  BackendSet backends;
  ASSERT_TRUE(backends.add(testing::loadSim()).ok());
  const NodeInventory inventory(eightGpus(islands), backends);
  const std::vector<std::uint32_t> chosen{0, 1, 2, 3}, left{4, 5, 6, 7};
  EXPECT_EQ(describeLinkedSet(inventory, chosen, left), "devices 0-3: direct x4 all-to-all; 4-7 kept whole (direct x4 all-to-all)");
}

TEST(LinkSets, GivesUpOnSearchesTooLargeInsteadOfStalling) {
  BackendSet backends;
  ASSERT_TRUE(backends.add(testing::loadSim()).ok());
  const NodeInventory inventory(eightGpus(fabric), backends);
  std::vector<std::uint32_t> many(kMaxLinkCandidates + 1, 0);
  EXPECT_FALSE(bestLinkedSet(inventory, many, {}, 2).has_value());
}

}  // namespace
}  // namespace vgpu
