#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "test_support.h"
#include "vgpu/preemption.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t k80G = 81920;
constexpr std::uint64_t kFifth = k80G / 5;  // 20 % of a device's memory

/// Victim selection on sim devices of 80 GiB, split count 5, with pods laid out by hand.
class PreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backends_.add(testing::loadSim()).ok()); }

  void makeNode(int deviceCount) {
    std::vector<Device> devs = testing::simDevices(deviceCount, "", k80G, "SIM-80G", 5);
    node_ = NodeState("n1", std::make_shared<const NodeInventory>(std::move(devs), backends_));
  }

  /// A running pod holding `percent` of memory and compute of each device in `devices`.
  void hold(const std::string& name, std::vector<int> devices, std::uint32_t percent, std::int32_t priority,
            bool pdb = false, bool proposed = false) {
    VictimCandidate c;
    c.uid = "uid-" + name;
    c.key = "ns/" + name;
    c.priority = priority;
    c.violatesPdb = pdb;
    c.proposed = proposed;
    c.assignment.node = "n1";
    ContainerAssignment ca{"main", false, {}};
    for (int d : devices)
      ca.devices.push_back({"sim", "gpu" + std::to_string(d), d, k80G * percent / 100, percent, -1, -1});
    c.assignment.containers.push_back(ca);
    ASSERT_TRUE(node_.add(c.assignment).ok());
    pods_.push_back(std::move(c));
  }
  /// Every device full of 20 % pods: "d<device>-<i>".
  void fillWithFifths(int deviceCount, std::int32_t priority) {
    makeNode(deviceCount);
    for (int d = 0; d < deviceCount; ++d)
      for (int i = 0; i < 5; ++i) hold("d" + std::to_string(d) + "-" + std::to_string(i), {d}, 20, priority);
  }

  PreparedPod preemptor(std::int64_t count, std::int64_t memoryMiB, std::int64_t cores) {
    ContainerResources c{
        "main", false, {{"vgpu.io/sim", count}, {"vgpu.io/sim-memory", memoryMiB}, {"vgpu.io/sim-cores", cores}}};
    auto request = buildPodRequest(backends_, "ns", "urgent", {c}, {});
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, backends_);
    EXPECT_TRUE(prepared.ok());
    return std::move(prepared).value();
  }

  Result<VictimChoice> choose(const PreparedPod& pod, std::int32_t priority) {
    return chooseVictims(engine_, pod, priority, node_, pods_);
  }
  std::set<std::string> victimNames(const VictimChoice& choice) const {
    std::set<std::string> out;
    for (std::size_t i : choice.victims) out.insert(pods_[i].key);
    return out;
  }
  /// The one device every victim holds ("" when they are spread).
  std::string victimsDevice(const VictimChoice& choice) const {
    std::set<std::string> devices;
    for (std::size_t i : choice.victims)
      for (const auto& g : pods_[i].assignment.containers[0].devices) devices.insert(g.deviceId);
    return devices.size() == 1 ? *devices.begin() : "";
  }

  BackendSet backends_;
  PlacementEngine engine_;
  NodeState node_;
  std::vector<VictimCandidate> pods_;
};

TEST_F(PreemptionTest, HalfADeviceEvictsExactlyThreeFifthsOfOneDevice) {
  fillWithFifths(8, 0);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(choice->victims.size(), 3u);
  const std::string device = victimsDevice(*choice);
  ASSERT_FALSE(device.empty()) << "victims spread over several devices";
  ASSERT_EQ(choice->assignment.containers.size(), 1u);
  EXPECT_EQ(choice->assignment.containers[0].devices.at(0).deviceId, device);
  EXPECT_EQ(choice->pdbViolations, 0);
}

TEST_F(PreemptionTest, BetweenEqualDevicesTakesTheOneKubeSchedulerProposedFrom) {
  makeNode(3);
  for (int d = 0; d < 3; ++d)
    for (int i = 0; i < 5; ++i)
      hold("d" + std::to_string(d) + "-" + std::to_string(i), {d}, 20, 0, false, /*proposed=*/d == 0 && i == 4);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(victimsDevice(*choice), "gpu0");
  EXPECT_EQ(victimNames(*choice).count("ns/d0-4"), 1u);
}

TEST_F(PreemptionTest, PartialFitEvictsOnlyWhatIsMissing) {
  makeNode(2);
  for (int i = 0; i < 5; ++i) hold("full-" + std::to_string(i), {0}, 20, 0);
  for (int i = 0; i < 3; ++i) hold("part-" + std::to_string(i), {1}, 20, 0);  // 40 % free
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  ASSERT_EQ(choice->victims.size(), 1u);
  EXPECT_EQ(victimsDevice(*choice), "gpu1");
}

TEST_F(PreemptionTest, FitsAsItIsNeedsNoVictims) {
  makeNode(1);
  hold("small", {0}, 20, 0);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok());
  EXPECT_TRUE(choice->victims.empty());
}

TEST_F(PreemptionTest, NeverChoosesPodsOfEqualOrHigherPriority) {
  makeNode(2);
  for (int i = 0; i < 5; ++i) hold("same-" + std::to_string(i), {0}, 20, 1000);
  for (int i = 0; i < 3; ++i) hold("higher-" + std::to_string(i), {1}, 20, 2000);
  hold("low", {1}, 20, 10);  // the only one below 1000: gpu1 then has 40 % free, no more
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_FALSE(choice.ok());
  EXPECT_THAT(choice.error().message, HasSubstr("would not make room"));

  // A 40 % pod fits once "low" is gone, and "low" is the only one it may take.
  auto smaller = choose(preemptor(1, k80G * 2 / 5, 40), 1000);
  ASSERT_TRUE(smaller.ok()) << smaller.error().message;
  EXPECT_EQ(victimNames(*smaller), std::set<std::string>{"ns/low"});
}

TEST_F(PreemptionTest, NoSetHelpsWhenTheRequestIsLargerThanAnyDevice) {
  fillWithFifths(2, 0);
  auto choice = choose(preemptor(1, k80G * 2, 50), 1000);
  ASSERT_FALSE(choice.ok());
  EXPECT_THAT(choice.error().message, HasSubstr("n1"));
}

TEST_F(PreemptionTest, PrefersADeviceWithoutDisruptionBudgetsEvenOfHigherPriority) {
  makeNode(2);
  for (int i = 0; i < 5; ++i) hold("guarded-" + std::to_string(i), {0}, 20, 0, /*pdb=*/true);
  for (int i = 0; i < 5; ++i) hold("free-" + std::to_string(i), {1}, 20, 500);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(victimsDevice(*choice), "gpu1");
  EXPECT_EQ(choice->pdbViolations, 0);
  EXPECT_EQ(choice->victims.size(), 3u);
}

TEST_F(PreemptionTest, CountsDisruptionBudgetViolationsWhenThereIsNoOtherWay) {
  makeNode(1);
  for (int i = 0; i < 5; ++i) hold("guarded-" + std::to_string(i), {0}, 20, 0, /*pdb=*/i < 3);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(choice->victims.size(), 3u);
  EXPECT_EQ(choice->pdbViolations, 1);  // two unguarded pods exist, so one guarded goes too
}

TEST_F(PreemptionTest, PrefersFewerVictimsThenLowerPriorities) {
  makeNode(3);
  for (int i = 0; i < 5; ++i) hold("fifth-" + std::to_string(i), {0}, 20, 0);   // 3 victims needed
  hold("big", {1}, 60, 100);                                                      // 1 victim needed
  hold("big-rest-0", {1}, 20, 100);
  hold("big-rest-1", {1}, 20, 100);
  hold("big-low", {2}, 60, 50);  // also 1 victim, of lower priority: this one
  hold("big-low-rest", {2}, 40, 50);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(victimNames(*choice), std::set<std::string>{"ns/big-low"});
}

TEST_F(PreemptionTest, EvictsTheLowestPrioritiesOnTheChosenDevice) {
  makeNode(1);
  const std::int32_t priorities[] = {40, 10, 30, 20, 50};
  for (int i = 0; i < 5; ++i) hold("p" + std::to_string(priorities[i]), {0}, 20, priorities[i]);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(victimNames(*choice), (std::set<std::string>{"ns/p10", "ns/p20", "ns/p30"}));
  // Most important first, as kube-scheduler lists victims.
  EXPECT_EQ(pods_[choice->victims.front()].priority, 30);
}

TEST_F(PreemptionTest, SpreadsOverSeveralDevicesForAMultiDeviceRequest) {
  fillWithFifths(4, 0);
  auto choice = choose(preemptor(2, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(choice->victims.size(), 6u);  // three on each of two devices
  std::map<std::string, int> perDevice;
  for (std::size_t i : choice->victims) ++perDevice[pods_[i].assignment.containers[0].devices[0].deviceId];
  EXPECT_EQ(perDevice.size(), 2u);
  for (const auto& [device, n] : perDevice) EXPECT_EQ(n, 3) << device;
}

TEST_F(PreemptionTest, AMultiDevicePodIsOneVictimAcrossItsDevices) {
  makeNode(2);
  hold("wide", {0, 1}, 60, 0);  // 60 % of both
  hold("narrow-0", {0}, 40, 0);
  hold("narrow-1", {1}, 40, 0);
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(victimNames(*choice), std::set<std::string>{"ns/wide"});
}

TEST_F(PreemptionTest, AnUnavailableNodeIsRefusedInWords) {
  fillWithFifths(1, 0);
  node_.unavailable = "heartbeat is 5 minutes old";
  auto choice = choose(preemptor(1, k80G / 2, 50), 1000);
  ASSERT_FALSE(choice.ok());
  EXPECT_THAT(choice.error().message, HasSubstr("heartbeat"));
}

}  // namespace
}  // namespace vgpu
