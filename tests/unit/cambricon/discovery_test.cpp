#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cambricon_test_support.h"
#include "cndev_library.h"

namespace vgpu::cambricon {
namespace {

using ::testing::HasSubstr;
using namespace testing;

TEST(CambriconDiscovery, FindsEveryCardWithItsProperties) {
  FakeCndev fake(threeCards());
  auto backend = makeBackend(fake.params());
  ASSERT_TRUE(backend);
  auto devices = backend->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);

  const Device& a = (*devices)[0];
  EXPECT_EQ(a.id, mluId(kUuid0));
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.backend, "cambricon");
  EXPECT_EQ(a.model, "MLU370-X4");
  EXPECT_EQ(a.memoryMiB, 24576u);
  EXPECT_EQ(a.computeUnits, 100u);
  EXPECT_EQ(a.numaNode, 0);
  EXPECT_EQ(a.health, Health::kHealthy);
  EXPECT_EQ(a.splitCount, 10u);
  EXPECT_EQ(a.attributes.at(kSmluAttribute), "on");
  EXPECT_FALSE(a.attributes.contains(kMluLinkAttribute));

  const Device& b = (*devices)[1];
  EXPECT_EQ(b.id, mluId(kUuid1));
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.memoryMiB, 49152u);
  EXPECT_EQ(b.numaNode, 1);
  EXPECT_EQ(b.attributes.at(kMluLinkAttribute), "4");

  const Device& c = (*devices)[2];
  EXPECT_EQ(c.model, "MLU590-H8");
  EXPECT_EQ(c.splitCount, 1u) << "a card not in sMLU mode is published whole";
  EXPECT_EQ(c.attributes.at(kSmluAttribute), "off");
}

TEST(CambriconDiscovery, ReportsAnUnhealthyCardWithTheReason) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " health=1\ncard uuid=" + kUuid1 + " health=0\n");
  auto backend = makeBackend(fake.params());
  auto devices = backend->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
  EXPECT_EQ((*devices)[1].health, Health::kUnhealthy);
  EXPECT_THAT((*devices)[1].attributes.at("healthDetail"), HasSubstr("health 0"));
}

TEST(CambriconDiscovery, ReportsHealthItCannotReadAsUnknown) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " healthError=1\n");
  auto devices = makeBackend(fake.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].health, Health::kUnknown);
  EXPECT_THAT((*devices)[0].attributes.at("healthDetail"), HasSubstr("cndevGetCardHealthState"));
}

TEST(CambriconDiscovery, KeepsAnMluPrefixTheLibraryAlreadyGives) {
  FakeCndev fake("card uuid=MLU-abc\n");
  auto devices = makeBackend(fake.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].id, "MLU-abc");
}

TEST(CambriconDiscovery, AppliesSplitCountAndMemoryScalingBelowOne) {
  FakeCndev fake(threeCards());
  auto params = fake.params();
  params.settings.splitCount = 4;
  params.settings.memoryScaling = 0.5;
  auto devices = makeBackend(params)->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].splitCount, 4u);
  EXPECT_EQ((*devices)[0].memoryMiB, 12288u);
  EXPECT_EQ((*devices)[2].splitCount, 1u);
}

TEST(CambriconDiscovery, ReportsAMissingLibraryWithThePathItLookedFor) {
  FakeCndev fake(threeCards());
  auto backend = makeBackend(fake.params({{"libraryPath", "/nonexistent/neuware/libcndev.so"}}));
  auto devices = backend->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("/nonexistent/neuware/libcndev.so"));
  EXPECT_THAT(devices.error().message, HasSubstr("options.libraryPath"));
}

TEST(CambriconDiscovery, ReportsAMissingDriver) {
  FakeCndev fake(threeCards() + "option noDriver=1\n");
  auto devices = makeBackend(fake.params())->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("cndevInit"));
  EXPECT_THAT(devices.error().message, HasSubstr("CNDEV_ERROR_NO_DRIVER"));
  EXPECT_THAT(devices.error().message, HasSubstr(VGPU_FAKE_CNDEV_LIBRARY));
}

TEST(CambriconDiscovery, ReportsALibraryThatRefusesTheStructVersion) {
  FakeCndev fake(threeCards() + "option apiVersion=5\n");
  auto devices = makeBackend(fake.params())->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("cndevGetDeviceCount"));
  EXPECT_THAT(devices.error().message, HasSubstr("CNDEV_ERROR_UNSUPPORTED_API_VERSION"));
  EXPECT_THAT(devices.error().message, HasSubstr("CNDEV_VERSION_6"));
}

TEST(CambriconDiscovery, FindsNoCardsWithoutError) {
  FakeCndev fake("# no cards\n");
  auto devices = makeBackend(fake.params())->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_TRUE(devices->empty());
}

TEST(CambriconDiscovery, ReportsHealthChanges) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " health=1\n");
  auto backend = makeBackend(fake.params());
  ASSERT_TRUE(backend->discover().ok());
  auto quiet = backend->waitForHealthEvents(std::chrono::milliseconds(10));
  ASSERT_TRUE(quiet.ok()) << quiet.error().message;
  EXPECT_TRUE(quiet->empty());

  fake.write(std::string("card uuid=") + kUuid0 + " health=0\n");
  auto events = backend->waitForHealthEvents(std::chrono::seconds(5));
  ASSERT_TRUE(events.ok()) << events.error().message;
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].deviceId, mluId(kUuid0));
  EXPECT_EQ((*events)[0].health, Health::kUnhealthy);
  EXPECT_THAT((*events)[0].reason, HasSubstr("health 0"));
}

TEST(CambriconDiscovery, AProhibitedCardIsUnhealthy) {
  // Compute mode PROHIBITED lets no process use the card, whatever its health state says.
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " health=1\ncard uuid=" + kUuid1 + " health=1 computeMode=2\n");
  auto backend = makeBackend(fake.params());
  auto devices = backend->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].health, Health::kHealthy);
  EXPECT_EQ((*devices)[1].health, Health::kUnhealthy);
  EXPECT_THAT((*devices)[1].attributes.at("healthDetail"), HasSubstr("PROHIBITED"));

  fake.write(std::string("card uuid=") + kUuid0 + " health=1 computeMode=2\ncard uuid=" + kUuid1 + " health=1\n");
  auto events = backend->waitForHealthEvents(std::chrono::seconds(5));
  ASSERT_TRUE(events.ok()) << events.error().message;
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].deviceId, mluId(kUuid0));
  EXPECT_EQ((*events)[0].health, Health::kUnhealthy);
  EXPECT_THAT((*events)[0].reason, HasSubstr("PROHIBITED"));
  EXPECT_EQ((*events)[1].health, Health::kHealthy);
}

TEST(CambriconDiscovery, RefusesToStartWhileCambriconsOwnPluginRuns) {
  FakeCndev fake(threeCards());
  auto backend = makeBackend(fake.params());
  {
    ListeningSocket vendor(fake.pluginDir() / "cambricon.sock");
    auto devices = backend->discover();
    ASSERT_FALSE(devices.ok());
    EXPECT_THAT(devices.error().message, HasSubstr((fake.pluginDir() / "cambricon.sock").string()));
    EXPECT_THAT(devices.error().message, HasSubstr("remove Cambricon's device plugin"));
    EXPECT_THAT(devices.error().message, HasSubstr("or disable backends.cambricon"));
  }
  // In dynamic-smlu mode it serves one socket per resource; any of them counts.
  {
    ListeningSocket vendor(fake.pluginDir() / "cambricon.com-mlu.smlu.vcore.sock");
    EXPECT_FALSE(backend->discover().ok());
  }
  // A socket file nobody answers on (a plugin that was removed) and our own sockets do not.
  std::filesystem::remove(fake.pluginDir() / "cambricon.com-mlu.smlu.vcore.sock");
  ListeningSocket ours(fake.pluginDir() / "vgpu-cambricon.com-vmlu.sock");
  auto devices = backend->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ(devices->size(), 3u);
  // Started after us: the health loop reports it, so the agent's log says which to remove.
  ListeningSocket late(fake.pluginDir() / "cambricon.sock");
  auto events = backend->waitForHealthEvents(std::chrono::milliseconds(10));
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(events.error().message, HasSubstr("Cambricon's own device plugin is running"));
}

TEST(CambriconFakeCndev, AnswersAWrongStructVersionWithAnError) {
  FakeCndev fake(threeCards());
  void* lib = dlopen(VGPU_FAKE_CNDEV_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<cndevInit_fn>(dlsym(lib, "cndevInit"));
  auto release = reinterpret_cast<cndevRelease_fn>(dlsym(lib, "cndevRelease"));
  auto count = reinterpret_cast<cndevGetDeviceCount_fn>(dlsym(lib, "cndevGetDeviceCount"));
  auto memory = reinterpret_cast<cndevGetMemoryUsage_fn>(dlsym(lib, "cndevGetMemoryUsage"));
  auto handleOf = reinterpret_cast<cndevGetDeviceHandleByIndex_fn>(dlsym(lib, "cndevGetDeviceHandleByIndex"));
  ASSERT_TRUE(init && release && count && memory && handleOf);

  cndevCardInfo_t info{};
  info.version = CNDEV_VERSION_6;
  EXPECT_EQ(count(&info), CNDEV_ERROR_UNINITIALIZED) << "calls before cndevInit are refused";
  ASSERT_EQ(init(0), CNDEV_SUCCESS);
  info.version = 3;
  EXPECT_EQ(count(&info), CNDEV_ERROR_UNSUPPORTED_API_VERSION);
  info.version = CNDEV_VERSION_6;
  ASSERT_EQ(count(&info), CNDEV_SUCCESS);
  EXPECT_EQ(info.number, 3u);

  cndevDevice_t handle = -1;
  ASSERT_EQ(handleOf(1, &handle), CNDEV_SUCCESS);
  cndevMemoryInfo_t mem{};
  mem.version = 0;
  EXPECT_EQ(memory(&mem, handle), CNDEV_ERROR_UNSUPPORTED_API_VERSION);
  mem.version = CNDEV_VERSION_6;
  ASSERT_EQ(memory(&mem, handle), CNDEV_SUCCESS);
  EXPECT_EQ(mem.physicalMemoryTotal, 49152);
  EXPECT_EQ(memory(&mem, 12345), CNDEV_ERROR_INVALID_DEVICE_ID);
  release();
  dlclose(lib);
}

TEST(CambriconFakeCndev, EnforcesCardCapacityOnInstances) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " memoryMB=16384\n");
  auto lib = CndevLibrary::open({VGPU_FAKE_CNDEV_LIBRARY});
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  auto cards = (*lib)->cards();
  ASSERT_TRUE(cards.ok());
  const auto card = (*cards)[0].handle;
  auto big = (*lib)->createProfile(card, 60, std::uint64_t{4096} << 20);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_FALSE((*lib)->createProfile(card, 60, std::uint64_t{4096} << 20).ok()) << "same size twice is a duplicate";
  ASSERT_TRUE((*lib)->createInstance(card, *big, "a").ok());
  auto second = (*lib)->createInstance(card, *big, "b");
  ASSERT_FALSE(second.ok()) << "60% + 60% does not fit one card";
  EXPECT_THAT(second.error().message, HasSubstr("CNDEV_ERROR_INSUFFICIENT_SPACE"));
  EXPECT_THAT((*lib)->createInstance(card, *big, "a").error().message, HasSubstr("DUPLICATE"));
  auto memoryHeavy = (*lib)->createProfile(card, 10, std::uint64_t{13000} << 20);
  ASSERT_TRUE(memoryHeavy.ok());
  EXPECT_FALSE((*lib)->createInstance(card, *memoryHeavy, "c").ok()) << "4096 + 13000 MiB exceed 16384";
  EXPECT_THAT((*lib)->destroyProfile(card, *big).error().message, HasSubstr("IN_USE"));
  auto listed = (*lib)->instances(card);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "a");
  EXPECT_EQ((*listed)[0].quota, 60u);
}

TEST(CambriconFakeCndev, RefusesSmluOnACardNotInSmluMode) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " smlu=off\n");
  auto lib = CndevLibrary::open({VGPU_FAKE_CNDEV_LIBRARY});
  ASSERT_TRUE(lib.ok()) << lib.error().message;
  auto cards = (*lib)->cards();
  ASSERT_TRUE(cards.ok());
  EXPECT_FALSE((*cards)[0].smlu);
  auto created = (*lib)->createProfile((*cards)[0].handle, 50, std::uint64_t{1024} << 20);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.error().message, HasSubstr("CNDEV_ERROR_NOT_SUPPORTED"));
}

}  // namespace
}  // namespace vgpu::cambricon
