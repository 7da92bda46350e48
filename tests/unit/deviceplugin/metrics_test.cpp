// /metrics and /healthz from real libvgpu.so shared regions, and the NVIDIA backend on the
// fake NVML.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

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

using vgpu::testing::promtoolProblems;

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
  const std::string unenforced = labels.substr(0, labels.size() - 1) + ",limit=";
  EXPECT_THAT(text, HasSubstr("vgpu_container_limit_unenforced" + unenforced + "\"memory\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_limit_unenforced" + unenforced + "\"compute\"} 0\n"));
  // What libvgpu.so publishes when the driver leaves it no way to throttle.
  {
    vgpu_region* region = nullptr;
    ASSERT_EQ(vgpu_region_open((folder + "/region").c_str(), &region, nullptr, 0), VGPU_REGION_OK);
    vgpu_region_publish_unenforced(region, 0, VGPU_REGION_UNENFORCED_COMPUTE);
    vgpu_region_close(region);
  }
  const std::string later = httpGet(agent->metricsUrl(), "/metrics").body;
  EXPECT_THAT(later, HasSubstr("vgpu_container_limit_unenforced" + unenforced + "\"compute\"} 1\n"));
  EXPECT_THAT(later, HasSubstr("vgpu_container_limit_unenforced" + unenforced + "\"memory\"} 0\n"));
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

// --hami-metrics (issue 28): HAMi's per-container names and labels beside ours, as HAMi's
// vGPUmonitor exports them (constant label zone="vGPU"); still valid text.
TEST_F(DevicePluginMetrics, ExportsHamisContainerNamesAndLabelsBesideOursInValidText) {
  writeSimNode();
  startKubelet(false);
  AgentOptions o = options();
  o.hamiMetrics = true;
  startAgent(o);
  ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  PodSpec spec{"work", {{"main", {{kSimCount, 1}, {kSimMemory, 3000}}, {grant("sim-1", 1, 3000, 30, 0)}}}};
  auto admitted = kubelet->admit(kubeletPod(spec, createPod(spec)));
  ASSERT_TRUE(admitted.admitted) << admitted.error;
  const std::string region = folderOf(admitted.allocations[0]) + "/region";
  writeRegion(region, "sim-1", 512ull << 20, 3000ull << 20, 30);

  const std::string text = httpGet(agent->metricsUrl(), "/metrics").body;
  EXPECT_EQ(promtoolProblems(text), "");
  const std::string labels =
      "{namespace=\"default\",pod=\"work\",container=\"main\",vdevice_index=\"0\",device_uuid=\"sim-1\",zone=\"vGPU\"}";
  EXPECT_THAT(text, HasSubstr("\nhami_vgpu_memory_used_bytes" + labels + " 536870912\n"));
  EXPECT_THAT(text, HasSubstr("\nhami_container_device_memory_bytes" + labels + " 536870912\n"));
  EXPECT_THAT(text, HasSubstr("\nhami_vgpu_memory_limit_bytes" + labels + " 3145728000\n"));
  EXPECT_THAT(text, HasSubstr("\nvgpu_container_memory_used_bytes{"));  // ours are still there
  // Utilization: the growth of the container's kernel time between two scrapes.
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\nhami_container_device_utilization_ratio{")));
  {
    vgpu_region* r = nullptr;
    ASSERT_EQ(vgpu_region_open(region.c_str(), &r, nullptr, 0), VGPU_REGION_OK);
    __atomic_add_fetch(&r->devices[0].compute_busy_ns, 50'000'000ull, __ATOMIC_RELAXED);  // 50 ms of kernels
    vgpu_region_close(r);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string later = httpGet(agent->metricsUrl(), "/metrics").body;
  const std::string name = "\nhami_container_device_utilization_ratio" + labels + " ";
  const auto at = later.find(name);
  ASSERT_NE(at, std::string::npos) << later;
  const double percent = std::stod(later.substr(at + name.size()));
  EXPECT_GT(percent, 0.0);
  EXPECT_LE(percent, 25.0);  // 50 ms in at least 200 ms
  EXPECT_EQ(promtoolProblems(later), "");
}

TEST_F(DevicePluginMetrics, ExportsNoneOfHamisNamesUnlessAsked) {
  startSimNode();
  // (vgpu's own vgpu_hami_container_memory_bytes is always there; HAMi's names start with hami_.)
  EXPECT_THAT(httpGet(agent->metricsUrl(), "/metrics").body, ::testing::Not(HasSubstr("# TYPE hami_")));
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

#ifdef VGPU_FAKE_CNDEV_LIBRARY
constexpr const char* kMlu = "0a1b2c3d-0000-4000-8000-000000000000";

/// An MLU node on the fake cnDev: the host's /dev in a temp folder, the cambricon backend.
class DevicePluginMlu : public AgentFixture {
 protected:
  void TearDown() override {
    AgentFixture::TearDown();
    ::unsetenv("VGPU_FAKE_CNDEV_CONFIG");
  }
  /// The fake driver's config; `extra` adds lines (noDriver, instanceUsage...).
  void writeCards(const std::string& extra = "") {
    for (const char* node : {"cambricon_dev0", "cambricon_ipcm0", "cambricon_dev1", "cambricon_ipcm1"})
      dir.write("dev/" + std::string(node), "");
    const auto cards =
        dir.write("cndev.conf", std::string("card uuid=") + kMlu + " name=MLU370-X4 memoryMB=24576 smlu=on\n" +
                                    "card uuid=0a1b2c3d-0000-4000-8000-000000000001 name=MLU370-X4 memoryMB=24576 "
                                    "smlu=on memoryUsedMB=20000 util=55\noption devRoot=" +
                                    (dir.path() / "dev").string() + "\n" + extra);
    ::setenv("VGPU_FAKE_CNDEV_CONFIG", cards.c_str(), 1);
    ::unsetenv("VGPU_FAKE_CNDEV_STATE");
  }
  void writeConfig() {
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  cambricon:\n    enabled: true\n"
                                                "    options:\n      libraryPath: ") +
                                        VGPU_FAKE_CNDEV_LIBRARY + "\n      stateDir: " +
                                        (dir.path() / "cambricon").string() + "\n      devRoot: " +
                                        (dir.path() / "dev").string() + "\n      kubeletPluginDir: " +
                                        (dir.path() / "dp").string() + "\n");
  }
  fakes::AdmitResult admit(const std::string& name, const std::string& card, int index, std::uint64_t memory,
                           std::uint32_t cores, std::map<std::string, std::int64_t> limits) {
    PodSpec spec{name, {{"main", limits, {grant(card, index, memory, cores, 0, "cambricon")}}}};
    const std::string uid = createPod(spec);
    fakes::KubeletPod pod;
    pod.name = name;
    pod.uid = uid;
    pod.containers.push_back({"main", false, {{"cambricon.com/vmlu", 1}}});
    return kubelet->admit(pod);
  }
};

TEST_F(DevicePluginMlu, ExportsEachMluContainersUsageUnderTheNvidiaNames) {
  writeCards("instanceUsage card=0 id=1 memMiB=700 util=18\n");
  writeConfig();
  startKubelet();
  startAgent(options());
  ASSERT_TRUE(kubelet->waitForDevices("cambricon.com/vmlu", std::chrono::seconds(10)));
  ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  const std::string card0 = std::string("MLU-") + kMlu;
  const std::string card1 = "MLU-0a1b2c3d-0000-4000-8000-000000000001";
  auto shared = admit("infer", card0, 0, 4096, 30,
                      {{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 30}});
  ASSERT_TRUE(shared.admitted) << shared.error;
  auto whole = admit("train", card1, 1, 24576, 100, {{"cambricon.com/vmlu", 1}});
  ASSERT_TRUE(whole.admitted) << whole.error;

  const std::string text = httpGet(agent->metricsUrl(), "/metrics").body;
  EXPECT_EQ(promtoolProblems(text), "");
  const std::string s = "{namespace=\"default\",pod=\"infer\",container=\"main\",device_uuid=\"" + card0 +
                        "\",device_index=\"0\"}";
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_limit_bytes" + s + " 4294967296\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_used_bytes" + s + " 734003200\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_compute_limit_percent" + s + " 30\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_compute_utilization_percent" + s + " 18\n"));
  const std::string w = "{namespace=\"default\",pod=\"train\",container=\"main\",device_uuid=\"" + card1 +
                        "\",device_index=\"0\"}";
  EXPECT_THAT(text, HasSubstr("vgpu_container_memory_used_bytes" + w + " 20971520000\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_compute_limit_percent" + w + " 100\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_container_compute_utilization_percent" + w + " 55\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_backend_devices{backend=\"cambricon\"} 2\n"));
}

TEST_F(DevicePluginMlu, ADriverLoadedAfterTheAgentStartedIsServedOnceRediscovered) {
  writeCards("option noDriver=1\n");  // the node rebooted; the MLU driver is not loaded yet
  writeConfig();
  startKubelet();
  auto o = options();
  o.rediscoverInterval = std::chrono::milliseconds(0);  // only when asked, as on SIGHUP
  startAgent(o);
  EXPECT_TRUE(agent->resources().empty());
  EXPECT_FALSE(agent->ready());
  const auto notReady = httpGet(agent->metricsUrl(), "/healthz");
  EXPECT_EQ(notReady.status, 503);
  EXPECT_THAT(notReady.body, HasSubstr("backend cambricon serves no devices"));
  EXPECT_THAT(notReady.body, HasSubstr("CNDEV_ERROR_NO_DRIVER"));
  EXPECT_THAT(agent->renderMetrics(), HasSubstr("vgpu_backend_devices{backend=\"cambricon\"} 0\n"));

  writeCards();  // the driver is loaded now
  agent->rediscoverNow();
  EXPECT_EQ(agent->resources(), (std::vector<std::string>{"cambricon.com/vmlu"}));
  ASSERT_TRUE(kubelet->waitForDevices("cambricon.com/vmlu", std::chrono::seconds(10)));
  EXPECT_EQ(kubelet->devices("cambricon.com/vmlu").size(), 20u);  // 2 cards x splitCount 10
  EXPECT_TRUE(waitFor([&] { return agent->ready(); }));
  EXPECT_EQ(httpGet(agent->metricsUrl(), "/healthz").status, 200);
  EXPECT_EQ(agent->servedDevices().at("cambricon"), 2u);
  EXPECT_THAT(agent->renderMetrics(), HasSubstr("vgpu_backend_devices{backend=\"cambricon\"} 2\n"));
  // The node's inventory is published for the scheduler, and a pod can be admitted.
  EXPECT_TRUE(waitFor([&] {
    auto node = api->get("nodes", "", kNode);
    return node && boost::json::serialize(*node).find(kMlu) != std::string::npos;
  }));
  auto shared = admit("late", std::string("MLU-") + kMlu, 0, 4096, 30,
                      {{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 30}});
  EXPECT_TRUE(shared.admitted) << shared.error;
}
#endif

TEST_F(DevicePluginMetrics, RediscoversPeriodicallyAndSaysWhichBackendsServeHowManyDevices) {
  devices.clear();  // the sim "driver" lists nothing yet
  writeSimNode();
  startKubelet();
  auto o = options();
  o.rediscoverInterval = std::chrono::milliseconds(200);
  startAgent(o);
  EXPECT_TRUE(agent->resources().empty());
  EXPECT_EQ(httpGet(agent->metricsUrl(), "/healthz").status, 503);
  devices = {{"sim-0", 16384}};
  writeSimNode();
  ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
  EXPECT_EQ(kubelet->devices(kSimCount).size(), 4u);
  EXPECT_TRUE(waitFor([&] { return httpGet(agent->metricsUrl(), "/healthz").status == 200; }));
  EXPECT_THAT(agent->renderMetrics(), HasSubstr("vgpu_backend_devices{backend=\"sim\"} 1\n"));
}

TEST_F(DevicePluginMetrics, AnAgentWithNoBackendEnabledIsReady) {
  dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: false\n");
  startKubelet();
  startAgent(options());
  EXPECT_TRUE(agent->resources().empty());
  EXPECT_TRUE(agent->ready());
  EXPECT_EQ(httpGet(agent->metricsUrl(), "/healthz").status, 200);
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
