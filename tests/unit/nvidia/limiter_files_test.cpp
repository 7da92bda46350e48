// The limiter's files in a container's host folder, against what a tenant plants there (issue
// 37 items 3 and 4): links to a missing path, to a root-owned 0600 file, to a folder, files of
// another user, hard links. The agent runs as root; none of them may make it write, chmod or
// delete anything outside the folder, on the first Allocate, a repeated one, or a release.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "limiter.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr uid_t kTenantUid = 4242;
const std::string kGpu0 = "GPU-11111111-0000-0000-0000-000000000000";

ContainerGrant grantIn(const fs::path& hostDir) {
  ContainerGrant g;
  g.container = {"nvidia.com_gpu-0123456789abcdef", "train"};
  g.podNamespace = "ml";
  g.podName = "trainer";
  g.devices = {{"nvidia", kGpu0, 0, 1000, 30, 0}};
  g.hostDir = hostDir.string();
  return g;
}

NvidiaLimiter limiter() {
  return NvidiaLimiter(LimiterSettings{}, [] { return Status(makeError("no driver cap here")); });
}

/// A host file only root may read: what a planted link points the agent at.
fs::path secretFile(const TempDir& host) {
  const fs::path p = host.path() / "secret";
  std::ofstream(p) << "root's secret";
  ::chmod(p.c_str(), 0600);
  return p;
}

struct stat statOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

/// What the limits file names as the region's inode.
std::string inodeInLimits(const fs::path& hostDir) {
  const std::string text = testing::readFile(hostDir / "limits.env");
  const auto at = text.find("VGPU_REGION_INODE=");
  return at == std::string::npos ? "" : text.substr(at + 18, text.find('\n', at) - at - 18);
}

/// The region as the agent must leave it: its own regular file, 0666, the inode the limits
/// file and the spec name.
void expectSoundRegion(const fs::path& hostDir, const ContainerSpec& spec) {
  const auto st = statOf(hostDir / "shared" / "shared-region");
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(inodeInLimits(hostDir), std::to_string(st.st_ino));
  ASSERT_TRUE(spec.region.has_value());
  EXPECT_EQ(spec.region->path, "shared/shared-region");
  EXPECT_EQ(spec.region->inode, st.st_ino);
}

/// Plants `target` as a link named `name`, replacing what is there.
void plantLink(const fs::path& name, const fs::path& target) {
  std::error_code ec;
  fs::remove_all(name, ec);
  fs::create_symlink(target, name);
}

class NvidiaLimiterFilesSecurity : public ::testing::Test {
 protected:
  /// The first Allocate, then what a repeated one finds.
  void SetUp() override {
    auto first = l_.containerSpec(grantIn(dir_.path()));
    ASSERT_TRUE(first.ok()) << first.error().message;
  }
  Result<ContainerSpec> again() { return l_.containerSpec(grantIn(dir_.path())); }
  fs::path region() const { return dir_.path() / "shared" / "shared-region"; }

  TempDir dir_;
  TempDir host_;  // stands for the rest of the host
  NvidiaLimiter l_ = limiter();
};

TEST_F(NvidiaLimiterFilesSecurity, ARepeatedAllocateCreatesNothingWhereALinkToAMissingPathPoints) {
  const fs::path missing = host_.path() / "created-by-root";
  plantLink(region(), missing);
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_FALSE(fs::exists(fs::symlink_status(missing))) << "root made a file where the tenant's link pointed";
  expectSoundRegion(dir_.path(), *spec);
}

TEST_F(NvidiaLimiterFilesSecurity, ARepeatedAllocateLeavesARootOnlyFileALinkPointsAtAlone) {
  const fs::path secret = secretFile(host_);
  plantLink(region(), secret);
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(statOf(secret).st_mode & 0777, 0600u) << "root made the host file world-writable";
  EXPECT_EQ(testing::readFile(secret), "root's secret");
  expectSoundRegion(dir_.path(), *spec);
}

TEST_F(NvidiaLimiterFilesSecurity, ARepeatedAllocateLeavesAFolderALinkPointsAtAlone) {
  const fs::path folder = host_.path() / "etc";
  fs::create_directories(folder);
  std::ofstream(folder / "passwd") << "root:x:0:0";
  plantLink(region(), folder);
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(testing::readFile(folder / "passwd"), "root:x:0:0");
  expectSoundRegion(dir_.path(), *spec);
}

TEST_F(NvidiaLimiterFilesSecurity, ARepeatedAllocateNeverWritesIntoAnotherUsersFileOrAHardLink) {
  // The tenant's own file in the region's place: the agent makes its own, the tenant's stays as it was.
  fs::remove(region());
  {
    std::ofstream(region()) << "tenant bytes";
  }
  ASSERT_EQ(::chown(region().c_str(), kTenantUid, kTenantUid), 0);
  const int kept = ::open(region().c_str(), O_RDONLY);
  ASSERT_GE(kept, 0);
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  char buf[32] = {};
  EXPECT_EQ(::pread(kept, buf, sizeof buf - 1, 0), 12);
  EXPECT_STREQ(buf, "tenant bytes");
  ::close(kept);
  expectSoundRegion(dir_.path(), *spec);

  // A hard link to a host file.
  const fs::path secret = secretFile(host_);
  fs::remove(region());
  fs::create_hard_link(secret, region());
  spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(statOf(secret).st_mode & 0777, 0600u);
  EXPECT_EQ(testing::readFile(secret), "root's secret");
  expectSoundRegion(dir_.path(), *spec);
}

TEST_F(NvidiaLimiterFilesSecurity, TheLimitsFileIsNeverWrittenThroughALink) {
  const fs::path secret = secretFile(host_);
  plantLink(dir_.path() / "limits.env.tmp", secret);  // where the file is written before its rename
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(testing::readFile(secret), "root's secret");
  EXPECT_EQ(statOf(secret).st_mode & 0777, 0600u);
  plantLink(dir_.path() / "limits.env", secret);
  spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(testing::readFile(secret), "root's secret");
  const auto st = statOf(dir_.path() / "limits.env");
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0444u);
}

TEST_F(NvidiaLimiterFilesSecurity, ARegionFolderThatIsALinkOrAnotherUsersIsRefusedAndNothingOutsideChanges) {
  const fs::path folder = host_.path() / "var-lib";
  fs::create_directories(folder);
  ::chmod(folder.c_str(), 0700);
  plantLink(dir_.path() / "shared", folder);
  auto spec = again();
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr((dir_.path() / "shared").string()));
  EXPECT_THAT(spec.error().message, HasSubstr("symbolic link"));
  EXPECT_EQ(statOf(folder).st_mode & 0777, 0700u) << "root made a host folder world-writable";
  EXPECT_TRUE(fs::is_empty(folder));

  fs::remove(dir_.path() / "shared");
  fs::create_directory(dir_.path() / "shared");
  ASSERT_EQ(::chown((dir_.path() / "shared").c_str(), kTenantUid, kTenantUid), 0);
  spec = again();
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("owned by user 4242"));
}

// The folder is the agent's and only the region file is mounted: a tenant can create nothing
// in the host folder, and a folder an older agent left world-writable is corrected.
TEST_F(NvidiaLimiterFilesSecurity, OnlyTheRegionFileIsMountedWritableInAFolderOnlyTheAgentMayWrite) {
  ::chmod((dir_.path() / "shared").c_str(), 0777);
  auto spec = again();
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(statOf(dir_.path() / "shared").st_mode & 0777, 0755u);
  EXPECT_EQ(statOf(dir_.path()).st_uid, ::geteuid());
  for (const auto& m : spec->mounts)
    if (!m.readOnly) {
      EXPECT_EQ(m.hostPath, region().string());
      EXPECT_EQ(m.containerPath, "/var/run/vgpu/shared-region");
    }
}

// remove_all-style removal must unlink a planted link, never walk into what it points at.
TEST_F(NvidiaLimiterFilesSecurity, ReleaseRemovesPlantedLinksWithoutFollowingThem) {
  const fs::path folder = host_.path() / "data";
  fs::create_directories(folder);
  std::ofstream(folder / "keep") << "host data";
  const fs::path secret = secretFile(host_);
  fs::create_symlink(folder, dir_.path() / "shared" / "to-folder");
  fs::create_symlink(secret, dir_.path() / "shared" / "to-file");
  plantLink(dir_.path() / "limits.env", secret);
  ASSERT_TRUE(l_.release(grantIn(dir_.path()).container).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_.path() / "shared")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_.path() / "limits.env")));
  EXPECT_EQ(testing::readFile(folder / "keep"), "host data");
  EXPECT_EQ(testing::readFile(secret), "root's secret");
}

}  // namespace
}  // namespace vgpu::nvidia
