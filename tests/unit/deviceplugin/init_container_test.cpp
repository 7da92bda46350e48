// Init containers (issue 27 item 11): the kubelet hands an init container's devices to the
// containers after it (devicesToReuse), so one Allocate after another names the same IDs
// for two containers of one pod. Each gets its own handout (folder, limits, partition),
// and an init container's goes when the pod's status says it finished, not before and not
// the app container's. Against the kubelet and apiserver doubles, with every backend.
#include "backend_nodes.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

using DevicePluginInitContainers = BackendNode;

TEST_F(DevicePluginInitContainers, SimInitAndAppContainerGetTheirOwnFoldersAndTheInitOnesGoesWhenItFinished) {
  ASSERT_NO_FATAL_FAILURE(startSimNodeManually());
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
  ASSERT_NO_FATAL_FAILURE(startNvidiaNode());
  ASSERT_NO_FATAL_FAILURE(admit(initAndApp("cuda", "nvidia.com/gpu", "nvidia", kGpu, 1000, 3000, 10, 30,
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
  ASSERT_FALSE(mounted(init, "/var/run/vgpu/shared-region").empty());
  EXPECT_NE(mounted(init, "/var/run/vgpu/shared-region"), mounted(app, "/var/run/vgpu/shared-region"));

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
  ASSERT_NO_FATAL_FAILURE(startCambriconNode());
  auto instances = [&] { return mluInstances(); };
  ASSERT_NO_FATAL_FAILURE(admit(
      initAndApp("mlu", "cambricon.com/vmlu", "cambricon", std::string("MLU-") + kMluUuid, 4096, 8192, 20, 50,
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
}
#endif

#ifdef VGPU_FAKE_ROCM_DIR
TEST_F(DevicePluginInitContainers, HygonInitAndAppContainerEachGetAVdcuAndTheInitOneIsDestroyedWhenItFinished) {
  hygon::fake::FakeNode node({hygon::fake::FakeDcu{}});
  const std::string dcu = startHygonNode(node);
  ASSERT_FALSE(dcu.empty());
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
