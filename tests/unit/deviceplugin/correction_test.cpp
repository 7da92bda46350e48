// The PodResources correction sets a pod the agent wrongly served back to waiting, also when
// the same pass (or an earlier one) already attributed the handout to the pod that really
// holds it: a pod the watch did not show yet, or a multi-container pod the agent still
// waits for. Otherwise the wrongly served pod's own Allocate finds no pod waiting and the
// kubelet rejects it. A pod the kubelet lists part-way through its admission is not
// recorded yet, but its remaining containers are matched to it. The agent serves a pod
// wrongly only without the kubelet's view at Allocate time: here its PodResources does not
// answer then. Against the kubelet and apiserver doubles with the sim backend (and the
// NVIDIA one on the fake NVML).
#include <gmock/gmock.h>

#include "agent_fixture.h"

namespace vgpu::deviceplugin::testing {
namespace {

/// The containers of `spec` named in `names`, as the kubelet admits them. The kubelet
/// records each container's devices as soon as its Allocate returns, so PodResources can
/// list a pod part-way through its admission: admitting a pod in two calls with the same UID
/// is the double's way of pausing there (the second call keeps what the first got).
fakes::KubeletPod containersOf(const PodSpec& spec, const std::string& uid, const std::set<std::string>& names) {
  auto p = kubeletPod(spec, uid);
  std::erase_if(p.containers, [&](const fakes::KubeletContainer& c) { return !names.contains(c.name); });
  return p;
}

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
  // The kubelet admits "late" before the agent's watch shows it, and its PodResources does
  // not answer in time (else the agent reads "late" or refuses it, never serves "first" for
  // it: admission_order_test.cpp): its Allocate serves "first".
  kubelet->setPodResourcesAnswering(false);
  auto l = kubelet->admit(kubeletPod(late, "uid-late"));
  kubelet->setPodResourcesAnswering(true);
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
  // The kubelet admits "multi" first while its PodResources does not answer (with it, the
  // agent matches multi's own containers): c1's Allocate serves "first", c2's multi's c1.
  kubelet->setPodResourcesAnswering(false);
  auto m = kubelet->admit(kubeletPod(multi, multiUid));
  kubelet->setPodResourcesAnswering(true);
  ASSERT_TRUE(m.admitted) << m.error;
  ASSERT_EQ(m.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  ASSERT_EQ(m.allocations.at(1).deviceIds, (std::vector<std::string>{"sim-0::1"}));
  // PodResources lists "multi" complete while the agent still waits for its c2: the kubelet
  // is done with it, so the pass that moves both handouts' holders to it also corrects it.
  agent->maintainNow();
  // "other"'s Allocate is served as its own.
  auto o = kubelet->admit(kubeletPod(other, otherUid));
  ASSERT_TRUE(o.admitted) << o.error;
  EXPECT_EQ(o.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::3"}));
  agent->maintainNow();
  ASSERT_TRUE(assignmentOf("multi"));
  EXPECT_EQ(assignmentOf("multi")->containers.at(0).devices.at(0).slot, 0);
  EXPECT_EQ(assignmentOf("multi")->containers.at(1).devices.at(0).slot, 1);

  // "first" waits again, so its own Allocate is served.
  auto f = kubelet->admit(kubeletPod(first, firstUid));
  EXPECT_TRUE(f.admitted) << f.error;
}

TEST_F(DevicePluginCorrection, APodListedPartWayWhoseContainerServedAnotherPodGetsItsNextContainerMatched) {
  PodSpec first{"first", {one("main", 0)}, true, "2026-01-01T00:00:00Z"};
  PodSpec multi{"multi", {one("c1", 1), one("c2", 2)}, true, "2026-01-01T00:00:01Z"};
  const std::string firstUid = createPod(first);
  const std::string multiUid = createPod(multi);
  ASSERT_TRUE(watched(2));
  // The kubelet admits "multi" first while its PodResources does not answer: c1's Allocate
  // serves "first" (the oldest waiting pod).
  kubelet->setPodResourcesAnswering(false);
  auto c1 = kubelet->admit(containersOf(multi, multiUid, {"c1"}));
  kubelet->setPodResourcesAnswering(true);
  ASSERT_TRUE(c1.admitted) << c1.error;
  ASSERT_EQ(c1.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  // PodResources lists "multi" with c1 only: it is still being admitted, so nothing is
  // recorded on it, but "first" waits again and c1 counts as multi's.
  agent->maintainNow();
  EXPECT_EQ(annotationOf("multi", keys::kPodBindPhase), "allocating");

  // c2's Allocate is steered to and served as multi's own c2, which completes the pod.
  auto c2 = kubelet->admit(containersOf(multi, multiUid, {"c2"}));
  ASSERT_TRUE(c2.admitted) << c2.error;
  EXPECT_EQ(c2.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::2"}));
  EXPECT_EQ(annotationOf("multi", keys::kPodBindPhase), "success");
  ASSERT_TRUE(assignmentOf("multi"));
  EXPECT_EQ(assignmentOf("multi")->containers.at(0).devices.at(0).slot, 0);
  EXPECT_EQ(assignmentOf("multi")->containers.at(1).devices.at(0).slot, 2);

  auto f = kubelet->admit(kubeletPod(first, firstUid));
  ASSERT_TRUE(f.admitted) << f.error;
  agent->maintainNow();
  ASSERT_TRUE(assignmentOf("first"));
  EXPECT_EQ(formatVirtualDeviceId("sim-0", assignmentOf("first")->containers.at(0).devices.at(0).slot),
            f.allocations.at(0).deviceIds.at(0));
  EXPECT_EQ(assignmentOf("multi")->containers.at(1).devices.at(0).slot, 2);
}

#ifdef VGPU_FAKE_NVML_LIBRARY
// Two resources: once "multi" is wrongly recorded as complete, no other pod waits for its
// GPU container, so the kubelet would fail its admission.
class DevicePluginCorrectionTwoBackends : public AgentFixture {
 protected:
  void SetUp() override {
    AgentFixture::SetUp();
    const auto machine = dir.write(
        "machine.conf", "gpu uuid=" + std::string(kGpu) + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
    ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
    const auto devFile = dir.write("sim-devices.yaml", simDevicesYaml(devices));
    dir.write("device-config.yaml", simConfigYaml(devFile.string(), split) +
                                        "  nvidia:\n    enabled: true\n    splitCount: 4\n    options:\n"
                                        "      discovery: nvml\n      nvmlLibrary: " VGPU_FAKE_NVML_LIBRARY "\n"
                                        "      hostSysRoot: /nonexistent-sys\n");
    AgentOptions o = options();
    o.podResourcesInterval = std::chrono::hours(1);
    o.cleanupInterval = std::chrono::hours(1);
    o.podWait = std::chrono::milliseconds(500);
    startKubelet();
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }
  static constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";
};

TEST_F(DevicePluginCorrectionTwoBackends, APodListedPartWayStillGetsItsRemainingContainersAllocated) {
  PodSpec first{"first", {{"main", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, 0)}}}, true,
                "2026-01-01T00:00:00Z"};
  PodSpec multi{"multi",
                {{"c1", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, 1)}},
                 {"c2", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}}, {grant(kGpu, 0, 3000, 25, 0, "nvidia")}}},
                true, "2026-01-01T00:00:01Z"};
  const std::string firstUid = createPod(first);
  const std::string multiUid = createPod(multi);
  ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().size() == 2; }));
  // c1's Allocate serves "first" (PodResources not answering); it then lists "multi" with
  // c1 only.
  kubelet->setPodResourcesAnswering(false);
  auto c1 = kubelet->admit(containersOf(multi, multiUid, {"c1"}));
  kubelet->setPodResourcesAnswering(true);
  ASSERT_TRUE(c1.admitted) << c1.error;
  ASSERT_EQ(c1.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  agent->maintainNow();

  auto c2 = kubelet->admit(containersOf(multi, multiUid, {"c2"}));
  ASSERT_TRUE(c2.admitted) << c2.error;
  EXPECT_EQ(annotationOf("multi", keys::kPodBindPhase), "success");
  ASSERT_TRUE(assignmentOf("multi"));
  EXPECT_EQ(assignmentOf("multi")->containers.at(0).devices.at(0).slot, 0);
  EXPECT_EQ(assignmentOf("multi")->containers.at(1).devices.at(0).deviceId, kGpu);

  auto f = kubelet->admit(kubeletPod(first, firstUid));
  EXPECT_TRUE(f.admitted) << f.error;
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
