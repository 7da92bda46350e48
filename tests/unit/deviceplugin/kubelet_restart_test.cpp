// A kubelet that restarts (issue 27 items 12 and 13). Its device manager keeps what each
// container got in a checkpoint and calls no Allocate for a container it has a record of;
// when that record is gone (kubelet_internal_checkpoint missing or unreadable at start) it
// admits its running pods again, Allocate and all, choosing IDs anew with the plugin's
// preference. The agent steers each container to the IDs it holds and answers with what it
// gave it, creating nothing new; an Allocate no pod can take is answered without a fixed
// wait unless the kubelet names a pod the watch has not shown yet.
#include "backend_nodes.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

class DevicePluginKubeletRestart : public BackendNode {
 protected:
  /// Pods created in this order, then admitted in it.
  std::vector<fakes::AdmitResult> createAndAdmit(const std::vector<PodSpec>& specs, const std::string& resource) {
    std::vector<std::string> uids;
    for (const auto& s : specs) uids.push_back(createPod(s));
    EXPECT_TRUE(waitFor([&] { return agent->tracker().pods().size() == specs.size(); }));
    for (size_t i = 0; i < specs.size(); ++i) pods.push_back(kubeletPodOf(specs[i], uids[i], resource));
    std::vector<fakes::AdmitResult> out;
    for (const auto& p : pods) {
      out.push_back(kubelet->admit(p));
      EXPECT_TRUE(out.back().admitted) << p.name << ": " << out.back().error;
    }
    return out;
  }
  /// The kubelet restarts without its checkpoint; returns once the plugin registered again.
  void restartLosingTheCheckpoint(const std::string& resource) {
    const auto registered = kubelet->registrations().size();
    ASSERT_TRUE(kubelet->restart(/*checkpointLost=*/true).ok());
    ASSERT_TRUE(waitFor([&] { return kubelet->registrations().size() > registered; }));
    ASSERT_TRUE(kubelet->waitForDevices(resource, std::chrono::seconds(10), [](const auto& l) {
      return !l.empty() && std::all_of(l.begin(), l.end(), [](const auto& d) { return d.healthy; });
    }));
  }
  /// Admits every pod again, in creation order, as the restarted kubelet does.
  std::vector<fakes::AdmitResult> admitAgain(std::chrono::steady_clock::duration& took) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<fakes::AdmitResult> out;
    for (const auto& p : pods) out.push_back(kubelet->admit(p));
    took = std::chrono::steady_clock::now() - t0;
    return out;
  }
  static void expectSameAnswers(const std::vector<fakes::AdmitResult>& before,
                                const std::vector<fakes::AdmitResult>& after) {
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      ASSERT_TRUE(after[i].admitted) << "pod " << i << ": " << after[i].error;
      ASSERT_EQ(after[i].allocations.size(), before[i].allocations.size());
      for (size_t j = 0; j < before[i].allocations.size(); ++j) {
        const auto& b = before[i].allocations[j];
        const auto& a = after[i].allocations[j];
        SCOPED_TRACE("pod " + std::to_string(i) + " container " + b.container);
        EXPECT_TRUE(a.allocateCalled);
        EXPECT_EQ(a.container, b.container);
        EXPECT_EQ(a.deviceIds, b.deviceIds);
        EXPECT_EQ(a.response.env, b.response.env);
        EXPECT_EQ(a.response.mounts, b.response.mounts);
        EXPECT_EQ(a.response.devices, b.response.devices);
        EXPECT_EQ(a.response.annotations, b.response.annotations);
      }
    }
  }
  std::map<std::string, std::string> annotationsNow(const std::vector<std::string>& names) const {
    std::map<std::string, std::string> out;
    for (const auto& n : names) {
      out[n + " phase"] = annotationOf(n, keys::kPodBindPhase);
      out[n + " assignment"] = annotationOf(n, keys::kPodAssignment);
    }
    return out;
  }

  std::vector<fakes::KubeletPod> pods;
};

TEST_F(DevicePluginKubeletRestart, AfterItLostItsCheckpointEveryRunningContainerGetsTheSameAnswerAtOnce) {
  ASSERT_NO_FATAL_FAILURE(startSimNodeManually());
  // One container; an init container and an app container on one slot; two devices.
  const std::vector<PodSpec> specs{
      {"a", {{"main", {{kSimCount, 1}, {kSimMemory, 2000}}, {grant("sim-0", 0, 2000, 20, 0)}}}},
      initAndApp("b", kSimCount, "sim", "sim-1", 1000, 3000, 10, 30, {{kSimMemory, 1000}}, {{kSimMemory, 3000}}),
      {"c",
       {{"main", {{kSimCount, 2}, {kSimMemory, 4000}}, {grant("sim-0", 0, 4000, 0, 1), grant("sim-1", 1, 4000, 0, 1)}}}}};
  auto before = createAndAdmit(specs, kSimCount);
  // initAndApp places "b" on device index 0: it is sim-1 here.
  ASSERT_EQ(before[1].allocations.at(0).deviceIds, before[1].allocations.at(1).deviceIds);
  const auto entries = stateEntries();
  ASSERT_EQ(entries.size(), 4u);
  const auto annotations = annotationsNow({"a", "b", "c"});

  ASSERT_NO_FATAL_FAILURE(restartLosingTheCheckpoint(kSimCount));
  std::chrono::steady_clock::duration took{};
  auto after = admitAgain(took);
  expectSameAnswers(before, after);
  // No fixed wait per pod (podWait is 2 s here; each pod used to wait 1 s for a hint and
  // then 2 s before its Allocate failed).
  EXPECT_LT(took, std::chrono::milliseconds(1000));
  EXPECT_EQ(stateEntries(), entries);
  agent->maintainNow();
  EXPECT_EQ(annotationsNow({"a", "b", "c"}), annotations);
  EXPECT_EQ(stateEntries(), entries);
}

TEST_F(DevicePluginKubeletRestart, PodsThatFinishedCostItNoFixedWaitWhenItAdmitsThemAgain) {
  ASSERT_NO_FATAL_FAILURE(startSimNodeManually());
  std::vector<PodSpec> specs;
  for (int i = 0; i < 3; ++i)
    specs.push_back({"done-" + std::to_string(i),
                     {{"main", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, i)}}}});
  createAndAdmit(specs, kSimCount);
  for (const auto& s : specs)
    ASSERT_TRUE(api->patch("pods", "default", s.name, {{"status", {{"phase", "Succeeded"}}}}).ok());
  ASSERT_TRUE(waitFor([&] {
    auto all = agent->tracker().pods();
    return std::all_of(all.begin(), all.end(), [](const TrackedPod& p) { return p.info.terminated(); });
  }));
  // The kubelet admits them again (its pod source said otherwise): the agent knows each one
  // finished, and PodResources names no pod it does not know, so there is nothing to wait for.
  ASSERT_NO_FATAL_FAILURE(restartLosingTheCheckpoint(kSimCount));
  std::chrono::steady_clock::duration took{};
  auto after = admitAgain(took);
  for (const auto& r : after) {
    EXPECT_FALSE(r.admitted);
    EXPECT_THAT(r.error, HasSubstr("no pod bound to node node-1 is waiting for 1 vgpu.io/sim"));
  }
  EXPECT_LT(took, std::chrono::milliseconds(1000)) << "3 pods took "
                                                   << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                                   << " ms";
}

TEST_F(DevicePluginKubeletRestart, APodTheWatchDoesNotShowIsWaitedForOnceNotAtEveryAllocate) {
  ASSERT_NO_FATAL_FAILURE(startSimNodeManually());
  fakes::KubeletPod ghost{"default", "ghost", "uid-ghost", {{"main", false, {{kSimCount, 1}}}}};
  auto t0 = std::chrono::steady_clock::now();
  auto first = kubelet->admit(ghost);
  const auto firstTook = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(first.admitted);
  EXPECT_GE(firstTook, std::chrono::milliseconds(1900));  // the bounded wait for the watch
  t0 = std::chrono::steady_clock::now();
  auto second = kubelet->admit(ghost);
  EXPECT_FALSE(second.admitted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  // A pod the watch shows late is still waited for and served.
  kubelet->removePod("uid-ghost");
  PodSpec late{"late", {{"main", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, 2)}}}};
  std::thread creator([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    createPod(late);
  });
  fakes::KubeletPod k{"default", "late", "uid-late-kubelet", {{"main", false, {{kSimCount, 1}}}}};
  auto r = kubelet->admit(k);
  creator.join();
  EXPECT_TRUE(r.admitted) << r.error;
}

#ifdef VGPU_FAKE_CNDEV_LIBRARY
TEST_F(DevicePluginKubeletRestart, CambriconContainersAdmittedAgainKeepTheirInstances) {
  ASSERT_NO_FATAL_FAILURE(startCambriconNode());
  const std::string card = std::string("MLU-") + kMluUuid;
  const std::vector<PodSpec> specs{
      initAndApp("mlu", "cambricon.com/vmlu", "cambricon", card, 4096, 8192, 20, 50,
                 {{"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 20}},
                 {{"cambricon.com/mlu.smlu.vmemory", 32}, {"cambricon.com/mlu.smlu.vcore", 50}})};
  auto before = createAndAdmit(specs, "cambricon.com/vmlu");
  const auto instances = mluInstances();
  ASSERT_EQ(instances.size(), 2u);
  ASSERT_NO_FATAL_FAILURE(restartLosingTheCheckpoint("cambricon.com/vmlu"));
  std::chrono::steady_clock::duration took{};
  auto after = admitAgain(took);
  expectSameAnswers(before, after);
  EXPECT_EQ(mluInstances(), instances);
}
#endif

#ifdef VGPU_FAKE_ROCM_DIR
TEST_F(DevicePluginKubeletRestart, HygonContainersAdmittedAgainKeepTheirVdcus) {
  hygon::fake::FakeNode node({hygon::fake::FakeDcu{}});
  const std::string dcu = startHygonNode(node);
  ASSERT_FALSE(dcu.empty());
  const std::vector<PodSpec> specs{initAndApp("dcu", "hygon.com/dcunum", "hygon", dcu, 4096, 8192, 20, 50,
                                              {{"hygon.com/dcumem", 4096}, {"hygon.com/dcucores", 20}},
                                              {{"hygon.com/dcumem", 8192}, {"hygon.com/dcucores", 50}})};
  auto before = createAndAdmit(specs, "hygon.com/dcunum");
  ASSERT_EQ(node.hydmiVdevCount(), 2);
  const auto vdev0 = node.hydmiVdev(0), vdev1 = node.hydmiVdev(1);
  ASSERT_NO_FATAL_FAILURE(restartLosingTheCheckpoint("hygon.com/dcunum"));
  // The running containers use their vDCUs: none may be destroyed or made again.
  node.writeConfig("fail dmiCreateVDevices 11\nfail dmiDestroySingleVDevice 11\n");
  std::chrono::steady_clock::duration took{};
  auto after = admitAgain(took);
  expectSameAnswers(before, after);
  EXPECT_EQ(node.hydmiVdevCount(), 2);
  EXPECT_EQ(node.hydmiVdev(0), vdev0);
  EXPECT_EQ(node.hydmiVdev(1), vdev1);
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
