// Node agent figures: Allocate with 100 pods waiting on the node (the tracker alone, and the
// whole path kubelet double -> gRPC -> agent -> sim limiter -> apiserver double), and the
// RSS of the idle vgpu-device-plugin process serving 8 GPUs.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "test_support.h"
#include "vgpu/k8s/object.h"

namespace vgpu::deviceplugin::testing {
namespace {

constexpr int kBackgroundPods = 100;

/// 100 pods waiting for two devices each (never admitted): every Allocate of a one-device
/// pod scans them.
void BM_TrackerClaimWith100WaitingPods(benchmark::State& state) {
  PodTracker tracker("n1");
  tracker.setResources({{kSimCount, "sim"}});
  std::vector<Device> devs;
  for (int i = 0; i < 8; ++i) {
    Device d;
    d.id = "sim-" + std::to_string(i);
    d.index = i;
    d.memoryMiB = 1 << 30;
    d.splitCount = 1000;
    d.computeUnits = 100000;
    devs.push_back(d);
  }
  tracker.setDevices("sim", devs);
  auto makePod = [&](const std::string& name, int age, std::vector<DeviceGrant> grants) {
    TrackedPod p;
    p.info.name = name;
    p.info.uid = "uid-" + name;
    p.info.nodeName = "n1";
    p.created = std::chrono::system_clock::time_point(std::chrono::seconds(age));
    p.info.containers.push_back({"main", false, {{kSimCount, static_cast<std::int64_t>(grants.size())}}});
    p.info.annotations[std::string(keys::kPodAssignment)] = encodeAssignment({"n1", {{"main", false, grants}}});
    p.info.annotations[std::string(keys::kPodBindPhase)] = "allocating";
    tracker.upsert(std::move(p));
  };
  for (int i = 0; i < kBackgroundPods; ++i)
    makePod("bg-" + std::to_string(i), i,
            {grant("sim-" + std::to_string(i % 8), i % 8, 100, 1, i),
             grant("sim-" + std::to_string((i + 1) % 8), (i + 1) % 8, 100, 1, 500 + i)});
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const int slot = 200 + n % 250;
    const std::string dev = "sim-" + std::to_string(n % 8);
    makePod("p-" + std::to_string(n), 1000 + n, {grant(dev, n % 8, 100, 1, slot)});
    state.ResumeTiming();
    auto hint = tracker.preferred(kSimCount, {formatVirtualDeviceId(dev, slot)}, {}, 1);
    auto r = tracker.claim(kSimCount, hint);
    auto* c = std::get_if<Claim>(&r);
    if (!c) {
      state.SkipWithError("claim failed");
      break;
    }
    benchmark::DoNotOptimize(tracker.commit(*c));
    state.PauseTiming();
    tracker.remove("uid-p-" + std::to_string(n));
    ++n;
    state.ResumeTiming();
  }
}
BENCHMARK(BM_TrackerClaimWith100WaitingPods)->Unit(benchmark::kMicrosecond);

/// The whole path, per pod: GetPreferredAllocation + Allocate over gRPC, the sim limiter,
/// the host folder, the pod's bind-phase patch to the apiserver double.
void BM_AdmitWith100WaitingPods(benchmark::State& state) {
  TempDir dir;
  auto api = std::move(fakes::FakeApiServer::start()).value();
  (void)api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
  std::vector<SimDevice> devices;
  for (int i = 0; i < 8; ++i) devices.push_back({"sim-" + std::to_string(i), 1 << 30});
  const auto devFile = dir.write("devices.yaml", simDevicesYaml(devices));
  dir.write("device-config.yaml", simConfigYaml(devFile.string(), 128));
  fakes::FakeKubeletOptions ko;
  ko.devicePluginDir = (dir.path() / "dp").string();
  auto kubelet = std::move(fakes::FakeKubelet::start(ko)).value();
  AgentOptions o;
  o.nodeName = kNode;
  o.configPath = (dir.path() / "device-config.yaml").string();
  o.backendDir = VGPU_BACKEND_DIR;
  o.pluginDir = ko.devicePluginDir;
  o.podResourcesSocket = "";
  o.metricsAddress = "";
  o.stateDir = (dir.path() / "state").string();
  o.regionTmpfs = FolderTmpfs::kOff;  // no mounts from a benchmark
  o.apiConfig.server = api->url();
  auto agent = std::move(Agent::create(o)).value();
  if (!agent->start().ok() || !kubelet->waitForDevices(kSimCount, std::chrono::seconds(10))) {
    state.SkipWithError("agent did not start");
    return;
  }
  for (int i = 0; i < kBackgroundPods; ++i) {
    PodSpec bg{"bg-" + std::to_string(i),
               {{"main",
                 {{kSimCount, 2}},
                 {grant("sim-" + std::to_string(i % 8), i % 8, 1, 0, 120 - i % 8),
                  grant("sim-" + std::to_string((i + 1) % 8), (i + 1) % 8, 1, 0, 100 - i % 8)}}}};
    (void)api->create("pods", podJson(bg));
  }
  waitFor([&] { return agent->tracker().pods().size() == kBackgroundPods; });
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    PodSpec spec{"p-" + std::to_string(n),
                 {{"main", {{kSimCount, 1}}, {grant("sim-" + std::to_string(n % 8), n % 8, 1, 0, n / 8)}}}};
    auto created = api->create("pods", podJson(spec));
    const std::string uid(created->at("metadata").as_object().at("uid").as_string());
    waitFor([&] { return agent->tracker().pods().size() == static_cast<size_t>(kBackgroundPods + n + 1); });
    const auto pod = kubeletPod(spec, uid);
    state.ResumeTiming();
    auto r = kubelet->admit(pod);
    if (!r.admitted) {
      state.SkipWithError(r.error.c_str());
      break;
    }
    ++n;
  }
  state.counters["waiting_pods"] = kBackgroundPods;
  // The agent's own time per Allocate (matching, limiter, host folder, the pod's patch).
  const std::string text = agent->renderMetrics();
  auto sample = [&](const std::string& name) {
    const std::string key = name + "{resource=\"vgpu.io/sim\"} ";
    const auto at = text.find(key);
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + key.size()));
  };
  const double count = sample("vgpu_allocate_duration_seconds_count");
  if (count > 0) state.counters["agent_allocate_mean_us"] = sample("vgpu_allocate_duration_seconds_sum") / count * 1e6;
  agent->stop();
}
BENCHMARK(BM_AdmitWith100WaitingPods)->Unit(benchmark::kMicrosecond)->Iterations(400);

/// 50 pods bound to the node at once (issue 27 item 15), admitted by the kubelet one after
/// another as it does, with every pod PATCH delayed by the apiserver double by `ms` (the
/// argument: a real apiserver answered the agent's PATCH in ~20 ms idle and 100-500 ms
/// during bursts). Figures: each Allocate's latency as the kubelet sees it (p50, p99, max),
/// the whole burst's admission, and when the last pod's outcome was on the apiserver.
void BM_BurstOf50PodsWithApiserverLatency(benchmark::State& state) {
  constexpr int kPods = 50;
  const auto latency = std::chrono::milliseconds(state.range(0));
  TempDir dir;
  auto api = std::move(fakes::FakeApiServer::start()).value();
  (void)api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
  std::vector<SimDevice> devices;
  for (int i = 0; i < 8; ++i) devices.push_back({"sim-" + std::to_string(i), 1 << 30});
  const auto devFile = dir.write("devices.yaml", simDevicesYaml(devices));
  dir.write("device-config.yaml", simConfigYaml(devFile.string(), 16));
  fakes::FakeKubeletOptions ko;
  ko.devicePluginDir = (dir.path() / "dp").string();
  ko.podResourcesSocket = (dir.path() / "pr.sock").string();
  auto kubelet = std::move(fakes::FakeKubelet::start(ko)).value();
  AgentOptions o;
  o.nodeName = kNode;
  o.configPath = (dir.path() / "device-config.yaml").string();
  o.backendDir = VGPU_BACKEND_DIR;
  o.pluginDir = ko.devicePluginDir;
  o.podResourcesSocket = ko.podResourcesSocket;
  o.metricsAddress = "";
  o.stateDir = (dir.path() / "state").string();
  o.regionTmpfs = FolderTmpfs::kOff;  // no mounts from a benchmark
  o.apiConfig.server = api->url();
  auto agent = std::move(Agent::create(o)).value();
  if (!agent->start().ok() || !kubelet->waitForDevices(kSimCount, std::chrono::seconds(10))) {
    state.SkipWithError("agent did not start");
    return;
  }
  fakes::Fault slow;
  slow.method = "PATCH";
  slow.pathPrefix = "/api/v1/namespaces/default/pods/";
  slow.action = fakes::Fault::Action::kDelay;
  slow.delay = latency;
  slow.times = -1;
  api->addFault(slow);
  for (auto _ : state) {
    std::vector<fakes::KubeletPod> pods;
    for (int n = 0; n < kPods; ++n) {
      PodSpec spec{"p-" + std::to_string(n),
                   {{"main", {{kSimCount, 1}}, {grant("sim-" + std::to_string(n % 8), n % 8, 1, 0, n / 8)}}}};
      auto created = api->create("pods", podJson(spec));
      pods.push_back(kubeletPod(spec, std::string(created->at("metadata").as_object().at("uid").as_string())));
    }
    waitFor([&] { return agent->tracker().pods().size() == kPods; });
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> ms;
    for (const auto& p : pods) {
      auto r = kubelet->admit(p);
      if (!r.admitted) {
        state.SkipWithError(r.error.c_str());
        return;
      }
      ms.push_back(static_cast<double>(r.allocations.at(0).allocateTime.count()) / 1000.0);
    }
    const auto admitted = std::chrono::steady_clock::now();
    auto written = [&] {
      for (const auto& p : pods) {
        auto pod = api->get("pods", "default", p.name);
        const auto* phase = pod ? k8s::findPath(*pod, {"metadata", "annotations", "vgpu.io/bind-phase"}) : nullptr;
        if (!phase || !phase->is_string() || phase->as_string() != "success") return false;
      }
      return true;
    };
    waitFor(written, std::chrono::seconds(60));
    const auto recorded = std::chrono::steady_clock::now();
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
    state.counters["allocate_p50_ms"] = pct(0.50);
    state.counters["allocate_p99_ms"] = pct(0.99);
    state.counters["allocate_max_ms"] = ms.back();
    state.counters["burst_admitted_ms"] = std::chrono::duration<double, std::milli>(admitted - t0).count();
    state.counters["outcomes_written_ms"] = std::chrono::duration<double, std::milli>(recorded - t0).count();
  }
  state.counters["patch_latency_ms"] = static_cast<double>(latency.count());
  agent->stop();
}
BENCHMARK(BM_BurstOf50PodsWithApiserverLatency)->Arg(0)->Arg(20)->Arg(100)->Arg(500)->Unit(benchmark::kMillisecond)->Iterations(1);

/// A number field of /proc/<pid>/status (kB for the memory fields); 0 when absent.
std::uint64_t statusField(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  return 0;
}

/// vgpu-device-plugin as its own process, 8 GPUs, idle for 3 s after registering.
void BM_IdleAgentRss8Gpus(benchmark::State& state) {
  TempDir dir;
  auto api = std::move(fakes::FakeApiServer::start()).value();
  (void)api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}});
  std::string config;
  std::string resource = kSimCount;
#ifdef VGPU_FAKE_NVML_LIBRARY
  std::string machine;
  for (int i = 0; i < 8; ++i) machine += "gpu name=\"NVIDIA A100-SXM4-80GB\" memory_mib=81920\n";
  ::setenv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", machine).c_str(), 1);
  config = std::string(
               "version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 10\n    options:\n"
               "      discovery: nvml\n      nvmlLibrary: ") +
           VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent\n";
  resource = "nvidia.com/gpu";
#else
  std::vector<SimDevice> devices;
  for (int i = 0; i < 8; ++i) devices.push_back({"sim-" + std::to_string(i), 81920});
  config = simConfigYaml(dir.write("devices.yaml", simDevicesYaml(devices)).string(), 10);
#endif
  const auto configFile = dir.write("device-config.yaml", config);
  const auto kubeconfig = dir.write(
      "kubeconfig", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + api->url() +
                        "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n"
                        "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n");
  fakes::FakeKubeletOptions ko;
  ko.devicePluginDir = (dir.path() / "dp").string();
  auto kubelet = std::move(fakes::FakeKubelet::start(ko)).value();
  for (auto _ : state) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string nodeFlag = std::string("--node-name=") + kNode;
      const std::string args[] = {"--config=" + configFile.string(),
                                  std::string("--backend-dir=") + VGPU_BACKEND_DIR,
                                  "--device-plugin-dir=" + ko.devicePluginDir,
                                  "--pod-resources-socket=" + (dir.path() / "no-pod-resources.sock").string(),
                                  "--metrics-address=127.0.0.1:0",
                                  "--state-dir=" + (dir.path() / "state").string(),
                                  "--kubeconfig=" + kubeconfig.string()};
      std::vector<char*> argv{const_cast<char*>(VGPU_DEVICE_PLUGIN_BIN), const_cast<char*>(nodeFlag.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(VGPU_DEVICE_PLUGIN_BIN, argv.data());
      _exit(127);
    }
    if (!kubelet->waitForDevices(resource, std::chrono::seconds(20))) {
      state.SkipWithError("the agent did not register");
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    // A zombie's status has no memory fields: report the exit, not an RSS of 0.
    if (int status = 0; ::waitpid(pid, &status, WNOHANG) == pid) {
      state.SkipWithError(("the agent exited while idle (wait status " + std::to_string(status) + ")").c_str());
      break;
    }
    state.counters["rss_MiB"] = static_cast<double>(statusField(pid, "VmRSS")) / 1024.0;
    state.counters["peak_rss_MiB"] = static_cast<double>(statusField(pid, "VmHWM")) / 1024.0;
    // rss = anon + file + shmem. Anonymous = the agent's own heap and stacks; file = mapped
    // code: the agent's binary (gRPC, protobuf, OpenSSL... linked in) and the shared C/C++
    // runtimes, backend and vendor library; shmem = the fake NVML's shared device state.
    state.counters["rss_anon_MiB"] = static_cast<double>(statusField(pid, "RssAnon")) / 1024.0;
    state.counters["rss_file_MiB"] = static_cast<double>(statusField(pid, "RssFile")) / 1024.0;
    state.counters["rss_shmem_MiB"] = static_cast<double>(statusField(pid, "RssShmem")) / 1024.0;
    state.counters["threads"] = static_cast<double>(statusField(pid, "Threads"));
    state.counters["devices_listed"] = static_cast<double>(kubelet->devices(resource).size());
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
}
BENCHMARK(BM_IdleAgentRss8Gpus)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace vgpu::deviceplugin::testing

BENCHMARK_MAIN();
