// The node agent's watchdog against the NVIDIA backend on the fake NVML, whose per-process
// accounting the tests set (vgpuFakeNvmlSetProcessUsage, and per-process utilization with
// vgpuFakeNvmlSetProcessUtilization) for real child processes they start; pids are mapped to pods
// through a /proc of the test's making (watchdog_fixture.h).

#include "watchdog_fixture.h"

namespace vgpu::deviceplugin {
namespace {

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
  EXPECT_THAT(w.enforce(v).said, HasSubstr("killed pid " + std::to_string(bypass.pid())));
  EXPECT_EQ(bypass.reap(), SIGKILL);
}

TEST_F(WatchdogTest, ReportModeOnlyReports) {
  Child bypass;
  run(bypass, podCgroup(kPodA), 3000);
  int kills = 0;
  Watchdog w = make(WatchdogAction::kReport, countingKiller(kills));
  EXPECT_THAT(w.enforce(confirmed(w)).said, HasSubstr("reported only"));
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
  EXPECT_THAT(w.enforce(v).said, HasSubstr("no longer in the pod"));
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
  // within its memory slice, where the share always applies (policy force; alone on the
  // device, `default` would not hold it to its share: WatchdogComputeRule.*).
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid, kForced}};
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
  EXPECT_THAT(w.enforce(v).said, HasSubstr("killed pid " + std::to_string(sidecar.pid()) + " (98% busy)"));
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
  EXPECT_THAT(w.enforce(v).said, HasSubstr("killed pid " + std::to_string(greedy.pid())));
  EXPECT_EQ(kills, 1);
}

TEST_F(WatchdogTest, CatchesAContainerBusierThanItsComputeShareWhileASiblingIsIdle) {
  // 45% for the pod is within 2 x 25% + 10; 45% for "main" is not within 25% + 10 (policy
  // force: the share applies though no other tenant is busy).
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 25, kCid, kForced},
            {kPodA, "team", "trainer", "side", kUuid, 1024, 25, kSideCid, kForced}};
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
  ASSERT_TRUE(waitFor([&] { return evictionsOf("cuda") >= 1; }));
  EXPECT_EQ(evictionsOf("cuda"), 1);
  std::string message;
  ASSERT_TRUE(waitFor([&] { return !(message = sliceEvent(uid)).empty(); }));
  EXPECT_THAT(message, HasSubstr("the pod is being evicted"));
}

TEST_F(DevicePluginWatchdog, KillsASidecarKeepingTheDeviceBusierThanThePodsComputeShare) {
  startNode(WatchdogAction::kKillProcess, 3);
  admitCuda();  // policy default (the backend's): the share applies while another tenant is busy
  Child sidecar, other;
  run(other, "0::/system.slice/render.service\n", 100);  // another tenant, busy throughout
  ASSERT_EQ(setUtil(static_cast<int>(other.pid()), 0, 20), 0);
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
  // The first scan of contention allows the whole device (the limiter is engaging): (100 + 25
  // + 25) / 3 + 10.
  EXPECT_THAT(message, HasSubstr("(60% with the watchdog's tolerance of 10 points; a 25% share, policy default"));
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
