// PodTracker: which pod an Allocate is for, without any I/O; the PodResources correction
// reads what each Allocate gave from a HandoutStore (on a temp folder).
#include <gmock/gmock.h>

#include "handout_store.h"
#include "pod_tracker.h"
#include "temp_dir.h"
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

/// A tracker set up as the agent sets it up, for the sim backend on devices d0 and d1.
void setUp(PodTracker& tracker) {
  tracker.setResources({{kRes, "sim"}});
  tracker.setDevices("sim", {dev("d0", 0), dev("d1", 1, 3000)});
}

class DevicePluginTracker : public ::testing::Test {
 protected:
  void SetUp() override {
    setUp(tracker);
    ASSERT_TRUE(handouts.load().ok());
  }
  /// Claims `ids`, records the handout and commits, as the agent's Allocate does.
  std::optional<PodOutcome> allocate(const std::vector<std::string>& ids) {
    auto r = tracker.claim(kRes, ids);
    const auto* c = std::get_if<Claim>(&r);
    EXPECT_TRUE(c) << std::get<ClaimError>(r).message;
    if (!c) return std::nullopt;
    EXPECT_TRUE(handouts.create(handoutOf(*c)).ok());
    return tracker.commit(*c);
  }
  testing::TempDir dir;
  HandoutStore handouts{dir.path() / "containers", dir.path() / "containers.journal"};
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

// Issue 43: the kubelet admits pods in the order they reach it. With its PodResources view
// the pods it lists are the candidates, whatever
// their age; without one waiting, the oldest is.
TEST_F(DevicePluginTracker, ThePodTheKubeletListsComesFirstWhateverItsAge) {
  tracker.upsert(pod("old", 1, {{g("d0", 2)}}));
  tracker.upsert(pod("young", 5, {{g("d1", 1, 1000, 1)}}));
  const std::vector<std::string> avail{"d0::0", "d0::2", "d1::1"};
  const KubeletAdmitting young{{"default/young"}, false};
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1, &young), (std::vector<std::string>{"d1::1"}));
  EXPECT_TRUE(tracker.awaitsListed(kRes, 1, young));
  // The old pod's own IDs: the Allocate is still the young pod's, on those devices.
  auto r = tracker.claim(kRes, {"d0::2"}, &young);
  ASSERT_TRUE(std::holds_alternative<Claim>(r)) << std::get<ClaimError>(r).message;
  EXPECT_EQ(std::get<Claim>(r).podName, "young");
  EXPECT_FALSE(std::get<Claim>(r).exact);
  tracker.abort(std::get<Claim>(r), false);

  // The kubelet lists no waiting pod: the oldest first, as without its view.
  const KubeletAdmitting other{{"default/other"}, false};
  EXPECT_FALSE(tracker.awaitsListed(kRes, 1, other));
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1, &other), (std::vector<std::string>{"d0::2"}));
  // ... unless it lists a pod the watch has not shown: then no waiting pod's share is named.
  const KubeletAdmitting unseen{{"default/other"}, true};
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1, &unseen), (std::vector<std::string>{"d0::0"}));
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

// Issue 27 item 3: a pod another scheduler bound (or given spec.nodeName) took the slice a
// waiting vgpu pod was promised: its Allocate was matched to that pod by signature.
TEST_F(DevicePluginTracker, AForeignPodAdmittedBeforeAWaitingOneIsRefusedNotGivenItsSlice) {
  TrackedPod foreign = pod("theirs", 1, {{g("d0", 0)}}, /*assigned=*/false);
  foreign.info.schedulerName = "default-scheduler";
  tracker.upsert(foreign);
  tracker.upsert(pod("mine", 5, {{g("d0", 2, 4000)}}));
  // The kubelet admits the older pod first, with IDs of its own choosing.
  auto r = tracker.claim(kRes, {"d0::3"});
  ASSERT_TRUE(std::holds_alternative<ClaimError>(r)) << "served as " << std::get<Claim>(r).podName;
  const auto& refused = std::get<ClaimError>(r);
  EXPECT_EQ(refused.failure, ClaimFailure::kPodUnusable);
  EXPECT_EQ(refused.podUid, "uid-theirs");
  EXPECT_THAT(refused.message, HasSubstr("pod default/theirs asks for vgpu.io/sim but was not placed by vgpu-scheduler"));
  EXPECT_THAT(refused.message, HasSubstr("schedulerName \"default-scheduler\""));
  tracker.failPod(refused.podUid);  // as the agent does; the kubelet fails the pod
  // The waiting pod still gets its own slice.
  auto mine = tracker.claim(kRes, {"d0::2"});
  ASSERT_TRUE(std::holds_alternative<Claim>(mine));
  EXPECT_EQ(std::get<Claim>(mine).podName, "mine");
  EXPECT_EQ(std::get<Claim>(mine).devices[0].memoryMiB, 4000u);
}

// Issue 28 item 2: a pod HAMi placed before the switch runs on the node (HAMi-core limits
// it). The kubelet admitted it long ago: it must not be taken for the next pod to admit, or
// every vgpu pod of the same signature is refused (seen in the real-cluster scenario), and
// it is reported with the devices HAMi gave it.
TEST_F(DevicePluginTracker, ARunningPodHamiPlacedIsNotWaitingAndIsReported) {
  TrackedPod hami = pod("from-hami", 1, {{g("d0", 0)}}, /*assigned=*/false);
  hami.info.phase = "Running";
  hami.info.schedulerName = "hami-scheduler";
  hami.info.annotations["hami.io/vgpu-devices-allocated"] = "d0,NVIDIA,6000,30:;";
  tracker.upsert(hami);
  tracker.upsert(pod("mine", 5, {{g("d0", 2, 4000)}}));
  auto mine = tracker.claim(kRes, {"d0::3"});
  ASSERT_TRUE(std::holds_alternative<Claim>(mine)) << std::get<ClaimError>(mine).message;
  EXPECT_EQ(std::get<Claim>(mine).podName, "mine");
  const auto reported = tracker.hamiContainers();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].pod, "from-hami");
  EXPECT_EQ(reported[0].container, "c0");
  EXPECT_EQ(reported[0].deviceId, "d0");
  EXPECT_EQ(reported[0].memoryMiB, 6000u);
}

TEST_F(DevicePluginTracker, TheHintForAForeignPodNamesNoPromisedIds) {
  tracker.upsert(pod("theirs", 1, {{g("d0", 0)}}, /*assigned=*/false));
  tracker.upsert(pod("mine", 5, {{g("d0", 0, 4000)}}));
  const std::vector<std::string> avail{"d0::0", "d0::1", "d1::0"};
  // The kubelet is admitting the older pod: steering it to d0::0 would make its Allocate
  // look like the younger pod's own.
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1), (std::vector<std::string>{"d0::1"}));
  // Once it is gone, the waiting pod's own IDs are the hint again.
  tracker.remove("uid-theirs");
  EXPECT_EQ(tracker.preferred(kRes, avail, {}, 1), (std::vector<std::string>{"d0::0"}));
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
  ASSERT_TRUE(allocate({"d0::1"}));
  ASSERT_TRUE(allocate({"d0::0"}));
  auto fix = tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}, handouts);
  ASSERT_TRUE(fix);
  EXPECT_EQ(fix->assignment.containers[0].devices[0].slot, 1);
  // Said once: the same report again changes nothing.
  EXPECT_FALSE(tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}, handouts));
  EXPECT_FALSE(tracker.correction("uid-unknown", {{"c0", {{kRes, {"d0::1"}}}}}, handouts));
}

TEST_F(DevicePluginTracker, CorrectingTwoSwappedPodsLeavesNeitherWaitingAgain) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("y", 2, {{g("d0", 1)}}));
  ASSERT_TRUE(allocate({"d0::1"}));  // went to y
  ASSERT_TRUE(allocate({"d0::0"}));  // went to x
  // The kubelet says the reverse; each pod is corrected in turn.
  ASSERT_TRUE(tracker.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}, handouts));
  ASSERT_TRUE(tracker.correction("uid-y", {{"c0", {{kRes, {"d0::0"}}}}}, handouts));
  // Both are admitted: the next pod's Allocate is its own, and both slices count.
  tracker.upsert(pod("z", 3, {{g("d0", 2)}}));
  auto next = tracker.claim(kRes, {"d0::3"});
  ASSERT_TRUE(std::holds_alternative<Claim>(next));
  EXPECT_EQ(std::get<Claim>(next).podName, "z");
  EXPECT_EQ(tracker.usageByDevice().at("d0").first, 3000u);
}

TEST_F(DevicePluginTracker, APodListedPartWayIsNotRecordedAndItsNextContainerIsMatchedToIt) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("m", 2, {{g("d0", 1)}, {g("d0", 2)}}));
  ASSERT_TRUE(allocate({"d0::0"}));  // m's c0, matched to x
  // The kubelet lists m with c0 only: it is still admitting m.
  EXPECT_FALSE(tracker.correction("uid-m", {{"c0", {{kRes, {"d0::0"}}}}}, handouts));
  EXPECT_FALSE(tracker.recorded("uid-m"));
  // m's c1 is matched to m and completes it with what each container really got.
  auto c1 = tracker.claim(kRes, {"d0::2"});
  ASSERT_TRUE(std::holds_alternative<Claim>(c1));
  EXPECT_EQ(std::get<Claim>(c1).podName, "m");
  EXPECT_EQ(std::get<Claim>(c1).container, "c1");
  auto done = tracker.commit(std::get<Claim>(c1));
  ASSERT_TRUE(done);
  ASSERT_EQ(done->assignment.containers.size(), 2u);
  EXPECT_EQ(done->assignment.containers[0].devices[0].slot, 0);
  EXPECT_EQ(done->assignment.containers[1].devices[0].slot, 2);
  // x waits again.
  auto x = tracker.claim(kRes, {"d0::1"});
  ASSERT_TRUE(std::holds_alternative<Claim>(x));
  EXPECT_EQ(std::get<Claim>(x).podName, "x");
}

TEST_F(DevicePluginTracker, APodListedCompleteIsCorrectedThoughTheAgentStillWaitsForOneOfItsContainers) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("m", 2, {{g("d0", 1)}, {g("d0", 2)}}));
  ASSERT_TRUE(allocate({"d0::0"}));   // m's c0, matched to x
  ASSERT_FALSE(allocate({"d0::1"}));  // m's c1, matched to m's c0
  // The kubelet is done with m: its Allocates were all answered.
  auto fix = tracker.correction("uid-m", {{"c0", {{kRes, {"d0::0"}}}}, {"c1", {{kRes, {"d0::1"}}}}}, handouts);
  ASSERT_TRUE(fix);
  ASSERT_EQ(fix->assignment.containers.size(), 2u);
  EXPECT_EQ(fix->assignment.containers[0].devices[0].slot, 0);
  EXPECT_EQ(fix->assignment.containers[1].devices[0].slot, 1);
  auto x = tracker.claim(kRes, {"d0::2"});
  ASSERT_TRUE(std::holds_alternative<Claim>(x));
  EXPECT_EQ(std::get<Claim>(x).podName, "x");
}

TEST_F(DevicePluginTracker, AnAllocateInFlightForAPodDefersItsCorrection) {
  tracker.upsert(pod("x", 1, {{g("d0", 0)}}));
  tracker.upsert(pod("y", 2, {{g("d0", 1)}}));
  ASSERT_TRUE(allocate({"d0::1"}));  // went to y
  auto inFlight = tracker.claim(kRes, {"d0::0"});
  ASSERT_TRUE(std::holds_alternative<Claim>(inFlight));
  const std::map<std::string, std::map<std::string, std::vector<std::string>>> held{{"c0", {{kRes, {"d0::1"}}}}};
  EXPECT_FALSE(tracker.correction("uid-x", held, handouts));
  ASSERT_TRUE(handouts.create(handoutOf(std::get<Claim>(inFlight))).ok());
  tracker.commit(std::get<Claim>(inFlight));
  EXPECT_TRUE(tracker.correction("uid-x", held, handouts));
}

/// Two pods whose assignments differ only in memory (x: d0 slot 0 with 1000 MiB, y: d0 slot
/// 1 with 3000 MiB). The kubelet admits y first with x's IDs, then x with y's: the agent's
/// Allocate serves each under the other's name, so the container y really runs got x's
/// 1000 MiB (its limiter enforces that) and x's got y's 3000 MiB.
struct SwappedSlices {
  TrackedPod x = pod("x", 1, {{g("d0", 0, 1000)}});
  TrackedPod y = pod("y", 2, {{g("d0", 1, 3000)}});
};

/// The pod as the watch shows it once the agent recorded it allocated with its own assignment.
TrackedPod allocated(TrackedPod p) {
  p.info.annotations[std::string(keys::kPodBindPhase)] = "success";
  return p;
}

TEST_F(DevicePluginTracker, ARestartedAgentCorrectsWithTheDevicesAnEarlierOneGave) {
  SwappedSlices pods;
  tracker.upsert(pods.x);
  tracker.upsert(pods.y);
  auto servedX = allocate({"d0::0"});  // the kubelet's Allocate for y
  auto servedY = allocate({"d0::1"});  // and for x
  ASSERT_TRUE(servedX && servedY);
  ASSERT_FALSE(servedX->changed || servedY->changed);  // both exact: annotations kept
  // The agent restarts before any PodResources pass: a new tracker (the watch shows both
  // pods allocated) and the store read back from the journal.
  PodTracker restarted{"n1"};
  setUp(restarted);
  restarted.upsert(allocated(pods.x));
  restarted.upsert(allocated(pods.y));
  HandoutStore reloaded(dir.path() / "containers", dir.path() / "containers.journal");
  ASSERT_TRUE(reloaded.load().ok());

  auto fixY = restarted.correction("uid-y", {{"c0", {{kRes, {"d0::0"}}}}}, reloaded);
  auto fixX = restarted.correction("uid-x", {{"c0", {{kRes, {"d0::1"}}}}}, reloaded);
  ASSERT_TRUE(fixY && fixX);
  // Each pod is recorded with what its container's limiter really got, not its own slice.
  EXPECT_EQ(fixY->assignment.containers[0].devices, (std::vector<DeviceGrant>{g("d0", 0, 1000)}));
  EXPECT_EQ(fixX->assignment.containers[0].devices, (std::vector<DeviceGrant>{g("d0", 1, 3000)}));
}

TEST_F(DevicePluginTracker, WithoutTheDevicesGivenACorrectionKeepsTheAnnotationsSlices) {
  // A journal an agent wrote before it recorded devices (the same as before the devices were
  // journalled: a restarted agent did not know what an earlier one gave).
  dir.write("old/containers.journal",
            R"({"op":"put","id":")" + handoutId(kRes, {"d0::0"}) +
                R"(","resource":"vgpu.io/sim","ids":["d0::0"],"backend":"sim","podUid":"uid-x",)"
                R"("namespace":"","pod":"x","container":"c0","podAnnotations":{}})"
                "\n");
  HandoutStore old(dir.path() / "old" / "containers", dir.path() / "old" / "handouts.journal", {},
                   dir.path() / "old" / "containers.journal");
  auto problems = old.load();
  ASSERT_TRUE(problems.ok());
  ASSERT_THAT(*problems, ::testing::IsEmpty());
  tracker.upsert(allocated(SwappedSlices{}.y));
  auto fix = tracker.correction("uid-y", {{"c0", {{kRes, {"d0::0"}}}}}, old);
  ASSERT_TRUE(fix);
  EXPECT_EQ(fix->assignment.containers[0].devices, (std::vector<DeviceGrant>{g("d0", 0, 3000)}));
}

// Issue 43 defect 5: a kubelet that holds two slots of one device for one container (handed
// out before the agent refused such Allocates) is not recorded as the pod's assignment, which
// no reader could decode (the agent logs why); it still counts the memory there.
TEST_F(DevicePluginTracker, ACorrectionToTwoSlotsOfOneDeviceIsNotRecordedButCounted) {
  tracker.upsert(pod("pair", 1, {{g("d0", 2, 1000), g("d1", 2, 1000, 1)}}));
  const std::map<std::string, std::map<std::string, std::vector<std::string>>> held{
      {"c0", {{kRes, {"d0::0", "d0::1"}}}}};
  auto fix = tracker.correction("uid-pair", held, handouts);
  ASSERT_TRUE(fix);
  EXPECT_THAT(fix->unrecordable, HasSubstr("device \"d0\" of backend \"sim\" is granted twice to container \"c0\""));
  EXPECT_FALSE(tracker.recorded("uid-pair"));
  EXPECT_EQ(tracker.usageByDevice()["d0"].first, 2000u);
  // Said once: the next pass finds it counted.
  EXPECT_FALSE(tracker.correction("uid-pair", held, handouts));
}

}  // namespace
}  // namespace vgpu::deviceplugin
