// Dynamic MIG end to end through libvgpu-backend-nvidia.so (loader, C table, adapter) and the
// fake libnvidia-ml.so.1: discovery publishes the managed GPU with its profiles, the fit picks
// the smallest profile, Allocate creates the instance and hands the container its MIG device,
// the container's end destroys it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator.h"
#include "mig_test_support.h"
#include "nvidia_backend.h"
#include "nvidia_test_support.h"
#include "vgpu/backend_loader.h"
#include "vgpu/c_views.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::params;
using testing::setEnv;
using testing::TempDir;

#ifdef VGPU_FAKE_NVML_LIBRARY
const std::string kA100 = "GPU-22222222-2222-2222-2222-222222222222";
const std::string kH100 = "GPU-11111111-1111-1111-1111-111111111111";

class NvidiaDynamicMig : public ::testing::Test {
 protected:
  void SetUp() override {
    setEnv("VGPU_FAKE_GPU_CONFIG",
           dir_.write("machine.conf",
                      "gpu uuid=" + kA100 + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb\n"
                      "gpu uuid=" + kH100 + " name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559\n")
               .string());
    setEnv("VGPU_FAKE_GPU_STATE", (dir_.path() / "gpu-state").string());
  }
  BackendParams backendParams(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> o{{"discovery", "nvml"},
                                         {"nvmlLibrary", VGPU_FAKE_NVML_LIBRARY},
                                         {"migManaged", kA100},
                                         {"migStateDir", (dir_.path() / "mig").string()}};
    for (auto& [k, v] : extra) o[k] = v;
    return params(o);
  }
  static vgpu_fit_result fit(const Allocator& allocator, const Device& d, std::int64_t memory, DeviceUsage used = {}) {
    ContainerResources c;
    c.name = "main";
    c.limits = {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", memory}};
    auto parsed = allocator.parseRequest(c, {});
    EXPECT_TRUE(parsed.ok() && parsed->has_value());
    const RequestRecord request(**parsed);
    const DeviceRecord device(d);
    vgpu_fit_result r{};
    allocator.fit(request.c(), device.c(), toC(used), r);
    return r;
  }
  TempDir dir_;
};

TEST_F(NvidiaDynamicMig, AllocateCreatesTheSmallestInstanceAndTheContainersEndDestroysIt) {
  auto backend = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), backendParams());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  const Device& a100 = (*devices)[0];
  EXPECT_EQ(a100.id, kA100);
  EXPECT_EQ(a100.attributes.at("migManaged"), "true");
  EXPECT_THAT(a100.attributes.at("migProfiles"), HasSubstr("3g.20gb:9:3:2:19968:4:0,4"));
  EXPECT_FALSE((*devices)[1].attributes.contains("migManaged"));

  const Allocator& allocator = (*backend)->allocator();
  auto small = fit(allocator, a100, 3000);
  ASSERT_TRUE(small.fits) << allocator.explain(small);
  EXPECT_EQ(small.take.memory_mib, 4864u);  // a 1g.5gb
  EXPECT_EQ(small.take.compute, 14u);       // 1 of 7 compute slices
  auto mid = fit(allocator, a100, 12000);
  ASSERT_TRUE(mid.fits);
  EXPECT_EQ(mid.take.memory_mib, 19968u);  // a 3g.20gb: no 10 GB profile holds 12000 MiB
  auto huge = fit(allocator, a100, 50000);
  EXPECT_FALSE(huge.fits);
  EXPECT_EQ(huge.reason, kReasonMigNoProfile);
  EXPECT_EQ(allocator.explain(huge), "no MIG profile of this GPU has 50000 MiB (the largest allowed has 40192 MiB)");
  // Two 3g.20gb already on it: no room for a third.
  auto full = fit(allocator, a100, 12000, {2, 39936, 84});
  EXPECT_FALSE(full.fits);
  EXPECT_EQ(full.reason, kReasonMigNoRoom);

  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  TempDir host;
  ContainerGrant g;
  g.container = {"holder-1", "main"};
  g.podNamespace = "default";
  g.podName = "small";
  g.devices = {{"nvidia", kA100, 0, small.take.memory_mib, small.take.compute, 0}};
  g.hostDir = host.path().string();
  auto spec = (*backend)->limiter()->containerSpec(g);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(spec->env.at("NVIDIA_VISIBLE_DEVICES"), ::testing::StartsWith("MIG-"));
  EXPECT_EQ(spec->env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "4864m");
  EXPECT_EQ(control.migDevices(0), 1u);
  ASSERT_TRUE((*backend)->limiter()->release(g.container).ok());
  EXPECT_EQ(control.migDevices(0), 0u);
}

TEST_F(NvidiaDynamicMig, AllocateRefusesInWordsWhenThePlacementsAreTaken) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(control.partition(0, 19, 5, 1), NVML_SUCCESS);  // an operator's 1g.5gb on slice 5
  ASSERT_EQ(control.partition(0, 14, 0, 2), NVML_SUCCESS);  // and a 2g.10gb on 0-1
  auto backend = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"),
                             backendParams({{"migAllowedProfiles", "3g.20gb"}}));
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  ASSERT_TRUE((*backend)->discovery()->discover().ok());
  TempDir host;
  ContainerGrant g;
  g.container = {"holder-2", "main"};
  g.podNamespace = "default";
  g.podName = "mid";
  g.devices = {{"nvidia", kA100, 0, 19968, 42, 0}};
  g.hostDir = host.path().string();
  auto spec = (*backend)->limiter()->containerSpec(g);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message,
              HasSubstr("no free 3g.20gb placement: slices 0\u20133 hold a 2g.10gb; slices 4\u20137 hold a 1g.5gb"));
  EXPECT_EQ(control.migDevices(0), 2u);  // nothing made, nothing taken
}

TEST_F(NvidiaDynamicMig, ARestartedAgentKeepsLiveContainersInstancesAndReclaimsTheRest) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  TempDir host;
  {
    auto first = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), backendParams());
    ASSERT_TRUE(first.ok()) << first.error().message;
    ASSERT_TRUE((*first)->discovery()->discover().ok());
    for (const char* holder : {"holder-1", "holder-2"}) {
      ContainerGrant g;
      g.container = {holder, "main"};
      g.podNamespace = "default";
      g.podName = holder;
      g.devices = {{"nvidia", kA100, 0, 4864, 14, 0}};
      g.hostDir = (host.path() / holder).string();
      std::filesystem::create_directories(g.hostDir);
      ASSERT_TRUE((*first)->limiter()->containerSpec(g).ok());
    }
  }  // the agent goes away without releasing anything
  EXPECT_EQ(control.migDevices(0), 2u);
  auto restarted = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), backendParams());
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  ASSERT_TRUE((*restarted)->discovery()->discover().ok());
  ASSERT_TRUE((*restarted)->limiter()->reconcile({{"holder-2", "main"}}).ok());
  EXPECT_EQ(control.migDevices(0), 1u);  // holder-1's container is gone, holder-2's runs on
}

TEST(NvidiaDynamicMigOptions, ManageAllGpusInMigModeWithTheDefaultStateFolder) {
  auto ok = parseOptions(params({{"migManaged", "all"}, {"migAllowedProfiles", "1g.5gb,3g.20gb"}}), nullptr, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(ok->mig.manages("GPU-anything"));
  EXPECT_EQ(ok->mig.stateDir, "/var/lib/vgpu/mig");
}
#endif

}  // namespace
}  // namespace vgpu::nvidia
