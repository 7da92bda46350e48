// A backend's OCI hook (the NVIDIA backend's vgpu-cdi-hook, issue 40) reaches the runtime
// through a CDI spec the agent writes per container: named in cdi_devices and in the
// cdi.k8s.io annotation, removed with the container; the device's enforcement is a metric.
#include <boost/json.hpp>

#include "backend_nodes.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

#ifdef VGPU_FAKE_NVML_LIBRARY
class DevicePluginContainerCdi : public BackendNode {
 protected:
  /// Admits a pod of one container with 3000 MiB of the GPU; its one allocation.
  fakes::ContainerAllocation admitOne() {
    PodSpec spec{"cuda", {{"main", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
                           {grant(kGpu, 0, 3000, 100, 0, "nvidia")}}}};
    uid = createPod(spec);
    EXPECT_TRUE(waitFor([&] { return !agent->tracker().pods().empty(); }));
    auto r = kubelet->admit(kubeletPodOf(spec, uid, "nvidia.com/gpu"));
    EXPECT_TRUE(r.admitted) << r.error;
    return r.allocations.empty() ? fakes::ContainerAllocation{} : r.allocations[0];
  }
};

TEST_F(DevicePluginContainerCdi, TheHookGoesToTheRuntimeInACdiSpecOfTheContainer) {
  ASSERT_NO_FATAL_FAILURE(startNvidiaNode("      memoryEnforcement: driver\n"
                                          "      cdiHookPath: " VGPU_CDI_HOOK_BINARY "\n"));
  EXPECT_THAT(agent->renderMetrics(),
              HasSubstr("vgpu_device_memory_enforcement{backend=\"nvidia\",device_id=\"" + std::string(kGpu) +
                        "\",device_index=\"0\",model=\"NVIDIA A100-SXM4-40GB\",mode=\"driver\"} 1"));
  const auto got = admitOne();
  ASSERT_EQ(got.cdiDevices.size(), 1u);
  const std::string id = got.cdiDevices[0];
  ASSERT_EQ(id.rfind("vgpu.io/container=", 0), 0u) << id;
  EXPECT_EQ(got.response.annotations.at("cdi.k8s.io/vgpu-container"), id);
  EXPECT_EQ(got.response.env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");  // env and mounts as before

  const std::string name = id.substr(id.find('=') + 1);
  const fs::path file = dir.path() / "cdi" / ("vgpu.io-container_" + name + ".json");
  ASSERT_TRUE(fs::exists(file));
  std::ifstream in(file);
  const auto cdi = boost::json::parse(std::string(std::istreambuf_iterator<char>(in), {})).as_object();
  EXPECT_EQ(cdi.at("kind"), "vgpu.io/container");
  const auto& device = cdi.at("devices").at(0).as_object();
  EXPECT_EQ(device.at("name").as_string(), name);
  const auto& hook = device.at("containerEdits").at("hooks").at(0).as_object();
  EXPECT_EQ(hook.at("hookName"), "createContainer");
  EXPECT_EQ(hook.at("path").as_string(), VGPU_CDI_HOOK_BINARY);
  EXPECT_EQ(hook.at("args").at(3).as_string(), std::string(kGpu) + "=3000");
  EXPECT_FALSE(device.at("containerEdits").as_object().contains("env"));  // only the hooks

  // The container goes: its spec goes with its folder.
  kubelet->removePod(uid);
  ASSERT_TRUE(api->remove("pods", "default", "cuda").ok());
  EXPECT_TRUE(waitFor([&] { return !fs::exists(file); }));
}

// On a node without the vgpu hook nothing changes: no CDI device, no spec, mode preload.
TEST_F(DevicePluginContainerCdi, WithoutTheHookNoSpecIsWritten) {
  ASSERT_NO_FATAL_FAILURE(startNvidiaNode());
  EXPECT_THAT(agent->renderMetrics(), HasSubstr("mode=\"preload\"} 1"));
  const auto got = admitOne();
  EXPECT_TRUE(got.cdiDevices.empty());
  EXPECT_FALSE(got.response.annotations.contains("cdi.k8s.io/vgpu-container"));
  EXPECT_FALSE(fs::exists(dir.path() / "cdi"));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
