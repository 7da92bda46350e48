#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "cambricon_test_support.h"

namespace vgpu::cambricon {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using namespace testing;

ContainerGrant grantFor(const std::string& pod, const std::string& container, std::vector<DeviceGrant> devices) {
  ContainerGrant g;
  g.container = {pod, container};
  g.podNamespace = "default";
  g.podName = "pod-" + pod;
  g.devices = std::move(devices);
  return g;
}

DeviceGrant onCard(const char* uuid, int index, std::uint64_t memoryMiB, std::uint32_t compute) {
  return {"cambricon", mluId(uuid), index, memoryMiB, compute, 0};
}

/// The nodes as the container sees them; each comes from the same place under the host's /dev.
std::vector<std::string> hostPaths(const ContainerSpec& spec) {
  std::vector<std::string> out;
  for (const auto& d : spec.devices) {
    EXPECT_EQ(d.containerPath.rfind("/dev/", 0), 0u) << d.containerPath;
    EXPECT_TRUE(d.hostPath.ends_with(d.containerPath.substr(4))) << d.hostPath;
    EXPECT_TRUE(std::filesystem::exists(d.hostPath)) << d.hostPath;
    out.push_back(d.containerPath);
  }
  return out;
}

class CambriconLimiter : public ::testing::Test {
 protected:
  FakeCndev fake_{threeCards()};
};

TEST_F(CambriconLimiter, GivesAWholeCardItsDeviceNodesWithoutAnInstance) {
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid2, 2, 81920, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(hostPaths(*spec), ::testing::ElementsAre("/dev/cambricon_dev2", "/dev/cambricon_ipcm2"));
  EXPECT_EQ(spec->env.at("CAMBRICON_VISIBLE_DEVICES"), "2");
  EXPECT_FALSE(spec->env.contains("VIRTUAL_DEVICES"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
}

TEST_F(CambriconLimiter, CreatesAnSmluInstanceOfTheGrantedSizeForASharedCard) {
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid1, 1, 4096, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(hostPaths(*spec), ::testing::ElementsAre("/dev/cambricon_dev1", "/dev/cambricon_ipcm1",
                                                       "/dev/cambricon-caps/cap_dev1_mi1"));
  EXPECT_EQ(spec->env.at("VIRTUAL_DEVICES"),
            "/dev/cambricon_dev1,/dev/cambricon_ipcm1,/dev/cambricon-caps/cap_dev1_mi1;");
  EXPECT_FALSE(spec->env.contains("CAMBRICON_VISIBLE_DEVICES"));
  EXPECT_TRUE(spec->annotations.empty()) << "vendor annotations are off by default";

  const auto profiles = fake_.driverState("profile");
  ASSERT_THAT(profiles, SizeIs(1));
  EXPECT_THAT(profiles[0], HasSubstr("card=1 "));
  EXPECT_THAT(profiles[0], HasSubstr("quota=30 "));
  EXPECT_THAT(profiles[0], HasSubstr("memory=" + std::to_string(std::uint64_t{4096} << 20)));
  const auto instances = fake_.driverState("instance");
  ASSERT_THAT(instances, SizeIs(1));
  EXPECT_THAT(instances[0], HasSubstr("name=" + instanceNameFor({"p1", "c"})));
}

TEST_F(CambriconLimiter, GivesEveryCardOfAMultiCardGrantItsNodesWhereTheDriverTakesSeveral) {
  auto backend = makeBackend(fake_.params({{"multiCardSmlu", "true"}}));
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid1, 1, 2048, 20)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(hostPaths(*spec), ::testing::ElementsAre("/dev/cambricon_dev0", "/dev/cambricon_ipcm0",
                                                       "/dev/cambricon-caps/cap_dev0_mi1", "/dev/cambricon_dev1",
                                                       "/dev/cambricon_ipcm1", "/dev/cambricon-caps/cap_dev1_mi1"));
  EXPECT_EQ(spec->env.at("VIRTUAL_DEVICES"),
            "/dev/cambricon_dev0,/dev/cambricon_ipcm0,/dev/cambricon-caps/cap_dev0_mi1;"
            "/dev/cambricon_dev1,/dev/cambricon_ipcm1,/dev/cambricon-caps/cap_dev1_mi1;");
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(2));
}

TEST_F(CambriconLimiter, GivesMultipleWholeCardsTheirNodes) {
  auto backend = makeBackend(fake_.params());
  auto spec =
      backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 24576, 100), onCard(kUuid2, 2, 81920, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(hostPaths(*spec), ::testing::ElementsAre("/dev/cambricon_dev0", "/dev/cambricon_ipcm0",
                                                       "/dev/cambricon_dev2", "/dev/cambricon_ipcm2"));
  EXPECT_EQ(spec->env.at("CAMBRICON_VISIBLE_DEVICES"), "0,2");
}

TEST_F(CambriconLimiter, PassesEveryNodeOfTheCardThatTheHostHasAndNoOther) {
  // This host's driver made no ipcm node for card 0, but the other families of Cambricon's
  // plugin, and the ctl and gdr nodes; card 1's nodes must not reach a card-0 container.
  fake_.removeNode("cambricon_ipcm0");
  for (const char* n : {"cambricon_ctl", "cambricon_gdr", "commu0", "cmsg_ctrl0", "cambr-msgq:0", "cambr-rpc:0",
                        "commu1", "cambr-rpc:1"})
    fake_.addNode(n);
  auto backend = makeBackend(fake_.params());
  auto whole = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 24576, 100)}));
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_THAT(hostPaths(*whole),
              ::testing::ElementsAre("/dev/cambricon_dev0", "/dev/commu0", "/dev/cmsg_ctrl0", "/dev/cambr-msgq:0",
                                     "/dev/cambr-rpc:0", "/dev/cambricon_ctl", "/dev/cambricon_gdr"));
  EXPECT_EQ(whole->devices[0].hostPath, (fake_.devRoot() / "cambricon_dev0").string());
  // A share: the card's nodes that exist, and the instance's node the driver made.
  auto shared = backend->containerSpec(grantFor("p2", "c", {onCard(kUuid1, 1, 4096, 30)}));
  ASSERT_TRUE(shared.ok()) << shared.error().message;
  EXPECT_THAT(hostPaths(*shared),
              ::testing::ElementsAre("/dev/cambricon_dev1", "/dev/cambricon_ipcm1", "/dev/commu1", "/dev/cambr-rpc:1",
                                     "/dev/cambricon-caps/cap_dev1_mi1", "/dev/cambricon_ctl", "/dev/cambricon_gdr"));
}

TEST_F(CambriconLimiter, RefusesACardWhoseDeviceNodeTheHostLacks) {
  fake_.removeNode("cambricon_dev2");
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid2, 2, 81920, 100)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr((fake_.devRoot() / "cambricon_dev2").string() + " does not exist"));
  EXPECT_THAT(spec.error().message, HasSubstr("default/pod-p1/c"));
}

TEST_F(CambriconLimiter, GivesAContainerAtMostOneSmluInstancePerCardAndOneSharedCard) {
  auto backend = makeBackend(fake_.params());
  auto twice = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid0, 0, 2048, 20)}));
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.error().message, HasSubstr("at most one sMLU instance of a card"));
  auto two = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid1, 1, 2048, 20)}));
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.error().message, HasSubstr("one sMLU instance"));
  EXPECT_THAT(two.error().message, HasSubstr("multiCardSmlu"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  // A share of one card next to whole cards is fine.
  auto mixed =
      backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid2, 2, 81920, 100)}));
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(1));
}

TEST_F(CambriconLimiter, RefusesToMakeInstancesWhileCambriconsOwnPluginRuns) {
  ListeningSocket vendor(fake_.pluginDir() / "cambricon.sock");
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("Cambricon's own device plugin is running"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
}

TEST_F(CambriconLimiter, ReusesAProfileOfTheSameSize) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  auto second = backend->containerSpec(grantFor("p2", "c", {onCard(kUuid0, 0, 4096, 25)}));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_THAT(hostPaths(*second), Contains("/dev/cambricon-caps/cap_dev0_mi2"));
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1));
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(2));
}

TEST_F(CambriconLimiter, ReusesTheInstanceWhenTheSameContainerIsAllocatedAgain) {
  auto backend = makeBackend(fake_.params());
  auto first = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)}));
  auto again = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)}));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(*first, *again);
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(1));
}

TEST_F(CambriconLimiter, ReplacesTheInstanceWhenTheSameContainerGetsAnotherSize) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 8192, 50)})).ok());
  const auto instances = fake_.driverState("instance");
  ASSERT_THAT(instances, SizeIs(1));
  const auto profiles = fake_.driverState("profile");
  ASSERT_THAT(profiles, SizeIs(1)) << "the old profile went with its last instance";
  EXPECT_THAT(profiles[0], HasSubstr("quota=50 "));
}

TEST_F(CambriconLimiter, DropsTheSliceWhenTheSameContainerGetsTheCardWhole) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 24576, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(hostPaths(*spec), ::testing::ElementsAre("/dev/cambricon_dev0", "/dev/cambricon_ipcm0"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
}

TEST_F(CambriconLimiter, ReleaseDestroysTheInstanceAndTheProfileOnceUnused) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  ASSERT_TRUE(backend->containerSpec(grantFor("p2", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  auto first = backend->release({"p1", "c"});
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(1));
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1)) << "p2 still uses the profile";
  ASSERT_TRUE(backend->release({"p2", "c"}).ok());
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
  EXPECT_TRUE(backend->release({"p2", "c"}).ok()) << "releasing twice is fine";
  EXPECT_TRUE(backend->release({"never", "seen"}).ok());
}

TEST_F(CambriconLimiter, NeverDestroysAProfileItDidNotCreate) {
  auto lib = CndevLibrary::open({VGPU_FAKE_CNDEV_LIBRARY});
  ASSERT_TRUE(lib.ok());
  auto cards = (*lib)->cards();
  ASSERT_TRUE((*lib)->createProfile((*cards)[0].handle, 25, std::uint64_t{4096} << 20).ok());
  lib->reset();
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  ASSERT_TRUE(backend->release({"p1", "c"}).ok());
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1)) << "the operator's profile stays";
}

TEST_F(CambriconLimiter, LeaksNothingWhenTheSecondCardFails) {
  fake_.append("option failInstanceCreate=2");
  auto backend = makeBackend(fake_.params({{"multiCardSmlu", "true"}}));
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid1, 1, 2048, 20)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr(mluId(kUuid1)));
  EXPECT_THAT(spec.error().message, HasSubstr("cndevCreateSMluInstanceByProfileId"));
  EXPECT_THAT(spec.error().message, HasSubstr("default/pod-p1/c"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
  auto state = loadSmluState(backend->statePath());
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_THAT(state->instances, IsEmpty());
  EXPECT_THAT(state->profiles, IsEmpty());
}

TEST_F(CambriconLimiter, LeaksNothingWhenAProfileCannotBeCreated) {
  fake_.append("option failProfileCreate=2");
  auto backend = makeBackend(fake_.params({{"multiCardSmlu", "true"}}));
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 2048, 20), onCard(kUuid1, 1, 2048, 20)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("creating an sMLU profile of 20% and 2048 MiB"));
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
}

TEST_F(CambriconLimiter, SaysInWordsWhenTheCardIsFull) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 80)})).ok());
  auto spec = backend->containerSpec(grantFor("p2", "c", {onCard(kUuid0, 0, 4096, 30)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("creating an sMLU instance of 30% and 4096 MiB"));
  EXPECT_THAT(spec.error().message, HasSubstr("CNDEV_ERROR_INSUFFICIENT_SPACE"));
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(1));
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1)) << "the failed container's new profile is gone again";
}

TEST_F(CambriconLimiter, RefusesToShareACardNotInSmluMode) {
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid2, 2, 4096, 30)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("not in sMLU mode"));
  EXPECT_THAT(spec.error().message, HasSubstr("cnmon set -c 2 -smlu on"));
}

TEST_F(CambriconLimiter, RefusesACardThisNodeDoesNotHave) {
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {{"cambricon", "MLU-elsewhere", 0, 1024, 10, 0}}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("MLU-elsewhere is not on this node"));
  EXPECT_THAT(spec.error().message, HasSubstr(mluId(kUuid0)));
}

TEST_F(CambriconLimiter, ReconcileAfterARestartDestroysWhatGoneContainersHeld) {
  {
    auto before = makeBackend(fake_.params({{"multiCardSmlu", "true"}}));
    ASSERT_TRUE(before->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
    ASSERT_TRUE(
        before->containerSpec(grantFor("p2", "c", {onCard(kUuid0, 0, 2048, 10), onCard(kUuid1, 1, 2048, 10)})).ok());
    ASSERT_THAT(fake_.driverState("instance"), SizeIs(3));
  }
  auto after = makeBackend(fake_.params());  // the agent restarted: nothing in memory
  auto reconciled = after->reconcile({{"p1", "c"}, {"p3", "c"}});
  ASSERT_TRUE(reconciled.ok()) << reconciled.error().message;
  const auto instances = fake_.driverState("instance");
  ASSERT_THAT(instances, SizeIs(1));
  EXPECT_THAT(instances[0], HasSubstr(instanceNameFor({"p1", "c"})));
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1));
  ASSERT_TRUE(after->reconcile({}).ok());
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
}

TEST_F(CambriconLimiter, ReconcileForgetsInstancesSomeoneElseDestroyed) {
  auto backend = makeBackend(fake_.params());
  ASSERT_TRUE(backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)})).ok());
  auto state = loadSmluState(backend->statePath());
  ASSERT_TRUE(state.ok());
  auto lib = CndevLibrary::open({VGPU_FAKE_CNDEV_LIBRARY});
  ASSERT_TRUE(lib.ok());
  ASSERT_TRUE((*lib)->destroyInstance(state->instances.at(0).handle).ok());
  lib->reset();
  ASSERT_TRUE(backend->reconcile({}).ok());
  auto after = loadSmluState(backend->statePath());
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(after->instances, IsEmpty());
  EXPECT_THAT(fake_.driverState("profile"), IsEmpty());
}

TEST_F(CambriconLimiter, WritesTheVendorPluginsAnnotationsWithItsSpellingForThePod) {
  auto backend = makeBackend(fake_.params({{"vendorPluginAnnotations", "true"}}));
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid1, 1, 4096, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  // They are the pod's (Cambricon's plugin reads them there), not the container runtime's.
  EXPECT_EQ(spec->podAnnotations.at("CAMBRICON_DSMLU_PROFILE"), "1_30_16");
  EXPECT_EQ(spec->podAnnotations.at("CAMBRICON_DSMLU_ASSIGHED"), "true");
  EXPECT_FALSE(spec->podAnnotations.contains("CAMBRICON_DSMLU_ASSIGNED"));
  EXPECT_FALSE(spec->annotations.contains("CAMBRICON_DSMLU_PROFILE"));
  auto state = loadSmluState(backend->statePath());
  ASSERT_TRUE(state.ok());
  const auto& r = state->instances.at(0);
  EXPECT_EQ(spec->podAnnotations.at("CAMBRICON_DSMLU_PROFILE_INSTANCE"),
            std::to_string(r.profileId) + "_" + std::to_string(r.handle) + "_1_" + std::to_string(r.instanceId));
  EXPECT_EQ(r.instanceId, 1);
}

TEST_F(CambriconLimiter, WritesNoPodAnnotationsUnlessAskedTo) {
  auto backend = makeBackend(fake_.params());
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid1, 1, 4096, 30)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->podAnnotations.empty());
}

TEST_F(CambriconLimiter, ReportsACorruptStateFileByName) {
  auto backend = makeBackend(fake_.params());
  std::filesystem::create_directories(backend->statePath().parent_path());
  std::ofstream(backend->statePath()) << "{\"version\": 1, \"instances\": [{\"holder\": 3}]}";
  auto spec = backend->containerSpec(grantFor("p1", "c", {onCard(kUuid0, 0, 4096, 25)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr(backend->statePath().string()));
  EXPECT_THAT(spec.error().message, HasSubstr("holder"));
  EXPECT_FALSE(backend->reconcile({}).ok());
  EXPECT_THAT(fake_.driverState("instance"), IsEmpty());
}

TEST_F(CambriconLimiter, ServesContainersFromSeveralThreadsAtOnce) {
  auto backend = makeBackend(fake_.params());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      ok[static_cast<size_t>(i)] =
          backend->containerSpec(grantFor("p" + std::to_string(i), "c", {onCard(kUuid0, 0, 2048, 20)})).ok();
    });
  for (auto& t : threads) t.join();
  EXPECT_THAT(ok, ::testing::Each(1));
  EXPECT_THAT(fake_.driverState("instance"), SizeIs(4));
  EXPECT_THAT(fake_.driverState("profile"), SizeIs(1));
  auto state = loadSmluState(backend->statePath());
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(state->instances, SizeIs(4));
}

TEST(CambriconState, RoundTripsThroughTheFile) {
  TempDir dir;
  const auto path = dir.path() / "sub" / "state.json";
  SmluState state;
  state.instances.push_back(
      {{"uid-1", "main"}, "MLU-a", 3, 2, 1027, 3, "vgpu-00", "/dev/cambricon-caps/cap_dev3_mi3", 40, 8192});
  state.profiles.push_back({"MLU-a", 2});
  ASSERT_TRUE(saveSmluState(path, state).ok());
  auto loaded = loadSmluState(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(*loaded, state);
  auto missing = loadSmluState(dir.path() / "none.json");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, SmluState{});
}

TEST(CambriconState, RefusesMalformedFilesInWords) {
  TempDir dir;
  const auto path = dir.path() / "state.json";
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "expected a JSON object"},
      {"{\"version\": 9}", "version 9"},
      {"{\"version\": 1, \"instances\": {}}", "must be a list"},
      {"{\"version\": 1, \"profiles\": [{\"card\": \"x\"}]}", "profileId"},
  };
  for (const auto& [text, words] : cases) {
    std::ofstream(path, std::ios::trunc) << text;
    auto loaded = loadSmluState(path);
    ASSERT_FALSE(loaded.ok()) << text;
    EXPECT_THAT(loaded.error().message, HasSubstr(words)) << text;
  }
}

TEST(CambriconState, NamesInstancesByOwner) {
  EXPECT_EQ(instanceNameFor({"a", "b"}), instanceNameFor({"a", "b"}));
  EXPECT_NE(instanceNameFor({"a", "b"}), instanceNameFor({"a", "c"}));
  EXPECT_NE(instanceNameFor({"ab", ""}), instanceNameFor({"a", "b"}));
  EXPECT_EQ(instanceNameFor({"a", "b"}).size(), 21u);
  EXPECT_EQ(instanceNameFor({"a", "b"}).rfind("vgpu-", 0), 0u);
}

}  // namespace
}  // namespace vgpu::cambricon
