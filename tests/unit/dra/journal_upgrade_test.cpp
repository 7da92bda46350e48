// An upgrade onto the shared handout journal: the state folder an agent from before it left
// (testdata/before-journal, written by that version's stores) is migrated on the first start
// of each front end, with every handout intact, once.
#include <gmock/gmock.h>

#include "handout_store.h"
#include "prepared_store.h"
#include "temp_dir.h"

namespace vgpu::dra {
namespace {
namespace fs = std::filesystem;
using deviceplugin::Handout;
using deviceplugin::HandoutStore;
using deviceplugin::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

/// What the old version's journal held (testdata/before-journal/README.md).
std::vector<Handout> handoutsBefore() {
  Handout a;
  a.id = "vgpu.io_sim-40676eda27460cc3";
  a.resource = "vgpu.io/sim";
  a.ids = {"GPU-0::1"};
  a.backend = "sim";
  a.devices = {DeviceGrant{"sim", "GPU-0", 0, 4096, 25, -1, 1, {}}};
  a.podUid = "pod-uid-a";
  a.podNamespace = "default";
  a.podName = "train";
  a.container = "main";
  a.podAnnotations = {{"vgpu.io/example", "1"}};
  a.matchedPodUid = "pod-uid-a";
  a.matchedContainer = "main";
  a.region = RegionFile{"vgpu.shr", 4242};
  Handout b;
  b.id = "vgpu.io_sim-0ea1f91f06da30e8";
  b.resource = "vgpu.io/sim";
  b.ids = {"GPU-0::2", "GPU-1::0"};
  b.backend = "sim";
  b.devices = {DeviceGrant{"sim", "GPU-1", 1, 8192, 50, -1, 0, {}}, DeviceGrant{"sim", "GPU-0", 0, 8192, 50, -1, 2, {}}};
  b.podUid = "pod-uid-c";
  b.podNamespace = "team-b";
  b.podName = "infer-2";
  b.container = "server";
  b.matchedPodUid = "pod-uid-c";
  b.matchedContainer = "server";
  return {b, a};  // by id
}

std::vector<PreparedClaim> claimsBefore() {
  return {PreparedClaim{{"team-a", "claim-uid-1", "shared-gpu"},
                        "dra-claim-uid-1",
                        {"vgpu.io/sim.vgpu.io-share=claim-uid-1"},
                        {PreparedShare{"gpu", "node-1", "sim-2", "share-a", "GPU-2", 2, 4096, 25}}, {}},
          PreparedClaim{{"team-a", "claim-uid-2", "whole-gpu"},
                        "dra-claim-uid-2",
                        {"vgpu.io/sim.vgpu.io-share=claim-uid-2", "nvidia.com/gpu=3"},
                        {PreparedShare{"gpu", "node-1", "sim-3", "", "GPU-3", 3, 16384, 100}}, {}}};
}

class JournalUpgrade : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fs::path(VGPU_TESTDATA_DIR) / "before-journal", state(), fs::copy_options::recursive);
  }
  fs::path state() const { return dir.path() / "state"; }
  fs::path legacyJournal() const { return state() / "containers.journal"; }
  fs::path legacyCheckpoint() const { return state() / "dra" / "sim.vgpu.io" / "prepared.json"; }
  /// The two front ends' stores as their daemons make them.
  std::unique_ptr<HandoutStore> devicePlugin() const {
    return std::make_unique<HandoutStore>(state() / "containers", state() / "handouts.journal", deviceplugin::FolderBound{},
                                          legacyJournal());
  }
  std::unique_ptr<PreparedStore> dra() const {
    return std::make_unique<PreparedStore>(state() / "handouts.journal", "sim.vgpu.io", "sim", legacyCheckpoint());
  }

  TempDir dir;
};

TEST_F(JournalUpgrade, EveryHandoutOfBothFrontEndsIsReadAfterTheUpgradeOnce) {
  for (int start = 0; start < 2; ++start) {  // the first start migrates; the second reads the journal
    SCOPED_TRACE(start == 0 ? "first start" : "second start");
    auto plugin = devicePlugin();
    auto problems = plugin->load();
    ASSERT_TRUE(problems.ok()) << problems.error().message;
    EXPECT_THAT(*problems, IsEmpty());
    EXPECT_EQ(plugin->all(), handoutsBefore());

    auto claims = dra();
    auto read = claims->load();
    ASSERT_TRUE(read.ok()) << read.error().message;
    EXPECT_THAT(*read, IsEmpty());
    EXPECT_EQ(claims->all(), claimsBefore());

    // The old files are kept renamed, never read again.
    EXPECT_FALSE(fs::exists(legacyJournal()));
    EXPECT_FALSE(fs::exists(legacyCheckpoint()));
    EXPECT_TRUE(fs::exists(legacyJournal().string() + ".migrated"));
    EXPECT_TRUE(fs::exists(legacyCheckpoint().string() + ".migrated"));
  }
  // What either front end checks: each device, its share and its holder.
  deviceplugin::HandoutJournal journal(state() / "handouts.journal", FrontEnd::kDevicePlugin);
  ASSERT_TRUE(journal.open().ok());
  auto all = journal.all();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  const auto& train = (*all)[1];  // by front end, then key
  EXPECT_EQ(train.key, "vgpu.io_sim-40676eda27460cc3");
  EXPECT_EQ(train.holder.podUid, "pod-uid-a");
  EXPECT_EQ(train.holder.container, "main");
  EXPECT_EQ(train.devices, (std::vector<deviceplugin::HeldDevice>{{"sim", "GPU-0", 4096, 25, ""}}));
  const auto& shared = (*all)[2];
  EXPECT_EQ(shared.key, "sim.vgpu.io/claim-uid-1");
  EXPECT_EQ(shared.holder.claimUid, "claim-uid-1");
  EXPECT_EQ(shared.devices, (std::vector<deviceplugin::HeldDevice>{{"sim", "GPU-2", 4096, 25, "share-a"}}));
}

TEST_F(JournalUpgrade, MigratedHandoutsKeepTheirDevicesFromTheOtherFrontEnd) {
  auto plugin = devicePlugin();
  ASSERT_TRUE(plugin->load().ok());
  auto claims = dra();
  ASSERT_TRUE(claims->load().ok());
  PreparedClaim onGpu0{{"team-a", "claim-uid-3", "late"}, "dra-claim-uid-3", {}, {{"gpu", "node-1", "sim-0", "", "GPU-0", 0, 16384, 100}}, {}};
  auto refused = claims->hold(onGpu0);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, AllOf(HasSubstr("device GPU-0"), HasSubstr("vgpu-device-plugin")));
  Handout onGpu3;
  onGpu3.resource = "vgpu.io/sim";
  onGpu3.ids = {"GPU-3::0"};
  onGpu3.backend = "sim";
  onGpu3.devices = {DeviceGrant{"sim", "GPU-3", 3, 1024, 10, -1, 0, {}}};
  onGpu3.podUid = "pod-uid-e";
  onGpu3.container = "main";
  auto made = plugin->create(onGpu3);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.error().message,
              AllOf(HasSubstr("device GPU-3"), HasSubstr("vgpu-dra-plugin"), HasSubstr("ResourceClaim team-a/whole-gpu")));
}

}  // namespace
}  // namespace vgpu::dra
