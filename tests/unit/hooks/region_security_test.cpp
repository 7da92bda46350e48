// What a hostile tenant can do to its region file (it can write it: the folder is mounted
// read-write into its container), against the node agent's reader and the limiter's locks.
// Each case runs what could crash or hang in a forked child with an alarm, so a regression
// is a failed case, not a dead or stuck test run.

#include "vgpu/shared_region.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1ull << 20;

class RegionSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-region-security-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/region";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // A region with one process slot holding memory, as a container's would be.
  std::vector<char> validImage() {
    vgpu_region* r = nullptr;
    char err[256] = "";
    EXPECT_EQ(vgpu_region_open(path_.c_str(), &r, err, sizeof err), VGPU_REGION_OK) << err;
    int slot = -1;
    EXPECT_EQ(vgpu_region_attach(r, &slot, err, sizeof err), VGPU_REGION_OK) << err;
    vgpu_region_publish_device(r, 0, "GPU-1234", 64 * kMiB, 25);
    EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 5 * kMiB, 64 * kMiB), VGPU_REGION_OK);
    std::vector<char> image(reinterpret_cast<const char*>(r), reinterpret_cast<const char*>(r) + sizeof(vgpu_region));
    vgpu_region_close(r);
    return image;
  }

  std::string dir_;
  std::string path_;
};

// Runs `body` in a forked child that must exit 0 within `seconds`; returns how it ended.
template <class F>
std::string inChild(int seconds, F&& body) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "exit " + std::to_string(WEXITSTATUS(status));
  return "ok";
}

// Everything the agent reads of a region, so that a bad copy would show up (under ASan, or as
// SIGBUS/SIGSEGV) here.
uint64_t touchAll(const vgpu_region* r) {
  uint64_t sum = r->version + r->tenant;
  for (const auto& d : r->devices) {
    sum += strnlen(d.uuid, VGPU_REGION_UUID_LEN) + d.memory_limit + d.memory_used + d.sm_limit + d.unenforced +
           d.compute_busy_ns;
  }
  for (const auto& p : r->procs) sum += static_cast<uint64_t>(p.pid) + p.memory_used[0];
  return sum;
}

// The attack of issue 26: a tenant resizes its region file (truncates, extends, rewrites)
// while the node agent reads it. A mapped reader dies of SIGBUS within a few thousand reads.
TEST_F(RegionSecurity, TheAgentsReaderSurvivesAFileResizedWhileItReads) {
  std::vector<char> image = validImage();
  pid_t storm = fork();
  if (storm == 0) {
    std::mt19937 rng(26);
    int fd = open(path_.c_str(), O_RDWR);
    for (;;) {
      switch (rng() % 4) {
        case 0: ftruncate(fd, 0); break;
        case 1: ftruncate(fd, static_cast<off_t>(rng() % sizeof(vgpu_region))); break;
        case 2: ftruncate(fd, sizeof(vgpu_region) + 4096); break;
        default:
          ftruncate(fd, sizeof(vgpu_region));
          pwrite(fd, image.data(), image.size(), 0);
      }
    }
  }
  std::string how = inChild(120, [&] {
    uint64_t sink = 0;
    for (int i = 0; i < 5000; ++i) {
      const vgpu_region* r = nullptr;
      char err[256];
      if (vgpu_region_open_readonly(path_.c_str(), &r, err, sizeof err) != VGPU_REGION_OK) continue;
      sink += touchAll(r);
      vgpu_region_close(r);
    }
    return sink == 1 ? 3 : 0;
  });
  kill(storm, SIGKILL);
  waitpid(storm, nullptr, 0);
  EXPECT_EQ(how, "ok") << "the reader did not survive 5000 reads of a file being resized";
  // And once the storm is over, the file reads again.
  int fd = open(path_.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_EQ(write(fd, image.data(), image.size()), static_cast<ssize_t>(image.size()));
  close(fd);
  const vgpu_region* r = nullptr;
  char err[256] = "";
  ASSERT_EQ(vgpu_region_open_readonly(path_.c_str(), &r, err, sizeof err), VGPU_REGION_OK) << err;
  EXPECT_EQ(r->devices[0].memory_used, 5 * kMiB);
  vgpu_region_close(r);
}

// Random bytes and sizes (a fixed seed, so a failure repeats): each file is refused with a
// message or read into a copy whose every field can be used (UUIDs end inside their arrays).
TEST_F(RegionSecurity, RandomBytesAndSizesAreRefusedOrReadSafely) {
  std::vector<char> image = validImage();
  std::mt19937_64 rng(0x5eed26);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<char> bytes;
    switch (rng() % 4) {
      case 0: bytes.resize(rng() % (2 * sizeof(vgpu_region))); break;   // any size, zeros
      case 1: bytes.resize(sizeof(vgpu_region)); break;                 // the size, random below
      default: bytes = image;                                            // a good header, random behind it
    }
    size_t from = bytes.size() == image.size() && rng() % 2 == 0 ? 64 : 0;
    for (size_t j = from; j < bytes.size(); j += 1 + rng() % 64) bytes[j] = static_cast<char>(rng());
    // Now and then a UUID with no end inside its array.
    constexpr size_t kUuid = offsetof(vgpu_region, devices) + offsetof(vgpu_region_device, uuid);
    if (rng() % 3 == 0 && bytes.size() >= kUuid + VGPU_REGION_UUID_LEN) memset(&bytes[kUuid], 'x', VGPU_REGION_UUID_LEN);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fd);
    const vgpu_region* r = nullptr;
    char err[256] = "";
    if (vgpu_region_open_readonly(path_.c_str(), &r, err, sizeof err) != VGPU_REGION_OK) {
      EXPECT_NE(std::string(err).find(path_), std::string::npos) << "the message names no file: " << err;
      ++refused;
      continue;
    }
    ++accepted;
    for (const auto& d : r->devices) ASSERT_LT(strnlen(d.uuid, VGPU_REGION_UUID_LEN), size_t{VGPU_REGION_UUID_LEN});
    (void)touchAll(r);
    vgpu_region_close(r);
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// A FIFO or a link in place of the region: refused at once, never a reader blocked on a FIFO
// nobody writes, never a file elsewhere on the node read through a link.
TEST_F(RegionSecurity, AFifoOrALinkInPlaceOfTheRegionIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0666), 0);
  std::string how = inChild(5, [&] {
    const vgpu_region* r = nullptr;
    return vgpu_region_open_readonly(path_.c_str(), &r, nullptr, 0) == VGPU_REGION_ERROR ? 0 : 1;
  });
  EXPECT_EQ(how, "ok") << "a FIFO";
  unlink(path_.c_str());
  std::vector<char> image = validImage();
  std::string target = dir_ + "/elsewhere";
  ASSERT_EQ(rename(path_.c_str(), target.c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  const vgpu_region* r = nullptr;
  char err[256] = "";
  EXPECT_EQ(vgpu_region_open_readonly(path_.c_str(), &r, err, sizeof err), VGPU_REGION_ERROR) << "a link";
  EXPECT_NE(std::string(err).find(path_), std::string::npos) << err;
}

// Holding flock on the region (what opening it takes) hung every new CUDA process of the
// container: now opening gives up after the bound, saying the region is locked.
TEST_F(RegionSecurity, AFlockHeldForEverMakesOpeningFailWithinTheBound) {
  validImage();
  int holder = open(path_.c_str(), O_RDONLY);
  ASSERT_EQ(flock(holder, LOCK_EX), 0);
  std::string how = inChild(VGPU_REGION_LOCK_TIMEOUT_MS / 1000 + 5, [&] {
    vgpu_region* r = nullptr;
    char err[512] = "";
    auto t0 = std::chrono::steady_clock::now();
    if (vgpu_region_open(path_.c_str(), &r, err, sizeof err) != VGPU_REGION_ERROR) return 1;
    if (std::string(err).find("is locked") == std::string::npos) return 2;
    return std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(VGPU_REGION_LOCK_TIMEOUT_MS) ? 0 : 3;
  });
  EXPECT_EQ(how, "ok");
  close(holder);
}

// The same with the region's own lock (taken to claim a slot): a process that holds it and
// never lets go makes attaching fail within the bound, with a message.
TEST_F(RegionSecurity, ARegionLockHeldForEverMakesAttachingFailWithinTheBound) {
  validImage();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  if (holder == 0) {
    vgpu_region* r = nullptr;
    if (vgpu_region_open(path_.c_str(), &r, nullptr, 0) != VGPU_REGION_OK || vgpu_region_lock(r) != 0) _exit(1);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::string how = inChild(VGPU_REGION_LOCK_TIMEOUT_MS / 1000 + 5, [&] {
    vgpu_region* r = nullptr;
    char err[512] = "";
    if (vgpu_region_open(path_.c_str(), &r, err, sizeof err) != VGPU_REGION_OK) return 1;
    int slot = -1;
    if (vgpu_region_attach(r, &slot, err, sizeof err) != VGPU_REGION_ERROR) return 2;
    return std::string(err).find("not free within") != std::string::npos ? 0 : 3;
  });
  EXPECT_EQ(how, "ok");
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
}

// Zeroing the device's usage while a process holds memory (issue 26: one process then held
// 300 MiB under a 64 MiB limit) contradicts that process's slot: found, and the next
// check-and-add of that process is refused, adding nothing.
TEST_F(RegionSecurity, AZeroedDeviceSumIsFoundAndTheNextAddRefused) {
  vgpu_region* r = nullptr;
  ASSERT_EQ(vgpu_region_open(path_.c_str(), &r, nullptr, 0), VGPU_REGION_OK);
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(r, &slot, nullptr, 0), VGPU_REGION_OK);
  ASSERT_EQ(vgpu_region_try_add(r, slot, 0, 40 * kMiB, 64 * kMiB), VGPU_REGION_OK);
  EXPECT_EQ(vgpu_region_verify(r, -1, nullptr, 0), VGPU_REGION_OK);
  __atomic_store_n(&r->devices[0].memory_used, 0, __ATOMIC_RELAXED);  // the attack
  char err[256] = "";
  EXPECT_EQ(vgpu_region_verify(r, slot, err, sizeof err), VGPU_REGION_TAMPERED);
  EXPECT_NE(std::string(err).find("device 0"), std::string::npos) << err;
  EXPECT_EQ(vgpu_region_try_add(r, slot, 0, 40 * kMiB, 64 * kMiB), VGPU_REGION_TAMPERED);
  EXPECT_EQ(r->procs[slot].memory_used[0], 40 * kMiB);  // nothing was added
  int other = -1;
  EXPECT_EQ(vgpu_region_attach(r, &other, err, sizeof err), VGPU_REGION_TAMPERED) << "a new process is refused too";
  vgpu_region_close(r);
}

// No false alarm: processes that allocate and free as fast as they can, while another checks
// the whole region over and over, never see the counters contradict each other.
TEST_F(RegionSecurity, HonestProcessesRacingNeverLookTampered) {
  validImage();
  std::vector<pid_t> kids;
  for (int k = 0; k < 4; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      vgpu_region* r = nullptr;
      int slot = -1;
      if (vgpu_region_open(path_.c_str(), &r, nullptr, 0) != VGPU_REGION_OK ||
          vgpu_region_attach(r, &slot, nullptr, 0) != VGPU_REGION_OK)
        _exit(1);
      // The first holds most of the usage: its slot and the sum are then close, the tightest case.
      if (k == 0 && vgpu_region_try_add(r, slot, 0, 64 * kMiB, 0) != VGPU_REGION_OK) _exit(3);
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
      while (std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 100; ++i) {
          int rc = vgpu_region_try_add(r, slot, 0, (i + 1) * 4096, 0);
          if (rc == VGPU_REGION_TAMPERED) _exit(2);
          if (rc == VGPU_REGION_OK) vgpu_region_sub(r, slot, 0, (i + 1) * 4096);
        }
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  vgpu_region* r = nullptr;
  ASSERT_EQ(vgpu_region_open(path_.c_str(), &r, nullptr, 0), VGPU_REGION_OK);
  int alarms = 0, checks = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
  while (std::chrono::steady_clock::now() < until) {
    ++checks;
    if (vgpu_region_verify(r, -1, nullptr, 0) != VGPU_REGION_OK) ++alarms;
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a racing process saw tampering: " << status;
  }
  EXPECT_EQ(alarms, 0) << "of " << checks << " checks";
  vgpu_region_close(r);
}

// A region the node agent created is opened by its inode number: deleted, truncated, wiped or
// replaced, it is refused with a message saying which, never started afresh (which handed
// every new process a full limit with nothing counted).
TEST_F(RegionSecurity, ARegionTheAgentMadeIsRefusedOnceDeletedTruncatedWipedOrReplaced) {
  validImage();
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  const uint64_t inode = st.st_ino;
  vgpu_region* r = nullptr;
  char err[512] = "";
  ASSERT_EQ(vgpu_region_open_existing(path_.c_str(), inode, &r, err, sizeof err), VGPU_REGION_OK) << err;
  vgpu_region_close(r);
  const auto refused = [&](const char* says) {
    err[0] = '\0';
    EXPECT_EQ(vgpu_region_open_existing(path_.c_str(), inode, &r, err, sizeof err), VGPU_REGION_ERROR) << says;
    EXPECT_NE(std::string(err).find(says), std::string::npos) << err;
  };
  std::vector<char> image = validImage();  // the same file, rewritten: still the agent's
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  refused("truncated");
  ASSERT_EQ(truncate(path_.c_str(), sizeof(vgpu_region)), 0);  // the right size, all zeros
  refused("wiped");
  // Another file, made while the first still exists (so its inode number differs), moved in.
  std::string other = dir_ + "/other";
  int fd = open(other.c_str(), O_WRONLY | O_CREAT, 0666);
  ASSERT_EQ(write(fd, image.data(), image.size()), static_cast<ssize_t>(image.size()));
  close(fd);
  ASSERT_EQ(rename(other.c_str(), path_.c_str()), 0);
  refused("replaced");
  ASSERT_EQ(unlink(path_.c_str()), 0);
  refused("deleted");
}

}  // namespace
