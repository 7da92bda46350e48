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
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/placement.h"
#include "vgpu/pod_request.h"

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

// The scheduler chooses the placement: the fit knows where the GPU's instances sit (the
// operator's from the inventory, the placed pods' from their grants' tokens), and the node
// creates the instance where the scheduler said.
class NvidiaMigScheduling : public NvidiaDynamicMig {
 protected:
  void load(std::map<std::string, std::string> extra = {}) {
    auto backend = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"), backendParams(std::move(extra)));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    ASSERT_TRUE(backends_.add(std::move(backend).value()).ok());
  }
  Backend& backend() const { return *backends_.find("nvidia"); }
  /// The node as the scheduler sees it, from what discovery publishes now: its A100 under
  /// dynamic MIG (the whole H100 beside it would take any pod).
  NodeState node() {
    auto devices = backend().discovery()->discover();
    EXPECT_TRUE(devices.ok()) << devices.error().message;
    std::vector<Device> a100;
    for (const Device& d : devices.ok() ? *devices : std::vector<Device>{})
      if (d.id == kA100) a100.push_back(d);
    return NodeState("node-a", std::make_shared<const NodeInventory>(std::move(a100), backends_));
  }
  /// The notices about MIG placements the node gave the container.
  static std::vector<PodNotice> placementNotices(const ContainerSpec& spec) {
    std::vector<PodNotice> out;
    for (const auto& n : spec.notices)
      if (n.reason == "MigPlacementChanged") out.push_back(n);
    return out;
  }
  Result<Assignment> assign(const NodeState& n, const std::string& pod, std::int64_t memory) {
    auto request = buildPodRequest(backends_, "default", pod,
                                   {{"main", false, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", memory}}}}, {});
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto prepared = PreparedPod::prepare(*request, backends_);
    EXPECT_TRUE(prepared.ok());
    return engine_.assign(*prepared, n);
  }
  /// Allocate on the node for the first container of `a`.
  Result<ContainerSpec> allocate(const Assignment& a, const std::string& holder) {
    ContainerGrant g;
    g.container = {holder, "main"};
    g.podNamespace = "default";
    g.podName = holder;
    g.devices = a.containers[0].devices;
    g.hostDir = (host_.path() / holder).string();
    std::filesystem::create_directories(g.hostDir);
    return backend().limiter()->containerSpec(g);
  }
  /// The MIG device a container got: its GPU instance's placement, "start:size".
  std::string placementOf(const ContainerSpec& spec) {
    auto devices = backend().discovery()->discover();
    const std::string uuid = spec.env.at("NVIDIA_VISIBLE_DEVICES");
    auto nvml = NvmlSession::open(VGPU_FAKE_NVML_LIBRARY);
    EXPECT_TRUE(nvml.ok());
    nvml::Device gpu = nullptr;
    (*nvml)->fn().deviceGetHandleByIndex(0, &gpu);
    auto profiles = readMigProfiles(**nvml, gpu);
    auto migs = readMigDevices(**nvml, gpu, *profiles);
    EXPECT_TRUE(migs.ok());
    for (const auto& m : *migs)
      if (m.uuid == uuid) return std::to_string(m.start) + ":" + std::to_string(m.size);
    return "none";
  }
  BackendSet backends_;
  PlacementEngine engine_;
  TempDir host_;
};

TEST_F(NvidiaMigScheduling, TheFitRefusesAFragmentedGpuThatHasMemoryAndSlicesInTotal) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(control.partition(0, 19, 5, 1), NVML_SUCCESS);  // an operator's 1g.5gb on slice 5
  ASSERT_EQ(control.partition(0, 14, 0, 2), NVML_SUCCESS);  // and a 2g.10gb on 0-1
  load({{"migAllowedProfiles", "3g.20gb"}});
  auto devices = backend().discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  // 14720 MiB and 3 of 7 compute slices are in instances: a 3g.20gb fits in total, but both
  // of its places (0-3, 4-7) hold one of them.
  const vgpu_fit_result r = fit(backend().allocator(), (*devices)[0], 12000);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.reason, kReasonMigNoPlacement);
  auto refused = assign(node(), "mid", 12000);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message,
              HasSubstr("no free 3g.20gb placement: slices 0\u20133 hold a 2g.10gb; slices 4\u20137 hold a 1g.5gb"));
}

TEST_F(NvidiaMigScheduling, TheSchedulerChoosesThePlacementAndTheNodeCreatesThere) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(control.partition(0, 15, 4, 2), NVML_SUCCESS);  // an operator's 1g.10gb on 4-5
  load();
  NodeState n = node();
  auto first = assign(n, "first", 12000);
  ASSERT_TRUE(first.ok()) << first.error().message;
  // A 3g.20gb goes where the operator's instance leaves room for one: slices 0-3.
  EXPECT_EQ(first->containers[0].devices[0].placement, "3g.20gb@0-3");
  ASSERT_TRUE(n.add(*first).ok());
  auto small = assign(n, "small", 3000);
  ASSERT_TRUE(small.ok()) << small.error().message;
  EXPECT_EQ(small->containers[0].devices[0].placement, "1g.5gb@6");
  ASSERT_TRUE(n.add(*small).ok());
  // A second 3g.20gb has memory and slices in total but no place, and the scheduler says so.
  auto second = assign(n, "second", 12000);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.error().message, HasSubstr("no free 3g.20gb placement: slices 0\u20133 hold a 3g.20gb; "
                                                "slices 4\u20137 hold a 1g.10gb and a 1g.5gb"));
  // The node creates each instance at the scheduler's placement.
  auto spec = allocate(*first, "first");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(placementOf(*spec), "0:4");
  EXPECT_TRUE(placementNotices(*spec).empty());
  auto smallSpec = allocate(*small, "small");
  ASSERT_TRUE(smallSpec.ok()) << smallSpec.error().message;
  EXPECT_EQ(placementOf(*smallSpec), "6:1");
  EXPECT_EQ(control.migDevices(0), 3u);
}

// The node's inventory is published now and then, not after each Allocate: an instance the
// agent made must not be listed as the GPU's own, or its slices would stay blocked for the
// scheduler after the container ended, until the next publication.
TEST_F(NvidiaMigScheduling, AnInstanceTheAgentMadeIsNotPublishedAsTheGpusSoItsSlicesFreeWhenItEnds) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(control.partition(0, 15, 4, 2), NVML_SUCCESS);  // an operator's 1g.10gb on 4-5
  load();
  auto first = assign(node(), "first", 12000);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_TRUE(allocate(*first, "first").ok());
  EXPECT_EQ(control.migDevices(0), 2u);
  auto devices = backend().discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  EXPECT_EQ((*devices)[0].attributes.at("migInstances"), "15@4:2");  // the operator's only
  NodeState published = node();  // discovered while the agent's 3g.20gb exists
  ASSERT_TRUE(backend().limiter()->release({"first", "main"}).ok());
  // The container ended; the inventory is the one published before. Its slices are free.
  auto second = assign(published, "second", 12000);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->containers[0].devices[0].placement, "3g.20gb@0-3");
}

TEST_F(NvidiaMigScheduling, TheNodeFollowsTheSchedulersPlacementOverItsOwnChoice) {
  load();
  auto grant = assign(node(), "small", 3000);
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  // Where the node alone would not put it (it fills from slice 6): the scheduler's word holds.
  grant->containers[0].devices[0].placement = "1g.5gb@2";
  auto spec = allocate(*grant, "small");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(placementOf(*spec), "2:1");
  EXPECT_TRUE(placementNotices(*spec).empty());
}

TEST_F(NvidiaMigScheduling, ATakenPlacementOnTheNodeIsPlannedAgainAndSaid) {
  load();
  auto grant = assign(node(), "mid", 12000);
  ASSERT_TRUE(grant.ok()) << grant.error().message;
  ASSERT_EQ(grant->containers[0].devices[0].placement, "3g.20gb@4-7");
  // Between the scheduler's choice and Allocate, the operator takes slice 5.
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_EQ(control.partition(0, 19, 5, 1), NVML_SUCCESS);
  auto spec = allocate(*grant, "mid");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(placementOf(*spec), "0:4");
  const auto notices = placementNotices(*spec);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].message, "GPU " + kA100 +
                                          ": the scheduler chose a MIG instance at 3g.20gb@4-7, but slices 4\u20137 "
                                          "hold a 1g.5gb; created a 3g.20gb on slices 0\u20133 instead");
  // With no place left at all, Allocate fails with both reasons.
  auto again = assign(node(), "other", 12000);
  ASSERT_FALSE(again.ok());  // the scheduler, now seeing both instances, refuses a third
  grant->containers[0].devices[0].placement = "3g.20gb@0-3";
  auto refused = allocate(*grant, "late");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("the scheduler chose 3g.20gb@0-3, but slices 0\u20133 hold a 3g.20gb: "
                                                 "no free 3g.20gb placement"));
}

TEST_F(NvidiaMigScheduling, AGrantWithoutAPlacementIsPlannedByTheNodeAndCountedInTotals) {
  load();
  NodeState n = node();
  // A pod bound before placements travelled with grants: its grant has none.
  const std::string old = R"({"version":1,"node":"node-a","containers":[{"name":"main","devices":[)"
                          R"({"backend":"nvidia","id":")" + kA100 + R"(","index":0,"memoryMiB":19968,"compute":42,"slot":0}]}]})";
  auto decoded = decodeAssignment(old);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded->containers[0].devices[0].placement, "");
  ASSERT_TRUE(n.add(*decoded).ok());
  EXPECT_TRUE(n.placed[0].empty());
  EXPECT_EQ(n.usage[0].memoryMiB, 19968u);
  // Its memory still counts: two more 3g.20gb do not fit in total.
  auto next = assign(n, "next", 12000);
  ASSERT_TRUE(next.ok()) << next.error().message;
  ASSERT_TRUE(n.add(*next).ok());
  auto third = assign(n, "third", 12000);
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(third.error().message, HasSubstr("no room for a MIG instance of 19968 MiB"));
  // The node plans it on the real state, as before.
  auto spec = allocate(*decoded, "old");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(placementNotices(*spec).empty());
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
