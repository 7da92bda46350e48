// Issue 28 items 1 and 8: the policy annotations HAMi users write (node and device policy,
// HAMi's policy lists with mutex and numa, scoring weights) mean what they mean to HAMi,
// and refusals carry HAMi's reason names beside our words.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/placement.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t k80G = 81920;
const std::string kNodeKey(keys::kHamiPodNodePolicy);
const std::string kDeviceKey(keys::kHamiPodDevicePolicy);
const std::string kWeightsKey(keys::kHamiDeviceScoringWeights);

class HamiPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backends_.add(testing::loadSim()).ok()); }

  /// `count` devices; device i on NUMA node numaOf(i).
  NodeState node(const std::string& name, int count, const std::function<int(int)>& numaOf = nullptr) {
    auto devs = testing::simDevices(count, name + "-", k80G, "NVIDIA A100-SXM4-80GB", 10, numaOf);
    return NodeState(name, std::make_shared<const NodeInventory>(std::move(devs), backends_));
  }
  static ContainerResources gpu(std::int64_t count, std::int64_t memory, std::int64_t cores) {
    return {"main", false, {{"vgpu.io/sim", count}, {"vgpu.io/sim-memory", memory}, {"vgpu.io/sim-cores", cores}}};
  }
  Result<PodRequest> request(Annotations annotations, ContainerResources c = gpu(1, 1000, 10)) {
    return buildPodRequest(backends_, "default", "p", {c}, annotations);
  }
  PreparedPod pod(Annotations annotations, ContainerResources c = gpu(1, 1000, 10)) {
    auto r = request(std::move(annotations), std::move(c));
    EXPECT_TRUE(r.ok()) << r.error().message;
    auto prepared = PreparedPod::prepare(*r, backends_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }
  /// The device ids the pod gets on `n` (added to its usage).
  std::vector<std::string> place(const PreparedPod& p, NodeState& n) {
    auto a = engine_.assign(p, n);
    EXPECT_TRUE(a.ok()) << a.error().message;
    std::vector<std::string> ids;
    if (!a.ok()) return ids;
    EXPECT_TRUE(n.add(*a).ok());
    for (const auto& d : a->containers.at(0).devices) ids.push_back(d.deviceId);
    return ids;
  }
  /// Why `n` refuses `p`, in the engine's words ("fits" when it does not refuse).
  std::string refusal(const PreparedPod& p, const NodeState& n) { return engine_.explain(p, n, engine_.evaluate(p, n)); }

  BackendSet backends_;
  PlacementEngine engine_;
};

TEST_F(HamiPolicyTest, NodePolicyAnnotationOfHamiIsHonouredAndOursWins) {
  std::vector<NodeState> nodes{node("idle", 2), node("busy", 2)};
  place(pod({}), nodes[1]);
  auto chosen = [&](Annotations a) { return nodes[*engine_.place(pod(std::move(a)), nodes).chosen].name; };
  EXPECT_EQ(chosen({}), "busy");  // configured: binpack
  EXPECT_EQ(chosen({{kNodeKey, "spread"}}), "idle");
  EXPECT_EQ(chosen({{kNodeKey, "spread"}, {std::string(keys::kPodNodePolicy), "binpack"}}), "busy");
  auto bad = request({{kNodeKey, "fullest"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("annotation hami.io/node-scheduler-policy must be \"binpack\" or \"spread\", "
                                             "got \"fullest\""));
}

TEST_F(HamiPolicyTest, DevicePolicyListsParseAsHamiReadsThem) {
  using Numa = DeviceChoice::Numa;
  auto choice = [](bool mutex, Numa numa = Numa::kIgnore, bool packUnlinked = false) {
    DeviceChoice c;
    c.mutex = mutex;
    c.numa = numa;
    c.packUnlinked = packUnlinked;
    return c;
  };
  struct Case {
    const char* text;
    std::optional<DevicePolicy> policy;
    DeviceChoice choice;
  } cases[] = {
      {"binpack", DevicePolicy::kBinpack, {}},
      {"spread", DevicePolicy::kSpread, {}},
      {"topology-aware", DevicePolicy::kTopology, {}},
      {"mutex", std::nullopt, choice(true)},
      {"numa", std::nullopt, choice(false, Numa::kFirst)},
      {"binpack,numa", DevicePolicy::kBinpack, choice(false, Numa::kTiebreak)},
      {"numa, spread", DevicePolicy::kSpread, choice(false, Numa::kFirst)},
      {"spread,binpack", DevicePolicy::kSpread, {}},  // the first sort key decides
      {"mutex,binpack,numa", DevicePolicy::kBinpack, choice(true, Numa::kTiebreak)},
      {"binpack,topology-aware", DevicePolicy::kTopology, choice(false, Numa::kIgnore, true)},
      {"mutex,numa,topology-aware,spread", DevicePolicy::kTopology, choice(true, Numa::kFirst)},
  };
  for (const auto& c : cases) {
    auto r = request({{kDeviceKey, c.text}});
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(r->devicePolicy, c.policy) << c.text;
    EXPECT_EQ(r->deviceChoice, c.choice) << c.text;
  }
  for (const char* bad : {"fastest", "binpack,fastest", "topology", ""}) {
    auto r = request({{kDeviceKey, bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("annotation hami.io/gpu-scheduler-policy \"" + std::string(bad) + "\""));
  }
  auto named = request({{kDeviceKey, "binpack,fastest"}});
  EXPECT_THAT(named.error().message, HasSubstr("\"fastest\" is not one of binpack, spread, numa, mutex, topology-aware"));
  // Ours wins whole: HAMi's list is not read beside it.
  auto ours = request({{kDeviceKey, "mutex"}, {std::string(keys::kPodDevicePolicy), "binpack"}});
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(ours->devicePolicy, DevicePolicy::kBinpack);
  EXPECT_FALSE(ours->deviceChoice.mutex);
}

TEST_F(HamiPolicyTest, MutexTakesOnlyDevicesNobodyUses) {
  auto n = node("n", 2);
  const Annotations mutex{{kDeviceKey, "mutex"}};
  EXPECT_EQ(place(pod({{kDeviceKey, "binpack"}}), n), std::vector<std::string>{"n-gpu0"});
  // Binpack alone would join gpu0; mutex refuses it and takes the idle one.
  EXPECT_EQ(place(pod({{kDeviceKey, "binpack,mutex"}}), n), std::vector<std::string>{"n-gpu1"});
  const PreparedPod third = pod(mutex);
  EXPECT_FALSE(engine_.check(third, n).fits);  // the one-request fast path too
  EXPECT_FALSE(engine_.evaluate(third, n).fits);
  EXPECT_THAT(refusal(third, n),
              HasSubstr("2/2 ExclusiveDeviceAllocateConflict: wants the device alone but 1 container(s) already use it"));
  // Without mutex the same request shares a device.
  EXPECT_TRUE(engine_.check(pod({}), n).fits);
}

TEST_F(HamiPolicyTest, NumaFirstKeepsARequestsDevicesOnOneNumaNode) {
  // gpu0, gpu1 on NUMA 0; gpu2, gpu3 on NUMA 1. gpu0 and gpu2 carry a little load.
  auto fresh = [&] {
    auto n = node("n", 4, [](int i) { return i / 2; });
    n.usage[0] = {1, 1000, 10};
    n.usage[2] = {1, 2000, 10};
    return n;
  };
  auto spread = fresh();
  EXPECT_EQ(place(pod({{kDeviceKey, "spread"}}, gpu(2, 1000, 10)), spread),
            (std::vector<std::string>{"n-gpu1", "n-gpu3"}));  // the two idle ones, across NUMA nodes
  auto numa = fresh();
  EXPECT_EQ(place(pod({{kDeviceKey, "numa,spread"}}, gpu(2, 1000, 10)), numa),
            (std::vector<std::string>{"n-gpu1", "n-gpu0"}));
  // As a tiebreak only: equal loads go to the lower NUMA node, unequal ones by load.
  auto tiebreak = node("n", 4, [](int i) { return 1 - i / 2; });  // gpu2, gpu3 on NUMA 0
  EXPECT_EQ(place(pod({{kDeviceKey, "spread,numa"}}), tiebreak), std::vector<std::string>{"n-gpu2"});
}

TEST_F(HamiPolicyTest, ScoringWeightsDecideWhichDeviceIsLeastLoaded) {
  // gpu0: three small slices (many shares, little memory); gpu1: one large slice.
  auto fresh = [&] {
    auto n = node("n", 2);
    n.usage[0] = {3, 3000, 3};
    n.usage[1] = {1, 40000, 1};
    return n;
  };
  auto plain = fresh();
  EXPECT_EQ(place(pod({}), plain), std::vector<std::string>{"n-gpu0"});  // equal weights: memory decides
  auto slots = fresh();
  EXPECT_EQ(place(pod({{kWeightsKey, "slot=1,core=0,memory=0"}}), slots), std::vector<std::string>{"n-gpu1"});
  auto memory = fresh();
  EXPECT_EQ(place(pod({{kWeightsKey, "memory=3, slot=1,core=1"}}), memory), std::vector<std::string>{"n-gpu0"});
}

TEST_F(HamiPolicyTest, ScoringWeightsAreCheckedAsHamiChecksThem) {
  auto weights = parseScoringWeights(" slot=1 , core=2,memory=3");
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  EXPECT_EQ(*weights, (LoadWeights{1, 2, 3}));
  struct Bad {
    const char* text;
    const char* says;
  } bad[] = {
      {"slot=1,core=1", "expected slot=<n>,core=<n>,memory=<n>"},
      {"slot=1,core=1,memory=1,", "expected slot=<n>,core=<n>,memory=<n>"},
      {"slot=1,core=1,mem=1", "unknown weight \"mem\""},
      {"slot=1,slot=1,core=1", "weight \"slot\" given twice"},
      {"slot=-1,core=1,memory=1", "must not be negative"},
      {"slot=1.5,core=1,memory=1", "weight \"slot\" must be a whole number, got \"1.5\""},
      {"slot,core=1,memory=1", "\"slot\" is not key=value"},
      {"slot=0,core=0,memory=0", "at least one weight must be above 0"},
  };
  for (const auto& b : bad) {
    auto r = parseScoringWeights(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_THAT(r.error().message, HasSubstr(b.says)) << b.text;
  }
  auto onPod = request({{kWeightsKey, "slot=1"}});
  ASSERT_FALSE(onPod.ok());
  EXPECT_THAT(onPod.error().message, HasSubstr("pod default/p: annotation hami.io/device-scoring-weights \"slot=1\""));
}

TEST_F(HamiPolicyTest, TopologyWithBinpackPacksWhereLinksDoNotDecide) {
  // No links published: the topology policy orders devices by load, spread unless binpack is asked.
  auto spread = node("n", 2);
  spread.usage[0] = {1, 1000, 10};
  EXPECT_EQ(place(pod({{kDeviceKey, "topology-aware"}}), spread), std::vector<std::string>{"n-gpu1"});
  auto packed = node("n", 2);
  packed.usage[0] = {1, 1000, 10};
  EXPECT_EQ(place(pod({{kDeviceKey, "binpack,topology-aware"}}), packed), std::vector<std::string>{"n-gpu0"});
}

TEST_F(HamiPolicyTest, RefusalsNameHamisReasonBesideOurWords) {
  auto n = node("n", 1);
  n.usage[0] = {2, 2000, 100};  // two containers took all the compute between them
  const PreparedPod noCompute = pod({}, gpu(1, 1000, 0));
  EXPECT_THAT(refusal(noCompute, n),
              HasSubstr("1/1 CardComputeUnitsExhausted: all of the device's compute is taken (by 2 container(s))"));
  EXPECT_EQ(engine_.category(noCompute, engine_.evaluate(noCompute, n)),
            "vgpu: devices with all their compute taken (CardComputeUnitsExhausted)");

  n.usage[0] = {1, k80G - 500, 10};
  const PreparedPod slice = pod({});
  EXPECT_THAT(refusal(slice, n), HasSubstr("1/1 CardInsufficientMemory: not enough free memory (needs 1000 MiB, 500 MiB free)"));
  EXPECT_EQ(engine_.category(slice, engine_.evaluate(slice, n)), "vgpu: not enough free device memory (CardInsufficientMemory)");

  NodeState empty("bare", std::make_shared<const NodeInventory>(std::vector<Device>{}, backends_));
  EXPECT_THAT(refusal(slice, empty), HasSubstr("NodeInsufficientDevice: the node has no sim devices"));
  EXPECT_EQ(engine_.category(slice, engine_.evaluate(slice, empty)), "vgpu: no sim devices on the node (NodeInsufficientDevice)");

  auto one = node("one", 1);
  const PreparedPod two = pod({}, gpu(2, 1000, 10));
  EXPECT_THAT(refusal(two, one), HasSubstr("1 of 1 fit; NodeInsufficientDevice: the node has 1"));
  EXPECT_EQ(engine_.category(two, engine_.evaluate(two, one)),
            "vgpu: fewer sim devices on the node than a container asks (NodeInsufficientDevice)");

  // Issue 41 item 2: five asked of a node of four whose devices all refuse for another
  // reason: the summary names the real one, the device count, as the words do.
  auto four = node("four", 4);
  for (auto& u : four.usage) u = {2, 2000, 100};
  const PreparedPod five = pod({}, gpu(5, 1000, 0));
  EXPECT_THAT(refusal(five, four), HasSubstr("NodeInsufficientDevice: the node has 4"));
  EXPECT_EQ(engine_.category(five, engine_.evaluate(five, four)),
            "vgpu: fewer sim devices on the node than a container asks (NodeInsufficientDevice)");
  EXPECT_EQ(engine_.category(five, engine_.check(five, four)),
            "vgpu: fewer sim devices on the node than a container asks (NodeInsufficientDevice)");

  struct Name {
    vgpu_reason reason;
    std::uint64_t needed;
    const char* hami;
  } names[] = {
      {VGPU_REASON_UNHEALTHY, 0, "CardNotHealth"},
      {VGPU_REASON_CORDONED, 0, "CardCordoned"},
      {VGPU_REASON_MODEL_MISMATCH, 0, "CardTypeMismatch"},
      {VGPU_REASON_ID_MISMATCH, 1, "CardUuidMismatch"},
      {VGPU_REASON_SHARES_EXHAUSTED, 1, "CardTimeSlicingExhausted"},
      {VGPU_REASON_INSUFFICIENT_MEMORY, 10, "CardInsufficientMemory"},
      {VGPU_REASON_REQUEST_TOO_LARGE, 10, "CardInsufficientMemory"},
      {VGPU_REASON_INSUFFICIENT_COMPUTE, 10, "CardInsufficientCore"},
      {VGPU_REASON_EXCLUSIVE_CONFLICT, 100, "ExclusiveDeviceAllocateConflict"},
      {VGPU_REASON_EXCLUSIVE_CONFLICT, 0, "CardComputeUnitsExhausted"},
      {VGPU_REASON_NUMA_MISMATCH, 2, "NumaNotFit"},
  };
  for (const auto& x : names)
    EXPECT_EQ(hamiReasonName(vgpu_fit_result{0, x.reason, x.needed, 0, {}}), x.hami) << x.reason;
  EXPECT_EQ(hamiReasonName(vgpu_fit_result{0, VGPU_REASON_BACKEND + 1, 0, 0, {}}), "");
}

}  // namespace
}  // namespace vgpu
