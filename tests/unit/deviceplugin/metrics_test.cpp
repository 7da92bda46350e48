// /metrics and /healthz from real libvgpu.so shared regions, and the NVIDIA backend on the
// fake NVML.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "agent_fixture.h"
#include "promtool_check.h"
#include "region_support.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

struct HttpReply {
  int status = 0;
  std::string body;
};

/// GET on http://127.0.0.1:port/path with a plain socket (Connection: close).
HttpReply httpGet(const std::string& url, const std::string& path) {
  const auto colon = url.rfind(':');
  const int port = std::stoi(url.substr(colon + 1));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  HttpReply r;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  if (::write(fd, req.data(), req.size()) < 0) return r;
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (all.size() > 12) r.status = std::atoi(all.substr(9, 3).c_str());
  const auto split = all.find("\r\n\r\n");
  if (split != std::string::npos) r.body = all.substr(split + 4);
  return r;
}

/// What `promtool check metrics` says about `text` (empty = clean, or promtool left out by
/// VGPU_WITHOUT_PROMTOOL).
std::string promtoolProblems(const std::string& text) {
#ifdef VGPU_PROMTOOL
  const auto check = vgpu::testing::promtoolCheck(VGPU_PROMTOOL, text);
  return check.exitCode == 0 ? "" : (check.output.empty() ? "promtool failed" : check.output);
#else
  (void)text;
  return "";
#endif
}

class DevicePluginMetrics : public AgentFixture {};

TEST_F(DevicePluginMetrics, ExportsDeviceTotalsAndContainerUsageFromSharedRegionsInValidText) {
  startSimNode();
  PodSpec spec{"work", {{"main", {{kSimCount, 1}, {kSimMemory, 3000}}, {grant("sim-1", 1, 3000, 30, 0)}}}};
  const std::string uid = createPod(spec);
  auto admitted = kubelet->admit(kubeletPod(spec, uid));
  ASSERT_TRUE(admitted.admitted) << admitted.error;
  const std::string folder = folderOf(admitted.allocations[0]);
  writeRegion(folder + "/region", "sim-1", 512ull << 20, 3000ull << 20, 30);

  ASSERT_FALSE(agent->metricsUrl().empty());
  const auto reply = httpGet(agent->metricsUrl(), "/metrics");
  ASSERT_EQ(reply.status, 200);
  const std::string& text = reply.body;
  EXPECT_EQ(promtoolProblems(text), "");
  const std::string labels = "{namespace=\"default\",pod=\"work\",container=\"main\",device_uuid=\"sim-1\",device_index=\"0\"}";
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_used_bytes" + labels + " 536870912\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_limit_bytes" + labels + " 3145728000\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_compute_limit_percent" + labels + " 30\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_processes{namespace=\"default\",pod=\"work\",container=\"main\"} 1\n"));
  const std::string dev = "{backend=\"sim\",device_id=\"sim-1\",device_index=\"1\",model=\"Sim GPU\"}";
  EXPECT_THAT(text, HasSubstr("vgpu_device_memory_bytes" + dev + " 17179869184\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_device_memory_allocated_bytes" + dev + " 3145728000\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_device_split_slots" + dev + " 4\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_allocate_total{resource=\"vgpu.io/sim\",result=\"success\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_plugin_registered{resource=\"vgpu.io/sim\"} 1\n"));

  const auto health = httpGet(agent->metricsUrl(), "/healthz");
  EXPECT_EQ(health.status, 200);

  // The pod goes away: its region is cleaned up and no longer exported.
  ASSERT_TRUE(api->remove("pods", "default", "work").ok());
  kubelet->removePod(uid);
  ASSERT_TRUE(waitFor([&] { return !fs::exists(folder); }));
  EXPECT_THAT(httpGet(agent->metricsUrl(), "/metrics").body, ::testing::Not(HasSubstr("pod=\"work\"")));
}

#ifdef VGPU_FAKE_NVML_LIBRARY
TEST_F(DevicePluginMetrics, NvidiaBackendOnTheFakeNvmlAllocatesWithLimitsFileAndExportsItsRegion) {
  const std::string gpu0 = "GPU-11111111-1111-1111-1111-111111111111";
  const std::string gpu1 = "GPU-22222222-2222-2222-2222-222222222222";
  const auto machine = dir.write("machine.conf", "gpu uuid=" + gpu0 + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n" +
                                                     "gpu uuid=" + gpu1 + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
  ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
  dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                              "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                      VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n");
  startKubelet();
  startAgent(options());
  ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
  EXPECT_EQ(kubelet->devices("nvidia.com/gpu").size(), 8u);

  PodSpec spec{"cuda", {{"train", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
                         {grant(gpu1, 1, 3000, 25, 2, "nvidia")}}}};
  const std::string uid = createPod(spec);
  auto result = kubelet->admit(kubeletPod(spec, uid));
  ASSERT_TRUE(result.admitted) << result.error;
  EXPECT_EQ(result.allocations[0].deviceIds, (std::vector<std::string>{gpu1 + "::2"}));
  const auto& env = result.allocations[0].response.env;
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), gpu1);
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "25");
  const std::string folder = folderOf(result.allocations[0]);
  EXPECT_TRUE(fs::exists(folder + "/limits.env"));
  bool limitsMounted = false;
  for (const auto& m : result.allocations[0].response.mounts)
    limitsMounted = limitsMounted || (m.hostPath == folder + "/limits.env" && m.readOnly);
  EXPECT_TRUE(limitsMounted);
  EXPECT_EQ(annotationOf("cuda", keys::kPodBindPhase), "success");

  writeRegion(folder + "/shared/shared-region", gpu1, 100ull << 20, 3000ull << 20, 25);
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(promtoolProblems(text), "");
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_used_bytes{namespace=\"default\",pod=\"cuda\",container=\"train\","
                              "device_uuid=\"" + gpu1 + "\",device_index=\"0\"} 104857600\n"));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin::testing
