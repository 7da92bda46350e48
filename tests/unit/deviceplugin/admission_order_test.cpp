// Issue 43, the chaos soak's node-agent defects: the kubelet admits pods in the order they
// reach it, not their creation order, and the agent's watch may lag or be cut off. The agent
// pairs a GetPreferredAllocation or an Allocate with a pod the kubelet lists (PodResources),
// reads from the apiserver a listed pod its watch has not shown, and never hands one pod's
// share to another, nor records two slots of one device for one container. Against the
// kubelet and apiserver doubles with the sim backend.
#include "agent_fixture.h"

namespace vgpu::deviceplugin::testing {
namespace {

class DevicePluginAdmissionOrder : public AgentFixture {
 protected:
  void start(bool ignorePreferred = false) {
    writeSimNode();
    startKubelet(ignorePreferred);
    AgentOptions o = options();
    // Passes run when the test says (maintainNow): what an Allocate did is what is seen.
    o.podResourcesInterval = std::chrono::hours(1);
    o.cleanupInterval = std::chrono::hours(1);
    o.podWait = std::chrono::milliseconds(1500);
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  /// One container asking one sim device, assigned slot `slot` of sim-0.
  static PodContainer one(int slot) {
    return {"main", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, slot)}};
  }

  bool watched(std::size_t pods) {
    return waitFor([&] { return agent->tracker().pods().size() == pods; });
  }

  /// The watch stops showing changes (its stream cut, every new watch left unanswered) while
  /// the apiserver still answers other requests: a watch connection held or dropped on the
  /// way, as the soak's proxy does, while the kubelet reaches the apiserver.
  void stallWatch() {
    fakes::Fault f;
    f.watch = fakes::Fault::Watch::kOnly;
    f.action = fakes::Fault::Action::kHang;
    f.times = -1;
    api->addFault(f);
    api->breakWatches();
  }

  /// Every request to the apiserver is left unanswered: the agent is cut off from it.
  void cutOff() {
    fakes::Fault f;
    f.action = fakes::Fault::Action::kHang;
    f.times = -1;
    api->addFault(f);
    api->breakWatches();
  }

  /// The kubelet admits `spec` and gives it `id`; the agent records it as served.
  void admitWith(const PodSpec& spec, const std::string& uid, const std::string& id) {
    auto r = kubelet->admit(kubeletPod(spec, uid));
    ASSERT_TRUE(r.admitted) << r.error;
    EXPECT_EQ(r.allocations.at(0).deviceIds, (std::vector<std::string>{id}));
    EXPECT_EQ(annotationOf(spec.name, keys::kPodBindPhase), "success");
  }
  int slotOf(const std::string& pod) const {
    auto a = assignmentOf(pod);
    return a ? a->containers.at(0).devices.at(0).slot : -1;
  }

  PodSpec older{"older", {one(0)}, true, "2026-01-01T00:00:00Z"};
  PodSpec younger{"younger", {one(1)}, true, "2026-01-01T00:00:01Z"};
};

// Defect 2 (1.34, seed 43134, t=54 s): two pods of one shape bound apart reach the kubelet
// in the order opposite to their creation. The hint named the older pod's share, the kubelet
// admitted the younger pod with it and the older pod was refused later.
TEST_F(DevicePluginAdmissionOrder, TheHintIsForThePodTheKubeletAdmitsNotTheOldestWaiting) {
  start();
  const std::string olderUid = createPod(older);
  const std::string youngerUid = createPod(younger);
  ASSERT_TRUE(watched(2));

  admitWith(younger, youngerUid, "sim-0::1");
  admitWith(older, olderUid, "sim-0::0");
  EXPECT_EQ(slotOf("younger"), 1);
  EXPECT_EQ(slotOf("older"), 0);
}

// The same without a hint (the kubelet takes the lowest IDs: the older pod's share): the
// Allocate is the younger pod's, the one the kubelet lists, never recorded as the older
// pod's success while the younger one holds the share.
TEST_F(DevicePluginAdmissionOrder, AnAllocateOfAnotherPodsIdsIsMatchedToThePodTheKubeletAdmits) {
  start(/*ignorePreferred=*/true);
  const std::string olderUid = createPod(older);
  const std::string youngerUid = createPod(younger);
  ASSERT_TRUE(watched(2));

  admitWith(younger, youngerUid, "sim-0::0");
  EXPECT_EQ(slotOf("younger"), 0);
  EXPECT_NE(annotationOf("older", keys::kPodBindPhase), "success");
  admitWith(older, olderUid, "sim-0::1");
  EXPECT_EQ(slotOf("older"), 1);
}

// Defect 3: the watch lags behind the kubelet. Waiting for the watch gave the kubelet no hint
// for the pod it admits, or (another pod of the shape waiting) the other pod's share, which a
// later correction recorded for two pods. The agent reads the pod the kubelet lists instead.
TEST_F(DevicePluginAdmissionOrder, UnderALaggingWatchThePodTheKubeletAdmitsGetsItsOwnShare) {
  start();
  const std::string olderUid = createPod(older);
  ASSERT_TRUE(watched(1));
  stallWatch();
  const std::string youngerUid = createPod(younger);

  admitWith(younger, youngerUid, "sim-0::1");
  EXPECT_NE(annotationOf("older", keys::kPodBindPhase), "success");
  admitWith(older, olderUid, "sim-0::0");
}

// Defect 1 (1.37, seed 7): an agent whose watch is cut off refused each Allocate after
// --pod-wait-ms though the apiserver could tell it the pod's assignment.
TEST_F(DevicePluginAdmissionOrder, AnAgentWhoseWatchIsCutOffReadsThePodInsteadOfRefusingIt) {
  start();
  stallWatch();
  admitWith(younger, createPod(younger), "sim-0::1");
}

// Refusing stays the answer when the apiserver cannot be reached at all: the pod the kubelet
// admits is unknown, and the share of the pod the agent knows is not handed to it.
TEST_F(DevicePluginAdmissionOrder, AnAgentCutOffFromTheApiserverRefusesRatherThanGuess) {
  start(/*ignorePreferred=*/true);
  createPod(older);
  ASSERT_TRUE(watched(1));
  cutOff();
  const std::string youngerUid = createPod(younger);

  const auto t0 = std::chrono::steady_clock::now();
  auto y = kubelet->admit(kubeletPod(younger, youngerUid));
  EXPECT_FALSE(y.admitted);
  EXPECT_NE(y.error.find("default/younger"), std::string::npos) << y.error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  api->clearFaults();
  api->releaseHangs();
  EXPECT_NE(annotationOf("older", keys::kPodBindPhase), "success");
}

// Defect 5 (1.37, seed 4312; 1.34, seed 4303): without the hint the kubelet gave a pod's
// one container two slots of one GPU for its two devices; the agent recorded them as the
// assignment, which nobody could read (a container sees a device once), and the pod ran
// with its memory accounted nowhere. The Allocate is refused instead: the kubelet fails the
// pod (UnexpectedAdmissionError), its controller creates it again, and the assignment the
// pod keeps stays readable.
TEST_F(DevicePluginAdmissionOrder, TwoSlotsOfOneDeviceForOneContainerAreRefusedNotRecorded) {
  start(/*ignorePreferred=*/true);
  PodSpec pair{"pair",
               {{"main", {{kSimCount, 2}, {kSimMemory, 1000}},
                 {grant("sim-0", 0, 1000, 0, 2), grant("sim-1", 1, 1000, 0, 2)}}},
               true, "2026-01-01T00:00:00Z"};
  const std::string uid = createPod(pair);
  ASSERT_TRUE(watched(1));

  auto r = kubelet->admit(kubeletPod(pair, uid));
  EXPECT_FALSE(r.admitted);
  EXPECT_NE(r.error.find("two slots of device sim-0"), std::string::npos) << r.error;
  EXPECT_TRUE(waitFor([&] { return annotationOf("pair", keys::kPodBindPhase) == "failed"; }));
  auto a = assignmentOf("pair");
  ASSERT_TRUE(a) << annotationOf("pair", keys::kPodAssignment);
  EXPECT_EQ(a->containers.at(0).devices.at(0).slot, 2);
  // The kubelet freed the IDs it picked: nothing runs on sim-0 unaccounted.
  EXPECT_TRUE(kubelet->allocations().empty());
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
