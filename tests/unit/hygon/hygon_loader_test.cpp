// The real libvgpu-backend-hygon.so through core's loader (dlopen, the C table), against
// the fake vendor libraries: what the node agent and the scheduler actually call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_node.h"
#include "vgpu/backend_loader.h"
#include "vgpu/c_views.h"

namespace vgpu::hygon {
namespace {

using fake::FakeNode;
using ::testing::HasSubstr;

std::unique_ptr<Backend> load(const BackendParams& p) {
  auto b = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "hygon"), p);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return b.ok() ? std::move(*b) : nullptr;
}

TEST(HygonLoader, LoadsAndServesEveryInterface) {
  FakeNode node({{.serial = "A"}, {.serial = "B", .pciId = "62b7", .vramMiB = 65520, .cus = 120}});
  auto b = load(node.params());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name(), "hygon");
  ASSERT_NE(b->discovery(), nullptr);
  ASSERT_NE(b->limiter(), nullptr);

  auto devices = b->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].id, "DCU-B");
  EXPECT_EQ((*devices)[1].model, "DCU-K100");
  EXPECT_EQ((*devices)[1].attributes.at("cuCount"), "120");

  auto request = b->allocator().parseRequest(
      {"app", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 8000}, {"hygon.com/dcucores", 10}}}, {});
  ASSERT_TRUE(request.ok()) << request.error().message;
  ASSERT_TRUE(request->has_value());
  const DeviceRecord device((*devices)[1]);
  const RequestRecord req(**request);
  vgpu_fit_result fit{};
  b->allocator().fit(req.c(), device.c(), vgpu_device_usage{1, 95, 1000}, fit);
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.reason, VGPU_REASON_BACKEND);
  EXPECT_THAT(b->allocator().explain(fit), HasSubstr("needs 12 whole compute units"));
  b->allocator().fit(req.c(), device.c(), vgpu_device_usage{0, 0, 0}, fit);
  ASSERT_TRUE(fit.fits);
  EXPECT_EQ(fit.take.compute, 10u);

  ContainerGrant g;
  g.container = {"uid-1", "app"};
  g.devices = {{"hygon", "DCU-B", 1, 8000, fit.take.compute, 0}};
  g.hostDir = node.hostDir("app").string();
  auto spec = b->limiter()->containerSpec(g);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->mounts.size(), 1u);
  EXPECT_THAT(fake::readText(node.hostDir("app") / "hygon-vdev" / "vdev0.conf"), HasSubstr("cu_count: 12\n"));
  EXPECT_TRUE(b->limiter()->release(g.container).ok());
  EXPECT_FALSE(std::filesystem::exists(node.hostDir("app") / "hygon-vdev"));
  EXPECT_TRUE(b->limiter()->reconcile({}).ok());
}

TEST(HygonLoader, CreateErrorsComeBackThroughTheLoader) {
  BackendParams p;
  p.name = "hygon";
  p.settings.options = {{"colour", "blue"}};
  auto b = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "hygon"), p);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("backends.hygon.options.colour"));
}

TEST(HygonLoader, DiscoveryErrorsComeBackThroughTheLoader) {
  FakeNode node({{.serial = "A"}});
  auto b = load(node.params("vdev-file", {{"driverDir", (node.root() / "empty").string()}}));
  ASSERT_TRUE(b);
  auto devices = b->discovery()->discover();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.error().message, HasSubstr("librocm_smi64.so"));
}

}  // namespace
}  // namespace vgpu::hygon
