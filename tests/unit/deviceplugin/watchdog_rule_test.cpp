// The watchdog judges compute by the limiter's own rule (deviceplugin/compute_rule.h): an honest
// tenant the limiter lets run unthrottled is never flagged, and a bypass is caught wherever the
// limiter would have held it to its share. On the NVIDIA backend over the fake NVML, with real
// child processes (watchdog_fixture.h).

#include "watchdog_fixture.h"

namespace vgpu::deviceplugin {
namespace {

/// Pod A ("trainer", container "main") has 25% of the GPU under `rule`; pod B ("other") is
/// another tenant on the same GPU with 25% under policy default.
class WatchdogComputeRule : public WatchdogTest {
 protected:
  Watchdog quarterFor(const ComputeRule& rule, int& kills) {
    slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid, rule},
              {kPodB, "team", "other", "main", kUuid, 1024, 25, kSideCid, {}}};
    return make(WatchdogAction::kKillProcess, countingKiller(kills));
  }
  /// Scans `n` times; the violations confirmed, all scans together.
  std::vector<Violation> scans(Watchdog& w, std::size_t n) {
    std::vector<Violation> out;
    for (std::size_t i = 0; i < n; ++i)
      for (auto& v : scan(w).confirmed) out.push_back(std::move(v));
    return out;
  }
};

TEST_F(WatchdogComputeRule, AnHonestTenantAloneOnItsGpuAboveItsShareIsNeverFlagged) {
  // The case: 25% share, policy default (the chart's), alone on the GPU; the limiter
  // does not throttle it (HAMi's meaning), so 74% busy is what it is allowed.
  Child worker;
  int kills = 0;
  Watchdog w = quarterFor({}, kills);
  run(worker, podCgroup(kPodA), 500);
  busy(worker, 74);
  EXPECT_TRUE(scans(w, 5 * w.options().computeWindowScans()).empty());
  EXPECT_EQ(kills, 0);
  EXPECT_TRUE(worker.running());
}

TEST_F(WatchdogComputeRule, ATenantWithPolicyForceAloneAboveItsShareIsCaught) {
  Child bypass;
  int kills = 0;
  Watchdog w = quarterFor(kForced, kills);
  run(bypass, podCgroup(kPodA), 500);
  busy(bypass, 74);
  const auto found = scans(w, w.options().computeWindowScans());
  ASSERT_EQ(found.size(), 1u) << "the share always applies: caught when the window is full";
  EXPECT_EQ(found[0].computePolicy, ComputePolicy::kForce);
  EXPECT_EQ(found[0].allowedPercent, 25u + WatchdogOptions{}.computeTolerancePercent);
}

TEST_F(WatchdogComputeRule, ASidestepUnderContentionIsCaught) {
  // Policy default, and another tenant (pod B) runs kernels on the GPU throughout: the limiter
  // would hold pod A to 25%; a bypass keeps it 98% busy.
  Child bypass, neighbour;
  int kills = 0;
  Watchdog w = quarterFor({}, kills);
  run(bypass, podCgroup(kPodA), 500);
  run(neighbour, podCgroup(kPodB, kSideCid), 500);
  busy(bypass, 98);
  busy(neighbour, 2);
  const std::size_t window = w.options().computeWindowScans();
  // The first scan of contention allows the whole device (the limiter is engaging); from the
  // second on, the share: (100 + 3 x 25) / 4 + 10 = 53 < 98 once the window is full.
  EXPECT_TRUE(scans(w, window - 1).empty());
  const auto found = scans(w, 1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].podUid, kPodA);
  EXPECT_EQ(found[0].usedPercent, 98u);
  EXPECT_EQ(found[0].sharePercent, 25u);
  EXPECT_EQ(found[0].allowedPercent, (100u + 3 * 25u) / 4 + WatchdogOptions{}.computeTolerancePercent);
  EXPECT_EQ(found[0].computePolicy, ComputePolicy::kDefault);
  EXPECT_EQ(found[0].processes, (std::vector<std::pair<std::uint32_t, std::uint64_t>>{{bypass.pid(), 98}}))
      << "the neighbour's process is not part of it";
  // A whole window under contention: the share itself.
  const auto again = scans(w, window);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].allowedPercent, 25u + WatchdogOptions{}.computeTolerancePercent);
  EXPECT_EQ(kills, 0) << "scan() only finds; enforce() acts";
}

TEST_F(WatchdogComputeRule, ContentionFromAHostProcessOrANeighbourBusyEveryOtherScanCounts) {
  // Tenants the agent did not place are tenants for the limiter too; one busy in every other
  // scan only is still within the second the limiter remembers it for.
  Child bypass, host;
  int kills = 0;
  Watchdog w = quarterFor({}, kills);
  run(bypass, podCgroup(kPodA), 500);
  run(host, "0::/system.slice/render.service\n", 300);
  busy(bypass, 98);
  std::vector<Violation> found;
  for (std::size_t i = 0; i < 2 * w.options().computeWindowScans() && found.empty(); ++i) {
    busy(host, i % 2 == 0 ? 30 : 0);
    found = scan(w).confirmed;
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].podUid, kPodA);
}

TEST_F(WatchdogComputeRule, AnHonestTenantThrottledOnceAnotherStartsIsNeverFlagged) {
  // Alone at 90% (unthrottled, policy default) until pod B starts kernels; the limiter then
  // holds it to its share, which its utilization shows one scan later. Then B stops, and it
  // runs unthrottled again once the limiter no longer remembers B (a second, one scan).
  // Over and over.
  Child worker, neighbour;
  int kills = 0;
  Watchdog w = quarterFor({}, kills);
  run(worker, podCgroup(kPodA), 500);
  run(neighbour, podCgroup(kPodB, kSideCid), 500);
  busy(neighbour, 0);
  for (int round = 0; round < 3; ++round) {
    busy(worker, 90);
    EXPECT_TRUE(scans(w, 6).empty()) << round << ": alone";
    busy(neighbour, 20);  // honest too: within its own share
    EXPECT_TRUE(scans(w, 1).empty()) << round << ": the scan B starts in, before the limiter engaged";
    busy(worker, 27);
    EXPECT_TRUE(scans(w, 8).empty()) << round << ": throttled";
    busy(neighbour, 0);
    EXPECT_TRUE(scans(w, 1).empty()) << round << ": B stopped; the limiter still remembers it";
  }
  EXPECT_EQ(kills, 0);
}

TEST_F(WatchdogComputeRule, PolicyDisableIsNeverFlaggedEvenUnderContention) {
  Child worker, neighbour;
  int kills = 0;
  Watchdog w = quarterFor({ComputePolicy::kDisable}, kills);
  run(worker, podCgroup(kPodA), 500);
  run(neighbour, podCgroup(kPodB, kSideCid), 500);
  busy(worker, 98);
  busy(neighbour, 20);
  const auto found = scans(w, 4 * w.options().computeWindowScans());
  EXPECT_TRUE(std::none_of(found.begin(), found.end(), [](const Violation& v) { return v.podUid == kPodA; }));
}

TEST_F(WatchdogComputeRule, AHighPriorityTenantWithABoardIsSharedOnlyByAnotherHighPriorityOne) {
  // Its limiter counts only high-priority tenants (the activity board); low-priority ones
  // are held back while it runs.
  const ComputeRule high{ComputePolicy::kDefault, true, true};
  Child worker, low;
  int kills = 0;
  Watchdog w = quarterFor(high, kills);
  run(worker, podCgroup(kPodA), 500);
  run(low, podCgroup(kPodB, kSideCid), 500);
  busy(worker, 90);
  busy(low, 5);
  EXPECT_TRUE(scans(w, 3 * w.options().computeWindowScans()).empty()) << "a low-priority neighbour does not count";
  slices[1].computeRule = high;  // now pod B is a high-priority tenant too
  const auto found = scans(w, 2 * w.options().computeWindowScans());
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].podUid, kPodA);
}

TEST(WatchdogComputeRuleFile, IsReadFromTheLimitsFileInTheHandoutFolder) {
  testing::TempDir dir;
  const auto folder = dir.path() / "nvidia.com_gpu-0123456789abcdef";
  fs::create_directories(folder / "region");
  EXPECT_EQ(readComputeRule(folder), ComputeRule{}) << "no limits file: the limiter's default";
  std::ofstream(folder / "region" / "limits.env") << "GPU_CORE_UTILIZATION_POLICY=disable\n";
  EXPECT_EQ(readComputeRule(folder), ComputeRule{}) << "only the top of the folder, which the container cannot write";
  std::ofstream(folder / "notes") << "unrelated\n";
  std::ofstream(folder / "limits.env") << "# Limits of pod default/train-0, written by the vgpu nvidia backend.\n"
                                          "CUDA_DEVICE_SM_LIMIT_0=25\n"
                                          "GPU_CORE_UTILIZATION_POLICY=force\n"
                                          "CUDA_TASK_PRIORITY=0\n"
                                          "VGPU_ACTIVITY_BOARD=/run/vgpu/board\n";
  const ComputeRule rule = readComputeRule(folder);
  EXPECT_EQ(rule.policy, ComputePolicy::kForce);
  EXPECT_TRUE(rule.othersMustBeHighPriority());
  fs::create_symlink(folder / "limits.env", folder / "a-link");
  EXPECT_EQ(readComputeRule(folder), rule) << "a link is not followed";
}

TEST(WatchdogComputeRuleFile, TheCacheReadsAFileAgainOnlyOnceItIsWrittenAgain) {
  testing::TempDir dir;
  const auto folder = dir.path() / "nvidia.com_gpu-0123456789abcdef";
  fs::create_directories(folder);
  ComputeRuleCache cache;
  EXPECT_EQ(cache.of("h1", folder), ComputeRule{}) << "not written yet";
  std::ofstream(folder / "limits.env") << "GPU_CORE_UTILIZATION_POLICY=force\n";
  EXPECT_EQ(cache.of("h1", folder).policy, ComputePolicy::kForce) << "looked at again";
  // A later holder of the same handout id: the backend writes the file anew (a new file,
  // renamed over the old one).
  std::ofstream(folder / "limits.new") << "GPU_CORE_UTILIZATION_POLICY=disable\nCUDA_TASK_PRIORITY=0\n";
  fs::last_write_time(folder / "limits.new", fs::last_write_time(folder / "limits.env") + std::chrono::seconds(1));
  fs::rename(folder / "limits.new", folder / "limits.env");
  EXPECT_EQ(cache.of("h1", folder), (ComputeRule{ComputePolicy::kDisable, true, false}));
  cache.keepOnly({});
  fs::remove_all(folder);
  EXPECT_EQ(cache.of("h1", folder), ComputeRule{}) << "forgotten, and the folder is gone";
}

TEST(WatchdogComputeRuleFile, ParsesThePolicyAndPriorityAsTheLimiterDoes) {
  struct Case {
    const char* description;
    const char* text;
    ComputeRule expected;
  };
  const Case cases[] = {
      {"HAMi's default", "GPU_CORE_UTILIZATION_POLICY=default\n", {}},
      {"force, any case", "GPU_CORE_UTILIZATION_POLICY= FORCE \n", {ComputePolicy::kForce}},
      {"disable", "GPU_CORE_UTILIZATION_POLICY=disable\n", {ComputePolicy::kDisable}},
      {"an unknown word reads as the default", "GPU_CORE_UTILIZATION_POLICY=max\n", {}},
      {"priority 0 is high", "CUDA_TASK_PRIORITY=0\n", {ComputePolicy::kDefault, true, false}},
      {"priority 1 is low", "CUDA_TASK_PRIORITY=1\n", {}},
      {"a priority that is no integer is low", "CUDA_TASK_PRIORITY=zero\n", {}},
      {"a board", "VGPU_ACTIVITY_BOARD=/run/vgpu/board\n", {ComputePolicy::kDefault, false, true}},
      {"comments and blank lines", "# GPU_CORE_UTILIZATION_POLICY=force\n\n", {}},
  };
  for (const auto& c : cases) EXPECT_EQ(parseComputeRule(c.text), c.expected) << c.description;
  EXPECT_TRUE(isLimitsFile("CUDA_DEVICE_SM_LIMIT=25\nGPU_CORE_UTILIZATION_POLICY=default\n"));
  EXPECT_FALSE(isLimitsFile("# GPU_CORE_UTILIZATION_POLICY=default\n"));
}

#ifdef VGPU_FAKE_NVML_LIBRARY
TEST_F(DevicePluginWatchdog, NeverKillsAnHonestTenantAloneOnItsGpuAboveItsShare) {
  // The measurement: the chart's defaults (kill-process, policy default), a 25% share,
  // alone on the GPU, 74% busy; on main it was SIGKILLed once the window was full.
  startNode(WatchdogAction::kKillProcess, 4);
  admitCuda();
  Child worker;
  run(worker, podCgroup(uid), 200);
  ASSERT_EQ(setUtil(static_cast<int>(worker.pid()), 0, 74), 0);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(agent->watchdogScanNow());
  EXPECT_TRUE(worker.running());
  EXPECT_EQ(sliceEvent(uid), "");
}

TEST_F(DevicePluginWatchdog, ReadsPolicyForceFromTheLimitsFileAndHoldsALoneTenantToItsShare) {
  startNode(WatchdogAction::kKillProcess, 2, "      corePolicy: force\n");
  admitCuda();
  Child bypass;
  run(bypass, podCgroup(uid), 200);
  ASSERT_EQ(setUtil(static_cast<int>(bypass.pid()), 0, 74), 0);
  ASSERT_TRUE(agent->watchdogScanNow());
  ASSERT_TRUE(agent->watchdogScanNow());
  EXPECT_EQ(bypass.reap(), SIGKILL);
  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("(35% with the watchdog's tolerance of 10 points; a 25% share, policy force)"));
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin
