// The node's handout journal both front ends share, on a real file: the device rule between
// the front ends, another process's appends and rewrites seen under the lock, a lock holder
// that dies, torn and unknown lines, and the cost of one append.
#include <gmock/gmock.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "handout_journal.h"
#include "temp_dir.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

JournalEntry entry(FrontEnd f, const std::string& key, const std::string& device, const std::string& share = "") {
  JournalEntry e;
  e.frontEnd = f;
  e.key = key;
  if (f == FrontEnd::kDra) e.holder = {"", "", "uid-" + key, "ResourceClaim team-a/" + key};
  else e.holder = {"uid-" + key, "main", "", "pod default/" + key};
  e.devices = {HeldDevice{"sim", device, 4096, 25, share}};
  e.record = {{"note", key}};
  return e;
}

std::vector<std::string> keys(const std::vector<JournalEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.key);
  return out;
}

/// Runs `body` in a child process (its own descriptors and locks, as the other daemon) and
/// returns its exit status.
int inChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(HandoutJournal, ADeviceHeldByOneFrontEndIsRefusedToTheOtherInAnyShare) {
  TempDir dir;
  HandoutJournal dp(dir.path() / "handouts.journal", FrontEnd::kDevicePlugin);
  HandoutJournal dra(dir.path() / "handouts.journal", FrontEnd::kDra);
  ASSERT_TRUE(dp.open().ok());
  ASSERT_TRUE(dra.open().ok());

  ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-a", "GPU-0", "slot 0")).ok());
  // Another share of the same device: the device plugin's own business.
  ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-b", "GPU-0", "slot 1")).ok());
  auto refused = dra.hold(entry(FrontEnd::kDra, "sim.vgpu.io/claim-1", "GPU-0", "share-x"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, AllOf(HasSubstr("device GPU-0 (backend sim)"), HasSubstr("vgpu-device-plugin"),
                                             HasSubstr("pod default/pod-a")));
  ASSERT_TRUE(dra.hold(entry(FrontEnd::kDra, "sim.vgpu.io/claim-1", "GPU-1")).ok());
  auto back = dp.hold(entry(FrontEnd::kDevicePlugin, "pod-c", "GPU-1", "slot 0"));
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.error().message,
              AllOf(HasSubstr("device GPU-1"), HasSubstr("vgpu-dra-plugin"), HasSubstr("ResourceClaim team-a/sim.vgpu.io/claim-1")));
  auto holder = dp.heldByOther("sim", "GPU-1");
  ASSERT_TRUE(holder.ok());
  EXPECT_EQ(*holder, "ResourceClaim team-a/sim.vgpu.io/claim-1");

  // Free again once every share the other front end held is released.
  ASSERT_TRUE(dp.release("pod-a").ok());
  EXPECT_FALSE(dra.hold(entry(FrontEnd::kDra, "sim.vgpu.io/claim-2", "GPU-0")).ok());
  ASSERT_TRUE(dp.release("pod-b").ok());
  EXPECT_TRUE(dra.hold(entry(FrontEnd::kDra, "sim.vgpu.io/claim-2", "GPU-0")).ok());

  // Read back by a restarted front end: each sees its own, and the rule still holds.
  HandoutJournal again(dir.path() / "handouts.journal", FrontEnd::kDevicePlugin);
  auto problems = again.open();
  ASSERT_TRUE(problems.ok());
  EXPECT_THAT(*problems, IsEmpty());
  EXPECT_THAT(again.mine(), IsEmpty());
  EXPECT_FALSE(again.hold(entry(FrontEnd::kDevicePlugin, "pod-d", "GPU-0")).ok());
  auto all = again.all();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(keys(*all), ElementsAre("sim.vgpu.io/claim-1", "sim.vgpu.io/claim-2"));
  EXPECT_EQ((*all)[0].record.at("note"), "sim.vgpu.io/claim-1");
  EXPECT_EQ((*all)[0].devices, (std::vector<HeldDevice>{{"sim", "GPU-1", 4096, 25, ""}}));
  EXPECT_EQ((*all)[0].holder, (JournalHolder{"", "", "uid-sim.vgpu.io/claim-1", "ResourceClaim team-a/sim.vgpu.io/claim-1"}));
}

TEST(HandoutJournal, SeesWhatAnotherProcessAppendedAndRewrote) {
  TempDir dir;
  const fs::path file = dir.path() / "handouts.journal";
  HandoutJournal dp(file, FrontEnd::kDevicePlugin);
  ASSERT_TRUE(dp.open().ok());
  ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-a", "GPU-0")).ok());

  // The DRA daemon, another process: refused GPU-0, holds GPU-1, then restarts (its open()
  // rewrites the file: the device plugin's descriptor now points at the old one).
  EXPECT_EQ(inChild([&] {
              HandoutJournal dra(file, FrontEnd::kDra);
              if (!dra.open().ok()) return 1;
              if (dra.hold(entry(FrontEnd::kDra, "d/claim-1", "GPU-0")).ok()) return 2;
              if (!dra.hold(entry(FrontEnd::kDra, "d/claim-1", "GPU-1")).ok()) return 3;
              HandoutJournal restarted(file, FrontEnd::kDra);
              return restarted.open().ok() ? 0 : 4;
            }),
            0);
  auto refused = dp.hold(entry(FrontEnd::kDevicePlugin, "pod-b", "GPU-1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("d/claim-1"));
  // Its own appends after the rewrite land in the file the other process reads.
  ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-c", "GPU-2")).ok());
  EXPECT_EQ(inChild([&] {
              HandoutJournal dra(file, FrontEnd::kDra);
              if (!dra.open().ok()) return 1;
              return dra.hold(entry(FrontEnd::kDra, "d/claim-2", "GPU-2")).ok() ? 2 : 0;
            }),
            0);
  auto all = dp.all();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(keys(*all), ElementsAre("pod-a", "pod-c", "d/claim-1"));
}

TEST(HandoutJournal, ALockHolderThatDiesDoesNotWedgeTheOther) {
  TempDir dir;
  const fs::path file = dir.path() / "handouts.journal";
  HandoutJournal dp(file, FrontEnd::kDevicePlugin);
  ASSERT_TRUE(dp.open().ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Takes the lock as a front end mid-operation does, says so, and hangs until killed.
    const int fd = ::open((file.string() + ".lock").c_str(), O_RDWR);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-a", "GPU-0")).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(HandoutJournal, ALineTornByACrashIsSkippedAndTheNextStandsOnItsOwn) {
  TempDir dir;
  const fs::path file = dir.path() / "handouts.journal";
  {
    HandoutJournal dra(file, FrontEnd::kDra);
    ASSERT_TRUE(dra.open().ok());
    ASSERT_TRUE(dra.hold(entry(FrontEnd::kDra, "d/claim-1", "GPU-1")).ok());
  }
  HandoutJournal dp(file, FrontEnd::kDevicePlugin);
  ASSERT_TRUE(dp.open().ok());
  std::ofstream(file, std::ios::app) << R"({"v":1,"op":"put","frontEnd":"dra","key":"d/cl)";  // the DRA daemon died here
  ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-a", "GPU-0")).ok());
  HandoutJournal restarted(file, FrontEnd::kDra);
  auto problems = restarted.open();
  ASSERT_TRUE(problems.ok());
  ASSERT_THAT(*problems, SizeIs(1));
  EXPECT_THAT((*problems)[0], HasSubstr("handouts.journal line 2: not a JSON object"));
  auto all = restarted.all();
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(keys(*all), ElementsAre("pod-a", "d/claim-1"));
}

TEST(HandoutJournal, NamesLinesOfAnUnknownVersionOrShape) {
  TempDir dir;
  const fs::path file = dir.path() / "handouts.journal";
  dir.write("handouts.journal",
            R"({"v":2,"op":"put","frontEnd":"dra","key":"k"})"
            "\n"
            R"({"op":"put","id":"vgpu.io_sim-0000000000000002"})"
            "\n"
            R"({"v":1,"op":"put","frontEnd":"kubelet","key":"k"})"
            "\n"
            R"({"v":1,"op":"put","frontEnd":"dra","key":"k","holder":{},"devices":[{"id":"GPU-0"}],"record":{}})"
            "\n"
            R"({"v":1,"op":"put","frontEnd":"dra","key":"k","devices":[],"record":{}})"
            "\n");
  HandoutJournal dp(file, FrontEnd::kDevicePlugin);
  auto problems = dp.open();
  ASSERT_TRUE(problems.ok());
  ASSERT_THAT(*problems, SizeIs(5));
  EXPECT_THAT((*problems)[0], HasSubstr("line 1: format version 2 is not known to this agent (it reads 1)"));
  EXPECT_THAT((*problems)[1], HasSubstr("line 2: no format version"));
  EXPECT_THAT((*problems)[2], HasSubstr("line 3: no frontEnd (devicePlugin or dra) or key"));
  EXPECT_THAT((*problems)[3], HasSubstr("line 4: a device without backend or id"));
  EXPECT_THAT((*problems)[4], HasSubstr("line 5: holder missing"));
}

TEST(HandoutJournal, NamesTheFileWhenItCannotBeOpened) {
  TempDir dir;
  fs::create_directories(dir.path() / "handouts.journal");  // a folder in its place
  HandoutJournal dp(dir.path() / "handouts.journal", FrontEnd::kDevicePlugin);
  auto opened = dp.open();
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.error().message, HasSubstr("handouts.journal"));
  auto held = dp.hold(entry(FrontEnd::kDevicePlugin, "pod-a", "GPU-0"));
  ASSERT_FALSE(held.ok());
  EXPECT_THAT(held.error().message, HasSubstr("handouts.journal"));
}

// Allocate's path pays the lock and one append (and a read of nothing new): measured here so
// a change that makes it a metadata operation shows. Generous bound: a loaded CI machine.
TEST(HandoutJournal, OneHoldCostsWellUnderAMillisecond) {
  TempDir dir;
  HandoutJournal dp(dir.path() / "handouts.journal", FrontEnd::kDevicePlugin);
  ASSERT_TRUE(dp.open().ok());
  constexpr int kHolds = 2000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kHolds; ++i)
    ASSERT_TRUE(dp.hold(entry(FrontEnd::kDevicePlugin, "pod-" + std::to_string(i), "GPU-0")).ok());
  const auto perHold = (std::chrono::steady_clock::now() - start) / kHolds;
  std::cout << "one hold: " << std::chrono::duration_cast<std::chrono::microseconds>(perHold).count() << " us\n";
  EXPECT_LT(perHold, std::chrono::microseconds(500));
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
