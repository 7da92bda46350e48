// Crash safety of the shared region (issue 36): a process SIGKILLed right after any one write
// to the region, whatever it was doing (allocating, freeing, releasing a context's batch,
// trimming a pool, attaching, detaching, exporting or importing shared memory, reclaiming),
// leaves nothing behind once another process reclaims: the device sums are exactly what live
// slots and live share entries hold, and a fresh process gets exactly the rest of the limit.
// Built against vgpu_region_killpoints (the region compiled with VGPU_REGION_KILL_POINTS),
// and with real processes, since what is tested is what survives a process.

#include "vgpu/region_kill_points.h"
#include "vgpu/region_shares.h"
#include "vgpu/shared_region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kLimit = 64 * kMiB;  // device 0; device 1 has no limit

// A share key: the 64 bytes of a CUipcMemHandle, here one repeated byte.
struct Key {
  uint8_t bytes[VGPU_REGION_SHARE_KEY_LEN];
  explicit Key(uint8_t b) { memset(bytes, b, sizeof bytes); }
};
const Key kBystanderKey(0xb5);  // exported by the test process, which stays alive
const Key kVictimKey(0x71);     // exported by the process that dies

class RegionKillPoints : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-killpoints-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/region";
    char err[256] = "";
    ASSERT_EQ(vgpu_region_open(path_.c_str(), &r_, err, sizeof err), VGPU_REGION_OK) << err;
    // The bystander: this process, alive throughout, holding memory and a share entry.
    ASSERT_EQ(vgpu_region_attach(r_, &slot_, err, sizeof err), VGPU_REGION_OK) << err;
    ASSERT_EQ(vgpu_region_try_add(r_, slot_, 0, 12 * kMiB, kLimit), VGPU_REGION_OK);
    ASSERT_EQ(vgpu_region_try_add(r_, slot_, 1, 1 * kMiB, 0), VGPU_REGION_OK);
    ASSERT_EQ(vgpu_region_share_publish(r_, slot_, VGPU_SHARE_IPC, kBystanderKey.bytes, 0, 4 * kMiB), VGPU_REGION_OK);
  }
  void TearDown() override {
    if (r_ != nullptr) vgpu_region_close(r_);
    std::system(("rm -rf " + dir_).c_str());
  }

  // What live processes hold after the setup: the bystander's 8 MiB in its slot, its 4 MiB
  // share on device 0, and 1 MiB on device 1.
  static constexpr uint64_t kLive0 = 12 * kMiB;
  static constexpr uint64_t kLive1 = 1 * kMiB;

  // Runs `body` in a child process with a region and slot of its own; its exit code.
  int inChild(const std::function<int(vgpu_region*, int)>& body, bool attach = true) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      alarm(20);  // a hang fails the test instead of stalling the suite
      vgpu_region* mine = nullptr;
      int slot = -1;
      if (vgpu_region_open(path_.c_str(), &mine, nullptr, 0) != VGPU_REGION_OK) _exit(90);
      if (attach && vgpu_region_attach(mine, &slot, nullptr, 0) != VGPU_REGION_OK) _exit(91);
      _exit(body(mine, slot));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGKILL ? kKilled : 200 + WTERMSIG(status);
    return WEXITSTATUS(status);
  }
  static constexpr int kKilled = 999;

  // A victim that attaches, allocates some, arms `point` (its nth passage), runs `op`, and
  // must die there.
  void killAt(int point, int nth, const std::function<void(vgpu_region*, int)>& op) {
    int rc = inChild([&](vgpu_region* r, int slot) {
      if (vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit) != VGPU_REGION_OK ||
          vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit) != VGPU_REGION_OK ||
          vgpu_region_try_add(r, slot, 1, 2 * kMiB, 0) != VGPU_REGION_OK)
        return 2;
      vgpu_region_kill_at(point, nth);
      op(r, slot);
      return 0;  // the kill point was never reached
    });
    ASSERT_EQ(rc, kKilled) << "the victim was not killed at kill point " << point << " (passage " << nth << ")";
  }

  // Another process reclaims; then the sums are exactly what the live hold, and a fresh
  // process gets exactly the rest of the limit, not one byte more.
  void expectExactAfterReclaim(uint64_t live0 = kLive0, uint64_t live1 = kLive1) {
    ASSERT_EQ(inChild([](vgpu_region* r, int) { return vgpu_region_reclaim_dead(r) >= 0 ? 0 : 1; }, false), 0);
    EXPECT_EQ(__atomic_load_n(&r_->reclaiming, __ATOMIC_SEQ_CST), 0u) << "the reclaim left its flag raised";
    uint64_t slots0 = 0, slots1 = 0;
    for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
      if (r_->procs[s].pid == 0) continue;
      slots0 += r_->procs[s].memory_used[0];
      slots1 += r_->procs[s].memory_used[1];
    }
    EXPECT_EQ(vgpu_region_used(r_, 0), slots0 + vgpu_region_shared_bytes(r_, 0)) << "device 0: live slots + shares";
    EXPECT_EQ(vgpu_region_used(r_, 1), slots1 + vgpu_region_shared_bytes(r_, 1)) << "device 1: live slots + shares";
    EXPECT_EQ(vgpu_region_used(r_, 0), live0) << "device 0 after the reclaim";
    EXPECT_EQ(vgpu_region_used(r_, 1), live1) << "device 1 after the reclaim";
    int fresh = inChild([live0](vgpu_region* r, int slot) {
      if (vgpu_region_try_add(r, slot, 0, kLimit - live0, kLimit) != VGPU_REGION_OK) return 3;
      if (vgpu_region_try_add(r, slot, 0, 1, kLimit) != VGPU_REGION_OVER_LIMIT) return 4;
      return 0;
    });
    EXPECT_EQ(fresh, 0) << (fresh == 3 ? "a fresh process did not get the whole rest of the limit"
                                       : "a fresh process got more than the limit");
  }

  std::string dir_, path_;
  vgpu_region* r_ = nullptr;
  int slot_ = -1;
};

struct Step {
  const char* what;
  int point;
  int nth;
};

TEST_F(RegionKillPoints, AllocationKilledAtEachStep) {
  for (Step s : {Step{"in flight", VGPU_KP_ADD_MARKED, 1}, Step{"device sum raised", VGPU_KP_ADD_DEVICE, 1},
                 Step{"slot raised", VGPU_KP_ADD_SLOT, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) { vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit); });
    expectExactAfterReclaim();
  }
}

TEST_F(RegionKillPoints, FreeKilledAtEachStep) {
  for (Step s : {Step{"in flight", VGPU_KP_SUB_MARKED, 1}, Step{"slot lowered", VGPU_KP_SUB_SLOT, 1},
                 Step{"device sum lowered", VGPU_KP_SUB_DEVICE, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) { vgpu_region_sub(r, slot, 0, 4 * kMiB); });
    expectExactAfterReclaim();
  }
}

// A context destroyed gives back what it held on every device, one subtraction each.
TEST_F(RegionKillPoints, ContextDestroyKilledInTheMiddleOfItsBatch) {
  for (Step s : {Step{"second slot lowered", VGPU_KP_SUB_SLOT, 2}, Step{"first device lowered", VGPU_KP_SUB_DEVICE, 1},
                 Step{"second in flight", VGPU_KP_SUB_MARKED, 2}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) {
      vgpu_region_sub(r, slot, 0, 8 * kMiB);
      vgpu_region_sub(r, slot, 1, 2 * kMiB);
    });
    expectExactAfterReclaim();
  }
}

// A pool trimmed gives back part of what it was charged.
TEST_F(RegionKillPoints, PoolTrimKilledAtEachStep) {
  for (Step s : {Step{"slot lowered", VGPU_KP_SUB_SLOT, 1}, Step{"device sum lowered", VGPU_KP_SUB_DEVICE, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) { vgpu_region_sub(r, slot, 0, 1 * kMiB + 4096); });
    expectExactAfterReclaim();
  }
}

// Memory the driver took already (a pool that grew) is counted whatever the limit.
TEST_F(RegionKillPoints, ForcedAddKilledAtEachStep) {
  for (Step s : {Step{"device sum raised", VGPU_KP_FORCE_DEVICE, 1}, Step{"slot raised", VGPU_KP_FORCE_SLOT, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) { vgpu_region_force_add(r, slot, 0, 3 * kMiB); });
    expectExactAfterReclaim();
  }
}

TEST_F(RegionKillPoints, AttachKilledAtEachStep) {
  for (Step s : {Step{"lock taken", VGPU_KP_ATTACH_LOCKED, 1}, Step{"slot claimed", VGPU_KP_ATTACH_CLAIMED, 1},
                 Step{"slot reset", VGPU_KP_ATTACH_RESET, 1}, Step{"pid written", VGPU_KP_ATTACH_DONE, 1}}) {
    SCOPED_TRACE(s.what);
    int rc = inChild(
        [&](vgpu_region* r, int) {
          int slot = -1;
          vgpu_region_kill_at(s.point, s.nth);
          vgpu_region_attach(r, &slot, nullptr, 0);
          return 0;
        },
        false);
    ASSERT_EQ(rc, kKilled);
    expectExactAfterReclaim();
  }
}

TEST_F(RegionKillPoints, DetachKilledAtEachStep) {
  for (Step s : {Step{"first counter taken", VGPU_KP_CLEAR_SLOT, 1},
                 Step{"first device lowered", VGPU_KP_CLEAR_DEVICE, 1},
                 Step{"second counter taken", VGPU_KP_CLEAR_SLOT, 2}, Step{"slot freed", VGPU_KP_CLEAR_DONE, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) { vgpu_region_detach(r, slot); });
    expectExactAfterReclaim();
  }
}

TEST_F(RegionKillPoints, ExportKilledAtEachStep) {
  for (Step s : {Step{"entry written", VGPU_KP_SHARE_PUBLISH_ENTRY, 1},
                 Step{"exporter's slot lowered", VGPU_KP_SHARE_PUBLISH_SLOT, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) {
      vgpu_region_share_publish(r, slot, VGPU_SHARE_IPC, kVictimKey.bytes, 0, 4 * kMiB);
    });
    expectExactAfterReclaim();
  }
}

// Importing the bystander's export and letting it go: the entry keeps its live holder.
TEST_F(RegionKillPoints, ImportAndDropOfALiveExportKilledAtEachStep) {
  for (Step s : {Step{"holder set", VGPU_KP_SHARE_HOLD, 1}, Step{"holder cleared", VGPU_KP_SHARE_DROP_HOLDER, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) {
      if (vgpu_region_share_hold(r, slot, VGPU_SHARE_IPC, kBystanderKey.bytes, nullptr, nullptr) != VGPU_REGION_OK)
        _exit(5);
      vgpu_region_share_drop(r, slot, VGPU_SHARE_IPC, kBystanderKey.bytes);
    });
    expectExactAfterReclaim();
  }
}

// The last holder drops its own export: the entry is freed and its bytes leave the sum.
TEST_F(RegionKillPoints, DropOfTheLastHolderKilledAtEachStep) {
  for (Step s : {Step{"holder cleared", VGPU_KP_SHARE_DROP_HOLDER, 1}, Step{"entry freed", VGPU_KP_SHARE_DROP_ENTRY, 1},
                 Step{"device sum lowered", VGPU_KP_SHARE_DROP_DEVICE, 1}}) {
    SCOPED_TRACE(s.what);
    killAt(s.point, s.nth, [](vgpu_region* r, int slot) {
      if (vgpu_region_share_publish(r, slot, VGPU_SHARE_IPC, kVictimKey.bytes, 0, 4 * kMiB) != VGPU_REGION_OK) _exit(5);
      vgpu_region_share_drop(r, slot, VGPU_SHARE_IPC, kVictimKey.bytes);
    });
    expectExactAfterReclaim();
  }
}

// An export held by a process that stays alive survives its exporter's death, counted once.
TEST_F(RegionKillPoints, AnExportHeldByALiveProcessOutlivesItsKilledExporter) {
  killAt(VGPU_KP_SUB_SLOT, 1, [&](vgpu_region* r, int slot) {
    if (vgpu_region_share_publish(r, slot, VGPU_SHARE_IPC, kVictimKey.bytes, 0, 4 * kMiB) != VGPU_REGION_OK) _exit(5);
    // On the bystander's behalf (its slot, in the mapping the child inherited): it imports.
    if (vgpu_region_share_hold(r_, slot_, VGPU_SHARE_IPC, kVictimKey.bytes, nullptr, nullptr) != VGPU_REGION_OK)
      _exit(6);
    vgpu_region_sub(r, slot, 0, 4 * kMiB);
  });
  expectExactAfterReclaim(kLive0 + 4 * kMiB);
  EXPECT_EQ(vgpu_region_share_drop(r_, slot_, VGPU_SHARE_IPC, kVictimKey.bytes), VGPU_REGION_OK);
  vgpu_region_reclaim_dead(r_);  // the fresh process of the check above exited without detaching
  EXPECT_EQ(vgpu_region_used(r_, 0), kLive0) << "the last holder let go";
}

// A reclaimer killed anywhere in its work (its own allocations and a dead process's torn
// update and export to clean up): the next locker recovers the lock and recomputes.
TEST_F(RegionKillPoints, ReclaimKilledAtEachStep) {
  for (Step s : {Step{"flag raised", VGPU_KP_RECLAIM_FLAGGED, 1}, Step{"quiet", VGPU_KP_RECLAIM_QUIET, 1},
                 Step{"shares reclaimed", VGPU_KP_RECLAIM_SHARES, 1},
                 Step{"first sum written", VGPU_KP_RECLAIM_DEVICE, 1},
                 Step{"second sum written", VGPU_KP_RECLAIM_DEVICE, 2},
                 Step{"dead slot freed", VGPU_KP_RECLAIM_SLOT, 1},
                 Step{"flag lowered", VGPU_KP_RECLAIM_DONE, 1}}) {
    SCOPED_TRACE(s.what);
    // The dead process to clean up: killed with its device sum raised and its slot not.
    killAt(VGPU_KP_ADD_DEVICE, 1, [](vgpu_region* r, int slot) {
      if (vgpu_region_share_publish(r, slot, VGPU_SHARE_IPC, kVictimKey.bytes, 0, 4 * kMiB) != VGPU_REGION_OK) _exit(5);
      vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit);
    });
    int rc = inChild(
        [&](vgpu_region* r, int) {
          vgpu_region_kill_at(s.point, s.nth);
          vgpu_region_reclaim_dead(r);
          return 0;
        },
        false);  // not attached: attaching would reclaim first
    ASSERT_EQ(rc, kKilled);
    expectExactAfterReclaim();
  }
}

// A live process stopped in the middle of an update (SIGSTOP) must hang no one: the reclaim
// gives up waiting for it within a few milliseconds, frees the dead anyway and leaves the sums
// high, never low; once it goes on and finishes, the next reclaim is exact.
TEST_F(RegionKillPoints, AProcessStoppedInFlightDelaysNoOneAndTheSumsStayHighUntilItGoesOn) {
  pid_t stopped = fork();
  ASSERT_GE(stopped, 0);
  if (stopped == 0) {
    alarm(20);
    vgpu_region* r = nullptr;
    int slot = -1;
    if (vgpu_region_open(path_.c_str(), &r, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_attach(r, &slot, nullptr, 0) != VGPU_REGION_OK ||
        vgpu_region_try_add(r, slot, 0, 8 * kMiB, kLimit) != VGPU_REGION_OK)
      _exit(2);
    vgpu_region_signal_at(VGPU_KP_ADD_DEVICE, 1, SIGSTOP);
    _exit(vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit) == VGPU_REGION_OK ? 0 : 3);  // exits without detaching
  }
  int status = 0;
  ASSERT_EQ(waitpid(stopped, &status, WUNTRACED), stopped);
  ASSERT_TRUE(WIFSTOPPED(status));
  killAt(VGPU_KP_ADD_DEVICE, 1, [](vgpu_region* r, int slot) { vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit); });
  // The dead one: 8 MiB in its slot, 4 MiB torn. The stopped one: 8 MiB, and 4 MiB in flight.
  EXPECT_EQ(vgpu_region_used(r_, 0), kLive0 + 12 * kMiB + 12 * kMiB);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(vgpu_region_reclaim_dead(r_), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(vgpu_region_used(r_, 0), kLive0 + 12 * kMiB + 4 * kMiB) << "high by the dead one's torn 4 MiB, never low";
  EXPECT_EQ(r_->sums_stale, 1u);
  EXPECT_EQ(r_->reclaiming, 0u) << "allocations go on meanwhile";
  EXPECT_EQ(vgpu_region_try_add(r_, slot_, 0, 1 * kMiB, kLimit), VGPU_REGION_OK);
  vgpu_region_sub(r_, slot_, 0, 1 * kMiB);
  kill(stopped, SIGCONT);
  ASSERT_EQ(waitpid(stopped, &status, 0), stopped);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  expectExactAfterReclaim();
}

// Leaving is not dying: a process that detaches lets go of its exports (an entry it alone
// held leaves the sum), so that its slot, taken by another process, holds nothing of them.
TEST_F(RegionKillPoints, ADetachingProcessLetsGoOfWhatItShares) {
  vgpu_region_detach(r_, slot_);
  EXPECT_EQ(vgpu_region_used(r_, 0), 0u) << "the bystander's 8 MiB and its 4 MiB export";
  EXPECT_EQ(vgpu_region_shared_bytes(r_, 0), 0u);
  EXPECT_EQ(vgpu_region_share_hold(r_, slot_, VGPU_SHARE_IPC, kBystanderKey.bytes, nullptr, nullptr),
            VGPU_REGION_SHARE_NOT_FOUND);
}

// The defect as measured from the outside: 40 processes allocating and freeing 4 MiB blocks
// under a 64 MiB limit, SIGKILLed at random moments; a new process then gets the whole 64 MiB.
TEST_F(RegionKillPoints, FortyProcessesKilledAtRandomLeaveTheWholeLimit) {
  // No bystander: the whole limit must come back.
  ASSERT_EQ(vgpu_region_share_drop(r_, slot_, VGPU_SHARE_IPC, kBystanderKey.bytes), VGPU_REGION_OK);
  vgpu_region_detach(r_, slot_);
  ASSERT_EQ(vgpu_region_used(r_, 0), 0u);
  std::mt19937 rng(1234);
  for (int round = 0; round < 2; ++round) {
    std::vector<pid_t> kids;
    for (int i = 0; i < 40; ++i) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        vgpu_region* r = nullptr;
        int slot = -1;
        if (vgpu_region_open(path_.c_str(), &r, nullptr, 0) != VGPU_REGION_OK ||
            vgpu_region_attach(r, &slot, nullptr, 0) != VGPU_REGION_OK)
          _exit(2);
        for (;;) {
          if (vgpu_region_try_add(r, slot, 0, 4 * kMiB, kLimit) == VGPU_REGION_OK) {
            vgpu_region_sub(r, slot, 0, 4 * kMiB);
          } else {
            usleep(1000);  // full: an application waits a little before it tries again
          }
        }
      }
      kids.push_back(pid);
    }
    usleep(100 * 1000);  // all of them at work
    std::shuffle(kids.begin(), kids.end(), rng);
    for (pid_t pid : kids) {
      kill(pid, SIGKILL);
      usleep(std::uniform_int_distribution<int>(0, 3000)(rng));
    }
    for (pid_t pid : kids) waitpid(pid, nullptr, 0);
  }
  auto start = std::chrono::steady_clock::now();
  int rc = inChild([](vgpu_region* r, int slot) {
    for (int tries = 0; vgpu_region_try_add(r, slot, 0, kLimit, kLimit) != VGPU_REGION_OK; ++tries) {
      if (tries == 60) return 3;  // 3 s
      usleep(50 * 1000);
    }
    return vgpu_region_try_add(r, slot, 0, 1, kLimit) == VGPU_REGION_OVER_LIMIT ? 0 : 4;
  });
  EXPECT_EQ(rc, 0) << (rc == 3 ? "a new process never got the whole 64 MiB; the region counts " +
                                     std::to_string(vgpu_region_used(r_, 0) / kMiB) + " MiB of dead processes"
                               : std::string("a new process got more than the limit"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
