// The shared region (and the activity board), exercised by real processes (fork) because its whole point is what
// happens between processes: racing check-and-add, a holder killed with the lock held.

#include "vgpu/shared_region.h"
#include "vgpu/activity_board.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
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

// In a forked child: a new PID namespace whose first process (pid 1 there) runs `body` and
// exits with its result; the child waits for it and exits likewise. 77: no namespaces here.
template <class F>
[[noreturn]] void inNewPidNamespace(F&& body) {
  if (unshare(CLONE_NEWPID) != 0) _exit(77);
  pid_t inner = fork();
  if (inner < 0) _exit(78);
  if (inner == 0) _exit(body());
  int status = 0;
  waitpid(inner, &status, 0);
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 79);
}

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

// The threads of one process share its slot: their adds and subtractions of it are atomic,
// or a lost update leaves the slot wrong, and a reclaim that recomputes the device sum from
// the slots would then count too little. (Before issue 36 a subtraction wrote the slot with a
// load and a store.)
TEST_F(LimiterRegion, ThreadsOfOneProcessNeverLoseAnUpdateOfTheirSlot) {
  vgpu_region* r = open();
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([r, slot, t, &ready] {
      ready.fetch_add(1);
      while (ready.load() < 4) {  // all at once
      }
      // For 500 ms: on a loaded machine two threads of four run at once only now and then.
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      for (int i = 0; (i & 1023) != 0 || std::chrono::steady_clock::now() < end; ++i) {
        const uint64_t bytes = 4096u * static_cast<uint64_t>(1 + (i + t) % 7);
        if (vgpu_region_try_add(r, slot, 0, bytes, 0) == VGPU_REGION_OK) vgpu_region_sub(r, slot, 0, bytes);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r->procs[slot].memory_used[0], 0u);
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

// Two processes that each see themselves as pid 1 (each the first of a PID namespace of its
// own) are two processes: neither's slot may be taken for a stale copy of the other's, and
// neither may be reclaimed as dead because /proc/1 is someone else.
TEST_F(LimiterRegion, ProcessesInNestedPidNamespacesKeepTheirSlots) {
  vgpu_region* r = open();
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 2; ++i) {
    pid_t kid = fork();
    ASSERT_GE(kid, 0);
    if (kid == 0) {
      close(done[1]);  // so that the parent's close is seen
      close(ready[0]);
      inNewPidNamespace([&] {
        vgpu_region* mine = nullptr;
        int slot = -1;
        if (getpid() != 1) return 5;
        if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK ||
            vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK) {
          return 2;
        }
        // 600 MiB of 1024: the second of the two must be refused.
        int got = vgpu_region_try_add(mine, slot, 0, 600 * kMiB, 1024 * kMiB) == VGPU_REGION_OK ? 1 : 0;
        char c = static_cast<char>('0' + got);
        if (write(ready[1], &c, 1) != 1) return 3;
        char wait;
        if (read(done[0], &wait, 1) < 0) return 4;  // hold the slot until the parent has looked
        return 0;
      });
    }
    kids.push_back(kid);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1) << "the process in the namespace did not report";
    if (i == 0) {
      ASSERT_EQ(c, '1');
    } else {
      EXPECT_EQ(c, '0') << "the second pid 1 got memory the first one holds";
    }
    // Whoever reclaims dead slots meanwhile must leave a live pid 1 alone.
    EXPECT_EQ(vgpu_region_reclaim_dead(r), 0);
    EXPECT_EQ(vgpu_region_used(r, 0), 600 * kMiB);
  }
  close(done[1]);
  int held = 0;
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) held += r->procs[s].pid == 1;
  EXPECT_EQ(held, 2);
  for (pid_t kid : kids) {
    int status = 0;
    waitpid(kid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "no PID namespaces here (needs root)";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(vgpu_region_reclaim_dead(r), 2);  // and once they are gone, they are
  EXPECT_EQ(vgpu_region_used(r, 0), 0u);
  vgpu_region_close(r);
}

TEST_F(LimiterRegion, AttachingWhenEverySlotIsHeldByALiveProcessSaysSo) {
  vgpu_region* r = open();
  int slot = -1;
  for (int i = 0; i < VGPU_REGION_MAX_PROCS; ++i) ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  char err[256] = "";
  EXPECT_EQ(vgpu_region_attach(r, &slot, err, sizeof err), VGPU_REGION_FULL);
  EXPECT_NE(std::string(err).find("all 1024 process slots"), std::string::npos) << err;
  vgpu_region_detach(r, 7);
  EXPECT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(slot, 7);
  vgpu_region_close(r);
}

// A forked child shares the parent's descriptor: after vgpu_region_after_fork it holds a
// slot of its own, and neither process's death is taken for the other's.
TEST_F(LimiterRegion, AForkedChildGetsASlotOfItsOwn) {
  vgpu_region* r = open();
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  ASSERT_EQ(vgpu_region_try_add(r, slot, 0, 100 * kMiB, 0), VGPU_REGION_OK);
  pid_t kid = fork();
  ASSERT_GE(kid, 0);
  if (kid == 0) {
    vgpu_region_after_fork(r);
    int mine = -1;
    if (vgpu_region_attach(r, &mine, nullptr, 0) != VGPU_REGION_OK || mine == slot) _exit(2);
    if (vgpu_region_try_add(r, mine, 0, 50 * kMiB, 0) != VGPU_REGION_OK) _exit(3);
    _exit(vgpu_region_reclaim_dead(r) == 0 ? 0 : 4);  // the parent is alive
  }
  int status = 0;
  waitpid(kid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(vgpu_region_used(r, 0), 150 * kMiB);
  EXPECT_EQ(vgpu_region_reclaim_dead(r), 1);  // the child is gone, the parent is not
  EXPECT_EQ(vgpu_region_used(r, 0), 100 * kMiB);
  vgpu_region_close(r);
}

// An older library's region: rewritten when none of its processes is alive, refused (with a
// message naming the version) while one is, since the two count memory differently.
TEST_F(LimiterRegion, AnOlderVersionIsRewrittenOnlyWhenNoProcessUsesIt) {
  vgpu_region* r = open();
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  ASSERT_EQ(vgpu_region_try_add(r, slot, 0, 5 * kMiB, 0), VGPU_REGION_OK);
  r->version = 2;  // as an older library leaves it: a live process by pid and start time
  r->procs[slot].flags = 0;
  vgpu_region* again = nullptr;
  char err[512] = "";
  EXPECT_EQ(vgpu_region_open(path_.c_str(), &again, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find("region version 2"), std::string::npos) << err;
  r->procs[slot].pid = 0;  // nobody left
  ASSERT_EQ(vgpu_region_open(path_.c_str(), &again, err, sizeof err), VGPU_REGION_OK) << err;
  EXPECT_EQ(again->version, VGPU_REGION_VERSION);
  EXPECT_EQ(vgpu_region_used(again, 0), 0u);
  vgpu_region_close(again);
  vgpu_region_close(r);
}

// A region file of an older version has another size (version 4 grew): rewritten when none of
// its processes is alive, refused naming its version while one is. Its slots are where
// versions 1 to 3 kept them: after a header and lock of 96 bytes, 16 device entries of 136.
TEST_F(LimiterRegion, AFileOfAnOlderSizeIsRewrittenOnlyWhenNoProcessUsesIt) {
  constexpr size_t kProcsAt = 96 + 16 * 136;
  std::vector<char> old(kProcsAt + VGPU_REGION_MAX_PROCS * sizeof(vgpu_region_proc), 0);
  const uint64_t magic = VGPU_REGION_MAGIC;
  const uint32_t version = 3;
  memcpy(old.data(), &magic, sizeof magic);
  memcpy(old.data() + 8, &version, sizeof version);
  vgpu_region_proc alive{};
  alive.pid = getpid();  // alive by pid (no file lock held): this process
  memcpy(old.data() + kProcsAt + 7 * sizeof alive, &alive, sizeof alive);
  std::ofstream(path_, std::ios::binary).write(old.data(), static_cast<std::streamsize>(old.size()));
  vgpu_region* r = nullptr;
  char err[512] = "";
  EXPECT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find("version 3"), std::string::npos) << err;
  const vgpu_region* view = nullptr;
  EXPECT_EQ(vgpu_region_open_readonly(path_.c_str(), &view, err, sizeof err), VGPU_REGION_ERROR);
  EXPECT_NE(std::string(err).find("a version 3 region"), std::string::npos) << err;

  alive.pid = 0;  // nobody left
  memcpy(old.data() + kProcsAt + 7 * sizeof alive, &alive, sizeof alive);
  std::ofstream(path_, std::ios::binary).write(old.data(), static_cast<std::streamsize>(old.size()));
  ASSERT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_OK) << err;
  EXPECT_EQ(r->version, VGPU_REGION_VERSION);
  EXPECT_EQ(r->header_size, sizeof(vgpu_region));
  int slot = -1;
  EXPECT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
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

// ---- the activity board (vgpu/activity_board.h) ----

namespace {

class LimiterBoard : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-board-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

constexpr const char* kUuid = "GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20";
constexpr int64_t kSecond = 1'000'000'000;

TEST_F(LimiterBoard, OnlyAWriterCreatesItAndReadersSeeItsAnnouncements) {
  vgpu_board* reader = nullptr;
  char err[256] = "";
  EXPECT_EQ(vgpu_board_open(dir_.c_str(), kUuid, 0, &reader, err, sizeof err), -1);  // no high-priority tenant yet
  vgpu_board* writer = nullptr;
  ASSERT_EQ(vgpu_board_open(dir_.c_str(), kUuid, 1, &writer, err, sizeof err), 0) << err;
  ASSERT_EQ(vgpu_board_open(dir_.c_str(), kUuid, 0, &reader, err, sizeof err), 0) << err;
  EXPECT_EQ(vgpu_board_active(reader, 0, 100 * kSecond), 0);
  vgpu_board_announce(writer, 7, 100 * kSecond + kSecond / 2);
  vgpu_board_announce(writer, 7, 100 * kSecond);  // an earlier time never shortens it
  EXPECT_EQ(vgpu_board_active(reader, 0, 100 * kSecond), 1);
  EXPECT_EQ(vgpu_board_active(reader, 7, 100 * kSecond), 0);  // not counted by itself
  EXPECT_EQ(vgpu_board_active(reader, 9, 100 * kSecond + kSecond), 0);  // lapsed
  vgpu_board_announce(writer, 9, 100 * kSecond + kSecond / 2);
  EXPECT_EQ(vgpu_board_active(reader, 0, 100 * kSecond), 2);
  vgpu_board_close(reader);
  vgpu_board_close(writer);
}

TEST_F(LimiterBoard, WhatIsNotABoardIsRefused) {
  std::ofstream(dir_ + "/" + kUuid) << std::string(sizeof(vgpu_board), 'x');
  vgpu_board* b = nullptr;
  char err[256] = "";
  EXPECT_EQ(vgpu_board_open(dir_.c_str(), kUuid, 0, &b, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("not a version 1 activity board"), std::string::npos) << err;
  EXPECT_EQ(vgpu_board_open(dir_.c_str(), "../escape", 1, &b, err, sizeof err), -1);  // a name, never a path
}

}  // namespace
