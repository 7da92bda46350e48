// The watchdog with the driver's own figure for a container's memory cgroup (backend ABI 1.9,
// CgroupMemoryReporter; NVIDIA r615+: nvmlDeviceGetMemoryLimits_v1's currentUsed): memory the
// container's processes share (CUDA IPC, VMM exports) is counted once, not once per process.
// The NVIDIA backend's side is checked over the fake NVML's per-cgroup limits.

#include "vgpu/cuda/nvml_api.h"
#include "watchdog_fixture.h"

namespace vgpu::deviceplugin {
namespace {

/// A driver answering what the test says, recording what it was asked.
class DriverFigure : public CgroupMemoryReporter {
 public:
  Result<std::optional<std::uint64_t>> cgroupMemoryUsed(const std::string& procCgroup, const std::string& deviceId) override {
    asked.emplace_back(procCgroup, deviceId);
    if (!error.empty()) return makeError(error);
    return answer;
  }
  std::optional<std::uint64_t> answer;
  std::string error;
  std::vector<std::pair<std::string, std::string>> asked;
};

class WatchdogDriverFigure : public WatchdogTest {
 protected:
  Watchdog withDriver(WatchdogAction action = WatchdogAction::kReport) {
    WatchdogOptions o;
    o.procRoot = proc().string();
    o.action = action;
    return Watchdog(o, {{"nvidia", backend->processReporter(), &driver}}, countingKiller(kills));
  }
  /// Pod A's "main" (1024 MiB) runs two processes that map the same 700 MiB (one exported it
  /// with CUDA IPC, the other imported it): NVML charges each of them the 700 MiB.
  void sharingProcesses(const Child& a, const Child& b) {
    run(a, podCgroup(kPodA), 700);
    run(b, podCgroup(kPodA), 700);
  }
  DriverFigure driver;
  int kills = 0;
};

TEST_F(WatchdogDriverFigure, MemorySharedBetweenAContainersProcessesIsNotAViolationWhereTheDriverCountsItOnce) {
  Child exporter, importer;
  sharingProcesses(exporter, importer);
  // Without the driver's figure the sum, 1400 MiB, is over 1024 + 128: an honest tenant flagged.
  Watchdog summing = make(WatchdogAction::kReport);
  EXPECT_EQ(confirmed(summing).usedBytes, 1400 * kMiB);

  driver.answer = 710 * kMiB;
  Watchdog w = withDriver(WatchdogAction::kKillProcess);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(scan(w).confirmed.empty());
  EXPECT_EQ(kills, 0);
  ASSERT_FALSE(driver.asked.empty());
  EXPECT_EQ(driver.asked.front(), std::make_pair(podCgroup(kPodA), kUuid));
}

TEST_F(WatchdogDriverFigure, TheDriversFigureOverTheSliceIsTheViolation) {
  Child exporter, importer;
  sharingProcesses(exporter, importer);
  driver.answer = 1500 * kMiB;  // e.g. the hook never ran and a bypass allocated more
  Watchdog w = withDriver();
  const Violation v = confirmed(w);
  EXPECT_EQ(v.usedBytes, 1500 * kMiB);
  EXPECT_EQ(v.container, "main");
}

TEST_F(WatchdogDriverFigure, WhereTheDriverDoesNotAccountTheCgroupTheSumIsCompared) {
  Child exporter, importer;
  sharingProcesses(exporter, importer);
  driver.answer.reset();  // no limit set for the cgroup, an older driver, a MIG device
  Watchdog w = withDriver();
  EXPECT_EQ(confirmed(w).usedBytes, 1400 * kMiB);
}

TEST_F(WatchdogDriverFigure, AFailingQueryIsSaidOnceAndTheSumIsCompared) {
  Child exporter, importer;
  sharingProcesses(exporter, importer);
  driver.error = "nvmlDeviceGetMemoryLimits_v1: Unknown Error";
  Watchdog w = withDriver();
  const auto first = scan(w);
  ASSERT_EQ(first.notices.size(), 1u);
  EXPECT_THAT(first.notices[0], HasSubstr("Unknown Error"));
  const auto second = scan(w);
  EXPECT_TRUE(second.notices.empty());
  ASSERT_EQ(second.confirmed.size(), 1u);
  EXPECT_EQ(second.confirmed[0].usedBytes, 1400 * kMiB);
}

TEST_F(WatchdogDriverFigure, APodCheckedAsAWholeIsNeverAskedAboutOneCgroup) {
  // Container ids not known yet: the pod's processes are checked together, across cgroups.
  slices = {{kPodA, "team", "trainer", "main", kUuid, 1024, 0, ""}};
  Child exporter, importer;
  sharingProcesses(exporter, importer);
  driver.answer = 10 * kMiB;
  Watchdog w = withDriver();
  EXPECT_EQ(confirmed(w).usedBytes, 1400 * kMiB);
  EXPECT_TRUE(driver.asked.empty());
}

#ifdef VGPU_FAKE_NVML_LIBRARY
// The NVIDIA backend's answer: currentUsed of the cgroup's limit, under the name vgpu-cdi-hook
// set it by (<hostSysRoot>/fs/cgroup/<the memory cgroup of /proc/<pid>/cgroup>).
TEST_F(WatchdogTest, TheNvidiaBackendReadsWhatTheDriverChargesALimitedCgroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "the driver's per-cgroup limits are root only";
  const fs::path sys = dir.path() / "sys";
  const std::string cgroupText = podCgroup(kPodA);
  const std::string rel = cgroupText.substr(4, cgroupText.size() - 5);  // "0::/" ... "\n"
  const fs::path cgroup = sys / "fs/cgroup" / rel;
  fs::create_directories(cgroup);
  ::setenv("VGPU_FAKE_GPU_SYSFS", sys.c_str(), 1);
  std::ofstream(dir.path() / "self.cgroup") << cgroupText;
  ::setenv("VGPU_FAKE_GPU_PROC_CGROUP", (dir.path() / "self.cgroup").c_str(), 1);

  BackendParams params;
  params.name = "nvidia";
  params.settings.options = {{"nvmlLibrary", VGPU_FAKE_NVML_LIBRARY}, {"discovery", "nvml"}, {"hostSysRoot", sys.string()}};
  auto loaded = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), params);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  auto& nvidia = *loaded;
  ASSERT_TRUE(nvidia->discovery()->discover().ok());
  CgroupMemoryReporter* driver = nvidia->cgroupMemoryReporter();
  ASSERT_NE(driver, nullptr);
  // No limit set for the cgroup: the driver keeps no figure the watchdog may take.
  auto none = driver->cgroupMemoryUsed(cgroupText, kUuid);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->has_value());

  using GetHandle = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
  using SetLimits = nvmlReturn_t (*)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t*);
  auto getHandle = reinterpret_cast<GetHandle>(dlsym(nvml, "nvmlDeviceGetHandleByUUID"));
  auto setLimits = reinterpret_cast<SetLimits>(dlsym(nvml, "nvmlDeviceSetMemoryLimits_v1"));
  ASSERT_TRUE(getHandle && setLimits);
  nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(getHandle(kUuid.c_str(), &gpu), NVML_SUCCESS);
  const std::string nameSpace = cgroup.string();
  nvmlSetMemoryLimits_v1_t limit{nameSpace.c_str(), 0, 2048 * kMiB};
  ASSERT_EQ(setLimits(gpu, &limit), NVML_SUCCESS);  // what the hook does at the container's creation

  ASSERT_EQ(setUsage(static_cast<int>(::getpid()), 0, 700 * kMiB), 0);  // this process, in the cgroup
  Child outside;                                                         // in another cgroup
  hold(outside, 300);
  auto used = driver->cgroupMemoryUsed(cgroupText, kUuid);
  ASSERT_TRUE(used.ok()) << used.error().message;
  EXPECT_EQ(used->value_or(0), 700 * kMiB);
  // Another device id is an error naming it; a process in the root cgroup has no figure.
  EXPECT_FALSE(driver->cgroupMemoryUsed(cgroupText, "GPU-unknown").ok());
  auto root = driver->cgroupMemoryUsed("0::/\n", kUuid);
  ASSERT_TRUE(root.ok());
  EXPECT_FALSE(root->has_value());
  ASSERT_EQ(setUsage(static_cast<int>(::getpid()), 0, 0), 0);
  ::unsetenv("VGPU_FAKE_GPU_SYSFS");
  ::unsetenv("VGPU_FAKE_GPU_PROC_CGROUP");
}
#endif

}  // namespace
}  // namespace vgpu::deviceplugin
