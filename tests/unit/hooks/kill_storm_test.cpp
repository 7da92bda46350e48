// Issue 36: processes SIGKILLed at random moments while they allocate and free leak nothing
// through libvgpu.so. 40 processes of one container churn 4 MiB blocks under a 64 MiB limit
// and are killed at random; a new process then gets exactly the 64 MiB. The same defect is
// stopped at every single step by RegionKillPoints.* (region level); this is the user's view,
// with the library and the fake driver. VGPU_TEST_LIBVGPU names another build of libvgpu.so.

#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "probe_process.h"

namespace {

constexpr unsigned long long kMiB = 1ull << 20;

class LimiterKillStorm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "vgpu-storm-test-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    // No context overhead, so the budget a process can take is exactly the limit.
    std::ofstream(dir_ + "/gpus.conf") << "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"Fake H100\" "
                                       << "memory_mib=1024 sm_count=132 cc=9.0 context_mib=0\n";
    env_ = {
        {"PATH", "/usr/bin:/bin"},
        {"LD_LIBRARY_PATH", VGPU_FAKE_LIB_PATH},
        {"LD_PRELOAD", vgpu::test::libvgpuPath()},
        {"VGPU_FAKE_GPU_CONFIG", dir_ + "/gpus.conf"},
        {"VGPU_FAKE_GPU_STATE", dir_ + "/fake-state"},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", dir_ + "/region"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"},
    };
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // A churning process (or `mode` of storm_probe); it writes a line to `ready` once it has a
  // context and churns.
  pid_t startChurn(int ready, const char* mode = "churn") {
    std::vector<std::string> envStrings;
    for (const auto& [k, v] : env_) envStrings.push_back(k + "=" + v);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(ready, 1);
      std::vector<char*> envp;
      for (auto& s : envStrings) envp.push_back(s.data());
      envp.push_back(nullptr);
      char* argv[] = {const_cast<char*>(VGPU_STORM_PROBE), const_cast<char*>(mode), nullptr};
      execve(VGPU_STORM_PROBE, argv, envp.data());
      _exit(127);
    }
    return pid;
  }

  // Starts `mode` and waits for its "ready" (false after 30 s).
  bool startReady(std::vector<pid_t>& started, const char* mode) {
    int ready[2];
    if (pipe(ready) != 0) return false;
    started.push_back(startChurn(ready[1], mode));
    close(ready[1]);
    char buf[16];
    pollfd p{ready[0], POLLIN, 0};
    const bool ok = poll(&p, 1, 30'000) == 1 && read(ready[0], buf, sizeof buf) > 0;
    close(ready[0]);
    return ok;
  }
  static void killAll(const std::vector<pid_t>& pids) {
    for (pid_t c : pids) kill(c, SIGKILL);
    for (pid_t c : pids) waitpid(c, nullptr, 0);
  }

  // What a new process of the container can allocate.
  unsigned long long fill() {
    auto r = vgpu::test::runProbe(VGPU_STORM_PROBE, {"fill"}, env_, dir_, std::chrono::seconds(30));
    EXPECT_EQ(r.exitCode, 0) << r.err;
    const auto at = r.out.find("got=");
    return at == std::string::npos ? 0 : std::stoull(r.out.substr(at + 4));
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(LimiterKillStorm, FortyProcessesKilledWhileAllocatingLeaveTheWholeBudget) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 random(seed);
  for (int round = 0; round < 2; ++round) {
    // Started one at a time, each churning ("ready") before the next: forty processes
    // attaching at once on a loaded 2-core machine can wait out the region lock's 2 s bound,
    // and the limiter then refuses them (fails closed), which is not what this test is about.
    std::vector<pid_t> churn;
    for (int i = 0; i < 40; ++i) {
      if (!startReady(churn, "churn")) {
        killAll(churn);
        FAIL() << "churning process " << i << " did not start within 30 s (its stderr is above)";
      }
    }
    // Each is killed at a random moment within a second: while it allocates, while it frees,
    // while it is refused, or between two steps of any of them.
    std::vector<std::pair<int, pid_t>> plan;
    for (pid_t p : churn) plan.emplace_back(std::uniform_int_distribution<int>(0, 1000)(random), p);
    std::sort(plan.begin(), plan.end());
    const auto start = std::chrono::steady_clock::now();
    for (const auto& [ms, pid] : plan) {
      std::this_thread::sleep_until(start + std::chrono::milliseconds(ms));
      kill(pid, SIGKILL);
    }
    for (pid_t p : churn) waitpid(p, nullptr, 0);
    // The first refusal of the new process reclaims the dead and recomputes the sums.
    EXPECT_EQ(fill(), 64 * kMiB) << "round " << round;
  }
}

// A container whose budget is taken, with 32 processes asking again and again without pause
// (refused each time): a new process of the container still attaches, promptly. Each refusal
// used to reclaim under the region lock, so the spinners held it almost all the time and a
// newcomer waited out the lock's 2 s bound and was refused its context (fail closed).
TEST_F(LimiterKillStorm, ProcessesSpinningOnRefusalsDoNotLockNewcomersOut) {
  std::vector<pid_t> running;
  ASSERT_TRUE(startReady(running, "hog")) << "the process holding the budget did not start";
  for (int i = 0; i < 32; ++i) {
    if (!startReady(running, "spin")) {
      killAll(running);
      FAIL() << "spinning process " << i << " did not start within 30 s (its stderr is above)";
    }
  }
  double total = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = vgpu::test::runProbe(VGPU_STORM_PROBE, {"fill"}, env_, dir_, std::chrono::seconds(30));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exitCode, 0) << "newcomer " << i << " after " << seconds << " s: " << r.err;
    EXPECT_NE(r.out.find("got=0"), std::string::npos) << r.out;
    total += seconds;
    std::printf("newcomer %d: attached and refused in %.3f s\n", i, seconds);
  }
  // Measured on the 2-core build VM: 0.05 s for the five; 2.3 s with a reclaim per refusal (one
  // newcomer 1.2 s: under load they reached the lock's 2 s bound).
  EXPECT_LT(total, 1.0) << "newcomers waited for the region lock";
  killAll(running);
  EXPECT_EQ(fill(), 64 * kMiB) << "the hog's and spinners' budget was not given back";
}

}  // namespace
