// A node-wide folder a backend mounts writable into containers (the NVIDIA activity board,
// written by every high-priority tenant) is bounded as each container's own folder is
// (issue 37 item 4): a tenant filling it gets ENOSPC, not the host's disk. In mount
// namespaces of their own, as root; also ctest -L security.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "folder_bound.h"
#include "handout_store.h"
#include "limiter.h"
#include "mount_namespace.h"
#include "temp_dir.h"
#include "vgpu/activity_board.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kGpu = "GPU-22222222-0000-0000-0000-000000000000";

class DevicePluginSharedFolderSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounts need root (the node agent's user)";
  }
  /// The board's parent, as the chart mounts the agent's run folder (Bidirectional).
  fs::path run() const { return dir.path() / "run"; }
  fs::path board() const { return run() / "vgpu-board"; }
  fs::path containers() const { return dir.path() / "state" / "containers"; }

  FolderBound bound(FolderTmpfs mode) {
    FolderBound b;
    b.mode = mode;
    b.unbounded = [this](const std::string&, const std::string& why) { warnings.push_back(why); };
    return b;
  }
  /// What the NVIDIA limiter answers for a container of `priority` on the GPU (0: high).
  ContainerSpec specFor(const std::string& holder, int priority) {
    nvidia::LimiterSettings settings;
    settings.activityBoardHostPath = board().string();
    nvidia::NvidiaLimiter limiter(settings, [] { return Status(makeError("no driver cap here")); });
    ContainerGrant g;
    g.container = {holder, "serve"};
    g.podNamespace = "ml";
    g.podName = holder;
    g.devices = {{"nvidia", kGpu, 0, 1000, 30, 0, priority}};
    g.hostDir = (containers() / holder).string();
    fs::create_directories(g.hostDir);
    auto spec = limiter.containerSpec(g);
    EXPECT_TRUE(spec.ok()) << spec.error().message;
    return spec.ok() ? *spec : ContainerSpec{};
  }
  std::string hostDirOf(const std::string& holder) const { return (containers() / holder).string(); }

  TempDir dir;
  std::vector<std::string> warnings;
};

TEST_F(DevicePluginSharedFolderSecurity, TheBoardIsASizeLimitedTmpfsThatTenantsCanStillWrite) {
  inOwnMountNamespace([&] {
    mountShared(run());
    const ContainerSpec spec = specFor("high", 0);
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kRequired), spec, hostDirOf("high")).ok());
    ASSERT_TRUE(isTmpfs(board())) << "the board folder is on the host's disk";
    struct stat st {};
    ASSERT_EQ(::stat(board().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0777u) << "tenants of other users could no longer write their board";

    // libvgpu.so of a high-priority tenant makes its GPU's board there.
    vgpu_board* b = nullptr;
    char err[256] = {};
    ASSERT_EQ(vgpu_board_open(board().c_str(), kGpu, 1, &b, err, sizeof err), 0) << err;
    vgpu_board_announce(b, 7, 1'000'000'000);
    vgpu_board_close(b);

    // A hostile high-priority tenant writes as much as it can into the folder.
    struct statvfs before {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &before), 0);
    const int fd = ::open((board() / "filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    const std::vector<char> chunk(1 << 20, 'x');
    std::uint64_t written = 0;
    int error = 0;
    for (int i = 0; i < 256 && error == 0; ++i) {  // 256 MiB at most
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n <= 0) error = n < 0 ? errno : -1;
      else written += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
    int files = 0;
    for (; files < 1000; ++files) {  // and as many files as it can
      const int f = ::open((board() / ("f" + std::to_string(files))).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (f < 0) break;
      ::close(f);
    }
    struct statvfs after {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &after), 0);
    EXPECT_EQ(error, ENOSPC) << std::strerror(error);
    EXPECT_LE(written, FolderBound::defaultFolderBytes());
    EXPECT_LT(files, 1000) << "no bound on the number of files";
    const double usedMiB = (static_cast<double>(before.f_bavail) - static_cast<double>(after.f_bavail)) *
                           static_cast<double>(before.f_frsize) / (1 << 20);
    EXPECT_LT(usedMiB, 64.0) << "the host's disk grew by " << usedMiB << " MiB";
    std::printf("tenant wrote %llu bytes and %d files into the board folder before ENOSPC\n",
                static_cast<unsigned long long>(written), files);
  });
}

TEST_F(DevicePluginSharedFolderSecurity, TheNextContainerKeepsTheBoardAndItsAnnouncements) {
  inOwnMountNamespace([&] {
    mountShared(run());
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kRequired), specFor("first", 0), hostDirOf("first")).ok());
    vgpu_board* b = nullptr;
    char err[256] = {};
    ASSERT_EQ(vgpu_board_open(board().c_str(), kGpu, 1, &b, err, sizeof err), 0) << err;
    vgpu_board_announce(b, 7, INT64_MAX);
    vgpu_board_close(b);
    struct stat first {};
    ASSERT_EQ(::stat(board().c_str(), &first), 0);

    for (const char* next : {"second", "third"}) {
      ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kRequired), specFor(next, 0), hostDirOf(next)).ok());
      struct stat now {};
      ASSERT_EQ(::stat(board().c_str(), &now), 0);
      EXPECT_EQ(now.st_dev, first.st_dev) << "another tmpfs over the first one";
      EXPECT_EQ(mountsAt(board()), 1) << "mounts stacked on the board";
    }
    ASSERT_EQ(vgpu_board_open(board().c_str(), kGpu, 0, &b, err, sizeof err), 0) << err;
    EXPECT_EQ(vgpu_board_active(b, 0, 0), 1) << "the running tenant's announcement was hidden";
    vgpu_board_close(b);
  });
}

TEST_F(DevicePluginSharedFolderSecurity, ReadOnlyMountsAndTheContainersOwnFolderAreLeftAlone) {
  inOwnMountNamespace([&] {
    mountShared(run());
    // A low-priority container gets the board read-only: nothing of the board to bound for it,
    // and its own folder (the region file mounted writable) is the handout store's.
    const ContainerSpec spec = specFor("low", 1);
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kRequired), spec, hostDirOf("low")).ok());
    EXPECT_FALSE(isTmpfs(board()));
    EXPECT_EQ(mountsAt(hostDirOf("low")), 0);
    EXPECT_EQ(mountsAt(fs::path(hostDirOf("low")) / "shared"), 0);
    // --region-tmpfs=off: nothing mounted at all.
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kOff), specFor("high", 0), hostDirOf("high")).ok());
    EXPECT_FALSE(isTmpfs(board()));
    EXPECT_TRUE(warnings.empty());
  });
}

TEST_F(DevicePluginSharedFolderSecurity, ABoardLeftOnTheDiskByAnOlderAgentIsKeptAndReported) {
  inOwnMountNamespace([&] {
    mountShared(run());
    const ContainerSpec spec = specFor("high", 0);
    vgpu_board* b = nullptr;
    char err[256] = {};
    ASSERT_EQ(vgpu_board_open(board().c_str(), kGpu, 1, &b, err, sizeof err), 0) << err;  // a tenant of before
    vgpu_board_announce(b, 7, INT64_MAX);
    vgpu_board_close(b);
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kRequired), spec, hostDirOf("high")).ok());
    EXPECT_FALSE(isTmpfs(board())) << "a tmpfs over it would hide the running tenants' board";
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr(board().string() + " already holds files made without a tmpfs"));
  });
}

TEST_F(DevicePluginSharedFolderSecurity, ALinkInPlaceOfTheBoardIsNeverMountedOver) {
  inOwnMountNamespace([&] {
    mountShared(run());
    const fs::path outside = dir.path() / "host-folder";
    fs::create_directories(outside);
    fs::create_directories(run());
    fs::create_symlink(outside, board());
    ContainerSpec spec;
    spec.mounts.push_back({board().string(), "/var/run/vgpu-board", false});
    auto s = boundSharedFolders(bound(FolderTmpfs::kRequired), spec, hostDirOf("high"));
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("symbolic link"));
    EXPECT_FALSE(isTmpfs(outside));
    EXPECT_EQ(mountsAt(outside), 0);
    EXPECT_TRUE(fs::is_symlink(board()));
    // The limiter itself refuses the link before anything is mounted into a container.
    nvidia::LimiterSettings settings;
    settings.activityBoardHostPath = board().string();
    nvidia::NvidiaLimiter limiter(settings, [] { return Status(makeError("no driver cap here")); });
    ContainerGrant g;
    g.container = {"high", "serve"};
    g.devices = {{"nvidia", kGpu, 0, 1000, 30, 0, 0}};
    g.hostDir = hostDirOf("high");
    fs::create_directories(g.hostDir);
    auto refused = limiter.containerSpec(g);
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.error().message, HasSubstr("activity board"));
  });
}

TEST_F(DevicePluginSharedFolderSecurity, RequiredRefusesWhenTheBoardWouldNotReachTheHost) {
  inOwnMountNamespace([&] {
    // The board's parent without Bidirectional propagation: a tmpfs there would be the agent's alone.
    auto s = boundSharedFolders(bound(FolderTmpfs::kRequired), specFor("high", 0), hostDirOf("high"));
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("mountPropagation: Bidirectional"));
    EXPECT_EQ(mountsAt(board()), 0);
    ASSERT_TRUE(boundSharedFolders(bound(FolderTmpfs::kBestEffort), specFor("high", 0), hostDirOf("high")).ok());
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("would not reach the host's mount namespace"));
  });
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
