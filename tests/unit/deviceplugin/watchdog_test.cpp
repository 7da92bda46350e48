// The node agent's watchdog against the NVIDIA backend on the fake NVML, whose per-process
// accounting the tests set (vgpuFakeNvmlSetProcessUsage, and per-process utilization with
// vgpuFakeNvmlSetProcessUtilization) for real child processes they start; pids are mapped to pods through a /proc of the test's making.

#include "watchdog.h"

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

extern char** environ;

namespace vgpu::deviceplugin {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1048576;
const std::string kUuid = "GPU-fa4e0000-0000-4000-8000-00000000aa01";
const std::string kPodA = "0b3c7f5e-1d2a-4c8e-9f00-1234567890ab";
const std::string kPodB = "77777777-2222-4333-8444-555555555555";
const std::string kCid = "3f6b2a9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c";
const std::string kSideCid = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";

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

std::string podCgroup(const std::string& uid, const std::string& cid = kCid) {
  std::string systemdUid = uid;
  for (char& c : systemdUid)
    if (c == '-') c = '_';
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUid +
         ".slice/cri-containerd-" + cid + ".scope\n";
}

/// A killer that only counts its calls.
ProcessKiller countingKiller(int& calls) {
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
  /// Pod A with 25% of the GPU; `worker` in it holds 500 MiB (within its memory slice).
  /// A watchdog whose kills are only counted.
  Watchdog atAQuarter(const Child& worker, int& kills) {
    slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid}};
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

TEST_F(WatchdogTest, KillsAProcessOverItsSliceOnTheSecondScan) {
  // Two scans at the default interval fit in the 2 s the issue allows for catching a bypass.
  EXPECT_LE(2 * WatchdogOptions{}.interval, std::chrono::seconds(2) - std::chrono::milliseconds(500));
  Child bypass;
  run(bypass, podCgroup(kPodA), 3000);  // e.g. a static binary that libvgpu.so never saw
  Watchdog w = make(WatchdogAction::kKillProcess);
  const Violation v = confirmed(w);
  EXPECT_EQ(v.podUid, kPodA);
  EXPECT_EQ(v.podName, "trainer");
  EXPECT_EQ(v.container, "main");
  EXPECT_EQ(v.deviceId, kUuid);
  EXPECT_EQ(v.usedBytes, 3000 * kMiB);
  EXPECT_EQ(v.allowedBytes, (1024 + WatchdogOptions{}.toleranceMiB) * kMiB);
  EXPECT_THAT(w.enforce(v), HasSubstr("killed pid " + std::to_string(bypass.pid())));
  EXPECT_EQ(bypass.reap(), SIGKILL);
}

TEST_F(WatchdogTest, ReportModeOnlyReports) {
  Child bypass;
  run(bypass, podCgroup(kPodA), 3000);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kReport, countingKiller(kills));
  EXPECT_THAT(w.enforce(confirmed(w)), HasSubstr("reported only"));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << "said again only after reportRepeat";
  EXPECT_EQ(kills, 0);
  EXPECT_TRUE(bypass.running());
}

TEST_F(WatchdogTest, EvictModeAsksOncePerPod) {
  Child bypass;
  run(bypass, podCgroup(kPodA), 3000);
  std::vector<std::string> evicted;
  Watchdog w = make(WatchdogAction::kEvictPod, killProcess,
                    [&](const std::string& ns, const std::string& name) { evicted.push_back(ns + "/" + name); });
  for (int i = 0; i < 4; ++i)
    for (const auto& v : scan(w).confirmed) w.enforce(v);
  EXPECT_EQ(evicted, std::vector<std::string>{"team/trainer"});
  EXPECT_TRUE(bypass.running());
}

TEST_F(WatchdogTest, HonestProcessesStartingGrowingAndExitingAreNeverFlagged) {
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  Child first, second;
  run(first, podCgroup(kPodA), 0);
  run(second, podCgroup(kPodA), 0);
  // The two share the slice and grow to it (plus a context's worth the limiter did not see).
  for (std::uint64_t step = 0; step <= 8; ++step) {
    hold(first, step * 64);
    hold(second, step * 64 + 60);
    EXPECT_TRUE(scan(w).confirmed.empty()) << "step " << step;
  }
  // The first exits while a third starts: for one scan the old memory is not freed yet.
  Child third;
  run(third, podCgroup(kPodA), 500);
  EXPECT_TRUE(scan(w).confirmed.empty());
  first.end();  // the driver frees what it held
  EXPECT_TRUE(scan(w).confirmed.empty());
  hold(second, 100);
  hold(third, 900);
  EXPECT_TRUE(scan(w).confirmed.empty());
  hold(third, 1200);  // over again for one scan only: a new streak, not a continued one
  EXPECT_TRUE(scan(w).confirmed.empty());
  hold(third, 400);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(scan(w).confirmed.empty());
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogTest, ProcessesOutsideOurPodsAreForeignAndNeverViolations) {
  Child host, otherPod, ours;
  run(host, "0::/system.slice/render.service\n", 500);
  run(otherPod, podCgroup(kPodB), 2000);  // a pod vgpu gave no device to
  run(ours, podCgroup(kPodA), 1000);
  Watchdog w = make(WatchdogAction::kKillProcess);
  scan(w);
  auto r = scan(w);
  EXPECT_TRUE(r.confirmed.empty());
  // 2500 MiB, published in steps of 64 MiB (rounded up).
  EXPECT_EQ(r.foreignMiB["nvidia"][kUuid], 2560u);
  otherPod.end();
  host.end();
  EXPECT_EQ(scan(w).foreignMiB["nvidia"][kUuid], 0u);
}

TEST_F(WatchdogTest, APodUsingADeviceItWasNotGivenIsAViolation) {
  // A container that set NVIDIA_VISIBLE_DEVICES itself: its pod holds no slice of this GPU.
  slices = {{kPodA, "team", "trainer", "main", "GPU-some-other-device", 1024, 0, kCid}};
  Child sneaky;
  run(sneaky, podCgroup(kPodA), 100);
  Watchdog w = make(WatchdogAction::kKillProcess);
  const Violation v = confirmed(w);
  EXPECT_EQ(v.allowedBytes, 0u);
  EXPECT_EQ(v.container, kCid.substr(0, 12));
}

TEST_F(WatchdogTest, DoesNotKillAPidThatLeftThePodSinceTheScan) {
  Child bypass;
  run(bypass, podCgroup(kPodA), 3000);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  const Violation v = confirmed(w);
  // The pid now names a process of another pod (reused).
  std::ofstream(proc() / std::to_string(bypass.pid()) / "cgroup") << podCgroup(kPodB);
  EXPECT_THAT(w.enforce(v), HasSubstr("no longer in the pod"));
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogTest, SaysOnceThatItCannotSeeTheProcesses) {
  Child elsewhere;
  hold(elsewhere, 100);  // listed by NVML, but not in the test's /proc
  Watchdog w = make(WatchdogAction::kKillProcess);
  auto first = scan(w);
  ASSERT_EQ(first.notices.size(), 1u);
  EXPECT_THAT(first.notices[0], HasSubstr("hostPID"));
  EXPECT_TRUE(scan(w).notices.empty());
}

TEST_F(WatchdogTest, KillsAPodKeepingTheDeviceBusierThanItsComputeShareWithinTheWindow) {
  // A sidecar refilling the limiter's credit in the shared region: 98% busy at a 25% share,
  // within its memory slice.
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid}};
  Child sidecar;
  run(sidecar, podCgroup(kPodA), 500);
  busy(sidecar, 98);
  Watchdog w = make(WatchdogAction::kKillProcess);
  const std::size_t window = w.options().computeWindowScans();
  EXPECT_EQ(window, 4u) << "2 s of scans every 500 ms";
  for (std::size_t i = 1; i < window; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << "scan " << i << " of the window";
  const auto r = scan(w).confirmed;
  ASSERT_EQ(r.size(), 1u) << "caught when the window is full";
  const Violation& v = r[0];
  EXPECT_EQ(v.resource, WatchdogResource::kCompute);
  EXPECT_EQ(v.podUid, kPodA);
  EXPECT_EQ(v.container, "main");
  EXPECT_EQ(v.usedPercent, 98u);
  EXPECT_EQ(v.allowedPercent, 25u + WatchdogOptions{}.computeTolerancePercent);
  EXPECT_THAT(w.enforce(v), HasSubstr("killed pid " + std::to_string(sidecar.pid()) + " (98% busy)"));
  EXPECT_EQ(sidecar.reap(), SIGKILL);
}

TEST_F(WatchdogTest, HonestBurstsAboveTheComputeShareAreNeverFlagged) {
  Child worker;
  int kills = 0;
  Watchdog w = atAQuarter(worker, kills);
  // The limiter lets a burst through, then throttles: one scan at 90%, then seven at 15%
  // (24% on average), over and over.
  for (int scanNo = 0; scanNo < 40; ++scanNo) {
    busy(worker, scanNo % 8 == 3 ? 90 : 15);
    EXPECT_TRUE(scan(w).confirmed.empty()) << "scan " << scanNo;
  }
  EXPECT_EQ(kills, 0);
  EXPECT_TRUE(worker.running());
}

TEST_F(WatchdogTest, AWindowWithUnknownUtilizationIsNeverFlagged) {
  Child worker;
  int kills = 0;
  Watchdog w = atAQuarter(worker, kills);
  const std::size_t window = w.options().computeWindowScans();
  // NVML has no sample for the process (-1 through the ABI): no evidence either way, so a
  // window is only of scans that had one.
  for (int round = 0; round < 3; ++round) {
    busy(worker, 98);
    for (std::size_t i = 1; i < window; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << round << "/" << i;
    busy(worker, -1);
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << round << ": unknown";
  }
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogTest, APodWithoutAComputeLimitIsNeverFlaggedForCompute) {
  Child unset, full;
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 0, kCid}, {kPodB, "team", "other", "main", kUuid, 1024, 100, kCid}};
  run(unset, podCgroup(kPodA), 500);
  run(full, podCgroup(kPodB), 500);
  busy(unset, 100);
  busy(full, 100);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  for (std::size_t i = 0; i < 3 * w.options().computeWindowScans(); ++i) EXPECT_TRUE(scan(w).confirmed.empty());
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogTest, CatchesAContainerOverItsSliceWhileASiblingIsUnderByAsMuch) {
  // The pod in total is within its two slices (1900 + 100 < 2048 + tolerance): only a per
  // container check sees "main" taking what "side" leaves.
  Child greedy, modest;
  int kills = 0;
  Watchdog w = greedyBesideModest(true, greedy, modest, kills);
  const Violation v = confirmed(w);
  EXPECT_EQ(v.resource, WatchdogResource::kMemory);
  EXPECT_EQ(v.container, "main");
  EXPECT_EQ(v.usedBytes, 1900 * kMiB);
  EXPECT_EQ(v.allowedBytes, (1024 + WatchdogOptions{}.toleranceMiB) * kMiB);
  ASSERT_EQ(v.processes.size(), 1u) << "the sibling's process is not part of it";
  EXPECT_EQ(v.processes[0].first, greedy.pid());
  EXPECT_THAT(w.enforce(v), HasSubstr("killed pid " + std::to_string(greedy.pid())));
  EXPECT_EQ(kills, 1);
}

TEST_F(WatchdogTest, CatchesAContainerBusierThanItsComputeShareWhileASiblingIsIdle) {
  // 45% for the pod is within 2 x 25% + 10; 45% for "main" is not within 25% + 10.
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid},
            {kPodA, "team", "trainer", "side", kUuid, 1024, 25, kSideCid}};
  Child busyOne, idle;
  run(busyOne, podCgroup(kPodA, kCid), 500);
  run(idle, podCgroup(kPodA, kSideCid), 500);
  busy(busyOne, 45);
  busy(idle, 0);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  const std::size_t window = w.options().computeWindowScans();
  for (std::size_t i = 1; i < window; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << "scan " << i;
  const auto r = scan(w).confirmed;
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].resource, WatchdogResource::kCompute);
  EXPECT_EQ(r[0].container, "main");
  EXPECT_EQ(r[0].usedPercent, 45u);
  EXPECT_EQ(r[0].allowedPercent, 25u + WatchdogOptions{}.computeTolerancePercent);
}

TEST_F(WatchdogTest, HonestMultiContainerPodsAreNeverFlagged) {
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid},
            {kPodA, "team", "trainer", "side", kUuid, 1024, 25, kSideCid}};
  Child a1, a2, b;
  run(a1, podCgroup(kPodA, kCid), 500);
  run(a2, podCgroup(kPodA, kCid), 500);  // two processes of one container share its slice
  run(b, podCgroup(kPodA, kSideCid), 1000);
  busy(a1, 15);
  busy(a2, 15);
  busy(b, 30);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  for (std::size_t i = 0; i < 3 * w.options().computeWindowScans(); ++i)
    EXPECT_TRUE(scan(w).confirmed.empty()) << "scan " << i;
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogTest, ContainersWhoseIdsAreNotKnownYetAreCheckedPerPod) {
  Child greedy, modest;
  int kills = 0;
  Watchdog w = greedyBesideModest(false, greedy, modest, kills);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(scan(w).confirmed.empty()) << "the pod is within its slices";
  hold(greedy, 3000);
  const Violation v = confirmed(w);
  EXPECT_EQ(v.usedBytes, 3100 * kMiB) << "the pod's total";
  EXPECT_EQ(v.allowedBytes, (2048 + WatchdogOptions{}.toleranceMiB) * kMiB);
  EXPECT_EQ(v.processes.size(), 2u);
}

TEST_F(WatchdogTest, AContainerWithoutASliceOnTheDeviceIsAllowedNothingThereAndSaidOnce) {
  // "side" has no slice of this GPU; the pod's status says its id. "main" is within its slice
  // with room to spare, which "side" may not use.
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid}};
  Child honest, sneaky;
  run(honest, podCgroup(kPodA, kCid), 200);
  run(sneaky, podCgroup(kPodA, kSideCid), 300);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kKillProcess, countingKiller(kills));
  const PodContainerIds ids{{kPodA, {kCid, kSideCid}}};
  EXPECT_TRUE(w.scan(slices, {{"nvidia", {kUuid}}}, ids).confirmed.empty());
  const auto r = w.scan(slices, {{"nvidia", {kUuid}}}, ids).confirmed;
  ASSERT_EQ(r.size(), 1u) << "one violation, not one per container and one for the pod";
  EXPECT_EQ(r[0].allowedBytes, 0u);
  EXPECT_EQ(r[0].usedBytes, 300 * kMiB);
  EXPECT_EQ(r[0].container, kSideCid.substr(0, 12));
  ASSERT_EQ(r[0].processes.size(), 1u);
  EXPECT_EQ(r[0].processes[0].first, sneaky.pid());
}

TEST(Watchdog, ABackendWithoutTheProcessSlotIsSaidUnsupportedOnceAndLeftAlone) {
  // The sim backend fills no device_processes slot, as a backend built before ABI 1.3.
  BackendParams params;
  params.name = "sim";
  auto sim = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  ASSERT_EQ((*sim)->processReporter(), nullptr);
  Watchdog w({}, {{"sim", (*sim)->processReporter()}});
  auto first = w.scan({}, {{"sim", {"sim-0"}}});
  ASSERT_EQ(first.notices.size(), 1u);
  EXPECT_THAT(first.notices[0], HasSubstr("not supported by backend sim"));
  EXPECT_TRUE(first.foreignMiB.empty()) << "nothing is claimed about its devices";
  EXPECT_TRUE(w.scan({}, {{"sim", {"sim-0"}}}).notices.empty());
}

TEST(Watchdog, TheEvictionBodyIsAPolicyV1Eviction) {
  auto body = boost::json::parse(evictionBody("team", "trainer")).as_object();
  EXPECT_EQ(body.at("apiVersion"), "policy/v1");
  EXPECT_EQ(body.at("kind"), "Eviction");
  EXPECT_EQ(body.at("metadata").at("name"), "trainer");
  EXPECT_EQ(body.at("metadata").at("namespace"), "team");
}

TEST(Watchdog, OptionsDefaultToKillAndRefuseAnUnknownAction) {
  auto env = [](const std::string&) { return std::optional<std::string>(); };
  const char* plain[] = {"agent", "--node-name", "n1"};
  auto d = parseAgentOptions(3, plain, env);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->options.watchdog.action, WatchdogAction::kKillProcess);
  EXPECT_LE(d->options.watchdog.interval, std::chrono::seconds(1));
  const char* set[] = {"agent", "--node-name", "n1", "--watchdog-action", "report", "--watchdog-interval-ms", "250",
                       "--watchdog-tolerance-mib", "32", "--watchdog-proc-root", "/host/proc",
                       "--watchdog-compute-tolerance", "5", "--watchdog-compute-window-ms", "2000"};
  auto s = parseAgentOptions(15, set, env);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->options.watchdog.action, WatchdogAction::kReport);
  EXPECT_EQ(s->options.watchdog.interval, std::chrono::milliseconds(250));
  EXPECT_EQ(s->options.watchdog.toleranceMiB, 32u);
  EXPECT_EQ(s->options.watchdog.procRoot, "/host/proc");
  EXPECT_EQ(s->options.watchdog.computeTolerancePercent, 5u);
  EXPECT_EQ(s->options.watchdog.computeWindow, std::chrono::milliseconds(2000));
  EXPECT_EQ(s->options.watchdog.computeWindowScans(), 8u);
  EXPECT_EQ(d->options.watchdog.computeTolerancePercent, 10u);
  const char* overdone[] = {"agent", "--node-name", "n1", "--watchdog-compute-tolerance", "150"};
  auto o = parseAgentOptions(5, overdone, env);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.error().message, HasSubstr("--watchdog-compute-tolerance must be 0..100"));
  const char* bad[] = {"agent", "--node-name", "n1", "--watchdog-action", "shoot"};
  auto b = parseAgentOptions(5, bad, env);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("--watchdog-action: unknown watchdog action \"shoot\""));
}

struct CgroupCase {
  const char* description;
  const char* text;
  std::optional<CgroupIdentity> expected;
};

TEST(CgroupIdentity, FindsThePodAndContainerInEveryLayout) {
  const std::string uid = "0b3c7f5e-1d2a-4c8e-9f00-1234567890ab";
  const std::string id = "3f6b2a9c0d1e";
  const CgroupCase cases[] = {
      {"v2, systemd driver, containerd",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b3c7f5e_1d2a_4c8e_9f00_1234567890ab.slice/"
       "cri-containerd-3f6b2a9c0d1e.scope\n",
       CgroupIdentity{uid, id}},
      {"v2, cgroupfs driver, guaranteed QoS", "0::/kubepods/pod0b3c7f5e-1d2a-4c8e-9f00-1234567890ab/3f6b2a9c0d1e\n",
       CgroupIdentity{uid, id}},
      {"v2 seen through a cgroup namespace",
       "0::/../../kubepods-besteffort-pod0b3c7f5e_1d2a_4c8e_9f00_1234567890ab.slice/crio-3f6b2a9c0d1e.scope\n",
       CgroupIdentity{uid, id}},
      {"v1, cgroupfs driver, docker",
       "12:pids:/kubepods/burstable/pod0b3c7f5e-1d2a-4c8e-9f00-1234567890ab/3f6b2a9c0d1e\n"
       "11:memory:/kubepods/burstable/pod0b3c7f5e-1d2a-4c8e-9f00-1234567890ab/3f6b2a9c0d1e\n",
       CgroupIdentity{uid, id}},
      {"v1, systemd driver, a named hierarchy first",
       "13:name=systemd:/\n"
       "4:memory:/kubepods.slice/kubepods-pod0b3c7f5e_1d2a_4c8e_9f00_1234567890ab.slice/docker-3f6b2a9c0d1e.scope\n",
       CgroupIdentity{uid, id}},
      {"the pod's own cgroup (its sandbox's processes)",
       "0::/kubepods/besteffort/pod0b3c7f5e-1d2a-4c8e-9f00-1234567890ab\n", CgroupIdentity{uid, ""}},
      {"a host service", "0::/system.slice/containerd.service\n", std::nullopt},
      {"a user's session", "0::/user.slice/user-1000.slice/session-3.scope\n", std::nullopt},
      {"kubepods itself", "0::/kubepods.slice\n", std::nullopt},
      {"a pod-like name that is no UID", "0::/kubepods/podcast/3f6b2a9c0d1e\n", std::nullopt},
      {"empty", "", std::nullopt},
      {"junk", "not a cgroup file", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(parseCgroupIdentity(c.text), c.expected) << c.description;
}

TEST(CgroupIdentity, TheRuntimeIdOfAPodStatusContainerIdIsWhatFollowsTheScheme) {
  EXPECT_EQ(runtimeContainerId("containerd://3f6b2a9c0d1e"), "3f6b2a9c0d1e");
  EXPECT_EQ(runtimeContainerId("cri-o://3f6b2a9c0d1e"), "3f6b2a9c0d1e");
  EXPECT_EQ(runtimeContainerId("docker://3f6b2a9c0d1e"), "3f6b2a9c0d1e");
  EXPECT_EQ(runtimeContainerId("3f6b2a9c0d1e"), "") << "no scheme: not a containerID";
  EXPECT_EQ(runtimeContainerId(""), "");
}

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
  void startNode(WatchdogAction action, std::size_t computeWindowScans = 1) {
    const auto machine =
        dir.write("machine.conf", std::string("gpu uuid=") + kGpu + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
    ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
    ::setenv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu.state").c_str(), 1);
    dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                                "    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                        VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n");
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

TEST_F(DevicePluginWatchdog, ReportsAPodOverItsSliceAndPublishesForeignMemoryForTheScheduler) {
  startNode(WatchdogAction::kReport);
  admitCuda();

  Child bypass, host;
  run(bypass, podCgroup(uid), 3000);
  run(host, "0::/system.slice/display-manager.service\n", 200);
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(agent->watchdogScanNow());

  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("container train holds 3000 MiB on nvidia device " + std::string(kGpu)));
  EXPECT_THAT(message, HasSubstr("reported only"));
  EXPECT_TRUE(bypass.running());
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(vgpu::testing::promtoolProblems(text), "");
  EXPECT_THAT(text, HasSubstr("vgpu_watchdog_violations_total{node=\"" + std::string(kNode) +
                              "\",pod=\"cuda\",namespace=\"default\",container=\"train\",device=\"" + kGpu +
                              "\",resource=\"memory\",action=\"report\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("vgpu_device_foreign_memory_bytes{backend=\"nvidia\",device_id=\"" + std::string(kGpu)));

  // The host process's 200 MiB, in steps of 64: what the scheduler must not offer.
  ASSERT_TRUE(waitFor([&] { return nodeInventory().find("foreignUsedMiB") != std::string::npos; }));
  auto inventory = decodeInventory(nodeInventory(), "nvidia");
  ASSERT_TRUE(inventory.ok()) << inventory.error().message;
  EXPECT_EQ((*inventory)[0].foreignUsedMiB, 256u);
}

TEST_F(DevicePluginWatchdog, EvictsAPodOverItsSliceThroughTheEvictionApi) {
  startNode(WatchdogAction::kEvictPod);
  admitCuda();
  Child bypass;
  run(bypass, podCgroup(uid), 3000);
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(waitFor([&] { return !api->get("pods", "default", "cuda"); }));
  int evictions = 0;
  for (const auto& r : api->requests())
    if (r.method == "POST" && r.path == "/api/v1/namespaces/default/pods/cuda/eviction" && r.status == 201) ++evictions;
  EXPECT_EQ(evictions, 1);
  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("the pod is being evicted"));
}

TEST_F(DevicePluginWatchdog, KillsASidecarKeepingTheDeviceBusierThanThePodsComputeShare) {
  startNode(WatchdogAction::kKillProcess, 3);
  admitCuda();
  Child sidecar;
  run(sidecar, podCgroup(uid), 200);  // within the memory slice
  ASSERT_EQ(setUtil(static_cast<int>(sidecar.pid()), 0, 98), 0);
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(agent->watchdogScanNow());
  EXPECT_TRUE(sidecar.running()) << "the window is three scans";
  ASSERT_TRUE(agent->watchdogScanNow());
  EXPECT_EQ(sidecar.reap(), SIGKILL);
  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("container train keeps nvidia device " + std::string(kGpu) + " 98% busy"));
  EXPECT_THAT(message, HasSubstr("(35% with the watchdog's tolerance of 10 points)"));
  EXPECT_THAT(message, HasSubstr("killed pid " + std::to_string(sidecar.pid())));
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(vgpu::testing::promtoolProblems(text), "");
  EXPECT_THAT(text, HasSubstr("vgpu_watchdog_violations_total{node=\"" + std::string(kNode) +
                              "\",pod=\"cuda\",namespace=\"default\",container=\"train\",device=\"" + kGpu +
                              "\",resource=\"compute\",action=\"kill-process\"} 1\n"));
}

TEST_F(DevicePluginWatchdog, ChecksEachContainerWithItsOwnSliceOnceThePodStatusSaysTheirIds) {
  startNode(WatchdogAction::kReport);
  PodSpec spec{"duo", {{"train", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 1000}},
                        {grant(kGpu, 0, 1000, 25, 0, "nvidia")}},
                       {"serve", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 1000}},
                        {grant(kGpu, 0, 1000, 25, 1, "nvidia")}}}};
  uid = createPod(spec);
  ASSERT_TRUE(waitFor([&] { return !agent->tracker().pods().empty(); }));
  auto admitted = kubelet->admit(kubeletPodOf(spec, uid, "nvidia.com/gpu"));
  ASSERT_TRUE(admitted.admitted) << admitted.error;
  boost::json::array statuses{
      boost::json::object{{"name", "train"}, {"containerID", "containerd://" + kCid}},
      boost::json::object{{"name", "serve"}, {"containerID", "cri-o://" + kSideCid}}};
  ASSERT_TRUE(api->patch("pods", "default", "duo", {{"status", {{"containerStatuses", statuses}}}}).ok());
  ASSERT_TRUE(waitFor([&] {
    auto pods = agent->tracker().pods();
    return pods.size() == 1 && pods[0].containerIds.size() == 2;
  }));
  EXPECT_EQ(agent->tracker().pods()[0].containerIds.at("serve"), kSideCid);

  // 1800 + 100 MiB is within the pod's 2000 MiB; "train" alone is over its 1000.
  Child greedy, modest;
  run(greedy, podCgroup(uid, kCid), 1800);
  run(modest, podCgroup(uid, kSideCid), 100);
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(agent->watchdogScanNow());
  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("container train holds 1800 MiB on nvidia device " + std::string(kGpu)));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin
