// The placement engine asks a backend's `fit` once per kind of device and usage on a node
// when the backend declares what `fit` reads (ABI 1.5 fit_reads, Allocator::fitReads).
// These tests hold that shortcut to the per-device path: same fits, scores, assignments,
// refusals and words on randomized nodes, and `fit` asked again whenever a device or its
// usage differs in anything the backend reads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "declaring_backend.h"
#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/placement.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu {
namespace {

using testing::DeclaringBackend;

ContainerResources gpu(std::int64_t count, std::int64_t memory, std::int64_t cores, const std::string& name = "main",
                       bool init = false) {
  ContainerResources c{name, init, {{"vgpu.io/sim", count}}};
  if (memory > 0) c.limits["vgpu.io/sim-memory"] = memory;
  if (cores >= 0) c.limits["vgpu.io/sim-cores"] = cores;
  return c;
}

/// The same sim backend twice: `fast` with the sim's own declaration (through the real
/// loader and the 1.5 slot), `slow` declaring that fit reads everything.
class FitClassesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = testing::loadSim();
    ASSERT_NE(sim, nullptr);
    declared_ = sim->allocator().fitReads();
    auto fast = std::make_unique<DeclaringBackend>(std::move(sim), declared_);
    auto slow = std::make_unique<DeclaringBackend>(testing::loadSim(), VGPU_FIT_READS_ALL);
    fast_ = fast.get();
    slow_ = slow.get();
    ASSERT_TRUE(fastSet_.add(std::move(fast)).ok());
    ASSERT_TRUE(slowSet_.add(std::move(slow)).ok());
  }

  PreparedPod prepare(const BackendSet& set, const std::vector<ContainerResources>& containers,
                      const Annotations& annotations) {
    auto request = buildPodRequest(set, "default", "p", containers, annotations);
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, set);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }

  std::uint32_t declared_ = 0;
  BackendSet fastSet_, slowSet_;
  DeclaringBackend* fast_ = nullptr;
  DeclaringBackend* slow_ = nullptr;
  PlacementEngine engine_;
};

TEST_F(FitClassesTest, TheSimDeclaresTheStandardRulesFieldsThroughTheLoader) {
  EXPECT_EQ(declared_, sdk::kStandardFitReads);
  EXPECT_EQ(declared_ & (VGPU_FIT_READS_ID | VGPU_FIT_READS_INDEX | VGPU_FIT_READS_NUMA_NODE), 0u);
}

TEST_F(FitClassesTest, IdenticalIdleDevicesAreJudgedOnce) {
  NodeState node("n", std::make_shared<const NodeInventory>(testing::simDevices(8, "n-", 81920, "A100", 10), fastSet_));
  const PreparedPod pod = prepare(fastSet_, {gpu(1, 100000, 20)}, {});
  const NodeEvaluation e = engine_.check(pod, node);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(fast_->fitCalls, 1);
  ASSERT_EQ(e.refusal.reasonCount, 1);
  EXPECT_EQ(e.refusal.reasons[0].devices, 8);
}

TEST_F(FitClassesTest, DevicesThatDifferInWhatFitReadsOrInUsageAreJudgedApart) {
  auto devices = testing::simDevices(8, "n-", 81920, "A100", 10);
  devices[1].health = Health::kUnhealthy;
  devices[2].model = "H100";
  devices[3].memoryMiB = 40960;
  devices[4].splitCount = 4;
  devices[5].computeUnits = 200;
  NodeState node("n", std::make_shared<const NodeInventory>(devices, fastSet_, std::set<std::string>{"n-gpu6"}));
  node.usage[7] = {1, 1000, 10};
  const PreparedPod pod = prepare(fastSet_, {gpu(1, 100000, 20)}, {});
  engine_.check(pod, node);
  EXPECT_EQ(fast_->fitCalls, 7);  // all but device 6, cordoned: core refuses it without asking
}

TEST_F(FitClassesTest, ARequestThatNamesIdsJudgesEveryDevice) {
  NodeState node("n", std::make_shared<const NodeInventory>(testing::simDevices(8, "n-", 81920, "A100", 10), fastSet_));
  const PreparedPod pod = prepare(fastSet_, {gpu(1, 100000, 20)}, {{"vgpu.io/nouse-gpuuuid", "n-gpu3"}});
  engine_.check(pod, node);
  EXPECT_EQ(fast_->fitCalls, 8);
}

TEST_F(FitClassesTest, ABackendThatDeclaresNothingIsAskedForEveryDevice) {
  NodeState node("n", std::make_shared<const NodeInventory>(testing::simDevices(8, "n-", 81920, "A100", 10), slowSet_));
  const PreparedPod pod = prepare(slowSet_, {gpu(1, 100000, 20)}, {});
  engine_.check(pod, node);
  EXPECT_EQ(slow_->fitCalls, 8);
}

/// A random node: devices alike but for some of id, index, model, health, NUMA node, links,
/// attributes, size, split count and cordoning, and random usage from a few values (so that
/// equal usage repeats).
struct RandomNode {
  std::vector<Device> devices;
  std::set<std::string> cordoned;
  std::vector<DeviceUsage> usage;
};

RandomNode randomNode(std::mt19937& rng, int n) {
  auto pick = [&](int k) { return static_cast<int>(rng() % static_cast<unsigned>(k)); };
  RandomNode out;
  const int count = 1 + pick(10);
  out.devices = testing::simDevices(count, "n" + std::to_string(n) + "-", 81920, "NVIDIA A100", 10,
                                    [&](int) { return pick(3) - 1; });
  static const DeviceUsage kUsages[] = {{0, 0, 0}, {0, 0, 0}, {1, 8000, 10}, {2, 16000, 20}, {1, 80000, 90},
                                        {10, 20000, 30}, {3, 30000, 100}};
  for (auto& d : out.devices) {
    if (pick(6) == 0) d.model = "NVIDIA H100";
    if (pick(8) == 0) d.health = pick(2) ? Health::kUnhealthy : Health::kUnknown;
    if (pick(8) == 0) d.memoryMiB = 40960;
    if (pick(10) == 0) d.splitCount = 2;
    if (pick(10) == 0) d.computeUnits = 50;
    if (pick(5) == 0) d.attributes["topology"] = pick(2) ? "a" : "b";
    if (pick(4) == 0) d.index = pick(100);
    if (pick(12) == 0) out.cordoned.insert(d.id);
    out.usage.push_back(kUsages[pick(7)]);
  }
  if (pick(2) == 0) {  // links: a random rank between some pairs
    for (std::size_t a = 0; a < out.devices.size(); ++a)
      for (std::size_t b = a + 1; b < out.devices.size(); ++b)
        if (pick(2) == 0)
          out.devices[a].links.push_back({out.devices[b].id, LinkClass::kDirect, 1, static_cast<std::uint32_t>(1 + pick(900))});
  }
  return out;
}

struct RandomPod {
  std::vector<ContainerResources> containers;
  Annotations annotations;
};

RandomPod randomPod(std::mt19937& rng, const RandomNode& node) {
  auto pick = [&](int k) { return static_cast<int>(rng() % static_cast<unsigned>(k)); };
  static const std::int64_t kMemory[] = {0, 1000, 8000, 30000, 50000, 81920, 100000};
  static const std::int64_t kCores[] = {-1, 0, 10, 30, 50, 100};
  RandomPod out;
  const int containers = 1 + pick(2);
  for (int c = 0; c < containers; ++c)
    out.containers.push_back(gpu(1 + pick(3), kMemory[pick(7)], kCores[pick(6)], "c" + std::to_string(c), pick(5) == 0));
  if (pick(4) == 0) out.containers.back().limits.erase("vgpu.io/sim-memory"),
                    out.containers.back().limits["vgpu.io/sim-memory-percentage"] = 25 * (1 + pick(4));
  if (pick(6) == 0) out.annotations["vgpu.io/use-gputype"] = pick(2) ? "H100" : "A100";
  if (pick(8) == 0) out.annotations["vgpu.io/nouse-gputype"] = "H100";
  if (pick(6) == 0 && !node.devices.empty())
    out.annotations[pick(2) ? "vgpu.io/use-gpuuuid" : "vgpu.io/nouse-gpuuuid"] =
        node.devices[static_cast<std::size_t>(pick(static_cast<int>(node.devices.size())))].id;
  if (pick(5) == 0) out.annotations["vgpu.io/numa-bind"] = "true";
  static const char* kDevicePolicies[] = {"binpack", "spread", "topology"};
  if (pick(2) == 0) out.annotations[std::string(keys::kPodDevicePolicy)] = kDevicePolicies[pick(3)];
  if (pick(3) == 0) out.annotations[std::string(keys::kPodNodePolicy)] = pick(2) ? "spread" : "binpack";
  return out;
}

void expectSameEvaluation(const NodeEvaluation& a, const NodeEvaluation& b, const std::string& where) {
  EXPECT_EQ(a.fits, b.fits) << where;
  EXPECT_EQ(a.score, b.score) << where;
  if (a.fits) return;  // a refusal is read only when the node does not fit
  const NodeRefusal& x = a.refusal;
  const NodeRefusal& y = b.refusal;
  EXPECT_EQ(x.kind, y.kind) << where;
  EXPECT_EQ(x.container, y.container) << where;
  EXPECT_EQ(x.request, y.request) << where;
  EXPECT_EQ(x.devicesConsidered, y.devicesConsidered) << where;
  EXPECT_EQ(x.devicesFitting, y.devicesFitting) << where;
  ASSERT_EQ(x.reasonCount, y.reasonCount) << where;
  for (std::uint8_t i = 0; i < x.reasonCount; ++i) {
    EXPECT_EQ(x.reasons[i].devices, y.reasons[i].devices) << where;
    EXPECT_EQ(0, std::memcmp(&x.reasons[i].example, &y.reasons[i].example, sizeof(vgpu_fit_result))) << where;
  }
}

TEST_F(FitClassesTest, RandomNodesGetTheAnswersOfEveryDeviceJudgedAlone) {
  std::mt19937 rng(20261203);
  long refused = 0, placed = 0, shortcuts = 0;
  for (int n = 0; n < 400; ++n) {
    const RandomNode r = randomNode(rng, n);
    NodeState fastNode("n" + std::to_string(n), std::make_shared<const NodeInventory>(r.devices, fastSet_, r.cordoned));
    NodeState slowNode(fastNode.name, std::make_shared<const NodeInventory>(r.devices, slowSet_, r.cordoned));
    fastNode.usage = slowNode.usage = r.usage;
    // Several pods in a row on each node: each one placed changes the usage the next sees.
    for (int p = 0; p < 6; ++p) {
      const RandomPod rp = randomPod(rng, r);
      if (!buildPodRequest(fastSet_, "default", "p", rp.containers, rp.annotations).ok()) continue;
      const PreparedPod fastPod = prepare(fastSet_, rp.containers, rp.annotations);
      const PreparedPod slowPod = prepare(slowSet_, rp.containers, rp.annotations);
      const std::string where = "node " + std::to_string(n) + " pod " + std::to_string(p);
      const long before = fast_->fitCalls, slowBefore = slow_->fitCalls;

      const NodeEvaluation fc = engine_.check(fastPod, fastNode), sc = engine_.check(slowPod, slowNode);
      expectSameEvaluation(fc, sc, where + " check");
      EXPECT_EQ(engine_.explain(fastPod, fastNode, fc), engine_.explain(slowPod, slowNode, sc)) << where;
      EXPECT_EQ(engine_.category(fastPod, fc), engine_.category(slowPod, sc)) << where;
      EXPECT_EQ(engine_.distance(fastPod, fc), engine_.distance(slowPod, sc)) << where;
      const NodeEvaluation fe = engine_.evaluate(fastPod, fastNode), se = engine_.evaluate(slowPod, slowNode);
      expectSameEvaluation(fe, se, where + " evaluate");
      EXPECT_EQ(engine_.explain(fastPod, fastNode, fe), engine_.explain(slowPod, slowNode, se)) << where;

      auto fa = engine_.assign(fastPod, fastNode);
      auto sa = engine_.assign(slowPod, slowNode);
      ASSERT_EQ(fa.ok(), sa.ok()) << where;
      shortcuts += (slow_->fitCalls - slowBefore) - (fast_->fitCalls - before);
      if (!fa.ok()) {
        EXPECT_EQ(fa.error().message, sa.error().message) << where;
        ++refused;
        continue;
      }
      EXPECT_EQ(*fa, *sa) << where;
      ASSERT_TRUE(fastNode.add(*fa).ok());
      ASSERT_TRUE(slowNode.add(*sa).ok());
      ++placed;
    }
  }
  // The cases cover both outcomes, and the shortcut was taken.
  EXPECT_GT(refused, 200);
  EXPECT_GT(placed, 200);
  EXPECT_GT(shortcuts, 1000);
}

}  // namespace
}  // namespace vgpu
