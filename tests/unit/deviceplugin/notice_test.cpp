// A backend's notes on a container (ContainerSpec::notices, backend ABI 1.2) reach the pod
// as Normal events: here the NVIDIA backend saying which component enforces memory.
#include "backend_nodes.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

using DevicePluginNotices = BackendNode;

#ifdef VGPU_FAKE_NVML_LIBRARY
TEST_F(DevicePluginNotices, ThePodIsToldWhoEnforcesItsMemoryLimit) {
  ASSERT_NO_FATAL_FAILURE(startNvidiaNode());
  PodSpec spec{"cuda", {{"main", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
                         {grant(kGpu, 0, 3000, 30, 0, "nvidia")}}}};
  uid = createPod(spec);
  ASSERT_TRUE(waitFor([&] { return !agent->tracker().pods().empty(); }));
  auto r = kubelet->admit(kubeletPodOf(spec, uid, "nvidia.com/gpu"));
  ASSERT_TRUE(r.admitted) << r.error;
  std::string message;
  ASSERT_TRUE(waitFor([&] {
    for (const auto& e : api->list("events"))
      if (e.at("reason").as_string() == "VgpuMemoryEnforcer" && e.at("type").as_string() == "Normal" &&
          e.at("involvedObject").as_object().at("uid").as_string() == uid)
        message = std::string(e.at("message").as_string());
    return !message.empty();
  }));
  EXPECT_THAT(message, HasSubstr("container main: memory limit (3000 MiB on " + std::string(kGpu) +
                                 ") enforced by libvgpu.so in the container"));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
