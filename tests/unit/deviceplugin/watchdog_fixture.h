#pragma once
// What the watchdog's tests share: child processes whose per-process accounting the fake NVML
// reports (vgpuFakeNvmlSetProcessUsage, vgpuFakeNvmlSetProcessUtilization), a /proc of the
// test's making that maps them to pods, the Watchdog on the NVIDIA backend (WatchdogTest), and
// the agent itself on it (DevicePluginWatchdog).

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "agent.h"
#include "backend_nodes.h"
#include "cgroup_identity.h"
#include "promtool_check.h"
#include "temp_dir.h"
#include "vgpu/backend_loader.h"
#include "vgpu/codec/inventory.h"
#include "watchdog.h"

extern char** environ;

namespace vgpu::deviceplugin {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

inline constexpr std::uint64_t kMiB = 1048576;
inline const std::string kUuid = "GPU-fa4e0000-0000-4000-8000-00000000aa01";
inline const std::string kPodA = "0b3c7f5e-1d2a-4c8e-9f00-1234567890ab";
inline const std::string kPodB = "77777777-2222-4333-8444-555555555555";
inline const std::string kCid = "3f6b2a9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c";
/// The rule of a container whose limiter always holds it to its share.
inline const ComputeRule kForced{ComputePolicy::kForce};
inline const std::string kSideCid = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";

/// A child process that sleeps until killed; reaped (and killed if still alive) at the end.
class Child {
 public:
  Child() {
    const char* argv[] = {"sleep", "60", nullptr};
    if (posix_spawnp(&pid_, "sleep", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) pid_ = -1;
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }
  /// Waits for it to end; the signal that ended it, 0 if it exited.
  int reap() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  /// Whether it is still running (not ended, not a zombie).
  bool running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }
  void end() {
    ::kill(pid_, SIGKILL);
    reap();
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

inline std::string podCgroup(const std::string& uid, const std::string& cid = kCid) {
  std::string systemdUid = uid;
  for (char& c : systemdUid)
    if (c == '-') c = '_';
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUid +
         ".slice/cri-containerd-" + cid + ".scope\n";
}

/// A killer that only counts its calls.
inline ProcessKiller countingKiller(int& calls) {
  return [&calls](std::uint32_t) {
    ++calls;
    return Status{};
  };
}

class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef VGPU_FAKE_NVML_LIBRARY
    GTEST_SKIP() << "the fake NVML is not built";
#else
    std::ofstream(dir.path() / "machine.conf") << "gpu uuid=" << kUuid << " memory_mib=16384\n";
    ::setenv("VGPU_FAKE_GPU_CONFIG", (dir.path() / "machine.conf").c_str(), 1);
    ::setenv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu.state").c_str(), 1);
    BackendParams params;
    params.name = "nvidia";
    params.settings.options = {{"nvmlLibrary", VGPU_FAKE_NVML_LIBRARY}, {"discovery", "nvml"}};
    auto loaded = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), params);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    backend = std::move(loaded).value();
    auto devices = backend->discovery()->discover();
    ASSERT_TRUE(devices.ok()) << devices.error().message;
    ASSERT_EQ(devices->size(), 1u);
    ASSERT_NE(backend->processReporter(), nullptr);
    // The backend opened this very library: the same instance, the same accounting.
    nvml = dlopen(VGPU_FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nvml, nullptr);
    setUsage = reinterpret_cast<SetUsage>(dlsym(nvml, "vgpuFakeNvmlSetProcessUsage"));
    ASSERT_NE(setUsage, nullptr);
    setUtil = reinterpret_cast<SetUtil>(dlsym(nvml, "vgpuFakeNvmlSetProcessUtilization"));
    ASSERT_NE(setUtil, nullptr);
    fs::create_directories(proc());
#endif
  }
  void TearDown() override {
    if (nvml) dlclose(nvml);
    ::unsetenv("VGPU_FAKE_GPU_CONFIG");
    ::unsetenv("VGPU_FAKE_GPU_STATE");
  }

  fs::path proc() const { return dir.path() / "proc"; }
  /// Puts `child` in `cgroup` in the test's /proc, holding `mib` on the GPU.
  void run(const Child& child, const std::string& cgroup, std::uint64_t mib) {
    fs::create_directories(proc() / std::to_string(child.pid()));
    std::ofstream(proc() / std::to_string(child.pid()) / "cgroup") << cgroup;
    hold(child, mib);
  }
  void hold(const Child& child, std::uint64_t mib) {
    ASSERT_EQ(setUsage(static_cast<int>(child.pid()), 0, mib * kMiB), 0);
  }
  /// NVML reports `child` `percent` busy on the GPU (-1: no sample, unknown).
  void busy(const Child& child, int percent) { ASSERT_EQ(setUtil(static_cast<int>(child.pid()), 0, percent), 0); }

  Watchdog make(WatchdogAction action, ProcessKiller killer = killProcess, PodEvictor evictor = {}) {
    WatchdogOptions o;
    o.procRoot = proc().string();
    o.action = action;
    return Watchdog(o, {{"nvidia", backend->processReporter()}}, std::move(killer), std::move(evictor));
  }
  /// Pod A with 25% of the GPU, always held to it (policy force: what is judged does not
  /// depend on another tenant); `worker` in it holds 500 MiB (within its memory slice).
  /// A watchdog whose kills are only counted.
  Watchdog atAQuarter(const Child& worker, int& kills) {
    slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid, kForced}};
    run(worker, podCgroup(kPodA), 500);
    return make(WatchdogAction::kKillProcess, countingKiller(kills));
  }
  /// Pod A's containers "main" (kCid) and "side" (kSideCid), each with 1024 MiB and 25% of
  /// the GPU; `withIds` false: their ids are not known yet (the pod's status has not said
  /// them). `greedy` in "main" holds 1900 MiB, `modest` in "side" 100: the pod in total is
  /// within its two slices. A watchdog whose kills are only counted.
  Watchdog greedyBesideModest(bool withIds, const Child& greedy, const Child& modest, int& kills) {
    slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, withIds ? kCid : ""},
              {kPodA, "team", "trainer", "side", kUuid, 1024, 25, withIds ? kSideCid : ""}};
    run(greedy, podCgroup(kPodA, kCid), 1900);
    run(modest, podCgroup(kPodA, kSideCid), 100);
    return make(WatchdogAction::kKillProcess, countingKiller(kills));
  }
  ScanResult scan(Watchdog& w) { return w.scan(slices, {{"nvidia", {kUuid}}}); }
  /// Two scans: the one violation the second confirms (none from the first).
  Violation confirmed(Watchdog& w) {
    EXPECT_TRUE(scan(w).confirmed.empty()) << "one reading is not enough";
    auto second = scan(w).confirmed;
    EXPECT_EQ(second.size(), 1u);
    return second.empty() ? Violation{} : second[0];
  }

  testing::TempDir dir;
  std::unique_ptr<Backend> backend;
  void* nvml = nullptr;
  using SetUsage = int (*)(int, int, unsigned long long);
  SetUsage setUsage = nullptr;
  using SetUtil = int (*)(int, int, int);
  SetUtil setUtil = nullptr;
  /// Pod A's container "main" has 1024 MiB of the GPU.
  std::vector<Slice> slices{{kPodA, "team", "trainer", "main", kUuid, 1024, 0, kCid}};
};

#ifdef VGPU_FAKE_NVML_LIBRARY
using testing::kNode;
using testing::PodSpec;
using testing::waitFor;
using testing::grant;

/// The agent on the NVIDIA backend over the fake NVML, scanning when the test says.
class DevicePluginWatchdog : public testing::BackendNode {
 protected:
  void TearDown() override {
    testing::BackendNode::TearDown();
    if (nvml) dlclose(nvml);
    ::unsetenv("VGPU_FAKE_GPU_CONFIG");
    ::unsetenv("VGPU_FAKE_GPU_STATE");
  }
  /// `nvidiaOptions`: more lines under the NVIDIA backend's options (6 spaces in), e.g.
  /// "      corePolicy: force\n".
  void startNode(WatchdogAction action, std::size_t computeWindowScans = 1, const std::string& nvidiaOptions = "") {
    const auto machine =
        dir.write("machine.conf", std::string("gpu uuid=") + kGpu + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
    ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
    ::setenv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu.state").c_str(), 1);
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                                "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                        VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n" + nvidiaOptions);
    fs::create_directories(dir.path() / "proc");
    startKubelet();
    AgentOptions o = manualPasses();
    o.watchdog.interval = std::chrono::hours(1);  // scans only when the test asks
    o.watchdog.computeWindow = o.watchdog.interval * computeWindowScans;
    o.watchdog.action = action;
    o.watchdog.procRoot = (dir.path() / "proc").string();
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices("nvidia.com/gpu", std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
    nvml = dlopen(VGPU_FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nvml, nullptr);
    setUsage = reinterpret_cast<int (*)(int, int, unsigned long long)>(dlsym(nvml, "vgpuFakeNvmlSetProcessUsage"));
    ASSERT_NE(setUsage, nullptr);
    setUtil = reinterpret_cast<int (*)(int, int, int)>(dlsym(nvml, "vgpuFakeNvmlSetProcessUtilization"));
    ASSERT_NE(setUtil, nullptr);
  }
  /// Pod "cuda": container "train" with 1000 MiB and 25% of the GPU; sets `uid`.
  void admitCuda() {
    PodSpec spec{"cuda", {{"train", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 1000}},
                           {grant(kGpu, 0, 1000, 25, 0, "nvidia")}}}};
    uid = createPod(spec);
    ASSERT_TRUE(waitFor([&] { return !agent->tracker().pods().empty(); }));
    auto admitted = kubelet->admit(kubeletPodOf(spec, uid, "nvidia.com/gpu"));
    ASSERT_TRUE(admitted.admitted) << admitted.error;
  }
  void run(const Child& child, const std::string& cgroup, std::uint64_t mib) {
    const auto folder = dir.path() / "proc" / std::to_string(child.pid());
    fs::create_directories(folder);
    std::ofstream(folder / "cgroup") << cgroup;
    ASSERT_EQ(setUsage(static_cast<int>(child.pid()), 0, mib * kMiB), 0);
  }
  std::string nodeInventory() const {
    auto n = api->get("nodes", "", kNode);
    if (!n || !n->at("metadata").as_object().if_contains("annotations")) return "";
    const auto& a = n->at("metadata").as_object().at("annotations").as_object();
    auto it = a.find(keys::nodeDevices("nvidia"));
    return it == a.end() ? "" : std::string(it->value().as_string());
  }
  /// Evictions of default/`pod` the apiserver double accepted. It records a request as it
  /// answers, after applying it: the pod can be gone before its eviction is counted here.
  int evictionsOf(const std::string& pod) const {
    int n = 0;
    for (const auto& r : api->requests())
      if (r.method == "POST" && r.path == "/api/v1/namespaces/default/pods/" + pod + "/eviction" && r.status == 201)
        ++n;
    return n;
  }
  /// The message of the pod's VgpuSliceExceeded event, "" while there is none.
  std::string sliceEvent(const std::string& podUid) const {
    for (const auto& e : api->list("events"))
      if (e.at("reason").as_string() == "VgpuSliceExceeded" && e.at("type").as_string() == "Warning" &&
          e.at("involvedObject").as_object().at("uid").as_string() == podUid)
        return std::string(e.at("message").as_string());
    return "";
  }

  void* nvml = nullptr;
  int (*setUsage)(int, int, unsigned long long) = nullptr;
  int (*setUtil)(int, int, int) = nullptr;
};
#endif

}  // namespace vgpu::deviceplugin
