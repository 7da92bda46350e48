// Issue 41 item 1: which devices a request gets where the device policy's first key does not
// decide: the tie-break table of docs/placement.md ("Tie-breaks"), checked on HAMi's own
// case, on the cases, and against a model of the table on random nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/placement.h"

namespace vgpu {
namespace {

using ::testing::ElementsAre;

const std::string kDeviceKey(keys::kHamiPodDevicePolicy);
const std::string kWeightsKey(keys::kHamiDeviceScoringWeights);

class TieBreakTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backends_.add(testing::loadSim()).ok()); }

  /// `count` devices of `memoryMiB`, split 10, all pairs linked at `rank` (0: no links).
  NodeState node(int count, std::uint32_t rank, std::uint64_t memoryMiB = 81920) {
    auto devs = testing::simDevices(count, "", memoryMiB, "sim", 10);
    for (Device& d : devs)
      for (int p = 0; p < count && rank != 0; ++p)
        if (p != d.index) d.links.push_back({"gpu" + std::to_string(p), LinkClass::kDirect, 4, rank});
    return NodeState("n", std::make_shared<const NodeInventory>(std::move(devs), backends_));
  }
  PreparedPod pod(Annotations annotations, std::int64_t count = 1,
                  std::vector<std::pair<std::string, std::int64_t>> more = {{"vgpu.io/sim-memory", 1000},
                                                                           {"vgpu.io/sim-cores", 10}}) {
    more.emplace_back("vgpu.io/sim", count);
    auto r = buildPodRequest(backends_, "default", "p", {{"main", false, {more.begin(), more.end()}}}, annotations);
    EXPECT_TRUE(r.ok()) << r.error().message;
    auto prepared = PreparedPod::prepare(*r, backends_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }
  /// The device indices the pod gets on `n`, sorted.
  std::vector<int> indices(const PreparedPod& p, const NodeState& n) {
    auto a = engine_.assign(p, n);
    EXPECT_TRUE(a.ok()) << a.error().message;
    std::vector<int> out;
    if (a.ok())
      for (const auto& d : a->containers.at(0).devices) out.push_back(d.deviceIndex);
    std::sort(out.begin(), out.end());
    return out;
  }

  BackendSet backends_;
  PlacementEngine engine_;
};

TEST_F(TieBreakTest, HamisTopologyTieBreakerCaseGivesTheLessUsedGpu) {
  // HAMi's TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker: two GPUs of equal
  // links; gpu-a (1 of 10 shares, 90 percent compute, 10 percent memory) is busier than
  // gpu-b (7 shares, 10 percent, 20 percent) with equal weights, less busy with memory=3.
  auto n = node(2, 500, 100);
  n.usage[0] = {1, 10, 90};
  n.usage[1] = {7, 20, 10};
  const std::vector<std::pair<std::string, std::int64_t>> fortyPercent{{"vgpu.io/sim-memory-percentage", 40}};
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware"}}, 1, fortyPercent), n), ElementsAre(1));
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware"}, {kWeightsKey, "slot=1,core=1,memory=3"}}, 1, fortyPercent), n),
              ElementsAre(0));
}

TEST_F(TieBreakTest, EqualLinksLeaveTheChoiceToLoad) {
  auto n = node(2, 500);
  n.usage[0] = {2, 20000, 20};
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware"}}), n), ElementsAre(1));
  std::swap(n.usage[0], n.usage[1]);  // the same node with the usage swapped: the other GPU
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware"}}), n), ElementsAre(0));
}

TEST_F(TieBreakTest, OnAThreeGpuIslandTheIdleGpuGoesFirstUnderSpread) {
  auto n = node(3, 500);
  n.usage[0] = n.usage[1] = {5, 40960, 50};
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware"}}), n), ElementsAre(2));
  EXPECT_THAT(indices(pod({{std::string(keys::kPodDevicePolicy), "topology"}}), n), ElementsAre(2));
}

TEST_F(TieBreakTest, TopologyWithBinpackTakesTheBusyGpuWhereLinksAreEqual) {
  auto n = node(3, 500);
  n.usage[2] = {5, 40960, 50};
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware,binpack"}}), n), ElementsAre(2));
  // Two devices: the busy one and then the lower idle one.
  EXPECT_THAT(indices(pod({{kDeviceKey, "topology-aware,binpack"}}, 2), n), ElementsAre(0, 2));
}

// ---- The table, as a model: docs/placement.md "Tie-breaks" ----

enum class NumaKey { kNone, kFirst, kTiebreak };

struct Case {
  bool topology = false;
  bool pack = false;
  NumaKey numa = NumaKey::kNone;
  LoadWeights weights;
  bool weighted = false;
  std::string words() const {
    std::string order = pack ? "binpack" : "spread";
    std::string w = numa == NumaKey::kFirst ? "numa," + order : numa == NumaKey::kTiebreak ? order + ",numa" : order;
    return topology ? w + ",topology-aware" : w;
  }
};

/// The devices the table says a request of `count` gets: the device order (NUMA first
/// when written first, load by the policy, NUMA when written after, position); under
/// topology with links, the best-linked set (worst pair, sum, remainder), ties to the set
/// first member by member in that order.
std::vector<int> modelChoice(const Case& c, const NodeState& n, int count) {
  const auto& entries = n.inventory->entries();
  const int size = static_cast<int>(entries.size());
  std::vector<int> order(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) order[static_cast<std::size_t>(i)] = i;
  auto load = [&](int i) {
    const auto& e = entries[static_cast<std::size_t>(i)];
    return c.weighted ? e.load(n.usage[static_cast<std::size_t>(i)], c.weights) : e.load(n.usage[static_cast<std::size_t>(i)]);
  };
  auto numa = [&](int i) { return entries[static_cast<std::size_t>(i)].c().numa_node; };
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (c.numa == NumaKey::kFirst && numa(a) != numa(b)) return numa(a) < numa(b);
    if (load(a) != load(b)) return c.pack ? load(a) > load(b) : load(a) < load(b);
    if (c.numa == NumaKey::kTiebreak && numa(a) != numa(b)) return numa(a) < numa(b);
    return a < b;
  });
  if (!c.topology || !n.inventory->hasLinks()) {
    std::vector<int> out(order.begin(), order.begin() + count);
    std::sort(out.begin(), out.end());
    return out;
  }
  auto rank = [&](int a, int b) {
    return n.inventory->linkRank(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
  };
  // Sets as masks over positions in `order` (bit k = order[k]): a lower mask compared from
  // the lowest bit is the set first member by member.
  std::tuple<std::uint32_t, std::uint64_t, std::uint64_t> best{};
  std::uint32_t bestSet = 0;
  for (std::uint32_t set = 0; set < (1u << size); ++set) {
    if (std::popcount(set) != count) continue;
    std::uint32_t worst = kMaxLinkRank;
    std::uint64_t sum = 0, rest = 0;
    for (int a = 0; a < size; ++a)
      for (int b = a + 1; b < size; ++b) {
        const bool ina = set >> a & 1u, inb = set >> b & 1u;
        const auto r = rank(order[static_cast<std::size_t>(a)], order[static_cast<std::size_t>(b)]);
        if (ina && inb) {
          worst = std::min(worst, r);
          sum += r;
        } else if (!ina && !inb) {
          rest += r;
        }
      }
    const auto score = std::make_tuple(worst, sum, rest);
    const std::uint32_t differ = set ^ bestSet;
    if (bestSet == 0 || score > best || (score == best && (set & differ & (~differ + 1)) != 0)) {
      best = score;
      bestSet = set;
    }
  }
  std::vector<int> out;
  for (int k = 0; k < size; ++k)
    if (bestSet >> k & 1u) out.push_back(order[static_cast<std::size_t>(k)]);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(TieBreakTest, RandomNodesPlaceAsTheTableSays) {
  std::mt19937 random(41);
  auto pickOf = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  int topologyTies = 0;
  for (int round = 0; round < 1500; ++round) {
    // Few distinct link ranks and usage levels, so that ties are common.
    const int size = 2 + pickOf(round % 10 == 0 ? 11 : 7);  // some beyond LinkTable::kMaxDevices
    const bool linked = pickOf(6) != 0;
    auto devs = testing::simDevices(size, "", 81920, "sim", 10, [&](int) { return pickOf(2); });
    const std::uint32_t ranks[] = {200, 500, 900};
    std::vector<std::uint32_t> matrix(static_cast<std::size_t>(size * size));
    for (int a = 0; a < size; ++a)
      for (int b = a + 1; b < size; ++b)
        matrix[static_cast<std::size_t>(a * size + b)] = matrix[static_cast<std::size_t>(b * size + a)] =
            round % 7 == 0 ? 500u : ranks[pickOf(3)];  // every pair equal: many sets tie
    for (Device& d : devs)
      for (int p = 0; p < size && linked; ++p)
        if (p != d.index)
          d.links.push_back({"gpu" + std::to_string(p), LinkClass::kDirect, 1,
                             matrix[static_cast<std::size_t>(d.index * size + p)]});
    NodeState n("n", std::make_shared<const NodeInventory>(std::move(devs), backends_));
    for (auto& u : n.usage) {
      const int level = pickOf(3);
      u = {static_cast<std::uint32_t>(level), static_cast<std::uint64_t>(level) * 20000u,
           static_cast<std::uint32_t>(pickOf(3) * 20)};
    }
    Case c;
    c.topology = pickOf(3) != 0;
    c.pack = pickOf(2) == 0;
    c.numa = static_cast<NumaKey>(pickOf(3));
    Annotations annotations{{kDeviceKey, c.words()}};
    if (pickOf(3) == 0) {
      c.weighted = true;
      c.weights = {static_cast<double>(pickOf(4)), static_cast<double>(pickOf(4)), static_cast<double>(1 + pickOf(3))};
      annotations[kWeightsKey] = "slot=" + std::to_string(static_cast<int>(c.weights.shares)) +
                                 ",core=" + std::to_string(static_cast<int>(c.weights.compute)) +
                                 ",memory=" + std::to_string(static_cast<int>(c.weights.memory));
    }
    const int count = 1 + pickOf(std::min(size, 4));
    const auto expected = modelChoice(c, n, count);
    EXPECT_EQ(indices(pod(annotations, count), n), expected)
        << "round " << round << ": " << size << " devices, " << (linked ? "linked" : "no links") << ", "
        << c.words() << (c.weighted ? " weighted" : "") << ", " << count << " asked";
    if (c.topology && linked) ++topologyTies;
  }
  EXPECT_GT(topologyTies, 500);  // the topology rows are well exercised
}

}  // namespace
}  // namespace vgpu
