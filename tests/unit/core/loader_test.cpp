#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_support.h"
#include "vgpu/backend_loader.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

Result<std::unique_ptr<Backend>> loadTestBackend(const std::string& name) {
  BackendParams params;
  params.name = name;
  return loadBackend(backendLibraryPath(VGPU_TEST_BACKEND_DIR, name), params);
}

TEST(Loader, LoadsTheSimBackendAndSeesItsInterfaces) {
  auto sim = testing::loadSim();
  ASSERT_TRUE(sim);
  EXPECT_EQ(sim->name(), "sim");
  EXPECT_NE(sim->discovery(), nullptr);
  EXPECT_NE(sim->limiter(), nullptr);
  ASSERT_FALSE(sim->allocator().resources().empty());
  EXPECT_EQ(sim->allocator().resources()[0].name, "vgpu.io/sim");
  EXPECT_TRUE(sim->allocator().resources()[0].advertised);
}

TEST(Loader, RefusesAMissingFileNamingThePath) {
  auto r = loadTestBackend("doesnotexist");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("libvgpu-backend-doesnotexist.so"));
  EXPECT_THAT(r.error().message, HasSubstr("no such file"));
}

TEST(Loader, RefusesALibraryWithoutTheEntrySymbol) {
  auto r = loadTestBackend("nosymbol");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("does not export vgpu_backend_entry"));
}

TEST(Loader, RefusesABackendBuiltForAnotherMajorVersion) {
  auto r = loadTestBackend("wrongabi");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("built for backend ABI 2.0"));
  EXPECT_THAT(r.error().message, HasSubstr("major versions must match"));
}

TEST(Loader, AcceptsABackendOfANewerMinorVersion) {
  auto r = loadTestBackend("newerminor");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->discovery(), nullptr);  // optional slots left null: unsupported, not a crash
  EXPECT_EQ((*r)->limiter(), nullptr);
}

TEST(Loader, LoadsA1Dot0BackendWhoseTableEndsBeforeTheUsageSlot) {
  auto r = loadTestBackend("abi10");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->usageReporter(), nullptr);  // the slot it does not know reads as unsupported
}

TEST(Loader, ListsTheDeviceProcessesOfA1Dot3Backend) {
  auto r = loadTestBackend("abi13");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ProcessReporter* reporter = (*r)->processReporter();
  ASSERT_NE(reporter, nullptr);
  auto processes = reporter->deviceProcesses();
  ASSERT_TRUE(processes.ok()) << processes.error().message;
  ASSERT_EQ(processes->size(), 1u);
  EXPECT_EQ((*processes)[0].pid, 4242u);
  EXPECT_EQ((*processes)[0].deviceId, "dev-0");
  EXPECT_EQ((*processes)[0].memoryUsedBytes, std::optional<std::uint64_t>(1048576));
  EXPECT_FALSE((*processes)[0].utilizationPercent.has_value());
}

TEST(Loader, ReadsWhatA1Dot5BackendsFitReads) {
  auto r = loadTestBackend("abi15");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->allocator().fitReads(), VGPU_FIT_READS_HEALTH);
}

TEST(Loader, AFitReadsBitThisCoreDoesNotKnowMeansFitReadsEverything) {
  auto r = loadTestBackend("abi15future");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->allocator().fitReads(), VGPU_FIT_READS_ALL);
}

TEST(Loader, ABackendWhoseTableEndsBeforeFitReadsIsJudgedDeviceByDevice) {
  // Its table ends before the slot (a 1.4 build), whatever lay beyond in its memory.
  auto r = loadTestBackend("abi14sized");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->allocator().fitReads(), VGPU_FIT_READS_ALL);
  auto old = loadTestBackend("abi13");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ((*old)->allocator().fitReads(), VGPU_FIT_READS_ALL);
}

TEST(Loader, A110BackendsSplitCountIsToldPerModelAndZeroMeansNotTold) {
  auto r = loadTestBackend("abi110");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->allocator().splitCountFor("Model A"), std::optional<std::uint32_t>(6));
  EXPECT_EQ((*r)->allocator().splitCountFor("unknown"), std::nullopt);
  // A 1.9 build's table ends before the slot, whatever lay beyond it in its memory.
  auto old = loadTestBackend("abi19sized");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ((*old)->allocator().splitCountFor("Model A"), std::nullopt);
}

TEST(Loader, A16BackendWithBothPlacementSlotsPlacesGrantsAndItsTokenComesBack) {
  auto r = loadTestBackend("abi16");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Allocator& a = (*r)->allocator();
  const vgpu_device d{};
  EXPECT_TRUE(a.placesGrants(d));
  const char* placed[] = {"slot-0", "slot-1"};
  char token[VGPU_PLACEMENT_TOKEN_MAX] = {};
  vgpu_placement p{sizeof(vgpu_placement), {placed, 2}, token, sizeof token, nullptr, 0};
  const vgpu_device_request q{};
  vgpu_fit_result result{};
  a.fitPlaced(q, d, vgpu_device_usage{}, p, result);
  EXPECT_TRUE(result.fits);
  EXPECT_STREQ(token, "slot-2");
}

TEST(Loader, APlacementSlotAloneOrATableThatEndsBeforeThemPlacesNothing) {
  const vgpu_device d{};
  for (const char* name : {"abi16half", "abi15sized", "abi15"}) {
    auto r = loadTestBackend(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
    EXPECT_FALSE((*r)->allocator().placesGrants(d)) << name;
  }
}

/// The devices a test backend's discovery reports (empty, with a failure, when it cannot).
std::vector<Device> discoverWith(const std::string& name) {
  auto r = loadTestBackend(name);
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok() || (*r)->discovery() == nullptr) {
    ADD_FAILURE() << name << " has no discovery";
    return {};
  }
  auto devices = (*r)->discovery()->discover();
  EXPECT_TRUE(devices.ok()) << devices.error().message;
  return devices.ok() ? *devices : std::vector<Device>{};
}

TEST(Loader, CarriesTheDeviceLinksOfA1Dot4Backend) {
  const auto devices = discoverWith("abi14");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].links, (std::vector<DeviceLink>{{"dev-1", LinkClass::kDirect, 2, 150}}));
}

TEST(Loader, A1Dot3BackendsDevicesLoadWithTopologyUnknown) {
  // Its vgpu_device ends before `links`: whatever lies beyond is never read.
  const auto devices = discoverWith("abi13");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].id, "dev-1");
  EXPECT_TRUE(devices[0].links.empty());
}

TEST(Loader, LoadsA1Dot2BackendWhoseTableEndsBeforeTheProcessSlot) {
  // Built with the slot filled but against the 1.2 header: only its 1.2 prefix is copied.
  auto r = loadTestBackend("abi12");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->processReporter(), nullptr);
}

TEST(Loader, RefusesABackendThatRefusesThisLoader) {
  auto r = loadTestBackend("refuses");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("refuses to work with this vgpu"));
}

TEST(Loader, RefusesABackendMissingARequiredFunction) {
  auto r = loadTestBackend("nofit");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("required function \"fit\""));
}

TEST(Loader, RefusesALibraryThatClaimsAnotherName) {
  auto r = loadTestBackend("misnamed");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("says it is backend \"othername\""));
}

TEST(Loader, RefusesABackendWhoseCreateFailsWithItsMessage) {
  BackendParams params;
  params.name = "sim";
  params.settings.options["colour"] = "blue";
  auto r = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("backends.sim.options.colour: unknown option"));
}

TEST(Loader, RefusesTheSameBackendTwice) {
  BackendSet set;
  ASSERT_TRUE(set.add(testing::loadSim()).ok());
  auto again = set.add(testing::loadSim());
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("already loaded"));
  EXPECT_EQ(set.all().size(), 1u);
}

TEST(Loader, RefusesAResourceNameClaimedByTwoBackends) {
  BackendSet set;
  ASSERT_TRUE(set.add(std::move(loadTestBackend("newerminor")).value()).ok());  // owns example.com/thing
  BackendParams params;
  params.name = "sim";
  params.resources.count = "example.com/thing";
  auto sim = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  auto added = set.add(std::move(sim).value());
  ASSERT_FALSE(added.ok());
  EXPECT_THAT(added.error().message, HasSubstr("claims resource example.com/thing"));
  EXPECT_THAT(added.error().message, HasSubstr("\"newerminor\" already owns"));
  EXPECT_EQ(set.all().size(), 1u);
}

TEST(Loader, AFailingBackendNeverTakesTheOthersDown) {
  TempDir dir;
  std::filesystem::create_symlink(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), backendLibraryPath(dir.path(), "sim"));
  std::filesystem::create_symlink(backendLibraryPath(VGPU_TEST_BACKEND_DIR, "wrongabi"),
                                  backendLibraryPath(dir.path(), "wrongabi"));
  DeviceConfig config;
  config.backends.push_back({"wrongabi", true, {}, {}});
  config.backends.push_back({"missing", true, {}, {}});
  config.backends.push_back({"sim", true, {}, {}});
  config.backends.push_back({"disabled", false, {}, {}});
  auto outcome = loadEnabledBackends(config, dir.path(), "node-1");
  ASSERT_EQ(outcome.backends.all().size(), 1u);
  EXPECT_EQ(outcome.backends.all()[0]->name(), "sim");
  ASSERT_EQ(outcome.failures.size(), 2u);
  EXPECT_THAT(outcome.failures[0].message, HasSubstr("wrongabi"));
  EXPECT_THAT(outcome.failures[1].message, HasSubstr("missing"));
}

TEST(Loader, SeveralFoldersGiveEachBackendFromTheFirstThatHasIt) {
  TempDir empty, own;  // vgpu-sim --backend-dir A --backend-dir B: a vendor's folder beside the project's
  std::filesystem::create_symlink(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), backendLibraryPath(own.path(), "sim"));
  DeviceConfig config;
  config.backends.push_back({"sim", true, {}, {}});
  config.backends.push_back({"missing", true, {}, {}});
  auto outcome = loadEnabledBackends(config, std::vector<std::filesystem::path>{empty.path(), own.path()}, "");
  ASSERT_EQ(outcome.backends.all().size(), 1u);
  EXPECT_EQ(outcome.backends.all()[0]->name(), "sim");
  ASSERT_EQ(outcome.failures.size(), 1u);
  EXPECT_THAT(outcome.failures[0].message, HasSubstr(backendLibraryPath(empty.path(), "missing").string()));
  EXPECT_THAT(outcome.failures[0].message, HasSubstr("nor in " + own.path().string()));
}

TEST(Loader, DefaultBackendDirIsBesideTheBinary) {
  EXPECT_EQ(defaultBackendDir().filename(), "backends");
  EXPECT_EQ(defaultBackendDir().parent_path().filename(), "vgpu");
}

TEST(Loader, CopiesRequestsAndDevicesAcrossTheBoundary) {
  auto sim = testing::loadSim();
  ASSERT_TRUE(sim);
  ContainerResources c{"main", false, {{"vgpu.io/sim", 2}, {"vgpu.io/sim-memory", 3000}, {"vgpu.io/sim-cores", 30}}};
  auto r = sim->allocator().parseRequest(c, {{"vgpu.io/use-gputype", "A100,H100"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  const DeviceRequest& q = **r;
  EXPECT_EQ(q.backend, "sim");
  EXPECT_EQ(q.count, 2u);
  EXPECT_EQ(q.memoryMiB, 3000u);
  EXPECT_EQ(q.computePercent, 30u);
  EXPECT_EQ(q.constraints.includeModels, (std::vector<std::string>{"A100", "H100"}));

  auto bad = sim->allocator().parseRequest({"main", false, {{"vgpu.io/sim-cores", 300}}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("vgpu.io/sim-cores must be between 0 and 100, got 300"));
}

}  // namespace
}  // namespace vgpu
