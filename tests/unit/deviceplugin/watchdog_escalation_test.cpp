// A bypass that starts again after every SIGKILL is not bounded by killing: the watchdog
// counts each pod's kills and evicts it at the threshold (deviceplugin/watchdog_escalation.h).
// The bypass is a real child process in the fake NVML's process list that comes back with a
// new pid after each kill (watchdog_fixture.h).

#include "watchdog_fixture.h"

namespace vgpu::deviceplugin {
namespace {

/// Pod A's container "main" has a 64 MiB slice; its bypass holds 248 MiB (over the slice plus
/// the 128 MiB tolerance). Time is the test's: each scan is 500 ms later.
class WatchdogEscalation : public WatchdogTest {
 protected:
  Watchdog watchdog(WatchdogAction action, int escalateAfter = 3) {
    slices = {{kPodA, "team", "trainer", "main", kUuid, 64, 0, kCid}};
    WatchdogOptions o;
    o.procRoot = proc().string();
    o.action = action;
    o.escalateAfter = escalateAfter;
    return Watchdog(o, {{"nvidia", backend->processReporter()}}, killProcess,
                    [this](const std::string& ns, const std::string& name) { evicted.push_back(ns + "/" + name); },
                    [this] { return now; });
  }
  /// The bypass (again, with a new pid), scanned until the watchdog confirms it; then what
  /// enforce() did. Its process is reaped when it was killed.
  Enforcement restartAndCatch(Watchdog& w) {
    bypasses.push_back(std::make_unique<Child>());
    Child& bypass = *bypasses.back();
    run(bypass, podCgroup(kPodA), 248);
    for (int i = 0; i < 4; ++i) {
      now += std::chrono::milliseconds(500);
      auto found = scan(w).confirmed;
      if (found.empty()) continue;
      EXPECT_EQ(found.size(), 1u);
      Enforcement done = w.enforce(found[0]);
      if (done.said.find("killed pid " + std::to_string(bypass.pid())) != std::string::npos) {
        EXPECT_EQ(bypass.reap(), SIGKILL);  // gone, as the driver then frees its memory
      }
      return done;
    }
    ADD_FAILURE() << "the bypass was not caught";
    return {};
  }

  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  std::vector<std::string> evicted;
  std::vector<std::unique_ptr<Child>> bypasses;
};

TEST_F(WatchdogEscalation, ABypassThatRestartsIsEvictedAtTheThirdKillWithinTheWindow) {
  Watchdog w = watchdog(WatchdogAction::kKillProcess);
  for (int kill = 1; kill <= 2; ++kill) {
    const Enforcement done = restartAndCatch(w);
    EXPECT_THAT(done.said, HasSubstr("killed pid " + std::to_string(bypasses.back()->pid()) + " (248 MiB)"));
    EXPECT_FALSE(done.escalated) << "kill " << kill;
    EXPECT_TRUE(evicted.empty()) << "kill " << kill;
  }
  const Enforcement third = restartAndCatch(w);
  EXPECT_TRUE(third.escalated);
  EXPECT_THAT(third.said, HasSubstr("killed pid " + std::to_string(bypasses.back()->pid())));
  EXPECT_THAT(third.said, HasSubstr("killed 3 times in 60 s for using 248 MiB of a 64 MiB slice; evicting"));
  EXPECT_EQ(evicted, std::vector<std::string>{"team/trainer"});
  // Until the pod is gone, a bypass started again is still killed; the eviction is asked once.
  const Enforcement fourth = restartAndCatch(w);
  EXPECT_FALSE(fourth.escalated);
  EXPECT_THAT(fourth.said, HasSubstr("its eviction was asked for already"));
  EXPECT_EQ(evicted.size(), 1u);
}

TEST_F(WatchdogEscalation, KillsFartherApartThanTheWindowNeverEscalate) {
  Watchdog w = watchdog(WatchdogAction::kKillProcess);
  for (int kill = 0; kill < 6; ++kill) {
    EXPECT_FALSE(restartAndCatch(w).escalated) << "kill " << kill;
    now += std::chrono::seconds(31);  // at most two kills within any 60 s
  }
  EXPECT_TRUE(evicted.empty());
}

TEST_F(WatchdogEscalation, ReportModeNeverKillsNorEvicts) {
  Watchdog w = watchdog(WatchdogAction::kReport);
  bypasses.push_back(std::make_unique<Child>());
  run(*bypasses.back(), podCgroup(kPodA), 248);
  int reported = 0;
  for (int i = 0; i < 20; ++i) {
    now += std::chrono::seconds(31);  // past reportRepeat every other scan
    for (const auto& v : scan(w).confirmed) {
      ++reported;
      const Enforcement done = w.enforce(v);
      EXPECT_FALSE(done.escalated);
      EXPECT_THAT(done.said, HasSubstr("reported only"));
    }
  }
  EXPECT_GE(reported, 3);
  EXPECT_TRUE(bypasses.back()->running());
  EXPECT_TRUE(evicted.empty());
}

TEST_F(WatchdogEscalation, ZeroTurnsItOff) {
  Watchdog w = watchdog(WatchdogAction::kKillProcess, 0);
  for (int kill = 0; kill < 5; ++kill) EXPECT_FALSE(restartAndCatch(w).escalated);
  EXPECT_TRUE(evicted.empty());
}

TEST(WatchdogKillEscalation, CountsEachPodsKillsInASlidingWindow) {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  KillEscalation e(3, std::chrono::seconds(60), [&] { return now; });
  EXPECT_EQ(e.recordKill("a"), 1);
  EXPECT_EQ(e.recordKill("b"), 1) << "per pod";
  now += std::chrono::seconds(30);
  EXPECT_EQ(e.recordKill("a"), 2);
  now += std::chrono::seconds(30);
  EXPECT_EQ(e.recordKill("a"), 2) << "the first left the window";
  EXPECT_FALSE(e.due(2));
  EXPECT_TRUE(e.due(3));
  EXPECT_FALSE(KillEscalation(0, std::chrono::seconds(60), {}).due(100)) << "0: never";
}

TEST(Watchdog, EscalationOptionsDefaultToThreeKillsInAMinuteAndRefuseNonsense) {
  auto env = [](const std::string&) { return std::optional<std::string>(); };
  const char* plain[] = {"agent", "--node-name", "n1"};
  auto d = parseAgentOptions(3, plain, env);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->options.watchdog.escalateAfter, 3);
  EXPECT_EQ(d->options.watchdog.escalateWindow, std::chrono::seconds(60));
  const char* set[] = {"agent", "--node-name", "n1", "--watchdog-escalate-after", "5",
                       "--watchdog-escalate-window-seconds", "300"};
  auto s = parseAgentOptions(7, set, env);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->options.watchdog.escalateAfter, 5);
  EXPECT_EQ(s->options.watchdog.escalateWindow, std::chrono::seconds(300));
  const char* negative[] = {"agent", "--node-name", "n1", "--watchdog-escalate-after", "-1"};
  auto n = parseAgentOptions(5, negative, env);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.error().message, HasSubstr("--watchdog-escalate-after must be 0..1000"));
  const char* noWindow[] = {"agent", "--node-name", "n1", "--watchdog-escalate-window-seconds", "0"};
  auto z = parseAgentOptions(5, noWindow, env);
  ASSERT_FALSE(z.ok());
  EXPECT_THAT(z.error().message, HasSubstr("--watchdog-escalate-window-seconds must be 1..86400"));
}

#ifdef VGPU_FAKE_NVML_LIBRARY
TEST_F(DevicePluginWatchdog, EvictsAPodWhoseBypassRestartsAfterEachKill) {
  startNode(WatchdogAction::kKillProcess);
  admitCuda();  // 1000 MiB slice
  std::vector<std::unique_ptr<Child>> bypasses;
  for (int kill = 1; kill <= 3; ++kill) {
    bypasses.push_back(std::make_unique<Child>());
    run(*bypasses.back(), podCgroup(uid), 3000);
    ASSERT_TRUE(agent->watchdogScanNow());
    ASSERT_TRUE(agent->watchdogScanNow());
    EXPECT_EQ(bypasses.back()->reap(), SIGKILL) << "kill " << kill;
  }
  ASSERT_TRUE(waitFor([&] { return !api->get("pods", "default", "cuda"); })) << "evicted";
  ASSERT_TRUE(waitFor([&] { return evictionsOf("cuda") >= 1; }));
  EXPECT_EQ(evictionsOf("cuda"), 1);
  bool said = false;
  ASSERT_TRUE(waitFor([&] {
    for (const auto& e : api->list("events"))
      if (e.at("reason").as_string() == "VgpuSliceExceeded" &&
          std::string_view(e.at("message").as_string())
                  .find("killed 3 times in 60 s for using 3000 MiB of a 1000 MiB slice; evicting") != std::string::npos)
        said = true;
    return said;
  }));
  const std::string text = agent->renderMetrics();
  EXPECT_EQ(vgpu::testing::promtoolProblems(text), "");
  const std::string labels = "vgpu_watchdog_violations_total{node=\"" + std::string(kNode) +
                             "\",pod=\"cuda\",namespace=\"default\",container=\"train\",device=\"" + kGpu +
                             "\",resource=\"memory\",action=";
  EXPECT_THAT(text, HasSubstr(labels + "\"kill-process\"} 3\n"));
  EXPECT_THAT(text, HasSubstr(labels + "\"evict-pod\"} 1\n")) << "the escalation, counted apart";
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin
