// Init containers (issue 27 item 11): the kubelet hands an init container's devices to the
// containers after it (devicesToReuse), so one Allocate after another names the same IDs
// for two containers of one pod. Each gets its own handout (folder, limits, partition),
// and an init container's goes when the pod's status says it finished, not before and not
// the app container's. Against the kubelet and apiserver doubles, with every backend.
#include <gmock/gmock.h>
#include <stdlib.h>

#include "agent_fixture.h"
#ifdef VGPU_FAKE_ROCM_DIR
#include "fake_node.h"
#endif

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

/// The pod's status as the kubelet reports it once `init` exited with `exitCode`.
boost::json::object initFinished(const std::string& init, int exitCode) {
  boost::json::object terminated{{"exitCode", exitCode}, {"reason", exitCode == 0 ? "Completed" : "Error"}};
  boost::json::array statuses{boost::json::object{
      {"name", init}, {"ready", false}, {"restartCount", 0}, {"state", {{"terminated", terminated}}}}};
  return {{"status", {{"phase", exitCode == 0 ? "Running" : "Pending"}, {"initContainerStatuses", statuses}}}};
}

class DevicePluginInitContainers : public AgentFixture {
 protected:
  AgentOptions manualPasses() {
    AgentOptions o = options();
    o.podResourcesInterval = std::chrono::hours(1);
    o.cleanupInterval = std::chrono::hours(1);
    return o;
  }
  /// The pod's init container and its app container on one device and slot, as the
  /// scheduler places them (init containers take the slot of the container after them).
  PodSpec initAndApp(const std::string& name, const std::string& resource, const std::string& backend,
                     const std::string& device, std::uint64_t initMiB, std::uint64_t appMiB, std::uint32_t initCompute,
                     std::uint32_t appCompute, std::map<std::string, std::int64_t> initLimits = {},
                     std::map<std::string, std::int64_t> appLimits = {}) {
    initLimits[resource] = 1;
    appLimits[resource] = 1;
    return PodSpec{name,
                   {{"setup", initLimits, {grant(device, 0, initMiB, initCompute, 0, backend)}, true},
                    {"main", appLimits, {grant(device, 0, appMiB, appCompute, 0, backend)}}}};
  }
  fakes::KubeletPod kubeletPodOf(const PodSpec& spec, const std::string& uid, const std::string& resource) {
    fakes::KubeletPod p;
    p.name = spec.name;
    p.uid = uid;
    for (const auto& c : spec.containers) p.containers.push_back({c.name, c.init, {{resource, 1}}});
    return p;
  }
  /// Admits `spec` and checks the premise: the app container got the init container's IDs.
  void admit(const PodSpec& spec, const std::string& resource) {
    uid = createPod(spec);
    ASSERT_TRUE(waitFor([&] { return !agent->tracker().pods().empty(); }));
    auto r = kubelet->admit(kubeletPodOf(spec, uid, resource));
    ASSERT_TRUE(r.admitted) << r.error;
    ASSERT_EQ(r.allocations.size(), 2u);
    init = r.allocations[0];
    app = r.allocations[1];
    ASSERT_EQ(init.container, "setup");
    ASSERT_EQ(init.deviceIds, app.deviceIds);
    ASSERT_TRUE(waitFor([&] { return annotationOf(spec.name, keys::kPodBindPhase) == "success"; }));
  }
  /// The host folder a response mounts at `containerPath` ("" when none).
  static std::string mounted(const fakes::ContainerAllocation& a, const std::string& containerPath) {
    for (const auto& m : a.response.mounts)
      if (m.containerPath == containerPath) return m.hostPath;
    return "";
  }
  void finishInit(const std::string& pod, int exitCode = 0) {
    ASSERT_TRUE(api->patch("pods", "default", pod, initFinished("setup", exitCode)).ok());
  }

  std::string uid;
  fakes::ContainerAllocation init, app;
};

TEST_F(DevicePluginInitContainers, SimInitAndAppContainerGetTheirOwnFoldersAndTheInitOnesGoesWhenItFinished) {
  writeSimNode();
  startKubelet();
  startAgent(manualPasses());
  ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  ASSERT_NO_FATAL_FAILURE(admit(initAndApp("p", kSimCount, "sim", "sim-0", 1000, 3000, 10, 30,
                                           {{kSimMemory, 1000}}, {{kSimMemory, 3000}}),
                                kSimCount));
  EXPECT_EQ(init.response.env.at("VGPU_SIM_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(app.response.env.at("VGPU_SIM_MEMORY_LIMIT_0"), "3000m");
  const std::string initDir = mounted(init, "/var/run/vgpu-sim");
  const std::string appDir = mounted(app, "/var/run/vgpu-sim");
  ASSERT_FALSE(initDir.empty());
  EXPECT_NE(initDir, appDir);
  EXPECT_TRUE(fs::is_directory(initDir));
  EXPECT_TRUE(fs::is_directory(appDir));

  // Running, the init container not finished: a pass keeps both.
  agent->maintainNow();
  EXPECT_TRUE(fs::is_directory(initDir));
  EXPECT_TRUE(fs::is_directory(appDir));
  // An init container that failed is run again: still kept.
  ASSERT_NO_FATAL_FAILURE(finishInit("p", 1));
  ASSERT_TRUE(waitFor([&] {
    for (const auto& p : agent->tracker().pods())
      if (p.info.name == "p" && p.info.phase == "Pending") return true;
    return false;
  }));
  agent->maintainNow();
  EXPECT_TRUE(fs::is_directory(initDir));

  ASSERT_NO_FATAL_FAILURE(finishInit("p", 0));
  EXPECT_TRUE(waitFor([&] {
    agent->maintainNow();
    return !fs::exists(initDir);
  })) << initDir;
  EXPECT_TRUE(fs::is_directory(appDir));
  // The app container's handout is the one PodResources names, and the pod keeps its outcome.
  EXPECT_EQ(annotationOf("p", keys::kPodBindPhase), "success");

  // The pod gone: the app container's folder goes too.
  kubelet->removePod(uid);
  ASSERT_TRUE(api->remove("pods", "default", "p").ok());
  EXPECT_TRUE(waitFor([&] {
    agent->maintainNow();
    return !fs::exists(appDir);
  }));
}

#ifdef VGPU_FAKE_NVML_LIBRARY
TEST_F(DevicePluginInitContainers, NvidiaInitAndAppContainerEachKeepTheirOwnLimitsFile) {
  const std::string gpu = "GPU-11111111-1111-1111-1111-111111111111";
  const auto machine = dir.write("machine.conf", "gpu uuid=" + gpu + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
  ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
  dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                              "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                      VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n");
  startKubelet();
  startAgent(manualPasses());
  ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  ASSERT_NO_FATAL_FAILURE(admit(initAndApp("cuda", "nvidia.com/gpu", "nvidia", gpu, 1000, 3000, 10, 30,
                                           {{"nvidia.com/gpumem", 1000}}, {{"nvidia.com/gpumem", 3000}}),
                                "nvidia.com/gpu"));
  const std::string initLimits = mounted(init, "/etc/vgpu/limits.env");
  const std::string appLimits = mounted(app, "/etc/vgpu/limits.env");
  ASSERT_FALSE(initLimits.empty());
  ASSERT_NE(initLimits, appLimits);
  // Each file says its own container's limits: the app container's Allocate did not replace
  // the init container's.
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_THAT(read(initLimits), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=1000m"));
  EXPECT_THAT(read(appLimits), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=3000m"));
  EXPECT_NE(mounted(init, "/var/run/vgpu"), mounted(app, "/var/run/vgpu"));

  ASSERT_NO_FATAL_FAILURE(finishInit("cuda"));
  EXPECT_TRUE(waitFor([&] {
    agent->maintainNow();
    return !fs::exists(initLimits);
  }));
  EXPECT_THAT(read(appLimits), HasSubstr("CUDA_DEVICE_MEMORY_LIMIT_0=3000m"));
}
#endif

#ifdef VGPU_FAKE_CNDEV_LIBRARY
TEST_F(DevicePluginInitContainers, CambriconInitAndAppContainerEachGetAnInstanceAndTheInitOneIsDestroyedWhenItFinished) {
  const std::string uuid = "0a1b2c3d-0000-4000-8000-000000000000";
  for (const char* node : {"cambricon_dev0", "cambricon_ipcm0"}) dir.write("dev/" + std::string(node), "");
  const auto cards = dir.write("cndev.conf", "card uuid=" + uuid +
                                                 " name=MLU370-X4 memoryMB=24576 numa=0 health=1 smlu=on mlulink=0\n"
                                                 "option devRoot=" + (dir.path() / "dev").string() + "\n");
  ::setenv("VGPU_FAKE_CNDEV_CONFIG", cards.c_str(), 1);
  ::unsetenv("VGPU_FAKE_CNDEV_STATE");
  dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  cambricon:\n    enabled: true\n    splitCount: 4\n"
                                              "    options:\n      libraryPath: ") +
                                      VGPU_FAKE_CNDEV_LIBRARY + "\n      stateDir: " + (dir.path() / "cambricon").string() +
                                      "\n      devRoot: " + (dir.path() / "dev").string() +
                                      "\n      kubeletPluginDir: " + (dir.path() / "dp").string() + "\n");
  startKubelet();
  startAgent(manualPasses());
  ASSERT_TRUE(kubelet->waitForDevices("cambricon.com/vmlu", std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  // Instances the fake driver holds: it makes (and removes) one node per instance.
  auto instances = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir.path() / "dev" / "cambricon-caps", ec))
      out.push_back("/dev/cambricon-caps/" + e.path().filename().string());
    return out;
  };
  ASSERT_NO_FATAL_FAILURE(admit(
      initAndApp("mlu", "cambricon.com/vmlu", "cambricon", "MLU-" + uuid, 4096, 8192, 20, 50,
                 {{"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 20}},
                 {{"cambricon.com/mlu.smlu.vmemory", 32}, {"cambricon.com/mlu.smlu.vcore", 50}}),
      "cambricon.com/vmlu"));
  const std::string initDevices = init.response.env.at("VIRTUAL_DEVICES");
  const std::string appDevices = app.response.env.at("VIRTUAL_DEVICES");
  EXPECT_NE(initDevices, appDevices);
  ASSERT_EQ(instances().size(), 2u) << "the app container's Allocate destroyed the init container's instance";
  std::string appNode;
  for (const auto& n : instances())
    if (appDevices.find(n) != std::string::npos) appNode = n;
  ASSERT_FALSE(appNode.empty()) << appDevices;

  ASSERT_NO_FATAL_FAILURE(finishInit("mlu"));
  EXPECT_TRUE(waitFor([&] {
    agent->maintainNow();
    return instances().size() == 1;
  }));
  EXPECT_EQ(instances(), (std::vector<std::string>{appNode}));
  ::unsetenv("VGPU_FAKE_CNDEV_CONFIG");
}
#endif

#ifdef VGPU_FAKE_ROCM_DIR
TEST_F(DevicePluginInitContainers, HygonInitAndAppContainerEachGetAVdcuAndTheInitOneIsDestroyedWhenItFinished) {
  hygon::fake::FakeNode node({hygon::fake::FakeDcu{}});
  dir.write("device-config.yaml",
            "version: 1\nbackends:\n  hygon:\n    enabled: true\n    splitCount: 4\n    options:\n"
            "      driverDir: " VGPU_FAKE_ROCM_DIR "\n      sysfsRoot: " + node.sys().string() +
                "\n      devRoot: " + node.dev().string() + "\n      enforcement: hydmi\n      stateDir: " +
                node.stateDir().string() + "\n      vdevCopyDir: " + node.copyDir().string() +
                "\n      hyhalDir: \"\"\n");
  startKubelet();
  startAgent(manualPasses());
  ASSERT_TRUE(kubelet->waitForDevices("hygon.com/dcunum", std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  const std::string first = kubelet->devices("hygon.com/dcunum").at(0).id;
  const std::string dcu = first.substr(0, first.rfind("::"));
  ASSERT_NO_FATAL_FAILURE(admit(initAndApp("dcu", "hygon.com/dcunum", "hygon", dcu, 4096, 8192, 20, 50,
                                           {{"hygon.com/dcumem", 4096}, {"hygon.com/dcucores", 20}},
                                           {{"hygon.com/dcumem", 8192}, {"hygon.com/dcucores", 50}}),
                                "hygon.com/dcunum"));
  const std::string initConf = mounted(init, "/etc/vdev/docker");
  const std::string appConf = mounted(app, "/etc/vdev/docker");
  ASSERT_FALSE(initConf.empty());
  EXPECT_NE(initConf, appConf);
  EXPECT_EQ(node.hydmiVdevCount(), 2) << "the app container's Allocate destroyed the init container's vDCU";
  EXPECT_TRUE(fs::is_directory(initConf));

  ASSERT_NO_FATAL_FAILURE(finishInit("dcu"));
  EXPECT_TRUE(waitFor([&] {
    agent->maintainNow();
    return node.hydmiVdevCount() == 1;
  }));
  EXPECT_FALSE(fs::exists(initConf));
  EXPECT_TRUE(fs::is_directory(appConf));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
