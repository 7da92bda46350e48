// Each DRA claim's folder is a size-limited tmpfs the plugin mounts (issue 37 item 4), as each
// device-plugin container's is (tests/unit/deviceplugin/folder_tmpfs_test.cpp): a tenant that
// grows a file there gets ENOSPC, not the host's disk; unprepare unmounts; a repeated prepare
// keeps the tmpfs and what is in it; a link in the folder's place is refused. Each test runs
// in a child with a mount namespace of its own and needs root. Also ctest -L security.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include <boost/json.hpp>

#include "dra_agent.h"
#include "dra_test_options.h"
#include "mount_namespace.h"
#include "temp_dir.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/fakes/fake_dra_kubelet.h"

namespace vgpu::dra {
namespace {
namespace json = boost::json;
namespace fs = std::filesystem;
using deviceplugin::FolderBound;
using deviceplugin::FolderTmpfs;
using deviceplugin::testing::inodeAt;
using deviceplugin::testing::inOwnMountNamespace;
using deviceplugin::testing::isTmpfs;
using deviceplugin::testing::mountsAt;
using deviceplugin::testing::mountShared;
using deviceplugin::testing::TempDir;

constexpr const char* kDriver = "sim.vgpu.io";
constexpr const char* kNode = "node-1";

/// The plugin, the kubelet's DRA double and the apiserver double on the sim backend, all
/// started inside the test's child.
class Node {
 public:
  explicit Node(const TempDir& dir) : dir_(dir) {
    auto s = fakes::FakeApiServer::start();
    EXPECT_TRUE(s.ok()) << s.error().message;
    api = std::move(s).value();
    EXPECT_TRUE(api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}}).ok());
    dir_.write("devices.yaml", "devices:\n  - id: GPU-0\n    model: Sim GPU\n    memoryMiB: 16384\n    health: healthy\n");
    dir_.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n    splitCount: 4\n"
                                     "    frontEnd: dra\n    options:\n      devicesFile: " +
                                         (dir_.path() / "devices.yaml").string() + "\n");
    fakes::FakeDraKubeletOptions ko;
    ko.registrationDir = (dir_.path() / "reg").string();
    ko.versions = {"v1.DRAPlugin"};
    auto k = fakes::FakeDraKubelet::start(ko);
    EXPECT_TRUE(k.ok()) << k.error().message;
    kubelet = std::move(k).value();
    startAgent();
  }
  ~Node() {
    if (agent) agent->stop();
    if (kubelet) kubelet->stop();
  }
  void startAgent() {
    DraAgentOptions o = dra::testing::draTestOptions(dir_.path(), api->url());
    o.regionTmpfs = FolderTmpfs::kRequired;
    auto a = DraAgent::create(std::move(o));
    ASSERT_TRUE(a.ok()) << a.error().message;
    agent = std::move(a).value();
    auto s = agent->start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto p = kubelet->waitForPlugin(kDriver, std::chrono::seconds(10));
    ASSERT_TRUE(p && p->accepted) << (p ? p->error : "not registered");
  }
  fakes::DraClaim createClaim(const std::string& name) {
    json::object r{{"request", "gpu"}, {"driver", kDriver}, {"pool", kNode}, {"device", "sim-0"}, {"shareID", "share-1"},
                   {"consumedCapacity", {{"memory", "3000Mi"}, {"cores", "30"}, {"shares", "1"}}}};
    json::object c{{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaim"},
                   {"metadata", {{"name", name}, {"namespace", "team-a"}}},
                   {"spec", {{"devices", {{"requests", json::array{}}}}}},
                   {"status", {{"allocation", {{"devices", {{"results", json::array{r}}}}}}}}};
    auto made = api->create("resourceclaims", c);
    EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().message);
    if (!made.ok()) return {};
    return {"team-a", std::string(made->at("metadata").at("uid").as_string()), name};
  }
  fs::path claimsDir() const { return dir_.path() / "state" / "dra" / kDriver / "claims"; }
  fs::path folder(const fakes::DraClaim& c) const { return claimsDir() / ("dra-" + c.uid); }
  fs::path cdiFile(const fakes::DraClaim& c) const { return dir_.path() / "cdi" / ("sim.vgpu.io-share_" + c.uid + ".json"); }
  std::string prepare(const fakes::DraClaim& c) {
    auto got = kubelet->prepare(kDriver, {c});
    if (!got.ok()) return got.error().message;
    return got->at(c.uid).error;
  }

  const TempDir& dir_;
  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<fakes::FakeDraKubelet> kubelet;
  std::unique_ptr<DraAgent> agent;
};

class DraClaimFolderTmpfsSecurity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounts need root (the plugin's user)";
  }
  TempDir dir;
};

TEST_F(DraClaimFolderTmpfsSecurity, ATenantWritingPastTheLimitGetsNoSpaceAndTheHostsDiskDoesNotGrow) {
  inOwnMountNamespace([&] {
    mountShared(dir.path() / "state");
    Node node(dir);
    const auto claim = node.createClaim("c1");
    ASSERT_EQ(node.prepare(claim), "");
    const fs::path folder = node.folder(claim);
    ASSERT_TRUE(isTmpfs(folder)) << folder << " is not a tmpfs";
    struct statvfs before {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &before), 0);
    // The tenant grows a file it was given (a region mounted writable) until it cannot.
    const int fd = ::open((folder / "grown").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::vector<char> chunk(64 * 1024, 'x');
    std::uint64_t written = 0;
    int err = 0;
    for (int i = 0; i < 1024; ++i) {
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n < 0) {
        err = errno;
        break;
      }
      written += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
    EXPECT_EQ(err, ENOSPC);
    EXPECT_LE(written, FolderBound::defaultFolderBytes());
    struct statvfs after {};
    ASSERT_EQ(::statvfs(dir.path().c_str(), &after), 0);
    // The host's disk did not take the 64 MiB the tenant tried (a little slack for other writers).
    EXPECT_LT(static_cast<double>(before.f_bavail) - static_cast<double>(after.f_bavail),
              8.0 * 1024 * 1024 / static_cast<double>(before.f_frsize));
  });
}

TEST_F(DraClaimFolderTmpfsSecurity, ARepeatedPrepareKeepsTheTmpfsAndTheRegionAndUnprepareUnmounts) {
  inOwnMountNamespace([&] {
    mountShared(dir.path() / "state");
    Node node(dir);
    const auto claim = node.createClaim("c1");
    ASSERT_EQ(node.prepare(claim), "");
    const fs::path folder = node.folder(claim);
    ASSERT_TRUE(isTmpfs(folder));
    { std::ofstream(folder / "shared-region") << "the region"; }
    const std::uint64_t inode = inodeAt(folder / "shared-region");
    // The kubelet asks again after the CDI spec went (the preparer hands out again), and the
    // plugin restarts (restore hands out every prepared claim again).
    fs::remove(node.cdiFile(claim));
    ASSERT_EQ(node.prepare(claim), "");
    node.agent->stop();
    node.agent.reset();
    node.startAgent();
    ASSERT_EQ(node.prepare(claim), "");
    EXPECT_EQ(mountsAt(folder), 1) << "one tmpfs, never stacked";
    EXPECT_EQ(inodeAt(folder / "shared-region"), inode);
    auto un = node.kubelet->unprepare(kDriver, {claim});
    ASSERT_TRUE(un.ok()) << un.error().message;
    EXPECT_EQ(un->at(claim.uid), "");
    EXPECT_EQ(mountsAt(folder), 0);
    EXPECT_FALSE(fs::exists(folder));
  });
}

TEST_F(DraClaimFolderTmpfsSecurity, AFolderOfAClaimGoneAtRestartIsUnmounted) {
  inOwnMountNamespace([&] {
    mountShared(dir.path() / "state");
    Node node(dir);
    const auto claim = node.createClaim("c1");
    ASSERT_EQ(node.prepare(claim), "");
    const fs::path folder = node.folder(claim);
    ASSERT_TRUE(isTmpfs(folder));
    node.agent->stop();
    node.agent.reset();
    // Unprepared while the plugin was down: the node's handout journal no longer has it.
    fs::remove(dir.path() / "state" / "handouts.journal");
    node.startAgent();
    EXPECT_EQ(mountsAt(folder), 0);
    EXPECT_FALSE(fs::exists(folder));
  });
}

TEST_F(DraClaimFolderTmpfsSecurity, ALinkInPlaceOfTheClaimFolderIsRefusedNeverMountedOver) {
  inOwnMountNamespace([&] {
    mountShared(dir.path() / "state");
    Node node(dir);
    const auto claim = node.createClaim("c1");
    const fs::path elsewhere = dir.path() / "elsewhere";
    fs::create_directories(elsewhere);
    fs::create_directories(node.claimsDir());
    fs::create_directory_symlink(elsewhere, node.folder(claim));
    EXPECT_NE(node.prepare(claim), "");
    EXPECT_FALSE(isTmpfs(elsewhere));
    EXPECT_EQ(mountsAt(elsewhere), 0);
    EXPECT_TRUE(fs::is_symlink(node.folder(claim)));
  });
}

}  // namespace
}  // namespace vgpu::dra
