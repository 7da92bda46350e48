// The backend as the daemons see it: libvgpu-backend-cambricon.so through the real loader.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cambricon_test_support.h"
#include "vgpu/backend_loader.h"
#include "vgpu/c_views.h"

namespace vgpu::cambricon {
namespace {

using ::testing::HasSubstr;
using namespace testing;

Result<std::unique_ptr<Backend>> load(const BackendParams& params) {
  return loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "cambricon"), params);
}

TEST(CambriconLoader, LoadsTheBackendWithEveryInterface) {
  FakeCndev fake(threeCards());
  auto backend = load(fake.params());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  EXPECT_EQ((*backend)->name(), "cambricon");
  ASSERT_NE((*backend)->discovery(), nullptr);
  ASSERT_NE((*backend)->limiter(), nullptr);
  const auto& resources = (*backend)->allocator().resources();
  ASSERT_EQ(resources.size(), 3u);
  EXPECT_EQ(resources[0].name, "cambricon.com/vmlu");
  EXPECT_TRUE(resources[0].advertised);
}

TEST(CambriconLoader, DiscoversAndPartitionsThroughTheSharedLibrary) {
  FakeCndev fake(threeCards());
  auto backend = load(fake.params());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[1].id, mluId(kUuid1));
  EXPECT_EQ((*devices)[2].attributes.at(kSmluAttribute), "off");

  // The devices as published go back through the C fit: card 2 is whole only.
  const DeviceRecord sharedCard((*devices)[0]);
  const DeviceRecord wholeCard((*devices)[2]);
  ContainerResources c;
  c.name = "main";
  c.limits = {{"cambricon.com/mlu.smlu.vmemory", 16}, {"cambricon.com/mlu.smlu.vcore", 30}};
  auto request = (*backend)->allocator().parseRequest(c, {});
  ASSERT_TRUE(request.ok() && request->has_value());
  const RequestRecord q(**request);
  vgpu_fit_result fits{}, refused{};
  (*backend)->allocator().fit(q.c(), sharedCard.c(), {}, fits);
  (*backend)->allocator().fit(q.c(), wholeCard.c(), {}, refused);
  EXPECT_TRUE(fits.fits);
  EXPECT_FALSE(refused.fits);
  EXPECT_EQ(refused.reason, kReasonNotSmlu);
  EXPECT_THAT((*backend)->allocator().explain(refused), HasSubstr("not in sMLU mode"));

  ContainerGrant grant;
  grant.container = {"uid-1", "main"};
  grant.devices = {{"cambricon", mluId(kUuid0), 0, 4096, 30, 0}};
  auto spec = (*backend)->limiter()->containerSpec(grant);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->devices.size(), 3u);
  EXPECT_EQ(spec->devices[2].containerPath, "/dev/cambricon-caps/cap_dev0_mi1");
  EXPECT_EQ(spec->devices[2].hostPath, (fake.devRoot() / "cambricon-caps/cap_dev0_mi1").string());
  EXPECT_EQ(fake.driverState("instance").size(), 1u);
  ASSERT_TRUE((*backend)->limiter()->reconcile({}).ok());
  EXPECT_TRUE(fake.driverState("instance").empty());
}

TEST(CambriconLoader, ReportsEachContainersUsageFromCndev) {
  FakeCndev fake(std::string("card uuid=") + kUuid0 + " memoryMB=24576 smlu=on\ncard uuid=" + kUuid1 +
                 " memoryMB=49152 smlu=on memoryUsedMB=30000 util=64\ninstanceUsage card=0 id=1 memMiB=700 util=18\n");
  auto backend = load(fake.params());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  UsageReporter* usage = (*backend)->usageReporter();
  ASSERT_NE(usage, nullptr);
  ContainerGrant shared;
  shared.container = {"h-1", "infer"};
  shared.devices = {{"cambricon", mluId(kUuid0), 0, 4096, 30, 0}};
  ContainerGrant whole;
  whole.container = {"h-2", "train"};
  whole.devices = {{"cambricon", mluId(kUuid1), 1, 49152, 100, 0}};
  ASSERT_TRUE((*backend)->limiter()->containerSpec(shared).ok());
  ASSERT_TRUE((*backend)->limiter()->containerSpec(whole).ok());
  auto got = usage->containerUsage();
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  std::map<std::string, ContainerUsage> byName;
  for (const auto& u : *got) byName[u.container.containerName] = u;
  const ContainerUsage& s = byName.at("infer");  // the sMLU instance's MAX and USAGE
  EXPECT_EQ(s.deviceId, mluId(kUuid0));
  EXPECT_EQ(s.deviceIndex, 0);
  EXPECT_EQ(s.memoryLimitBytes, 4096ull << 20);
  EXPECT_EQ(s.memoryUsedBytes, std::optional<std::uint64_t>(700ull << 20));
  EXPECT_EQ(s.computeLimitPercent, 30u);
  EXPECT_EQ(s.utilizationPercent, std::optional<std::uint32_t>(18));
  const ContainerUsage& w = byName.at("train");  // held whole: the card's own figures
  EXPECT_EQ(w.deviceId, mluId(kUuid1));
  EXPECT_EQ(w.memoryLimitBytes, 49152ull << 20);
  EXPECT_EQ(w.memoryUsedBytes, std::optional<std::uint64_t>(30000ull << 20));
  EXPECT_EQ(w.computeLimitPercent, 100u);
  EXPECT_EQ(w.utilizationPercent, std::optional<std::uint32_t>(64));
  ASSERT_TRUE((*backend)->limiter()->release(whole.container).ok());
  got = usage->containerUsage();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
}

TEST(CambriconLoader, LoadsOnTheSchedulerWithoutLibcndev) {
  BackendParams params;
  params.name = "cambricon";
  params.settings.options["libraryPath"] = "/nonexistent/libcndev.so";
  auto backend = load(params);
  ASSERT_TRUE(backend.ok()) << backend.error().message;  // the allocator needs no library
  auto devices = (*backend)->discovery()->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("/nonexistent/libcndev.so"));
}

TEST(CambriconLoader, RefusesAnUnknownOptionNamingIt) {
  BackendParams params;
  params.name = "cambricon";
  params.settings.options["smluUnit"] = "512";
  auto backend = load(params);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.error().message, HasSubstr("backends.cambricon.options.smluUnit"));
}

}  // namespace
}  // namespace vgpu::cambricon
