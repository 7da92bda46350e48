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
  EXPECT_EQ(spec->devices[2].hostPath, "/dev/cambricon-caps/cap_dev0_mi1");
  EXPECT_EQ(fake.driverState("instance").size(), 1u);
  ASSERT_TRUE((*backend)->limiter()->reconcile({}).ok());
  EXPECT_TRUE(fake.driverState("instance").empty());
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
