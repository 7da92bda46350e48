#pragma once
// A node agent against the kubelet and apiserver doubles with one backend on its fake
// vendor library (sim, NVIDIA on the fake NVML, Cambricon on the fake cnDev, Hygon on the
// fake hydmi/ROCm-SMI), with manual maintenance passes, and pods of an init container and
// an app container on one device slot.

#include <gmock/gmock.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>

#include "agent_fixture.h"
#ifdef VGPU_FAKE_ROCM_DIR
#include "fake_node.h"
#endif

namespace vgpu::deviceplugin::testing {

/// The pod's status as the kubelet reports it once `init` exited with `exitCode`.
inline boost::json::object initFinished(const std::string& init, int exitCode) {
  boost::json::object terminated{{"exitCode", exitCode}, {"reason", exitCode == 0 ? "Completed" : "Error"}};
  boost::json::array statuses{boost::json::object{
      {"name", init}, {"ready", false}, {"restartCount", 0}, {"state", {{"terminated", terminated}}}}};
  return {{"status", {{"phase", exitCode == 0 ? "Running" : "Pending"}, {"initContainerStatuses", statuses}}}};
}

class BackendNode : public AgentFixture {
 protected:
  void TearDown() override {
    AgentFixture::TearDown();
    ::unsetenv("VGPU_FAKE_CNDEV_CONFIG");
  }
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
    for (const auto& c : spec.containers) {
      auto count = c.limits.find(resource);
      p.containers.push_back({c.name, c.init, {{resource, count == c.limits.end() ? 1 : count->second}}});
    }
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

  void startSimNodeManually() {
    writeSimNode();
    startKubelet();
    startAgent(manualPasses());
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  static constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";
  /// `extraOptions`: more lines of the backend's options ("      key: value\n").
  void startNvidiaNode(const std::string& extraOptions = "") {
    const auto machine =
        dir.write("machine.conf", std::string("gpu uuid=") + kGpu + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
    ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
#ifdef VGPU_FAKE_NVML_LIBRARY
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                                "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                        VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n" +
                                        extraOptions);
#endif
    startKubelet();
    startAgent(manualPasses());
    ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  static constexpr const char* kMluUuid = "0a1b2c3d-0000-4000-8000-000000000000";
  void startCambriconNode() {
    for (const char* node : {"cambricon_dev0", "cambricon_ipcm0"}) dir.write("dev/" + std::string(node), "");
    const auto cards = dir.write("cndev.conf", std::string("card uuid=") + kMluUuid +
                                                   " name=MLU370-X4 memoryMB=24576 numa=0 health=1 smlu=on mlulink=0\n"
                                                   "option devRoot=" + (dir.path() / "dev").string() + "\n");
    ::setenv("VGPU_FAKE_CNDEV_CONFIG", cards.c_str(), 1);
    ::unsetenv("VGPU_FAKE_CNDEV_STATE");
#ifdef VGPU_FAKE_CNDEV_LIBRARY
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  cambricon:\n    enabled: true\n    splitCount: 4\n"
                                                "    options:\n      libraryPath: ") +
                                        VGPU_FAKE_CNDEV_LIBRARY + "\n      stateDir: " + (dir.path() / "cambricon").string() +
                                        "\n      devRoot: " + (dir.path() / "dev").string() +
                                        "\n      kubeletPluginDir: " + (dir.path() / "dp").string() + "\n");
#endif
    startKubelet();
    startAgent(manualPasses());
    ASSERT_TRUE(kubelet->waitForDevices("cambricon.com/vmlu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }
  /// The sMLU instances the fake driver holds: it makes (and removes) one node per instance.
  std::vector<std::string> mluInstances() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir.path() / "dev" / "cambricon-caps", ec))
      out.push_back("/dev/cambricon-caps/" + e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

#ifdef VGPU_FAKE_ROCM_DIR
  /// A DCU node in hydmi mode (vDCUs the fake driver counts); returns the DCU's device id.
  std::string startHygonNode(const hygon::fake::FakeNode& node) {
    dir.write("device-config.yaml",
              "version: 1\nbackends:\n  hygon:\n    enabled: true\n    splitCount: 4\n    options:\n"
              "      driverDir: " VGPU_FAKE_ROCM_DIR "\n      sysfsRoot: " + node.sys().string() +
                  "\n      devRoot: " + node.dev().string() + "\n      enforcement: hydmi\n      stateDir: " +
                  node.stateDir().string() + "\n      vdevCopyDir: " + node.copyDir().string() +
                  "\n      hyhalDir: \"\"\n");
    startKubelet();
    startAgent(manualPasses());
    EXPECT_TRUE(kubelet->waitForDevices("hygon.com/dcunum", std::chrono::seconds(10)));
    EXPECT_TRUE(waitFor([&] { return agent->podsSynced(); }));
    const auto devices = kubelet->devices("hygon.com/dcunum");
    if (devices.empty()) return "";
    return devices[0].id.substr(0, devices[0].id.rfind("::"));
  }
#endif

  std::string uid;
  fakes::ContainerAllocation init, app;
};

}  // namespace vgpu::deviceplugin::testing
