#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/placement.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t k80G = 81920;

/// Builds devices for a node: `count` devices of one model.
std::vector<Device> devices(const std::string& node, int count, std::uint64_t memoryMiB = k80G,
                            const std::string& model = "NVIDIA A100-SXM4-80GB", std::uint32_t split = 10,
                            int numaNodes = 1) {
  return testing::simDevices(count, node + "-", memoryMiB, model, split,
                             [&](int i) { return i * numaNodes / count; });
}

class PlacementTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backends_.add(testing::loadSim()).ok()); }

  NodeState node(const std::string& name, std::vector<Device> devs, std::set<std::string> cordoned = {}) {
    return NodeState(name, std::make_shared<const NodeInventory>(std::move(devs), backends_, cordoned));
  }

  /// A pod of app containers, each given as limits on the sim resources.
  PreparedPod pod(std::vector<ContainerResources> containers, Annotations annotations = {}) {
    auto request = buildPodRequest(backends_, "default", "p", containers, annotations);
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, backends_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }
  static ContainerResources gpu(std::int64_t count, std::int64_t memory = 0, std::int64_t cores = -1,
                                const std::string& name = "main", bool init = false) {
    ContainerResources c{name, init, {{"vgpu.io/sim", count}}};
    if (memory > 0) c.limits["vgpu.io/sim-memory"] = memory;
    if (cores >= 0) c.limits["vgpu.io/sim-cores"] = cores;
    return c;
  }

  Assignment place(const PreparedPod& p, NodeState& n) {
    auto a = engine_.assign(p, n);
    EXPECT_TRUE(a.ok()) << a.error().message;
    if (a.ok()) {
      EXPECT_TRUE(n.add(*a).ok());
    }
    return a.ok() ? *a : Assignment{};
  }
  std::string refusal(const PreparedPod& p, const NodeState& n) {
    auto a = engine_.assign(p, n);
    EXPECT_FALSE(a.ok());
    return a.ok() ? std::string() : a.error().message;
  }

  BackendSet backends_;
  PlacementEngine engine_;
};

TEST_F(PlacementTest, PlacesASliceWithItsMemoryAndCompute) {
  auto n = node("n1", devices("n1", 1));
  auto a = place(pod({gpu(1, 3000, 30)}), n);
  ASSERT_EQ(a.containers.size(), 1u);
  ASSERT_EQ(a.containers[0].devices.size(), 1u);
  const auto& g = a.containers[0].devices[0];
  EXPECT_EQ(g.deviceId, "n1-gpu0");
  EXPECT_EQ(g.memoryMiB, 3000u);
  EXPECT_EQ(g.compute, 30u);
  EXPECT_EQ(a.node, "n1");
  EXPECT_EQ(n.usage[0], (DeviceUsage{1, 3000, 30}));
}

TEST_F(PlacementTest, GrantsCarryTheRequestsPriority) {
  auto n = node("n1", devices("n1", 1));
  ContainerResources c = gpu(1, 1000, 10);
  c.limits["vgpu.io/sim-priority"] = 1;
  auto a = place(pod({c}), n);
  EXPECT_EQ(a.containers[0].devices[0].priority, 1);
  EXPECT_EQ(place(pod({gpu(1, 1000, 10)}), n).containers[0].devices[0].priority, -1);
}

TEST_F(PlacementTest, BareCountTakesTheWholeDeviceAlone) {
  auto n = node("n1", devices("n1", 1));
  auto a = place(pod({gpu(1)}), n);
  EXPECT_EQ(a.containers[0].devices[0].memoryMiB, k80G);
  EXPECT_EQ(a.containers[0].devices[0].compute, 100u);
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 10)}), n), HasSubstr("not enough free memory (needs 1000 MiB, 0 MiB free)"));
}

TEST_F(PlacementTest, ExclusiveRequestRefusesADeviceInUse) {
  auto n = node("n1", devices("n1", 1));
  place(pod({gpu(1, 1000, 10)}), n);
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 100)}), n), HasSubstr("wants the device alone but 1 container(s) already use it"));
}

TEST_F(PlacementTest, SpreadPutsTwoPodsOnDifferentDevicesAndBinpackOnOne) {
  auto spread = node("n1", devices("n1", 2));
  auto a1 = place(pod({gpu(1, 1000, 10)}), spread);
  auto a2 = place(pod({gpu(1, 1000, 10)}), spread);
  EXPECT_NE(a1.containers[0].devices[0].deviceId, a2.containers[0].devices[0].deviceId);

  auto packed = node("n2", devices("n2", 2));
  const Annotations binpack{{std::string(keys::kPodDevicePolicy), "binpack"}};
  auto b1 = place(pod({gpu(1, 1000, 10)}, binpack), packed);
  auto b2 = place(pod({gpu(1, 1000, 10)}, binpack), packed);
  EXPECT_EQ(b1.containers[0].devices[0].deviceId, b2.containers[0].devices[0].deviceId);
}

TEST_F(PlacementTest, NodePolicyBinpackPrefersTheBusierNodeAndSpreadTheEmptier) {
  std::vector<NodeState> nodes{node("idle", devices("idle", 2)), node("busy", devices("busy", 2))};
  place(pod({gpu(1, 20000, 20)}), nodes[1]);
  auto p = pod({gpu(1, 1000, 10)});
  auto placement = engine_.place(p, nodes);
  ASSERT_TRUE(placement.chosen);
  EXPECT_EQ(nodes[*placement.chosen].name, "busy");  // default node policy: binpack

  auto spread = pod({gpu(1, 1000, 10)}, {{std::string(keys::kPodNodePolicy), "spread"}});
  placement = engine_.place(spread, nodes);
  ASSERT_TRUE(placement.chosen);
  EXPECT_EQ(nodes[*placement.chosen].name, "idle");
  EXPECT_EQ(placement.assignment.node, "idle");
}

TEST_F(PlacementTest, ConfiguredPoliciesApplyWithoutAnnotations) {
  SchedulerConfig config;
  config.nodePolicy = NodePolicy::kSpread;
  PlacementEngine spreadEngine(config);
  std::vector<NodeState> nodes{node("busy", devices("busy", 2)), node("idle", devices("idle", 2))};
  place(pod({gpu(1, 20000, 20)}), nodes[0]);
  auto placement = spreadEngine.place(pod({gpu(1, 1000, 10)}), nodes);
  ASSERT_TRUE(placement.chosen);
  EXPECT_EQ(nodes[*placement.chosen].name, "idle");
}

TEST_F(PlacementTest, MultiDeviceRequestGetsDistinctDevices) {
  auto n = node("n1", devices("n1", 4));
  auto a = place(pod({gpu(3, 1000, 10)}), n);
  ASSERT_EQ(a.containers[0].devices.size(), 3u);
  std::set<std::string> ids;
  for (const auto& d : a.containers[0].devices) ids.insert(d.deviceId);
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_THAT(refusal(pod({gpu(5, 1000, 10)}), n), HasSubstr("needs 5 vgpu.io/sim (1000 MiB, 10 percent compute each): 4 of 4 fit"));
}

TEST_F(PlacementTest, MemoryPercentageIsAShareOfEachDevice) {
  auto n = node("n1", devices("n1", 1));
  ContainerResources c{"main", false, {{"vgpu.io/sim", 1}, {"vgpu.io/sim-memory-percentage", 25}, {"vgpu.io/sim-cores", 10}}};
  auto a = place(pod({c}), n);
  EXPECT_EQ(a.containers[0].devices[0].memoryMiB, k80G / 4);
}

TEST_F(PlacementTest, ModelAndIdFiltersChooseDevices) {
  auto devs = devices("n1", 2);
  devs[1].model = "NVIDIA H100 80GB HBM3";
  auto n = node("n1", devs);
  auto h100 = place(pod({gpu(1, 1000, 10)}, {{"vgpu.io/use-gputype", "h100"}}), n);
  EXPECT_EQ(h100.containers[0].devices[0].deviceId, "n1-gpu1");
  auto notH100 = place(pod({gpu(1, 1000, 10)}, {{"vgpu.io/nouse-gputype", "H100"}}), n);
  EXPECT_EQ(notH100.containers[0].devices[0].deviceId, "n1-gpu0");
  auto byId = place(pod({gpu(1, 1000, 10)}, {{"vgpu.io/use-gpuuuid", "n1-gpu1"}}), n);
  EXPECT_EQ(byId.containers[0].devices[0].deviceId, "n1-gpu1");
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 10)}, {{"vgpu.io/use-gputype", "V100"}}), n),
              HasSubstr("2/2 CardTypeMismatch: device model is not in the pod's list of models"));
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 10)}, {{"vgpu.io/nouse-gpuuuid", "n1-gpu0,n1-gpu1"}}), n),
              HasSubstr("2/2 CardUuidMismatch: device id is excluded by the pod"));
}

TEST_F(PlacementTest, NumaBindKeepsAContainerOnOneNumaNode) {
  auto n = node("n1", devices("n1", 4, k80G, "A100", 10, 2));  // gpu0,1 on NUMA 0; gpu2,3 on NUMA 1
  const Annotations bind{{"vgpu.io/numa-bind", "true"}};
  auto a = place(pod({gpu(2, 1000, 10)}, bind), n);
  const auto& d = a.containers[0].devices;
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(n.inventory->entries()[n.inventory->find("sim", d[0].deviceId)].device().numaNode,
            n.inventory->entries()[n.inventory->find("sim", d[1].deviceId)].device().numaNode);
  EXPECT_THAT(refusal(pod({gpu(3, 1000, 10)}, bind), n), HasSubstr("not enough fitting devices on one NUMA node"));
}

TEST_F(PlacementTest, InitContainersCountLikeKubernetes) {
  auto n = node("n1", devices("n1", 1));
  // 60 GiB while initialising, then 30 GiB: fits a 80 GiB device and holds max(60, 30).
  auto a = place(pod({gpu(1, 61440, 10, "warmup", true), gpu(1, 30720, 10, "serve")}), n);
  ASSERT_EQ(a.containers.size(), 2u);
  EXPECT_TRUE(a.containers[0].init);
  EXPECT_EQ(n.usage[0].memoryMiB, 61440u);
  EXPECT_EQ(n.usage[0].shares, 1u);
}

TEST_F(PlacementTest, AppContainersOfOnePodAddUp) {
  auto n = node("n1", devices("n1", 1));
  EXPECT_THAT(refusal(pod({gpu(1, 50000, 10, "a"), gpu(1, 50000, 10, "b")}), n),
              HasSubstr("container \"b\" needs 1 vgpu.io/sim (50000 MiB, 10 percent compute)"));
}

TEST_F(PlacementTest, SharesRunOut) {
  auto n = node("n1", devices("n1", 1, k80G, "A100", 2));
  place(pod({gpu(1, 1000, 10)}), n);
  place(pod({gpu(1, 1000, 10)}), n);
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 10)}), n), HasSubstr("all 2 shares of the device are taken"));
}

TEST_F(PlacementTest, UnhealthyAndCordonedDevicesAreRefusedWithTheirReason) {
  auto devs = devices("n1", 2);
  devs[0].health = Health::kUnhealthy;
  auto n = node("n1", devs, {"n1-gpu1"});
  const std::string why = refusal(pod({gpu(1, 1000, 10)}), n);
  EXPECT_THAT(why, HasSubstr("0 of 2 fit"));
  EXPECT_THAT(why, HasSubstr("1/2 CardNotHealth: device is unhealthy"));
  EXPECT_THAT(why, HasSubstr("1/2 CardCordoned: device is cordoned"));
}

TEST_F(PlacementTest, ComputeRunsOut) {
  auto n = node("n1", devices("n1", 1));
  place(pod({gpu(1, 1000, 80)}), n);
  EXPECT_THAT(refusal(pod({gpu(1, 1000, 30)}), n), HasSubstr("not enough free compute (needs 30 percent, 20 percent free)"));
}

TEST_F(PlacementTest, MemoryThatForeignProcessesHoldIsNotOffered) {
  // The node agent's watchdog saw 30000 MiB of an 81920 MiB device held outside vgpu.
  auto devs = devices("n1", 1);
  devs[0].foreignUsedMiB = 30000;
  auto n = node("n1", devs);
  EXPECT_THAT(refusal(pod({gpu(1, 60000, 10)}), n), HasSubstr("not enough free memory"));
  auto a = place(pod({gpu(1, 50000, 10)}), n);
  ASSERT_EQ(a.containers.size(), 1u);
  EXPECT_THAT(refusal(pod({gpu(1, 2000, 10)}), n), HasSubstr("not enough free memory"));
}

TEST_F(PlacementTest, UnavailableNodeAndNodeWithoutDevicesSayWhy) {
  std::vector<NodeState> nodes{node("stale", devices("stale", 1)), node("cpu-only", {})};
  nodes[0].unavailable = "node agent heartbeat is 300s old";
  auto p = pod({gpu(1, 1000, 10)});
  auto placement = engine_.place(p, nodes);
  EXPECT_FALSE(placement.chosen);
  EXPECT_EQ(engine_.explain(p, nodes[0], placement.evaluations[0]), "node agent heartbeat is 300s old");
  EXPECT_THAT(engine_.explain(p, nodes[1], placement.evaluations[1]), HasSubstr("the node has no sim devices"));
}

TEST_F(PlacementTest, CheckAgreesWithEvaluateOnFitAndRefusal) {
  // Four devices on two NUMA nodes, partly used, one cordoned, and a node without devices.
  std::vector<NodeState> nodes{node("n1", devices("n1", 4, k80G, "A100", 4, 2), {"n1-gpu3"}), node("none", {})};
  place(pod({gpu(1, 70000, 50)}), nodes[0]);
  place(pod({gpu(1, 20000, 90)}), nodes[0]);
  nodes.push_back(nodes[0]);
  nodes.back().unavailable = "stale";
  const Annotations bind{{"vgpu.io/numa-bind", "true"}};
  struct Case {
    const char* description;
    PreparedPod pod;
  };
  std::vector<Case> cases;
  cases.push_back({"one slice that fits", pod({gpu(1, 1000, 10)})});
  cases.push_back({"two devices that fit", pod({gpu(2, 1000, 10)})});
  cases.push_back({"a slice only a later device has room for", pod({gpu(1, 70000, 10)})});
  cases.push_back({"more devices than fit (one is cordoned)", pod({gpu(4, 1000, 10)})});
  cases.push_back({"more memory than any device has", pod({gpu(1, 90000, 10)})});
  cases.push_back({"NUMA-bound", pod({gpu(2, 1000, 10)}, bind)});
  cases.push_back({"two containers", pod({gpu(1, 50000, 10, "a"), gpu(1, 50000, 10, "b")})});
  cases.push_back({"an init container", pod({gpu(1, 61440, 10, "warmup", true), gpu(1, 1000, 10, "serve")})});
  int fits = 0;
  for (const auto& c : cases) {
    for (const auto& n : nodes) {
      const NodeEvaluation full = engine_.evaluate(c.pod, n);
      const NodeEvaluation quick = engine_.check(c.pod, n);
      EXPECT_EQ(quick.fits, full.fits) << c.description << " on " << n.name;
      fits += full.fits;
      if (!full.fits) {
        EXPECT_EQ(engine_.explain(c.pod, n, quick), engine_.explain(c.pod, n, full)) << c.description << " on " << n.name;
      }
    }
  }
  EXPECT_EQ(fits, 6);  // the cases cover both outcomes: 6 fit n1, nothing fits the others
}

TEST_F(PlacementTest, ANodeBuiltFromAnotherLoadOfTheBackendIsStillJudged) {
  // The engine finds a node's devices by allocator address first, then by backend name.
  BackendSet other;
  ASSERT_TRUE(other.add(testing::loadSim()).ok());
  NodeState n("n1", std::make_shared<const NodeInventory>(devices("n1", 2), other));
  EXPECT_TRUE(engine_.check(pod({gpu(1, 1000, 10)}), n).fits);
  EXPECT_TRUE(engine_.check(pod({gpu(2, 1000, 10)}), n).fits);
  EXPECT_FALSE(engine_.check(pod({gpu(3, 1000, 10)}), n).fits);
}

TEST_F(PlacementTest, RemoveGivesBackWhatAddTook) {
  auto n = node("n1", devices("n1", 2));
  auto a = place(pod({gpu(2, 1000, 10)}), n);
  ASSERT_TRUE(n.remove(a).ok());
  EXPECT_EQ(n.usage, std::vector<DeviceUsage>(2));
  Assignment stranger{"n1", {{"c", false, {{"sim", "nope", 0, 1, 1, -1}}}}};
  EXPECT_FALSE(n.add(stranger).ok());
}

TEST_F(PlacementTest, PodsWithoutDeviceRequestsAreNotOurs) {
  auto request = buildPodRequest(backends_, "default", "web", {{"nginx", false, {}}}, {});
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(request->empty());
}

TEST_F(PlacementTest, BadPolicyAnnotationIsAnError) {
  auto request = buildPodRequest(backends_, "default", "p", {gpu(1)}, {{std::string(keys::kPodNodePolicy), "random"}});
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(request.error().message, HasSubstr("must be \"binpack\" or \"spread\", got \"random\""));
}

}  // namespace
}  // namespace vgpu
