// The shared region, exercised by real processes (fork) because its whole point is what
// happens between processes: racing check-and-add, a holder killed with the lock held.

#include "vgpu/shared_region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace {

class LimiterRegion : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-region-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/region";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  vgpu_region* open() {
    vgpu_region* r = nullptr;
    char err[256] = "";
    EXPECT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_OK) << err;
    return r;
  }

  std::string dir_;
  std::string path_;
};

constexpr uint64_t kMiB = 1ull << 20;

TEST_F(LimiterRegion, CheckAndAddRefusesWhatWouldExceedTheLimit) {
  vgpu_region* r = open();
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 600 * kMiB, 1024 * kMiB), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 600 * kMiB, 1024 * kMiB), VGPU_REGION_OVER_LIMIT);
  EXPECT_EQ(vgpu_region_used(r, 0), 600 * kMiB);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 424 * kMiB, 1024 * kMiB), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 1, 5000 * kMiB, 0), VGPU_REGION_OK);  // no limit
  vgpu_region_sub(r, slot, 0, 100 * kMiB);
  EXPECT_EQ(vgpu_region_used(r, 0), 924 * kMiB);
  vgpu_region_sub(r, slot, 0, 10000 * kMiB);  // clamped, never underflows
  EXPECT_EQ(vgpu_region_used(r, 0), 0u);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 16, 1, 0), VGPU_REGION_ERROR);
  vgpu_region_detach(r, slot);
  EXPECT_EQ(vgpu_region_used(r, 1), 0u);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, EightRacingProcessesNeverExceedTheLimitTogether) {
  constexpr int kProcs = 8;
  constexpr uint64_t kLimit = 1000 * kMiB;
  vgpu_region* r = open();
  int pipes[kProcs][2];
  std::vector<pid_t> kids;
  for (int i = 0; i < kProcs; ++i) {
    ASSERT_EQ(pipe(pipes[i]), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      vgpu_region* mine = nullptr;
      int slot = -1;
      if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK ||
          vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK) {
        _exit(2);
      }
      uint64_t got = 0;
      for (int k = 0; k < 400; ++k) {  // 400 x 7 MiB each: far more than the limit
        if (vgpu_region_try_add(mine, slot, 0, 7 * kMiB, kLimit) == VGPU_REGION_OK) got += 7 * kMiB;
        if (k % 3 == 0 && got >= 7 * kMiB) {
          vgpu_region_sub(mine, slot, 0, 7 * kMiB);
          got -= 7 * kMiB;
        }
      }
      if (write(pipes[i][1], &got, sizeof got) != sizeof got) _exit(3);
      pause();  // keep the slot alive until the parent has summed up
      _exit(0);
    }
    kids.push_back(pid);
    close(pipes[i][1]);
  }
  uint64_t total = 0;
  for (int i = 0; i < kProcs; ++i) {
    uint64_t got = 0;
    ASSERT_EQ(read(pipes[i][0], &got, sizeof got), static_cast<ssize_t>(sizeof got));
    close(pipes[i][0]);
    total += got;
  }
  EXPECT_LE(total, kLimit);
  EXPECT_EQ(vgpu_region_used(r, 0), total);
  EXPECT_GT(total, kLimit - 7 * kMiB * kProcs);  // they did fill it up
  for (pid_t pid : kids) kill(pid, SIGKILL);
  for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  EXPECT_EQ(vgpu_region_reclaim_dead(r), kProcs);
  EXPECT_EQ(vgpu_region_used(r, 0), 0u);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, KilledLockHolderBlocksNoOneAndItsMemoryIsReclaimed) {
  vgpu_region* r = open();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    vgpu_region* mine = nullptr;
    int slot = -1;
    if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_try_add(mine, slot, 0, 900 * kMiB, 1024 * kMiB) != VGPU_REGION_OK ||
        vgpu_region_lock(mine) != VGPU_REGION_OK) {
      _exit(2);
    }
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(3);
    pause();  // dies holding the lock
    _exit(0);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(vgpu_region_used(r, 0), 900 * kMiB);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);

  // Another process must get through quickly and find the 900 MiB free again.
  auto start = std::chrono::steady_clock::now();
  pid_t other = fork();
  ASSERT_GE(other, 0);
  if (other == 0) {
    alarm(10);  // a hang fails the test instead of stalling the suite
    vgpu_region* mine = nullptr;
    int slot = -1;
    if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK) {
      _exit(2);
    }
    _exit(vgpu_region_try_add(mine, slot, 0, 1000 * kMiB, 1024 * kMiB) == VGPU_REGION_OK ? 0 : 4);
  }
  int status = 0;
  waitpid(other, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the second process hung or crashed";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The region lock is usable again from this process too.
  EXPECT_EQ(vgpu_region_lock(r), VGPU_REGION_OK);
  vgpu_region_unlock(r);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, DeadProcessUsageIsReclaimedWhenSomeoneNeedsIt) {
  vgpu_region* r = open();
  pid_t kid = fork();
  ASSERT_GE(kid, 0);
  if (kid == 0) {
    vgpu_region* mine = nullptr;
    int slot = -1;
    if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK) {
      _exit(2);
    }
    _exit(vgpu_region_try_add(mine, slot, 0, 800 * kMiB, 1024 * kMiB) == VGPU_REGION_OK ? 0 : 4);
  }
  int status = 0;
  waitpid(kid, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(vgpu_region_used(r, 0), 800 * kMiB);  // it exited without detaching
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 1000 * kMiB, 1024 * kMiB), VGPU_REGION_OK);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, RefusesAFileThatIsNotARegion) {
  std::ofstream(path_) << std::string(100, 'x');
  vgpu_region* r = nullptr;
  char err[256] = "";
  EXPECT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find(path_), std::string::npos) << err;
  std::ofstream(path_, std::ios::trunc) << std::string(sizeof(vgpu_region), 'x');
  EXPECT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find("magic"), std::string::npos) << err;
  const vgpu_region* ro = nullptr;
  EXPECT_EQ(vgpu_region_open_readonly("/nonexistent/region", &ro, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find("/nonexistent/region"), std::string::npos) << err;
}

TEST_F(LimiterRegion, ReadOnlyViewSeesUsageAndPublishedDevices) {
  vgpu_region* r = open();
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  vgpu_region_publish_device(r, 2, "GPU-1234", 4096 * kMiB, 30);
  ASSERT_EQ(vgpu_region_try_add(r, slot, 2, 5 * kMiB, 4096 * kMiB), VGPU_REGION_OK);
  const vgpu_region* ro = nullptr;
  char err[256] = "";
  ASSERT_EQ(vgpu_region_open_readonly(path_.c_str(), &ro, err, sizeof err), VGPU_REGION_OK) << err;
  EXPECT_EQ(ro->version, VGPU_REGION_VERSION);
  EXPECT_STREQ(ro->devices[2].uuid, "GPU-1234");
  EXPECT_EQ(ro->devices[2].memory_limit, 4096 * kMiB);
  EXPECT_EQ(ro->devices[2].sm_limit, 30u);
  EXPECT_EQ(ro->devices[2].memory_used, 5 * kMiB);
  EXPECT_EQ(ro->procs[slot].pid, getpid());
  EXPECT_EQ(ro->procs[slot].memory_used[2], 5 * kMiB);
  vgpu_region_close(ro);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, PrivateRegionWorksWithoutAFile) {
  vgpu_region* r = nullptr;
  ASSERT_EQ(vgpu_region_open_private(&r, nullptr, 0), VGPU_REGION_OK);
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 10, 10), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 1, 10), VGPU_REGION_OVER_LIMIT);
  vgpu_region_close(r);
}

}  // namespace
