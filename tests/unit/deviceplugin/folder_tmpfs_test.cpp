// Each container's folder is a size-limited tmpfs the agent mounts (issue 37 item 4): a tenant
// that grows its region file gets ENOSPC, not the host's disk. Every test runs in a child
// process with a mount namespace of its own, so nothing it mounts is seen on this machine,
// and needs root (the agent's user). Also ctest -L security.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "handout_store.h"
#include "mount_namespace.h"
#include "temp_dir.h"
#include "vgpu/host_files.h"
#include "vgpu/shared_region.h"
#if VGPU_TEST_NVIDIA_LIMITER
#include "limiter.h"
#endif

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

/// The agent without CAP_SYS_ADMIN (the chart's devicePlugin.privileged: false).
void dropSysAdmin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  ASSERT_EQ(::syscall(SYS_capget, &header, data), 0);
  data[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
  data[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
  ASSERT_EQ(::syscall(SYS_capset, &header, data), 0);
}

Handout handoutFor(const std::string& id) {
  Handout h;
  h.resource = "nvidia.com/gpu";
  h.ids = {id};
  h.backend = "nvidia";
  h.podUid = "uid-" + id;
  h.podNamespace = "ml";
  h.podName = "trainer";
  h.container = "train";
  return h;
}

/// What the backend's limiter does on Allocate: the region in shared/, its inode. The NVIDIA
/// limiter itself where it is built.
std::uint64_t makeRegion(const std::string& hostDir, const std::string& id) {
#if VGPU_TEST_NVIDIA_LIMITER
  nvidia::NvidiaLimiter limiter(nvidia::LimiterSettings{}, [] { return Status(makeError("no driver cap here")); });
  ContainerGrant g;
  g.container = {id, "train"};
  g.podNamespace = "ml";
  g.podName = "trainer";
  g.devices = {{"nvidia", "GPU-11111111-0000-0000-0000-000000000000", 0, 1000, 30, 0}};
  g.hostDir = hostDir;
  auto spec = limiter.containerSpec(g);
  EXPECT_TRUE(spec.ok()) << spec.error().message;
  if (!spec.ok() || !spec->region) return 0;
  EXPECT_EQ(spec->region->path, "shared/shared-region");
  return spec->region->inode;
#else
  (void)id;
  fs::create_directories(fs::path(hostDir) / "shared");
  const std::string path = hostDir + "/shared/shared-region";
  vgpu_region* region = nullptr;
  char err[256];
  EXPECT_EQ(vgpu_region_open(path.c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  if (region) vgpu_region_close(region);
  return inodeAt(path);
#endif
}

class DevicePluginFolderTmpfsSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounts need root (the node agent's user)";
  }
  fs::path root() const { return dir.path() / "state" / "containers"; }
  fs::path journal() const { return dir.path() / "state" / "handouts.journal"; }
  HandoutStore store(FolderTmpfs mode, std::vector<std::string>* warnings = nullptr) const {
    FolderBound bound;
    bound.mode = mode;
    if (warnings) bound.unbounded = [warnings](const std::string&, const std::string& why) { warnings->push_back(why); };
    return HandoutStore(root(), journal(), std::move(bound));
  }
  TempDir dir;
};

TEST_F(DevicePluginFolderTmpfsSecurity, ATenantWritingPastTheLimitGetsNoSpaceAndTheHostsDiskDoesNotGrow) {
  inOwnMountNamespace([&] {
    mountShared(root());
    auto handouts = store(FolderTmpfs::kRequired);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    EXPECT_TRUE(isTmpfs(*folder));
    const std::uint64_t inode = makeRegion(*folder, fs::path(*folder).filename().string());
    ASSERT_NE(inode, 0u);
    const fs::path region = fs::path(*folder) / "shared" / "shared-region";
    // The region's own pages are taken (written when it was made): the tenant's growth cannot
    // starve what libvgpu.so and the agent write through a mapping.
    struct stat st {};
    ASSERT_EQ(::stat(region.c_str(), &st), 0);
#if VGPU_TEST_NVIDIA_LIMITER
    EXPECT_GE(static_cast<std::uint64_t>(st.st_blocks) * 512, sizeof(vgpu_region));
#endif

    // The tenant (the file is mounted writable into its container) writes past the end.
    struct statvfs before {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &before), 0);
    const int fd = ::open(region.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const std::vector<char> chunk(1 << 20, 'x');
    off_t at = static_cast<off_t>(sizeof(vgpu_region));
    std::uint64_t written = 0;
    int error = 0;
    for (int i = 0; i < 256 && error == 0; ++i) {  // 256 MiB at most
      const ssize_t n = ::pwrite(fd, chunk.data(), chunk.size(), at);
      if (n < 0) error = errno;
      else if (n == 0) error = -1;
      else {
        written += static_cast<std::uint64_t>(n);
        at += n;
      }
    }
    // Far past its end, into a hole: no page for it either.
    const bool farWrite = ::pwrite(fd, chunk.data(), 4096, off_t{1} << 30) == 4096;
    const int farError = errno;
    ::close(fd);
    struct statvfs after {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &after), 0);
    EXPECT_EQ(error, ENOSPC) << std::strerror(error);
    EXPECT_LE(written, FolderBound::defaultFolderBytes());
    EXPECT_FALSE(farWrite);
    EXPECT_EQ(farError, ENOSPC);
    // Other engineers' builds share this disk: a loose bound, far below the 256 MiB tried.
    const double usedMiB = (static_cast<double>(before.f_bavail) - static_cast<double>(after.f_bavail)) *
                           static_cast<double>(before.f_frsize) / (1 << 20);
    EXPECT_LT(usedMiB, 64.0) << "the host's disk grew by " << usedMiB << " MiB";
    std::printf("tenant wrote %llu bytes past its region before ENOSPC; host disk change %.1f MiB\n",
                static_cast<unsigned long long>(written), usedMiB);
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, ARepeatedAllocateKeepsTheMountAndTheRegionInode) {
  inOwnMountNamespace([&] {
    mountShared(root());
    auto handouts = store(FolderTmpfs::kRequired);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    const std::string id = fs::path(*folder).filename().string();
    const std::uint64_t inode = makeRegion(*folder, id);
    ASSERT_NE(inode, 0u);
    struct stat first {};
    ASSERT_EQ(::stat(folder->c_str(), &first), 0);

    // The kubelet admits the container again (it lost its record): the same tmpfs, the same region.
    for (int again = 0; again < 2; ++again) {
      auto same = handouts.prepare(id);
      ASSERT_TRUE(same.ok()) << same.error().message;
      EXPECT_EQ(*same, *folder);
      struct stat now {};
      ASSERT_EQ(::stat(folder->c_str(), &now), 0);
      EXPECT_EQ(now.st_dev, first.st_dev) << "another tmpfs over the first one";
      EXPECT_EQ(mountsAt(*folder), 1) << "mounts stacked on the folder";
      EXPECT_EQ(makeRegion(*folder, id), inode) << "the running container's region was replaced";
    }
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, ReleaseAndRestartRecoveryUnmountTheFolder) {
  inOwnMountNamespace([&] {
    mountShared(root());
    {
      auto handouts = store(FolderTmpfs::kRequired);
      ASSERT_TRUE(handouts.load().ok());
      auto gone = handouts.create(handoutFor("GPU-0"));
      auto left = handouts.create(handoutFor("GPU-1"));
      ASSERT_TRUE(gone.ok() && left.ok());
      ASSERT_EQ(mountsAt(*gone), 1);
      // Released: unmounted and removed.
      handouts.remove(fs::path(*gone).filename().string());
      EXPECT_EQ(mountsAt(*gone), 0);
      EXPECT_FALSE(fs::exists(*gone));
      // The same IDs handed out again: a fresh tmpfs, not one stacked on the earlier holder's.
      auto next = handouts.create(handoutFor("GPU-0"));
      ASSERT_TRUE(next.ok());
      EXPECT_EQ(mountsAt(*next), 1);
      EXPECT_EQ(mountsAt(*left), 1);
    }
    // A restart whose journal no longer has GPU-1's handout (gone while the agent was down).
    fs::remove(journal());
    auto restarted = store(FolderTmpfs::kRequired);
    ASSERT_TRUE(restarted.load().ok());
    EXPECT_EQ(restarted.removeStrays(), 2u);
    EXPECT_TRUE(fs::is_empty(root()));
    for (const char* id : {"GPU-0", "GPU-1"})
      EXPECT_EQ(mountsAt(root() / handoutId("nvidia.com/gpu", {id})), 0) << id;
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, ALinkInPlaceOfTheFolderIsNeverMountedOver) {
  inOwnMountNamespace([&] {
    mountShared(root());
    const fs::path outside = dir.path() / "host-folder";
    fs::create_directories(outside);
    auto handouts = store(FolderTmpfs::kRequired);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    const std::string id = fs::path(*folder).filename().string();
    // The folder swapped for a link to a host folder before the kubelet admits the container again.
    ASSERT_EQ(::umount2(folder->c_str(), MNT_DETACH), 0);
    fs::remove_all(*folder);
    fs::create_symlink(outside, *folder);
    auto again = handouts.prepare(id);
    ASSERT_FALSE(again.ok());
    EXPECT_THAT(again.error().message, HasSubstr("symbolic link"));
    EXPECT_FALSE(isTmpfs(outside));
    EXPECT_EQ(mountsAt(outside), 0);
    // The helpers themselves, given the link.
    auto rootFd = openOwnDir(root());
    ASSERT_TRUE(rootFd.ok());
    auto mounted = mountTmpfsAt(rootFd->get(), id, 1 << 20, 16, *folder);
    ASSERT_FALSE(mounted.ok());
    EXPECT_THAT(mounted.error().message, HasSubstr("symbolic link"));
    EXPECT_TRUE(unmountAt(rootFd->get(), id, *folder).ok());  // nothing of ours there: nothing to do
    EXPECT_EQ(mountsAt(outside), 0);
    EXPECT_TRUE(fs::is_symlink(*folder));
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, RequiredRefusesTheAllocateWhenTheAgentCannotMount) {
  inOwnMountNamespace([&] {
    mountShared(root());
    dropSysAdmin();
    auto handouts = store(FolderTmpfs::kRequired);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_FALSE(folder.ok());
    const fs::path where = root() / handoutId("nvidia.com/gpu", {"GPU-0"});
    EXPECT_THAT(folder.error().message,
                HasSubstr("cannot mount a tmpfs on " + where.string() + ": Operation not permitted"));
    EXPECT_THAT(folder.error().message, HasSubstr("CAP_SYS_ADMIN: devicePlugin.privileged"));
    EXPECT_THAT(folder.error().message, HasSubstr("--region-tmpfs=required"));
    EXPECT_TRUE(handouts.all().empty());
    EXPECT_TRUE(fs::is_empty(root()));
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, BestEffortGoesOnWithAWarningWhenTheAgentCannotMount) {
  inOwnMountNamespace([&] {
    mountShared(root());
    dropSysAdmin();
    std::vector<std::string> warnings;
    auto handouts = store(FolderTmpfs::kBestEffort, &warnings);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    EXPECT_TRUE(fs::is_directory(*folder));
    EXPECT_FALSE(isTmpfs(*folder));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0],
                HasSubstr("Operation not permitted (the agent needs CAP_SYS_ADMIN: devicePlugin.privileged)"));
    EXPECT_NE(makeRegion(*folder, fs::path(*folder).filename().string()), 0u);
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, AMountThatWouldNotReachTheHostIsNotUsed) {
  inOwnMountNamespace([&] {
    // No Bidirectional propagation: the state folder is private to the agent's namespace.
    {
      auto handouts = store(FolderTmpfs::kRequired);
      ASSERT_TRUE(handouts.load().ok());
      auto folder = handouts.create(handoutFor("GPU-0"));
      ASSERT_FALSE(folder.ok());
      EXPECT_THAT(folder.error().message, HasSubstr("mountPropagation: Bidirectional"));
      EXPECT_TRUE(fs::is_empty(root()));
    }
    std::vector<std::string> warnings;
    auto handouts = store(FolderTmpfs::kBestEffort, &warnings);
    ASSERT_TRUE(handouts.load().ok());
    auto folder = handouts.create(handoutFor("GPU-0"));
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    EXPECT_EQ(mountsAt(*folder), 0);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("would not reach the host's mount namespace"));
  });
}

TEST_F(DevicePluginFolderTmpfsSecurity, AFolderMadeWithoutATmpfsKeepsItsRegionWhenAdmittedAgain) {
  inOwnMountNamespace([&] {
    mountShared(root());
    std::string id;
    std::uint64_t inode = 0;
    {
      auto before = store(FolderTmpfs::kOff);  // an agent before bounded folders, or --region-tmpfs=off
      ASSERT_TRUE(before.load().ok());
      auto folder = before.create(handoutFor("GPU-0"));
      ASSERT_TRUE(folder.ok());
      id = fs::path(*folder).filename().string();
      inode = makeRegion(*folder, id);
    }
    std::vector<std::string> warnings;
    auto handouts = store(FolderTmpfs::kRequired, &warnings);
    ASSERT_TRUE(handouts.load().ok());
    auto again = handouts.prepare(id);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(mountsAt(*again), 0);
    EXPECT_EQ(makeRegion(*again, id), inode);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("a running container's region"));
  });
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
