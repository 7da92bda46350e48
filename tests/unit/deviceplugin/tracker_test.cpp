// PodTracker: which pod an Allocate is for, without any I/O.
#include <gmock/gmock.h>

#include "pod_tracker.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"

namespace vgpu::deviceplugin {
namespace {

using ::testing::HasSubstr;
constexpr const char* kRes = "vgpu.io/sim";

Device dev(const std::string& id, int index, std::uint64_t mem = 10000) {
  Device d;
  d.id = id;
  d.index = index;
  d.backend = "sim";
  d.memoryMiB = mem;
  d.splitCount = 4;
  d.health = Health::kHealthy;
  return d;
}

DeviceGrant g(const std::string& id, int slot, std::uint64_t mem = 1000, int index = 0) {
  return DeviceGrant{"sim", id, index, mem, 0, slot};
}

/// A pod created at second `age` with one container per entry of `grants`.
TrackedPod pod(const std::string& name, int age, std::vector<std::vector<DeviceGrant>> grants, bool assigned = true) {
  TrackedPod p;
  p.info.name = name;
  p.info.uid = "uid-" + name;
  p.info.nodeName = "n1";
  p.info.phase = "Pending";
  p.created = std::chrono::system_clock::time_point(std::chrono::seconds(1000 + age));
  Assignment a{"n1", {}};
  for (size_t i = 0; i < grants.size(); ++i) {
    const std::string c = "c" + std::to_string(i);
    p.info.containers.push_back({c, false, {{kRes, static_cast<std::int64_t>(grants[i].size())}}});
    a.containers.push_back({c, false, grants[i]});
  }
  if (assigned) {
    p.info.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(a);
    p.info.annotations[std::string(keys::kPodBindPhase)] = "allocating";
  }
  return p;
}

class DevicePluginTracker : public ::testing::Test {
 protected:
  void SetUp() override {
    tracker.setResources({{kRes, "sim"}});
    tracker.setDevices("sim", {dev("d0", 0), dev("d1", 1, 3000)});
  }
  PodTracker tracker{"n1"};
};

TEST_F(DevicePluginTracker, PrefersTheAssignmentOfTheOldestWaitingPod) {
  tracker.upsert(pod("young", 5, {{g("d1", 1)}}));
  tracker.upsert(pod("old", 1, {{g("d0", 2)}}));
  const std::vector<std::string> avail{"d0::0", "d0::1", "d0::2", "d1::0", "d1::1"};
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1), (std::vector<std::string>{"d0::2"}));
  // Two devices wanted: nobody waits for two, so no hint.
  EXPECT_TRUE(tracker.preferred(kRes, avail, {}, 2).empty());
  // The old pod's IDs are taken: the next pod's are preferred.
  EXPECT_EQ(tracker.preferred(kRes, {"d0::0", "d1::1"}, {}, 1), (std::vector<std::string>{"d1::1"}));
}

TEST_F(DevicePluginTracker, ExactIdsWinOverAge) {
  tracker.upsert(pod("old", 1, {{g("d0", 2)}}));
  tracker.upsert(pod("young", 5, {{g("d1", 1, 1000, 1)}}));
  auto r = tracker.claim(kRes, {"d1::1"});
  ASSERT_TRUE(std::holds_alternative<Claim>(r));
  const auto& c = std::get<Claim>(r);
  EXPECT_EQ(c.podName, "young");
  EXPECT_TRUE(c.exact);
  EXPECT_EQ(c.devices[0].deviceIndex, 1);
  auto outcome = tracker.commit(c);
  ASSERT_TRUE(outcome);
  EXPECT_FALSE(outcome->changed);
}

TEST_F(DevicePluginTracker, OtherIdsGoToTheOldestPodWithTheSameSignatureAndKeepItsSlice) {
  tracker.upsert(pod("pair", 1, {{g("d0", 0, 500), g("d1", 0, 500)}}));
  tracker.upsert(pod("single", 2, {{g("d0", 1, 700)}}));
  auto r = tracker.claim(kRes, {"d0::3"});
  ASSERT_TRUE(std::holds_alternative<Claim>(r));
  const auto& c = std::get<Claim>(r);
  EXPECT_EQ(c.podName, "single");
  EXPECT_FALSE(c.exact);
  EXPECT_EQ(c.devices[0].slot, 3);
  EXPECT_EQ(c.devices[0].memoryMiB, 700u);
  auto outcome = tracker.commit(c);
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->changed);
  EXPECT_EQ(outcome->assignment.containers[0].devices[0].slot, 3);
}

TEST_F(DevicePluginTracker, RefusesDevicesThatWouldBeOverfilled) {
  tracker.upsert(pod("a", 1, {{g("d1", 0, 2000, 1)}}));
  tracker.upsert(pod("b", 2, {{g("d0", 0, 2000)}}));
  auto ra = tracker.claim(kRes, {"d1::0"});
  ASSERT_TRUE(std::holds_alternative<Claim>(ra));
  ASSERT_TRUE(tracker.commit(std::get<Claim>(ra)));
  auto rb = tracker.claim(kRes, {"d1::1"});
  ASSERT_TRUE(std::holds_alternative<ClaimError>(rb));
  EXPECT_EQ(std::get<ClaimError>(rb).failure, ClaimFailure::kPodUnusable);
  EXPECT_EQ(std::get<ClaimError>(rb).podUid, "uid-b");
  EXPECT_THAT(std::get<ClaimError>(rb).message, HasSubstr("device d1 has 1000 MiB free"));
}

TEST_F(DevicePluginTracker, AMultiContainerPodCompletesOnItsLastContainer) {
  tracker.upsert(pod("m", 1, {{g("d0", 0)}, {g("d0", 1), g("d1", 1)}}));
  auto r0 = tracker.claim(kRes, {"d0::0"});
  ASSERT_TRUE(std::holds_alternative<Claim>(r0));
  EXPECT_EQ(std::get<Claim>(r0).container, "c0");
  EXPECT_FALSE(tracker.commit(std::get<Claim>(r0)));
  auto r1 = tracker.claim(kRes, {"d1::1", "d0::1"});
  ASSERT_TRUE(std::holds_alternative<Claim>(r1));
  EXPECT_EQ(std::get<Claim>(r1).container, "c1");
  EXPECT_EQ(std::get<Claim>(r1).containerIndex, 1);
  EXPECT_TRUE(tracker.commit(std::get<Claim>(r1)));
  // Done: the pod is no longer waiting.
  EXPECT_TRUE(std::holds_alternative<ClaimError>(tracker.claim(kRes, {"d0::0"})));
}

TEST_F(DevicePluginTracker, APodWithoutAssignmentIsNamedAsTheOneToFail) {
  tracker.upsert(pod("bare", 1, {{g("d0", 0)}}, /*assigned=*/false));
  auto r = tracker.claim(kRes, {"d0::0"});
  ASSERT_TRUE(std::holds_alternative<ClaimError>(r));
  EXPECT_EQ(std::get<ClaimError>(r).failure, ClaimFailure::kPodUnusable);
  EXPECT_THAT(std::get<ClaimError>(r).message, HasSubstr("has no vgpu.io/assignment annotation"));
}

TEST_F(DevicePluginTracker, RejectsIdsThatAreNotOurs) {
  auto r = tracker.claim(kRes, {"GPU-1234-0"});
  ASSERT_TRUE(std::holds_alternative<ClaimError>(r));
  EXPECT_EQ(std::get<ClaimError>(r).failure, ClaimFailure::kBadRequest);
  EXPECT_EQ(std::get<ClaimError>(tracker.claim("other.io/x", {"d0::0"})).failure, ClaimFailure::kBadRequest);
}

TEST_F(DevicePluginTracker, ConcurrentClaimsNeverShareAContainer) {
  for (int i = 0; i < 8; ++i) tracker.upsert(pod("p" + std::to_string(i), i, {{g("d0", i % 4)}}));
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::string> pods;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      auto r = tracker.claim(kRes, {"d0::" + std::to_string(i % 4)});
      if (auto* c = std::get_if<Claim>(&r)) {
        std::lock_guard lock(mu);
        EXPECT_TRUE(pods.insert(c->podUid).second);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(pods.size(), 8u);
}

TEST_F(DevicePluginTracker, CorrectionFollowsTheIdsTheKubeletReports) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("y", 2, {{g("d0", 1)}}));
  // x was admitted with y's IDs and y with x's: both claims are exact but for the other pod.
  auto r1 = tracker.claim(kRes, {"d0::1"});
  ASSERT_TRUE(tracker.commit(std::get<Claim>(r1)));
  auto r2 = tracker.claim(kRes, {"d0::0"});
  ASSERT_TRUE(tracker.commit(std::get<Claim>(r2)));
  auto fix = tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}});
  ASSERT_TRUE(fix);
  EXPECT_EQ(fix->assignment.containers[0].devices[0].slot, 1);
  // Said once: the same report again changes nothing.
  EXPECT_FALSE(tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}));
  EXPECT_FALSE(tracker.correction("uid-unknown", {{"c0", {{kRes, {"d0::1"}}}}}));
  // The correction could not be written: the next report tries again.
  tracker.forgetRecorded("uid-x");
  EXPECT_TRUE(tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}));
}

TEST_F(DevicePluginTracker, CorrectingTwoSwappedPodsLeavesNeitherWaitingAgain) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("y", 2, {{g("d0", 1)}}));
  ASSERT_TRUE(tracker.commit(std::get<Claim>(tracker.claim(kRes, {"d0::1"}))));  // went to y
  ASSERT_TRUE(tracker.commit(std::get<Claim>(tracker.claim(kRes, {"d0::0"}))));  // went to x
  // The kubelet says the reverse; each pod is corrected in turn.
  ASSERT_TRUE(tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}));
  ASSERT_TRUE(tracker.correction("uid-y", {{"c0", {{kRes, {"d0::0"}}}}}));
  // Both are admitted: the next pod's Allocate is its own, and both slices count.
  tracker.upsert(pod("z", 3, {{g("d0", 2)}}));
  auto next = tracker.claim(kRes, {"d0::3"});
  ASSERT_TRUE(std::holds_alternative<Claim>(next));
  EXPECT_EQ(std::get<Claim>(next).podName, "z");
  EXPECT_EQ(tracker.usageByDevice().at("d0").first, 3000u);
}

}  // namespace
}  // namespace vgpu::deviceplugin
