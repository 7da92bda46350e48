// What a tenant writes into its container's host folder is never the agent's input (issue 37
// item 4): the agent exports usage from the one region the backend created, by inode, and
// removes folders without following links planted in them. Also ctest -L security.
#include <gmock/gmock.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "agent_fixture.h"
#include "handout_store.h"
#include "region_metrics.h"
#include "region_support.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::size_t countOf(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DevicePluginAgentFilesSecurity : public AgentFixture {
 protected:
  /// A sim pod admitted, its region written as libvgpu.so would; the pod's folder.
  std::string admitWorkPod() {
    startSimNode();
    PodSpec spec{"work", {{"main", {{kSimCount, 1}, {kSimMemory, 3000}}, {grant("sim-1", 1, 3000, 30, 0)}}}};
    auto admitted = kubelet->admit(kubeletPod(spec, createPod(spec)));
    EXPECT_TRUE(admitted.admitted) << admitted.error;
    const std::string folder = folderOf(admitted.allocations[0]);
    writeRegion(folder + "/region", "sim-1", 512ull << 20, 3000ull << 20, 30);
    return folder;
  }

  /// The fastest of a few renders, in microseconds.
  double scrapeMicros() {
    double best = 1e18;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)agent->renderMetrics();
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  }
};

// Issue 37 item 4, measured on main: 1,000 planted copies gave 16,000 label sets and a scrape
// time linear in their number.
TEST_F(DevicePluginAgentFilesSecurity, PlantedRegionCopiesAddNoSeriesAndNoScrapeTime) {
  const std::string folder = admitWorkPod();
  const std::string before = agent->renderMetrics();
  const std::string series = "vgpu_container_memory_used_bytes{";
  ASSERT_EQ(countOf(before, series), 1u) << before;
  const double baseline = scrapeMicros();

  for (int i = 0; i < 1000; ++i) {
    const std::string where = folder + (i % 2 ? "/copy-" : "/nested/deeper/copy-") + std::to_string(i);
    writeRegion(where, "planted-" + std::to_string(i), 1, 2, 3);
  }
  const std::string after = agent->renderMetrics();
  EXPECT_EQ(countOf(after, series), 1u);
  EXPECT_THAT(after, Not(HasSubstr("planted-")));
  const double planted = scrapeMicros();
  std::printf("scrape: %.0f us with the container's region alone, %.0f us with 1000 planted copies beside it\n",
              baseline, planted);
  EXPECT_LT(planted, 2 * baseline + 2000) << "the scrape grew with the tenant's files";
}

TEST_F(DevicePluginAgentFilesSecurity, ARegionReplacedByALinkOrAnotherFileIsNotRead) {
  const std::string folder = admitWorkPod();
  const std::string labels = "{namespace=\"default\",pod=\"work\",container=\"main\",device_uuid=\"sim-1\"";
  ASSERT_THAT(agent->renderMetrics(), HasSubstr("vgpu_container_memory_used_bytes" + labels));
  // A region of the tenant's making in the region's place (another inode): not read.
  const std::string elsewhere = dir.path().string() + "/elsewhere-region";
  writeRegion(elsewhere, "sim-1", 7ull << 20, 3000ull << 20, 30);
  fs::copy_file(elsewhere, folder + "/new-region");  // made while the region exists: another inode
  fs::rename(folder + "/new-region", folder + "/region");
  EXPECT_THAT(agent->renderMetrics(), Not(HasSubstr("vgpu_container_memory_used_bytes" + labels)));
  // A link to a region elsewhere: not followed.
  fs::remove(folder + "/region");
  fs::create_symlink(elsewhere, folder + "/region");
  EXPECT_THAT(agent->renderMetrics(), Not(HasSubstr("vgpu_container_memory_used_bytes" + labels)));
}

TEST(DevicePluginRegionMetricsSecurity, ReadsOnlyTheAgentsOwnFileAtAPathInsideTheFolder) {
  TempDir dir;
  const fs::path folder = dir.path() / "h";
  fs::create_directories(folder / "shared");
  writeRegion((folder / "shared" / "r").string(), "u", 1, 2, 3);
  struct stat st {};
  ASSERT_EQ(::stat((folder / "shared" / "r").c_str(), &st), 0);
  const std::uint64_t inode = st.st_ino;
  EXPECT_TRUE(readRegionIn(folder, {"shared/r", inode}).ok());
  for (const std::string bad : {"../h/shared/r", "/etc/passwd", "", "shared/../shared/r", "a/b/c/d/e"}) {
    auto r = readRegionIn(folder, {bad, inode});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("not a short path")) << bad;
  }
  auto other = readRegionIn(folder, {"shared/r", inode + 1});
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.error().message, HasSubstr("not inode"));
  // Another user's file with the right inode (a tenant's chown'd copy is another inode anyway).
  ASSERT_EQ(::chown((folder / "shared" / "r").c_str(), 4242, 4242), 0);
  auto foreign = readRegionIn(folder, {"shared/r", inode});
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(foreign.error().message, HasSubstr("owned by user 4242"));
  ASSERT_EQ(::chown((folder / "shared" / "r").c_str(), 0, 0), 0);
  // A folder on the way replaced by a link.
  fs::rename(folder / "shared", dir.path() / "moved");
  fs::create_symlink(dir.path() / "moved", folder / "shared");
  auto linked = readRegionIn(folder, {"shared/r", inode});
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.error().message, HasSubstr("symbolic link"));
}

/// A host folder with a file only root may read, and links to both planted in `in`.
struct PlantedLinks {
  PlantedLinks(const fs::path& host, const fs::path& in) : folder(host / "data"), secret(host / "secret") {
    fs::create_directories(folder);
    std::ofstream(folder / "keep") << "host data";
    std::ofstream(secret) << "root's secret";
    ::chmod(secret.c_str(), 0600);
    fs::create_directories(in / "sub");
    fs::create_symlink(folder, in / "to-folder");
    fs::create_symlink(secret, in / "sub" / "to-file");
  }
  void expectIntact() const {
    EXPECT_EQ(readText(folder / "keep"), "host data");
    EXPECT_EQ(readText(secret), "root's secret");
  }
  static std::string readText(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path folder, secret;
};

Handout simHandout(const std::string& id) {
  Handout h;
  h.resource = "vgpu.io/sim";
  h.ids = {id};
  h.backend = "sim";
  h.podUid = "uid-" + id;
  h.podNamespace = "default";
  h.podName = "p-" + id;
  h.container = "main";
  return h;
}

TEST(DevicePluginHandoutStoreSecurity, RemovingFoldersNeverFollowsLinksPlantedInThem) {
  TempDir dir;
  const fs::path host = dir.path() / "host";
  HandoutStore store(dir.path() / "containers", dir.path() / "containers.journal");
  ASSERT_TRUE(store.load().ok());
  // remove(): the container is gone.
  auto a = store.create(simHandout("sim-0::0"));
  ASSERT_TRUE(a.ok()) << a.error().message;
  PlantedLinks planted(host, *a);
  store.remove(fs::path(*a).filename().string());
  EXPECT_FALSE(fs::exists(*a));
  planted.expectIntact();
  // create(): what an earlier holder left in the folder goes (a restart, a crash).
  fs::create_directories(*a);
  fs::create_symlink(planted.folder, fs::path(*a) / "to-folder");
  auto again = store.create(simHandout("sim-0::0"));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(fs::is_empty(*again));
  planted.expectIntact();
  // removeStrays(): a folder no handout owns.
  const fs::path stray = dir.path() / "containers" / "stray";
  fs::create_directories(stray);
  fs::create_symlink(planted.folder, stray / "to-folder");
  fs::create_symlink(planted.secret, stray / "to-file");
  EXPECT_EQ(store.removeStrays(), 1u);
  EXPECT_FALSE(fs::exists(stray));
  planted.expectIntact();
}

TEST(DevicePluginHandoutStoreSecurity, KeepsTheBackendsRegionAcrossARestart) {
  TempDir dir;
  {
    HandoutStore store(dir.path() / "containers", dir.path() / "containers.journal");
    ASSERT_TRUE(store.load().ok());
    auto a = store.create(simHandout("sim-0::0"));
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(store.setRegion(fs::path(*a).filename().string(), RegionFile{"shared/shared-region", 1234}));
  }
  HandoutStore store(dir.path() / "containers", dir.path() / "containers.journal");
  auto problems = store.load();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty());
  ASSERT_EQ(store.all().size(), 1u);
  ASSERT_TRUE(store.all()[0].region.has_value());
  EXPECT_EQ(*store.all()[0].region, (RegionFile{"shared/shared-region", 1234}));
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
