// The PodResources correction sets a pod the agent wrongly served back to waiting, also when
// the same pass (or an earlier one) already attributed the handout to the pod that really
// holds it: a pod the watch did not show yet, or a multi-container pod still being
// allocated. Otherwise the wrongly served pod's own Allocate finds no pod waiting and the
// kubelet rejects it. Against the kubelet and apiserver doubles with the sim backend.
#include <gmock/gmock.h>

#include "agent_fixture.h"

namespace vgpu::deviceplugin::testing {
namespace {

class DevicePluginCorrection : public AgentFixture {
 protected:
  void SetUp() override {
    AgentFixture::SetUp();
    AgentOptions o = options();
    // Passes run when the test says (maintainNow).
    o.podResourcesInterval = std::chrono::hours(1);
    o.cleanupInterval = std::chrono::hours(1);
    o.podWait = std::chrono::milliseconds(500);  // an Allocate nobody waits for fails sooner
    writeSimNode();
    startKubelet();
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  /// One container asking one sim device, assigned slot `slot` of sim-0.
  static PodContainer one(const std::string& name, int slot) {
    return {name, {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, slot)}};
  }

  bool watched(std::size_t pods) {
    return waitFor([&] { return agent->tracker().pods().size() == pods; });
  }
};

TEST_F(DevicePluginCorrection, APodListedBeforeTheWatchShowsItStillSetsTheWronglyServedPodWaiting) {
  PodSpec first{"first", {one("main", 0)}, true, "2026-01-01T00:00:00Z"};
  PodSpec late{"late", {one("main", 1)}, true, "2026-01-01T00:00:01Z"};
  const std::string firstUid = createPod(first);
  ASSERT_TRUE(watched(1));
  // The kubelet admits "late" before the agent's watch shows it: its Allocate serves "first".
  auto l = kubelet->admit(kubeletPod(late, "uid-late"));
  ASSERT_TRUE(l.admitted) << l.error;
  ASSERT_EQ(l.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  // PodResources lists "late", still unknown to the agent: no correction, but the handout's
  // holder moves to it.
  agent->maintainNow();
  createPod(late);
  ASSERT_TRUE(watched(2));
  agent->maintainNow();
  ASSERT_TRUE(assignmentOf("late"));
  EXPECT_EQ(assignmentOf("late")->containers.at(0).devices.at(0).slot, 0);

  // "first" waits again, so its own Allocate is served.
  auto f = kubelet->admit(kubeletPod(first, firstUid));
  EXPECT_TRUE(f.admitted) << f.error;
}

TEST_F(DevicePluginCorrection, AMultiContainerPodListedMidAllocationStillSetsTheWronglyServedPodWaiting) {
  PodSpec first{"first", {one("main", 0)}, true, "2026-01-01T00:00:00Z"};
  PodSpec multi{"multi", {one("c1", 1), one("c2", 2)}, true, "2026-01-01T00:00:01Z"};
  PodSpec other{"other", {one("main", 3)}, true, "2026-01-01T00:00:02Z"};
  const std::string firstUid = createPod(first);
  const std::string multiUid = createPod(multi);
  const std::string otherUid = createPod(other);
  ASSERT_TRUE(watched(3));
  // The kubelet admits "multi" first: c1's Allocate serves "first", c2's serves multi's c1.
  auto m = kubelet->admit(kubeletPod(multi, multiUid));
  ASSERT_TRUE(m.admitted) << m.error;
  ASSERT_EQ(m.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  ASSERT_EQ(m.allocations.at(1).deviceIds, (std::vector<std::string>{"sim-0::1"}));
  // PodResources lists "multi" while the agent still waits for its c2: no correction, but
  // both handouts' holders move to it.
  agent->maintainNow();
  // "other"'s Allocate serves multi's c2, so "multi" is complete; the next pass corrects it.
  auto o = kubelet->admit(kubeletPod(other, otherUid));
  ASSERT_TRUE(o.admitted) << o.error;
  agent->maintainNow();
  ASSERT_TRUE(assignmentOf("multi"));
  EXPECT_EQ(assignmentOf("multi")->containers.at(0).devices.at(0).slot, 0);
  EXPECT_EQ(assignmentOf("multi")->containers.at(1).devices.at(0).slot, 1);

  // "first" waits again, so its own Allocate is served.
  auto f = kubelet->admit(kubeletPod(first, firstUid));
  EXPECT_TRUE(f.admitted) << f.error;
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
