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
  g.container = {"handout-1", "app"};
  g.podUid = "pod-uid-1";
  g.devices = {{"hygon", "DCU-B", 1, 8000, fit.take.compute, 0}};
  g.hostDir = node.hostDir("app").string();
  auto spec = b->limiter()->containerSpec(g);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->mounts.size(), 1u);
  // The pod UID crossed the C boundary: it names the per-pod folder.
  const std::filesystem::path dir = spec->mounts[0].hostPath;
  EXPECT_EQ(dir.parent_path(), node.confRoot());
  EXPECT_EQ(dir.filename().string().rfind("pod-uid-1_app_1_", 0), 0u) << dir;
  EXPECT_THAT(fake::readText(dir / "vdev0.conf"), HasSubstr("cu_count: 12\n"));
  EXPECT_TRUE(b->limiter()->release(g.container).ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(b->limiter()->reconcile({}).ok());
}

TEST(HygonLoader, ReportsEachContainersUsageFromHydmiAndRocmSmi) {
  FakeNode node({{.serial = "A", .vramUsedMiB = 9000, .busy = 70}, {.serial = "B"}});
  auto b = load(node.params("hydmi"));
  ASSERT_TRUE(b);
  ASSERT_NE(b->usageReporter(), nullptr);
  ASSERT_TRUE(b->discovery()->discover().ok());
  ContainerGrant whole;
  whole.container = {"h-whole", "train"};
  whole.devices = {{"hygon", "DCU-A", 0, 16368, 100, 0}};
  ContainerGrant part;
  part.container = {"h-part", "serve"};
  part.devices = {{"hygon", "DCU-B", 1, 3000, 50, 0}};
  ASSERT_TRUE(b->limiter()->containerSpec(whole).ok());
  auto made = b->limiter()->containerSpec(part);
  ASSERT_TRUE(made.ok()) << made.error().message;
  node.writeConfig("vdevUsage id=0 usedMiB=1200 busy=35\n");  // hydmi's figures for the slice's vDCU
  auto usage = b->usageReporter()->containerUsage();
  ASSERT_TRUE(usage.ok()) << usage.error().message;
  ASSERT_EQ(usage->size(), 2u);
  const ContainerUsage& w = (*usage)[0];
  EXPECT_EQ(w.container, (ContainerRef{"h-whole", "train"}));
  EXPECT_EQ(w.deviceId, "DCU-A");
  EXPECT_EQ(w.deviceIndex, 0);
  EXPECT_EQ(w.memoryLimitBytes, 16368ull << 20);
  EXPECT_EQ(w.memoryUsedBytes, std::optional<std::uint64_t>(9000ull << 20));  // the DCU is the container's alone
  EXPECT_EQ(w.computeLimitPercent, 100u);
  EXPECT_EQ(w.utilizationPercent, std::optional<std::uint32_t>(70));
  const ContainerUsage& p = (*usage)[1];
  EXPECT_EQ(p.container, (ContainerRef{"h-part", "serve"}));
  EXPECT_EQ(p.deviceId, "DCU-B");
  EXPECT_EQ(p.deviceIndex, 0);  // its one vDCU is device 0 in the container
  EXPECT_EQ(p.memoryLimitBytes, 3000ull << 20);
  EXPECT_EQ(p.memoryUsedBytes, std::optional<std::uint64_t>(1200ull << 20));
  EXPECT_EQ(p.computeLimitPercent, 50u);
  EXPECT_EQ(p.utilizationPercent, std::optional<std::uint32_t>(35));
}

TEST(HygonLoader, AVdevFileSliceReportsItsLimitsButNoUseNoQueryCovers) {
  FakeNode node({{.serial = "A"}});
  auto b = load(node.params("vdev-file"));
  ASSERT_TRUE(b);
  ASSERT_NE(b->usageReporter(), nullptr);
  ASSERT_TRUE(b->discovery()->discover().ok());
  ContainerGrant part;
  part.container = {"h-part", "serve"};
  part.devices = {{"hygon", "DCU-A", 0, 2000, 25, 0}};
  ASSERT_TRUE(b->limiter()->containerSpec(part).ok());
  auto usage = b->usageReporter()->containerUsage();
  ASSERT_TRUE(usage.ok()) << usage.error().message;
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].memoryLimitBytes, 2000ull << 20);
  EXPECT_EQ((*usage)[0].computeLimitPercent, 25u);
  EXPECT_FALSE((*usage)[0].memoryUsedBytes.has_value());
  EXPECT_FALSE((*usage)[0].utilizationPercent.has_value());
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
