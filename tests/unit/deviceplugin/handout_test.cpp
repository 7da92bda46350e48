// A container's host folder belongs to what the kubelet handed out, not to the pod the
// agent guessed at Allocate: metrics and cleanup follow the pod that really holds it.
// Against the kubelet and apiserver doubles with the sim backend (and Cambricon's on its
// fake libcndev.so, for the pod annotations a backend asks for).
#include <gmock/gmock.h>
#include <stdlib.h>

#include "agent_fixture.h"
#include "region_support.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1ull << 20;

std::string usedLine(const std::string& pod, std::uint64_t bytes) {
  return "vgpu_container_memory_used_bytes{namespace=\"default\",pod=\"" + pod +
         "\",container=\"main\",device_uuid=\"sim-0\",device_index=\"0\"} " + std::to_string(bytes) + "\n";
}

class DevicePluginHandouts : public AgentFixture {
 protected:
  /// Passes run when the test says (maintainNow) or when a pod is deleted.
  AgentOptions manualPasses() {
    AgentOptions o = options();
    o.podResourcesInterval = std::chrono::hours(1);
    o.cleanupInterval = std::chrono::hours(1);
    return o;
  }

  /// A sim node, its kubelet, and an agent with manual passes, ready for pods.
  void startNode() {
    writeSimNode();
    startKubelet();
    startAgent(manualPasses());
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  /// Two identical pods; the kubelet admits the younger first while its PodResources does
  /// not answer (with it, the agent matches each pod's own container), so the agent
  /// attributes its container to the older one (the oldest waiting pod) and the older one's
  /// to it.
  void admitIdenticalPodsOutOfOrder() {
    ASSERT_NO_FATAL_FAILURE(startNode());

    older = {"older",
             {{"main", {{kSimCount, 1}, {kSimMemory, 2000}}, {grant("sim-0", 0, 2000, 0, 0)}}},
             true,
             "2026-01-01T00:00:00Z"};
    younger = {"younger",
               {{"main", {{kSimCount, 1}, {kSimMemory, 2000}}, {grant("sim-0", 0, 2000, 0, 1)}}},
               true,
               "2026-01-01T00:00:01Z"};
    olderUid = createPod(older);
    youngerUid = createPod(younger);
    ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().size() == 2; }));
    kubelet->setPodResourcesAnswering(false);
    auto y = kubelet->admit(kubeletPod(younger, youngerUid));
    auto o2 = kubelet->admit(kubeletPod(older, olderUid));
    kubelet->setPodResourcesAnswering(true);
    ASSERT_TRUE(y.admitted) << y.error;
    ASSERT_TRUE(o2.admitted) << o2.error;
    youngerGot = y.allocations.at(0);
    olderGot = o2.allocations.at(0);
    // The premise: the younger pod got the IDs the scheduler meant for the older one.
    ASSERT_EQ(youngerGot.deviceIds, (std::vector<std::string>{"sim-0::0"}));
    ASSERT_EQ(olderGot.deviceIds, (std::vector<std::string>{"sim-0::1"}));
    // Each container writes usage into the folder it was given (the sim backend mounts it).
    ASSERT_EQ(youngerGot.response.mounts.at(0).hostPath, folderOf(youngerGot));
    ASSERT_EQ(olderGot.response.mounts.at(0).hostPath, folderOf(olderGot));
    writeRegion(folderOf(youngerGot) + "/region", "sim-0", 111 * kMiB, 2000 * kMiB, 0);
    writeRegion(folderOf(olderGot) + "/region", "sim-0", 222 * kMiB, 2000 * kMiB, 0);
  }

  PodSpec older, younger;
  std::string olderUid, youngerUid;
  fakes::ContainerAllocation olderGot, youngerGot;
};

TEST_F(DevicePluginHandouts, AfterTheCorrectionMetricsLabelEachContainerWithThePodThatHoldsIt) {
  admitIdenticalPodsOutOfOrder();
  agent->maintainNow();
  const std::string text = agent->renderMetrics();
  EXPECT_THAT(text, HasSubstr(usedLine("younger", 111 * kMiB)));
  EXPECT_THAT(text, HasSubstr(usedLine("older", 222 * kMiB)));
  EXPECT_THAT(text, Not(HasSubstr(usedLine("older", 111 * kMiB))));
  EXPECT_THAT(text, Not(HasSubstr(usedLine("younger", 222 * kMiB))));
  // The annotations say the same.
  EXPECT_EQ(assignmentOf("younger")->containers.at(0).devices.at(0).slot, 0);
  EXPECT_EQ(assignmentOf("older")->containers.at(0).devices.at(0).slot, 1);
}

TEST_F(DevicePluginHandouts, DeletingTheGuessedPodKeepsTheFolderOfTheContainerStillRunning) {
  admitIdenticalPodsOutOfOrder();
  agent->maintainNow();
  // The older pod goes: in the apiserver first, while the kubelet still runs its container.
  ASSERT_TRUE(api->remove("pods", "default", "older").ok());
  ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().size() == 1; }));
  agent->maintainNow();
  EXPECT_TRUE(fs::exists(folderOf(olderGot) + "/region")) << "the kubelet still reports its devices held";
  // Then the kubelet lets go of its devices.
  kubelet->removePod(olderUid);
  agent->maintainNow();
  EXPECT_FALSE(fs::exists(folderOf(olderGot)));
  // The folder the agent first made for "older" is the younger pod's container's: it stays.
  EXPECT_TRUE(fs::exists(folderOf(youngerGot) + "/region"));
  const std::string text = agent->renderMetrics();
  EXPECT_THAT(text, HasSubstr(usedLine("younger", 111 * kMiB)));
  EXPECT_THAT(text, Not(HasSubstr("pod=\"older\"")));

  // When both are gone, nothing is left.
  kubelet->removePod(youngerUid);
  ASSERT_TRUE(api->remove("pods", "default", "younger").ok());
  EXPECT_TRUE(waitFor([&] { return stateEntries().empty(); }));
  EXPECT_THAT(agent->renderMetrics(), Not(HasSubstr("vgpu_container_memory_used_bytes{")));
}

TEST_F(DevicePluginHandouts, WithoutACorrectionPassDeletingTheGuessedPodStillKeepsTheRunningContainersFolder) {
  admitIdenticalPodsOutOfOrder();
  // No PodResources pass has run: the agent still believes "older" holds sim-0::0.
  kubelet->removePod(olderUid);
  ASSERT_TRUE(api->remove("pods", "default", "older").ok());
  ASSERT_TRUE(waitFor([&] { return !fs::exists(folderOf(olderGot)); }));
  EXPECT_TRUE(fs::exists(folderOf(youngerGot) + "/region"));
  EXPECT_THAT(agent->renderMetrics(), HasSubstr(usedLine("younger", 111 * kMiB)));
}

TEST_F(DevicePluginHandouts, ARestartedAgentKeepsHeldFoldersWithTheirHoldersAndDropsStraysAndTornLines) {
  admitIdenticalPodsOutOfOrder();
  agent->maintainNow();
  agent->stop();
  agent.reset();
  fs::create_directories(stateRoot() / "vgpu.io_sim-00000000deadbeef");  // a folder nobody journalled
  std::ofstream(dir.path() / "state" / "handouts.journal", std::ios::app) << "{\"v\":1,\"op\":\"put\",\"key\":\"vgpu.io";
  startAgent(manualPasses());
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  agent->maintainNow();
  EXPECT_TRUE(fs::exists(folderOf(youngerGot) + "/region"));
  EXPECT_TRUE(fs::exists(folderOf(olderGot) + "/region"));
  EXPECT_FALSE(fs::exists(stateRoot() / "vgpu.io_sim-00000000deadbeef"));
  EXPECT_EQ(stateEntries().size(), 2u);
  const std::string text = agent->renderMetrics();
  EXPECT_THAT(text, HasSubstr(usedLine("younger", 111 * kMiB)));
  EXPECT_THAT(text, HasSubstr(usedLine("older", 222 * kMiB)));
}

TEST_F(DevicePluginHandouts, ARestartedAgentCorrectsEachPodWithTheSliceItsContainerGot) {
  ASSERT_NO_FATAL_FAILURE(startNode());
  // Interchangeable for the kubelet (one device each), but not the same slice.
  PodSpec small{"small",
                {{"main", {{kSimCount, 1}, {kSimMemory, 1000}}, {grant("sim-0", 0, 1000, 0, 0)}}},
                true,
                "2026-01-01T00:00:00Z"};
  PodSpec large{"large",
                {{"main", {{kSimCount, 1}, {kSimMemory, 3000}}, {grant("sim-0", 0, 3000, 0, 1)}}},
                true,
                "2026-01-01T00:00:01Z"};
  const std::string smallUid = createPod(small);
  const std::string largeUid = createPod(large);
  ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().size() == 2; }));
  // The kubelet admits the younger first, its PodResources not answering (so the agent
  // cannot tell which pod it admits): it gets the older one's IDs and so its slice.
  kubelet->setPodResourcesAnswering(false);
  auto l = kubelet->admit(kubeletPod(large, largeUid));
  auto s = kubelet->admit(kubeletPod(small, smallUid));
  kubelet->setPodResourcesAnswering(true);
  ASSERT_TRUE(l.admitted && s.admitted) << l.error << s.error;
  ASSERT_EQ(l.allocations.at(0).deviceIds, (std::vector<std::string>{"sim-0::0"}));
  ASSERT_EQ(l.allocations.at(0).response.env.at("VGPU_SIM_MEMORY_LIMIT_0"), "1000m");
  ASSERT_EQ(s.allocations.at(0).response.env.at("VGPU_SIM_MEMORY_LIMIT_0"), "3000m");

  // The agent restarts before any PodResources pass; the first one after it corrects both
  // pods with what their containers' limits say (the journal kept what Allocate gave).
  agent->stop();
  agent.reset();
  startAgent(manualPasses());
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  agent->maintainNow();
  EXPECT_EQ(agent->stats().corrections, 2u);
  ASSERT_TRUE(assignmentOf("large") && assignmentOf("small"));
  EXPECT_EQ(assignmentOf("large")->containers.at(0).devices, (std::vector<DeviceGrant>{grant("sim-0", 0, 1000, 0, 0)}));
  EXPECT_EQ(assignmentOf("small")->containers.at(0).devices, (std::vector<DeviceGrant>{grant("sim-0", 0, 3000, 0, 1)}));
}

class DevicePluginHandoutCleanup : public AgentFixture {
 protected:
  /// A sim node whose agent reads PodResources at `socket`, and one pod admitted on it.
  void admitOne(const std::string& socket) {
    AgentOptions o = options();
    o.podResourcesSocket = socket;
    writeSimNode();
    startKubelet();
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
    PodSpec spec{"one", {{"main", {{kSimCount, 1}}, {grant("sim-0", 0, 0, 0, 0)}}}};
    uid = createPod(spec);
    auto r = kubelet->admit(kubeletPod(spec, uid));
    ASSERT_TRUE(r.admitted) << r.error;
    folder = folderOf(r.allocations.at(0));
    ASSERT_TRUE(fs::is_directory(folder));
    kubelet->removePod(uid);
    ASSERT_TRUE(api->remove("pods", "default", "one").ok());
    ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().empty(); }));
  }
  std::string uid, folder;
};

TEST_F(DevicePluginHandoutCleanup, WithPodResourcesConfiguredButSilentNoFolderIsRemoved) {
  admitOne((dir.path() / "pr" / "missing.sock").string());
  agent->maintainNow();
  EXPECT_TRUE(fs::is_directory(folder));
}

TEST_F(DevicePluginHandoutCleanup, WithoutAPodResourcesApiTheAttributedPodAloneDecides) {
  admitOne("");
  EXPECT_TRUE(waitFor([&] { return !fs::exists(folder); }));
}

#ifdef VGPU_FAKE_CNDEV_LIBRARY
constexpr const char* kMluUuid = "0a1b2c3d-0000-4000-8000-000000000000";

class DevicePluginCambricon : public AgentFixture {
 protected:
  void SetUp() override {
    AgentFixture::SetUp();
    // The host's /dev with the card's nodes; the fake driver makes instance nodes there.
    for (const char* node : {"cambricon_dev0", "cambricon_ipcm0"}) dir.write("dev/" + std::string(node), "");
    const auto cards =
        dir.write("cndev.conf", std::string("card uuid=") + kMluUuid +
                                    " name=MLU370-X4 memoryMB=24576 numa=0 health=1 smlu=on mlulink=0\n"
                                    "option devRoot=" + (dir.path() / "dev").string() + "\n");
    ::setenv("VGPU_FAKE_CNDEV_CONFIG", cards.c_str(), 1);
    ::unsetenv("VGPU_FAKE_CNDEV_STATE");
  }
  void TearDown() override {
    AgentFixture::TearDown();
    ::unsetenv("VGPU_FAKE_CNDEV_CONFIG");
  }
  void startMluNode(bool vendorAnnotations) {
    dir.write("device-config.yaml",
              std::string("version: 1\nbackends:\n  cambricon:\n    enabled: true\n    splitCount: 4\n"
                          "    options:\n      libraryPath: ") +
                  VGPU_FAKE_CNDEV_LIBRARY + "\n      stateDir: " + (dir.path() / "cambricon").string() +
                  "\n      devRoot: " + (dir.path() / "dev").string() +
                  "\n      kubeletPluginDir: " + (dir.path() / "dp").string() +
                  "\n      vendorPluginAnnotations: \"" + (vendorAnnotations ? "true" : "false") + "\"\n");
    startKubelet();
    startAgent(options());
    ASSERT_TRUE(kubelet->waitForDevices("cambricon.com/vmlu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }
  /// A pod with one container asking for 30% and 16 × 256 MiB of the card, as placed
  /// (on `slot`, bound at `bindTime`).
  std::string createSlicePod(const std::string& name, int slot = 0, const std::string& bindTime = {}) {
    const std::string card = std::string("MLU-") + kMluUuid;
    PodSpec spec{
        name,
        {{"infer",
          {{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 30}},
          {grant(card, 0, 4096, 30, slot, "cambricon")}}},
        true,
        bindTime};
    return createPod(spec);
  }
  fakes::AdmitResult admitSlice(const std::string& name, const std::string& uid) {
    fakes::KubeletPod pod;
    pod.name = name;
    pod.uid = uid;
    pod.containers.push_back({"infer", false, {{"cambricon.com/vmlu", 1}}});
    return kubelet->admit(pod);
  }
  fakes::AdmitResult admitSlice(const std::string& name) { return admitSlice(name, createSlicePod(name)); }
};

TEST_F(DevicePluginCambricon, AllocateWritesTheAnnotationsCambriconsPluginReadsOnThePod) {
  startMluNode(/*vendorAnnotations=*/true);
  auto result = admitSlice("mlu");
  ASSERT_TRUE(result.admitted) << result.error;
  EXPECT_EQ(annotationOf("mlu", keys::kPodBindPhase), "success");
  // <card index>_<vcore>_<vmemory units>, and the key spelled as Cambricon's plugin reads it.
  EXPECT_EQ(annotationOf("mlu", "CAMBRICON_DSMLU_PROFILE"), "0_30_16");
  EXPECT_EQ(annotationOf("mlu", "CAMBRICON_DSMLU_ASSIGHED"), "true");
  EXPECT_THAT(annotationOf("mlu", "CAMBRICON_DSMLU_PROFILE_INSTANCE"),
              ::testing::MatchesRegex("[0-9]+_[0-9]+_0_[0-9]+"));
  // They are the pod's, not the container runtime's.
  EXPECT_FALSE(result.allocations.at(0).response.annotations.contains("CAMBRICON_DSMLU_PROFILE"));
  EXPECT_THAT(result.allocations.at(0).response.env.at("VIRTUAL_DEVICES"), HasSubstr("/dev/cambricon_dev0,"));
}

/// The instance id in the instance node the container got (…/cap_dev0_mi<id>).
std::string instanceIdOf(const fakes::ContainerAllocation& a) {
  const std::string& v = a.response.env.at("VIRTUAL_DEVICES");
  const auto at = v.find("_mi");
  return at == std::string::npos ? "" : v.substr(at + 3, v.find(';', at) - at - 3);
}

/// The last field of CAMBRICON_DSMLU_PROFILE_INSTANCE: the instance id.
std::string lastField(const std::string& value) { return value.substr(value.rfind('_') + 1); }

TEST_F(DevicePluginCambricon, TheVendorAnnotationsFollowTheContainerToThePodThatHoldsIt) {
  startMluNode(/*vendorAnnotations=*/true);
  const std::string olderUid = createSlicePod("older", 0, "2026-01-01T00:00:00Z");
  const std::string youngerUid = createSlicePod("younger", 1, "2026-01-01T00:00:01Z");
  ASSERT_TRUE(waitFor([&] { return agent->tracker().pods().size() == 2; }));
  // The kubelet admits the younger first, its PodResources not answering: the agent serves
  // it under the older one's name.
  kubelet->setPodResourcesAnswering(false);
  auto y = admitSlice("younger", youngerUid);
  auto o = admitSlice("older", olderUid);
  kubelet->setPodResourcesAnswering(true);
  ASSERT_TRUE(y.admitted && o.admitted) << y.error << o.error;
  ASSERT_EQ(y.allocations.at(0).deviceIds.at(0), std::string("MLU-") + kMluUuid + "::0");
  const std::string yInstance = instanceIdOf(y.allocations.at(0));
  const std::string oInstance = instanceIdOf(o.allocations.at(0));
  ASSERT_FALSE(yInstance.empty());
  ASSERT_NE(yInstance, oInstance);
  agent->maintainNow();
  EXPECT_TRUE(waitFor([&] {
    return lastField(annotationOf("younger", "CAMBRICON_DSMLU_PROFILE_INSTANCE")) == yInstance &&
           lastField(annotationOf("older", "CAMBRICON_DSMLU_PROFILE_INSTANCE")) == oInstance;
  })) << "younger: "
      << annotationOf("younger", "CAMBRICON_DSMLU_PROFILE_INSTANCE") << " (holds " << yInstance
      << "), older: " << annotationOf("older", "CAMBRICON_DSMLU_PROFILE_INSTANCE") << " (holds " << oInstance << ")";
}

TEST_F(DevicePluginCambricon, WithoutTheOptionNoVendorAnnotationIsWritten) {
  startMluNode(/*vendorAnnotations=*/false);
  auto result = admitSlice("plain");
  ASSERT_TRUE(result.admitted) << result.error;
  EXPECT_EQ(annotationOf("plain", keys::kPodBindPhase), "success");
  EXPECT_EQ(annotationOf("plain", "CAMBRICON_DSMLU_PROFILE"), "");
  EXPECT_EQ(annotationOf("plain", "CAMBRICON_DSMLU_ASSIGHED"), "");
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
