// The handout store on a real folder: naming, fresh folders, records read back after a
// restart, strays.
#include <gmock/gmock.h>

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

TEST(DevicePluginHandoutStore, GivesIdsHandedOutAgainAFreshFolder) {
  TempDir dir;
  HandoutStore store(dir.path());
  auto first = store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  ASSERT_TRUE(first.ok()) << first.error().message;
  dir.write(fs::path(*first).filename().string() + "/region", "left by the first container");
  auto second = store.create(handout("vgpu.io/sim", {"sim-0::0"}, "b", "uid-b"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_FALSE(fs::exists(*second + "/region"));
  ASSERT_EQ(store.all().size(), 1u);
  EXPECT_EQ(store.all()[0].podName, "b");
}

TEST(DevicePluginHandoutStore, ReadsBackItsRecordsWithTheLatestHolderAfterARestart) {
  TempDir dir;
  std::string id;
  {
    HandoutStore store(dir.path());
    auto made = store.create(handout("vgpu.io/sim", {"sim-1::2", "sim-0::3"}, "guessed", "uid-g"));
    ASSERT_TRUE(made.ok());
    id = fs::path(*made).filename().string();
    EXPECT_TRUE(store.setPodAnnotations(id, {{"vendor/key", "v"}}));
    EXPECT_TRUE(store.attribute(id, "uid-t", "default", "truth", "main"));
    EXPECT_FALSE(store.attribute(id, "uid-t", "default", "truth", "main"));
  }
  HandoutStore again(dir.path());
  EXPECT_THAT(again.load(), IsEmpty());
  auto h = again.find(id);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->podName, "truth");
  EXPECT_EQ(h->podUid, "uid-t");
  EXPECT_EQ(h->ids, (std::vector<std::string>{"sim-0::3", "sim-1::2"}));
  EXPECT_EQ(h->podAnnotations.at("vendor/key"), "v");
  EXPECT_EQ(h->backendRef(), (ContainerRef{id, "main"}));
  EXPECT_EQ(again.heldBy("uid-t").size(), 1u);
  EXPECT_THAT(again.heldBy("uid-g"), IsEmpty());
}

TEST(DevicePluginHandoutStore, RefusesRecordsThatAreUnreadableOrNameOtherIds) {
  TempDir dir;
  dir.write("vgpu.io_sim-0000000000000001.json", "{\"resource\": 3}");
  // A valid record under a name its IDs do not hash to.
  dir.write("vgpu.io_sim-0000000000000002.json",
            R"({"resource":"vgpu.io/sim","ids":["sim-0::0"],"backend":"sim","podUid":"u","namespace":"default",)"
            R"("pod":"p","container":"main","podAnnotations":{}})");
  HandoutStore store(dir.path());
  const auto problems = store.load();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_THAT(problems, ::testing::Contains(HasSubstr("vgpu.io_sim-0000000000000001.json: resource, ids")));
  EXPECT_THAT(problems, ::testing::Contains(HasSubstr("do not belong to this file")));
  EXPECT_THAT(store.all(), IsEmpty());
}

TEST(DevicePluginHandoutStore, RemovesItsOwnAndStrayEntriesButNoOthers) {
  TempDir dir;
  HandoutStore store(dir.path());
  auto keep = store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  auto drop = store.create(handout("vgpu.io/sim", {"sim-0::1"}, "b", "uid-b"));
  ASSERT_TRUE(keep.ok() && drop.ok());
  fs::create_directories(dir.path() / "0000-dead_old");
  store.remove(fs::path(*drop).filename().string());
  EXPECT_FALSE(fs::exists(*drop));
  EXPECT_FALSE(fs::exists(*drop + ".json"));
  EXPECT_EQ(store.removeStrays(), 1u);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  const std::string id = fs::path(*keep).filename().string();
  EXPECT_THAT(left, UnorderedElementsAre(id, id + ".json"));
}

TEST(DevicePluginHandoutStore, NamesThePathWhenTheFolderCannotBeMade) {
  TempDir dir;
  dir.write("blocker", "a file where the root folder should be");
  HandoutStore store(dir.path() / "blocker");
  auto made = store.create(handout("vgpu.io/sim", {"sim-0::0"}, "a", "uid-a"));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(made.error().message, HasSubstr("cannot create the container's host folder"));
  EXPECT_THAT(made.error().message, HasSubstr((dir.path() / "blocker").string()));
  EXPECT_THAT(store.all(), IsEmpty());
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
