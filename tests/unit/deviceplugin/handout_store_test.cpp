// The handout store on a real folder: naming, fresh folders, records read back after a
// restart, strays.
#include <gmock/gmock.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "handout_store.h"
#include "temp_dir.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

Handout handout(const std::string& resource, std::vector<std::string> ids, const std::string& pod,
                const std::string& uid) {
  Handout h;
  h.resource = resource;
  h.ids = std::move(ids);
  h.backend = "sim";
  h.podUid = uid;
  h.podNamespace = "default";
  h.podName = pod;
  h.container = "main";
  return h;
}

TEST(DevicePluginHandoutStore, NamesAFolderByTheResourceAndTheSetOfIds) {
  const auto a = handoutId("vgpu.io/sim", {"sim-0::1", "sim-1::0"});
  EXPECT_EQ(a, handoutId("vgpu.io/sim", {"sim-1::0", "sim-0::1"}));
  EXPECT_NE(a, handoutId("vgpu.io/sim", {"sim-0::1"}));
  EXPECT_NE(a, handoutId("other.io/sim", {"sim-0::1", "sim-1::0"}));
  EXPECT_THAT(a, ::testing::MatchesRegex("vgpu\\.io_sim-[0-9a-f]{16}"));
}

/// A store on `dir`/containers with the node's journal beside, loaded (as the agent does at start),
/// migrating containers.journal (the journal of an agent before the shared one) when a test wrote it.
struct LoadedStore {
  explicit LoadedStore(const TempDir& dir)
      : journal(dir.path() / "handouts.journal"), store(dir.path() / "containers", journal, {}, dir.path() / "containers.journal") {
    auto problems = store.load();
    EXPECT_TRUE(problems.ok());
    if (problems.ok()) this->problems = *problems;
  }
  fs::path journal;
  HandoutStore store;
  std::vector<std::string> problems;
};

TEST(DevicePluginHandoutStore, GivesIdsHandedOutAgainAFreshFolder) {
  TempDir dir;
  LoadedStore s(dir);
  auto first = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  ASSERT_TRUE(first.ok()) << first.error().message;
  s.store.remove(fs::path(*first).filename().string());
  // Whatever is left there (a crash between the two) goes with the next holder.
  fs::create_directories(*first);
  std::ofstream(*first + "/region") << "left by the first container";
  auto second = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "b", "uid-b"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_FALSE(fs::exists(*second + "/region"));
  ASSERT_EQ(s.store.all().size(), 1u);
  EXPECT_EQ(s.store.all()[0].podName, "b");
}

// An init container's IDs go to the container after it: both live, each with its folder.
TEST(DevicePluginHandoutStore, GivesIdsAnotherLiveContainerHoldsAFolderOfTheirOwn) {
  TempDir dir;
  std::string initId, appId, thirdId;
  {
    LoadedStore s(dir);
    Handout init = handout("vgpu.io/sim", {"sim-0::0"}, "p", "uid-p");
    init.container = "setup";
    auto a = s.store.create(init);
    ASSERT_TRUE(a.ok());
    std::ofstream(*a + "/region") << "the init container's";
    auto b = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "p", "uid-p"));
    ASSERT_TRUE(b.ok());
    initId = fs::path(*a).filename().string();
    appId = fs::path(*b).filename().string();
    EXPECT_EQ(initId, handoutId("vgpu.io/sim", {"sim-0::0"}));
    EXPECT_EQ(appId, initId + "-2");
    EXPECT_EQ(handoutKey(appId), initId);
    EXPECT_TRUE(fs::exists(*a + "/region"));
    ASSERT_EQ(s.store.withIds("vgpu.io/sim", {"sim-0::0"}).size(), 2u);
    EXPECT_EQ(s.store.withIds("vgpu.io/sim", {"sim-0::0"})[0].container, "setup");
    // PodResources lists the app container (never the init one): the newest, or the one
    // attributed to the listed container.
    EXPECT_EQ(s.store.listedAs("vgpu.io/sim", {"sim-0::0"}, "uid-x", "main")->id, appId);
    EXPECT_EQ(s.store.listedAs("vgpu.io/sim", {"sim-0::0"}, "uid-p", "setup")->id, initId);
    EXPECT_FALSE(s.store.listedAs("vgpu.io/sim", {"sim-0::1"}, "uid-p", "main"));
    // The first one gone, another container of the IDs comes after the live one.
    s.store.remove(initId);
    auto c = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "p", "uid-p"));
    ASSERT_TRUE(c.ok());
    thirdId = fs::path(*c).filename().string();
    EXPECT_EQ(thirdId, initId + "-3");
  }
  LoadedStore again(dir);
  EXPECT_THAT(again.problems, IsEmpty());
  auto live = again.store.withIds("vgpu.io/sim", {"sim-0::0"});
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].id, appId);
  EXPECT_EQ(live[1].id, thirdId);
}

TEST(DevicePluginHandoutStore, ReplaysItsJournalWithTheLatestHolderAfterARestart) {
  TempDir dir;
  std::string id, gone;
  {
    LoadedStore s(dir);
    auto made = s.store.create(handout("vgpu.io/sim", {"sim-1::2", "sim-0::3"}, "guessed", "uid-g"));
    auto other = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "other", "uid-o"));
    ASSERT_TRUE(made.ok() && other.ok());
    id = fs::path(*made).filename().string();
    gone = fs::path(*other).filename().string();
    EXPECT_TRUE(s.store.setPodAnnotations(id, {{"vendor/key", "v"}}));
    EXPECT_TRUE(s.store.attribute(id, "uid-t", "default", "truth", "main"));
    EXPECT_FALSE(s.store.attribute(id, "uid-t", "default", "truth", "main"));
    s.store.remove(gone);
  }
  LoadedStore again(dir);
  EXPECT_THAT(again.problems, IsEmpty());
  ASSERT_EQ(again.store.all().size(), 1u);
  auto h = again.store.find(id);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->podName, "truth");
  EXPECT_EQ(h->podUid, "uid-t");
  EXPECT_EQ(h->ids, (std::vector<std::string>{"sim-0::3", "sim-1::2"}));
  EXPECT_EQ(h->podAnnotations.at("vendor/key"), "v");
  EXPECT_EQ(h->backendRef(), (ContainerRef{id, "main"}));
  EXPECT_EQ(again.store.heldBy("uid-t").size(), 1u);
  EXPECT_THAT(again.store.heldBy("uid-g"), IsEmpty());
  // Loading compacts: one line per live handout.
  std::ifstream in(again.journal);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

TEST(DevicePluginHandoutStore, ReplaysTheDevicesEachAllocateGave) {
  TempDir dir;
  std::string id;
  Handout made = handout("vgpu.io/sim", {"sim-1::2", "sim-0::3"}, "guessed", "uid-g");
  // In the kubelet's ID order, with each device's slice (one with a task priority, one with
  // the placement the scheduler chose).
  made.devices = {DeviceGrant{"sim", "sim-1", 1, 3000, 30, 2, 5},
                  DeviceGrant{"sim", "sim-0", 0, 1000, 0, 3, -1, "half@0-1"}};
  {
    LoadedStore s(dir);
    auto folder = s.store.create(made);
    ASSERT_TRUE(folder.ok()) << folder.error().message;
    id = fs::path(*folder).filename().string();
    EXPECT_TRUE(s.store.attribute(id, "uid-t", "default", "truth", "main"));  // appends a line
  }
  LoadedStore again(dir);
  EXPECT_THAT(again.problems, IsEmpty());
  auto h = again.store.find(id);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->devices, made.devices);
  EXPECT_EQ(h->podName, "truth");
  // And once more from the compacted journal.
  LoadedStore third(dir);
  ASSERT_TRUE(third.store.find(id));
  EXPECT_EQ(third.store.find(id)->devices, made.devices);
}

TEST(DevicePluginHandoutStore, KeepsTheMatchApartFromTheHolderUntilACorrectionMovesIt) {
  TempDir dir;
  std::string id;
  {
    LoadedStore s(dir);
    auto made = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "guessed", "uid-g"));
    ASSERT_TRUE(made.ok());
    id = fs::path(*made).filename().string();
    EXPECT_EQ(s.store.find(id)->matchedPodUid, "uid-g");
    EXPECT_EQ(s.store.find(id)->matchedContainer, "main");
    // PodResources names the real holder: the match stays.
    EXPECT_TRUE(s.store.attribute(id, "uid-t", "default", "truth", "side"));
    EXPECT_EQ(s.store.find(id)->matchedPodUid, "uid-g");
  }
  {
    LoadedStore again(dir);
    auto h = again.store.find(id);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->podUid, "uid-t");
    EXPECT_EQ(h->matchedPodUid, "uid-g");
    EXPECT_EQ(h->matchedContainer, "main");
    EXPECT_TRUE(again.store.rematch(id, "uid-t", "side"));
    EXPECT_FALSE(again.store.rematch("vgpu.io_sim-0000000000000000", "uid-t", "side"));
  }
  LoadedStore third(dir);
  auto h = third.store.find(id);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->matchedPodUid, "uid-t");
  EXPECT_EQ(h->matchedContainer, "side");
}

TEST(DevicePluginHandoutStore, LoadsALineWrittenBeforeDevicesWereJournalled) {
  TempDir dir;
  const std::string id = handoutId("vgpu.io/sim", {"sim-0::1"});
  dir.write("containers.journal",
            R"({"op":"put","id":")" + id +
                R"(","resource":"vgpu.io/sim","ids":["sim-0::1"],"backend":"sim",)"
                R"("podUid":"u","namespace":"default","pod":"p","container":"main","podAnnotations":{"k":"v"}})"
                "\n");
  LoadedStore s(dir);
  EXPECT_THAT(s.problems, IsEmpty());
  auto h = s.store.find(id);
  ASSERT_TRUE(h);
  EXPECT_THAT(h->devices, IsEmpty());
  EXPECT_EQ(h->podName, "p");
  EXPECT_EQ(h->podAnnotations.at("k"), "v");
  // Nor the match: it is the holder the line names.
  EXPECT_EQ(h->matchedPodUid, "u");
  EXPECT_EQ(h->matchedContainer, "main");
}

TEST(DevicePluginHandoutStore, SkipsALineWhoseDevicesCannotBeRead) {
  TempDir dir;
  const std::string put = R"({"op":"put","id":")" + handoutId("vgpu.io/sim", {"sim-0::1"}) +
                          R"(","resource":"vgpu.io/sim","ids":["sim-0::1"],"backend":"sim",)"
                          R"("podUid":"u","namespace":"default","pod":"p","container":"main","devices":)";
  dir.write("containers.journal",
            put + R"([{"backend":"sim","id":"sim-0","index":0,"memoryMiB":-5,"compute":0,"slot":1}]})" + "\n" + put +
                R"([{"backend":"sim","id":"sim-0","index":0,"memoryMiB":1,"compute":0,"slot":1},)" +
                R"({"backend":"sim","id":"sim-1","index":1,"memoryMiB":1,"compute":0,"slot":1}]})" + "\n");
  LoadedStore s(dir);
  ASSERT_EQ(s.problems.size(), 2u);
  EXPECT_THAT(s.problems[0], HasSubstr("line 1: device sim-0 has a missing or bad index, memoryMiB"));
  EXPECT_THAT(s.problems[1], HasSubstr("line 2: 2 devices for 1 IDs"));
  EXPECT_THAT(s.store.all(), IsEmpty());
}

TEST(DevicePluginHandoutStore, SkipsJournalLinesThatAreTornOrNameOtherIds) {
  TempDir dir;
  dir.write("containers.journal",
            // A folder name the IDs do not hash to.
            R"({"op":"put","id":"vgpu.io_sim-0000000000000002","resource":"vgpu.io/sim","ids":["sim-0::0"],)"
            R"("backend":"sim","podUid":"u","namespace":"default","pod":"p","container":"main"})"
            "\n"
            R"({"op":"put","resource":3})"
            "\n"
            R"({"op":"put","id":"vgpu.io_sim-00)");  // torn by a crash
  LoadedStore s(dir);
  ASSERT_EQ(s.problems.size(), 3u);
  EXPECT_THAT(s.problems[0], HasSubstr("containers.journal line 1: the device IDs do not belong to folder"));
  EXPECT_THAT(s.problems[1], HasSubstr("line 2: id, resource, ids, backend or container missing"));
  EXPECT_THAT(s.problems[2], HasSubstr("line 3: not a journal entry"));
  EXPECT_THAT(s.store.all(), IsEmpty());
}

TEST(DevicePluginHandoutStore, RemovesItsOwnAndStrayFoldersButNoOthers) {
  TempDir dir;
  LoadedStore s(dir);
  auto keep = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  auto drop = s.store.create(handout("vgpu.io/sim", {"sim-0::1"}, "b", "uid-b"));
  ASSERT_TRUE(keep.ok() && drop.ok());
  fs::create_directories(dir.path() / "containers" / "0000-dead_old");
  s.store.remove(fs::path(*drop).filename().string());
  EXPECT_FALSE(fs::exists(*drop));
  EXPECT_EQ(s.store.removeStrays(), 1u);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path() / "containers")) left.push_back(e.path().filename().string());
  EXPECT_THAT(left, UnorderedElementsAre(fs::path(*keep).filename().string()));
}

TEST(DevicePluginHandoutStore, NamesThePathWhenTheFolderCannotBeMade) {
  TempDir dir;
  dir.write("containers", "a file where the root folder should be");
  LoadedStore s(dir);
  auto made = s.store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.error().message, HasSubstr("cannot create the container's host folder"));
  EXPECT_THAT(made.error().message, HasSubstr((dir.path() / "containers").string()));
  EXPECT_THAT(s.store.all(), IsEmpty());
}

TEST(DevicePluginHandoutStore, NamesTheJournalWhenItCannotBeOpened) {
  TempDir dir;
  fs::create_directories(dir.path() / "containers.journal");  // a folder in its place
  HandoutStore store(dir.path() / "containers", dir.path() / "containers.journal");
  auto loaded = store.load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.error().message, HasSubstr("containers.journal"));
  auto made = store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.error().message, HasSubstr("journal"));
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
