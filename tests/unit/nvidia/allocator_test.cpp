#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::gpu;
using testing::params;

ContainerResources limits(std::map<std::string, std::int64_t> l) {
  ContainerResources c;
  c.name = "main";
  c.limits = std::move(l);
  return c;
}

/// `allocator.fit` of the container asking `l` (with `annotations`) on `device` with `usage`
/// taken; a request that does not parse fails the test and answers "does not fit".
vgpu_fit_result fitOn(const NvidiaAllocator& allocator, std::map<std::string, std::int64_t> l,
                      const Annotations& annotations, const Device& device, const DeviceUsage& usage = {}) {
  vgpu_fit_result r{};
  auto parsed = allocator.parseRequest(limits(std::move(l)), annotations);
  if (!parsed.ok() || !parsed->has_value()) {
    ADD_FAILURE() << "the request does not parse: " << (parsed.ok() ? "no request" : parsed.error().message);
    return r;
  }
  const RequestRecord request(**parsed);
  const DeviceRecord record(device);
  allocator.fit(request.c(), record.c(), toC(usage), r);
  return r;
}

struct FitCase {
  const char* description;
  std::map<std::string, std::int64_t> limits;
  Annotations annotations;
  Device device;
  DeviceUsage usage;
  std::int32_t reason;  // VGPU_REASON_NONE = fits
  DeviceUsage take;     // when it fits
  std::uint64_t needed = 0;
  std::uint64_t available = 0;
};

Device unhealthy(Device d) {
  d.health = Health::kUnhealthy;
  return d;
}
Device withMig(Device d) {
  d.attributes["migMode"] = "enabled";
  return d;
}
Device scaled(Device d, std::uint64_t memoryMiB, std::uint32_t computeUnits) {
  d.memoryMiB = memoryMiB;
  d.computeUnits = computeUnits;
  return d;
}
Device model(Device d, const std::string& m) {
  d.model = m;
  return d;
}

const std::string kUuid = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
const std::map<std::string, std::int64_t> kSlice{{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 10000}, {"nvidia.com/gpucores", 30}};

std::vector<FitCase> fitCases() {
  return {
      {"a slice fits an idle GPU", kSlice, {}, gpu(kUuid), {}, VGPU_REASON_NONE, {1, 10000, 30}},
      {"an unhealthy GPU takes nothing", kSlice, {}, unhealthy(gpu(kUuid)), {}, VGPU_REASON_UNHEALTHY, {}},
      {"health is checked before MIG", kSlice, {}, unhealthy(withMig(gpu(kUuid))), {}, VGPU_REASON_UNHEALTHY, {}},
      {"a GPU in MIG mode is not shared", kSlice, {}, withMig(gpu(kUuid)), {}, kReasonMigEnabled, {}},
      {"use-gputype that names another model", kSlice, {{"nvidia.com/use-gputype", "H100,H200"}}, gpu(kUuid), {},
       VGPU_REASON_MODEL_MISMATCH, {}, 0, 0},
      {"use-gputype matches a substring in any case", kSlice, {{"nvidia.com/use-gputype", "h100, a100"}}, gpu(kUuid),
       {}, VGPU_REASON_NONE, {1, 10000, 30}},
      {"nouse-gputype excludes the model", kSlice, {{"nvidia.com/nouse-gputype", "A100"}}, gpu(kUuid), {},
       VGPU_REASON_MODEL_MISMATCH, {}, 1, 0},
      // HAMi matches its type name, "NVIDIA-" + the NVML name unless that starts with NVIDIA.
      {"use-gputype in HAMi's type name", kSlice, {{"nvidia.com/use-gputype", "nvidia-tesla t4"}},
       model(gpu(kUuid), "Tesla T4"), {}, VGPU_REASON_NONE, {1, 10000, 30}},
      {"nouse-gputype in HAMi's type name", kSlice, {{"nvidia.com/nouse-gputype", "NVIDIA-Tesla"}},
       model(gpu(kUuid), "Tesla T4"), {}, VGPU_REASON_MODEL_MISMATCH, {}, 1, 0},
      {"a name that starts with NVIDIA gets no prefix", kSlice, {{"nvidia.com/use-gputype", "NVIDIA-A100"}},
       gpu(kUuid), {}, VGPU_REASON_MODEL_MISMATCH, {}},
      {"nouse-gputype of another model", kSlice, {{"nvidia.com/nouse-gputype", "T4"}},
       model(gpu(kUuid), "NVIDIA H100 80GB HBM3"), {}, VGPU_REASON_NONE, {1, 10000, 30}},
      {"use-gpuuuid names another GPU", kSlice, {{"nvidia.com/use-gpuuuid", "GPU-other"}}, gpu(kUuid), {},
       VGPU_REASON_ID_MISMATCH, {}, 0, 0},
      {"use-gpuuuid names this GPU", kSlice, {{"nvidia.com/use-gpuuuid", "GPU-other," + kUuid}}, gpu(kUuid), {},
       VGPU_REASON_NONE, {1, 10000, 30}},
      {"nouse-gpuuuid names this GPU", kSlice, {{"nvidia.com/nouse-gpuuuid", kUuid}}, gpu(kUuid), {},
       VGPU_REASON_ID_MISMATCH, {}, 1, 0},
      {"more memory than the whole GPU", {{"nvidia.com/gpumem", 90000}}, {}, gpu(kUuid), {},
       VGPU_REASON_REQUEST_TOO_LARGE, {}, 90000, 81920},
      {"every share is taken", kSlice, {}, gpu(kUuid), {10, 10000, 10}, VGPU_REASON_SHARES_EXHAUSTED, {}, 1, 10},
      {"a whole card wants the GPU alone", {{"nvidia.com/gpu", 1}}, {}, gpu(kUuid), {1, 1000, 10},
       VGPU_REASON_EXCLUSIVE_CONFLICT, {}, 100, 1},
      {"a whole card on an idle GPU", {{"nvidia.com/gpu", 1}}, {}, gpu(kUuid), {}, VGPU_REASON_NONE, {1, 81920, 100}},
      {"no compute asked on a GPU whose compute is all taken", {{"nvidia.com/gpumem", 1000}, {"nvidia.com/gpucores", 0}}, {},
       gpu(kUuid), {1, 1000, 100}, VGPU_REASON_EXCLUSIVE_CONFLICT, {}, 0, 1},
      {"not enough free memory", kSlice, {}, gpu(kUuid), {3, 75000, 30}, VGPU_REASON_INSUFFICIENT_MEMORY, {}, 10000,
       6920},
      {"not enough free compute", kSlice, {}, gpu(kUuid), {3, 1000, 80}, VGPU_REASON_INSUFFICIENT_COMPUTE, {}, 30, 20},
      {"memory scaling 2 publishes twice the memory", {{"nvidia.com/gpumem", 100000}}, {},
       scaled(gpu(kUuid), 163840, 100), {}, VGPU_REASON_NONE, {1, 100000, 0}},
      {"core scaling 2 publishes 200 compute units", kSlice, {}, scaled(gpu(kUuid), 81920, 200), {2, 1000, 150},
       VGPU_REASON_NONE, {1, 10000, 30}},
      {"a memory percentage is of the published memory", {{"nvidia.com/gpumem-percentage", 50}}, {}, gpu(kUuid), {},
       VGPU_REASON_NONE, {1, 40960, 0}},
      {"numa-bind leaves a GPU of unknown NUMA node to core's grouping",
       {{"nvidia.com/gpu", 2}, {"nvidia.com/gpumem", 1000}, {"nvidia.com/gpucores", 10}},
       {{"nvidia.com/numa-bind", "true"}}, gpu(kUuid, 81920, -1), {}, VGPU_REASON_NONE, {1, 1000, 10}},
      {"numa-bind for several GPUs on a known node",
       {{"nvidia.com/gpu", 2}, {"nvidia.com/gpumem", 1000}, {"nvidia.com/gpucores", 10}},
       {{"nvidia.com/numa-bind", "true"}}, gpu(kUuid, 81920, 1), {}, VGPU_REASON_NONE, {1, 1000, 10}},
      {"numa-bind for one GPU does not need its node", kSlice, {{"nvidia.com/numa-bind", "true"}},
       gpu(kUuid, 81920, -1), {}, VGPU_REASON_NONE, {1, 10000, 30}},
  };
}

TEST(NvidiaAllocator, AppliesEveryFitRuleInOrder) {
  const NvidiaAllocator allocator(params());
  for (const auto& c : fitCases()) {
    SCOPED_TRACE(c.description);
    const vgpu_fit_result r = fitOn(allocator, c.limits, c.annotations, c.device, c.usage);
    if (c.reason == VGPU_REASON_NONE) {
      EXPECT_TRUE(r.fits) << allocator.explain(r);
      EXPECT_EQ(r.take.shares, c.take.shares);
      EXPECT_EQ(r.take.memory_mib, c.take.memoryMiB);
      EXPECT_EQ(r.take.compute, c.take.compute);
    } else {
      EXPECT_FALSE(r.fits);
      EXPECT_EQ(r.reason, c.reason) << allocator.explain(r);
      if (c.needed || c.available) {
        EXPECT_EQ(r.needed, c.needed);
        EXPECT_EQ(r.available, c.available);
      }
      EXPECT_FALSE(allocator.explain(r).empty());
    }
  }
}

TEST(NvidiaAllocator, ExplainsItsOwnReasonsInWords) {
  const NvidiaAllocator allocator(params());
  vgpu_fit_result r{};
  r.reason = kReasonMigEnabled;
  EXPECT_THAT(allocator.explain(r), HasSubstr("MIG mode"));
  r.reason = VGPU_REASON_INSUFFICIENT_MEMORY;
  r.needed = 10000;
  r.available = 6920;
  EXPECT_THAT(allocator.explain(r), HasSubstr("needs 10000 MiB, 6920 MiB free"));
  r.reason = VGPU_REASON_BACKEND + 77;
  EXPECT_THAT(allocator.explain(r), HasSubstr("1077"));
}

TEST(NvidiaAllocator, PublishesHamiResourceNamesByDefaultWithOnlyTheCountAdvertised) {
  const NvidiaAllocator allocator(params());
  std::map<std::string, std::pair<vgpu_resource_role, bool>> got;
  for (const auto& r : allocator.resources()) got[r.name] = {r.role, r.advertised};
  const std::map<std::string, std::pair<vgpu_resource_role, bool>> want{
      {"nvidia.com/gpu", {VGPU_RESOURCE_COUNT, true}},
      {"nvidia.com/gpumem", {VGPU_RESOURCE_MEMORY, false}},
      {"nvidia.com/gpumem-percentage", {VGPU_RESOURCE_MEMORY_PERCENT, false}},
      {"nvidia.com/gpucores", {VGPU_RESOURCE_CORES, false}},
      {"nvidia.com/priority", {VGPU_RESOURCE_PRIORITY, false}}};
  EXPECT_EQ(got, want);
}

TEST(NvidiaAllocator, TakesResourceNamesFromTheConfig) {
  BackendParams p = params();
  p.resources.count = "example.com/vgpu";
  p.resources.memory = "example.com/vgpu-memory";
  const NvidiaAllocator allocator(p);
  EXPECT_EQ(allocator.resources()[0].name, "example.com/vgpu");
  auto mine = allocator.parseRequest(limits({{"example.com/vgpu", 2}, {"example.com/vgpu-memory", 512}}), {});
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE(mine->has_value());
  EXPECT_EQ((*mine)->count, 2u);
  EXPECT_EQ((*mine)->memoryMiB, 512u);
  auto other = allocator.parseRequest(limits({{"nvidia.com/gpu", 1}}), {});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST(NvidiaAllocator, ABareGpuCountIsAWholeCardUnlessDefaultsAreConfigured) {
  auto whole = NvidiaAllocator(params()).parseRequest(limits({{"nvidia.com/gpu", 1}}), {});
  ASSERT_TRUE(whole.ok() && whole->has_value());
  EXPECT_EQ((*whole)->memoryMiB, 0u);  // the whole device
  EXPECT_EQ((*whole)->computePercent, 100u);

  BackendParams p = params();
  p.settings.defaultMemoryMiB = 4000;
  p.settings.defaultCores = 20;
  auto slice = NvidiaAllocator(p).parseRequest(limits({{"nvidia.com/gpu", 1}}), {});
  ASSERT_TRUE(slice.ok() && slice->has_value());
  EXPECT_EQ((*slice)->memoryMiB, 4000u);
  EXPECT_EQ((*slice)->computePercent, 20u);
}

TEST(NvidiaAllocator, MemoryUnitScalesTheMemoryResource) {
  BackendParams p = params();
  p.settings.memoryUnitMiB = 1024;
  auto r = NvidiaAllocator(p).parseRequest(limits({{"nvidia.com/gpumem", 3}}), {});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->memoryMiB, 3072u);
  EXPECT_EQ((*r)->count, 1u);
}

TEST(NvidiaAllocator, RefusesBadRequestsNamingWhatIsWrong) {
  const NvidiaAllocator allocator(params());
  const struct {
    std::map<std::string, std::int64_t> limits;
    Annotations annotations;
    const char* mentions;
  } cases[] = {
      {{{"nvidia.com/gpu", 0}}, {}, "nvidia.com/gpu must be at least 1"},
      {{{"nvidia.com/gpumem-percentage", 150}}, {}, "nvidia.com/gpumem-percentage must be between 1 and 100"},
      {{{"nvidia.com/gpucores", 101}}, {}, "nvidia.com/gpucores must be between 0 and 100"},
      {{{"nvidia.com/gpumem", 100}, {"nvidia.com/gpumem-percentage", 10}}, {}, "not both"},
      {{{"nvidia.com/gpu", 1}, {"nvidia.com/priority", 2}}, {}, "nvidia.com/priority must be between 0 and 1"},
      {{{"nvidia.com/priority", 1}}, {}, "no nvidia.com/gpu is requested"},
      {{{"nvidia.com/gpu", 1}}, {{"nvidia.com/numa-bind", "yes"}}, "nvidia.com/numa-bind"},
  };
  for (const auto& c : cases) {
    auto r = allocator.parseRequest(limits(c.limits), c.annotations);
    ASSERT_FALSE(r.ok()) << c.mentions;
    EXPECT_THAT(r.error().message, HasSubstr(c.mentions));
  }
}

TEST(NvidiaAllocator, AdmissionDefaultsStateWhatTheRequestAssumes) {
  const NvidiaAllocator allocator(params());
  auto bare = allocator.admissionDefaults(limits({{"nvidia.com/gpu", 1}}), {});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, (std::map<std::string, std::int64_t>{{"nvidia.com/gpucores", 100}}));
  auto memoryOnly = allocator.admissionDefaults(limits({{"nvidia.com/gpumem", 2000}}), {});
  ASSERT_TRUE(memoryOnly.ok());
  EXPECT_EQ(*memoryOnly, (std::map<std::string, std::int64_t>{{"nvidia.com/gpu", 1}}));
  auto none = allocator.admissionDefaults(limits({{"cpu", 1}}), {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace vgpu::nvidia

namespace vgpu::nvidia {
namespace {

// MIG devices as discovery publishes them (toMigDevice), for the strategies' fit rules.
Device migDevice(const std::string& profile, std::uint64_t memoryMiB) {
  Device d = gpu("MIG-" + profile, memoryMiB);
  d.model = "NVIDIA A100-SXM4-40GB";
  d.attributes.erase("migMode");
  d.attributes["migProfile"] = profile;
  return d;
}

MigServing serving(MigStrategy strategy, std::vector<std::string> profiles = {}) {
  MigServing m;
  m.strategy = strategy;
  m.profiles = std::move(profiles);
  return m;
}

NvidiaAllocator mixed() { return NvidiaAllocator(params(), serving(MigStrategy::kMixed, {"1g.5gb", "3g.20gb"})); }

TEST(NvidiaMigAllocator, MixedServesOneResourcePerProfile) {
  std::map<std::string, bool> advertised;
  const NvidiaAllocator allocator = mixed();
  for (const auto& r : allocator.resources())
    if (r.role == VGPU_RESOURCE_COUNT) advertised[r.name] = r.advertised;
  const std::map<std::string, bool> want{
      {"nvidia.com/gpu", true}, {"nvidia.com/mig-1g.5gb", true}, {"nvidia.com/mig-3g.20gb", true}};
  EXPECT_EQ(advertised, want);
}

TEST(NvidiaMigAllocator, MixedFitsAMigResourceOnlyOnMigDevicesOfItsProfile) {
  const NvidiaAllocator allocator = mixed();
  const struct {
    const char* description;
    std::map<std::string, std::int64_t> limits;
    Annotations annotations;
    Device device;
    std::int32_t reason;
    std::uint64_t takeMiB = 0;
  } cases[] = {
      {"its profile, whole", {{"nvidia.com/mig-1g.5gb", 1}}, {}, migDevice("1g.5gb", 4864), VGPU_REASON_NONE, 4864},
      {"its profile, a memory slice of it (libvgpu.so splits the MIG device)",
       {{"nvidia.com/mig-3g.20gb", 1}, {"nvidia.com/gpumem", 6000}, {"nvidia.com/gpucores", 50}},
       {},
       migDevice("3g.20gb", 19968),
       VGPU_REASON_NONE,
       6000},
      {"another profile", {{"nvidia.com/mig-1g.5gb", 1}}, {}, migDevice("3g.20gb", 19968), kReasonMigProfileMismatch},
      {"a media-extension profile is another profile", {{"nvidia.com/mig-1g.5gb", 1}}, {},
       migDevice("1g.5gb+me", 4864), kReasonMigProfileMismatch},
      {"a whole GPU", {{"nvidia.com/mig-1g.5gb", 1}}, {}, gpu(kUuid), kReasonNotAMigDevice},
      {"nvidia.com/gpu on a MIG device", {{"nvidia.com/gpu", 1}}, {}, migDevice("1g.5gb", 4864),
       kReasonMigDeviceNeedsMigResource},
      {"nvidia.com/gpu on a whole GPU", {{"nvidia.com/gpu", 1}}, {}, gpu(kUuid), VGPU_REASON_NONE, 81920},
      {"use-gputype still applies, and to the model", {{"nvidia.com/mig-1g.5gb", 1}},
       {{"nvidia.com/use-gputype", "H100"}}, migDevice("1g.5gb", 4864), VGPU_REASON_MODEL_MISMATCH},
      {"use-gputype naming the model", {{"nvidia.com/mig-1g.5gb", 1}}, {{"nvidia.com/use-gputype", "a100"}},
       migDevice("1g.5gb", 4864), VGPU_REASON_NONE, 4864},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.description);
    const vgpu_fit_result r = fitOn(allocator, c.limits, c.annotations, c.device);
    EXPECT_EQ(r.reason, c.reason) << allocator.explain(r);
    EXPECT_EQ(r.fits != 0, c.reason == VGPU_REASON_NONE);
    if (r.fits) {
      EXPECT_EQ(r.take.memory_mib, c.takeMiB);
    }
    EXPECT_FALSE(allocator.explain(r).empty());
  }
}

TEST(NvidiaMigAllocator, MixedRefusesAContainerThatAsksForTwoKindsOfDevice) {
  const NvidiaAllocator allocator = mixed();
  auto two = allocator.parseRequest(limits({{"nvidia.com/mig-1g.5gb", 1}, {"nvidia.com/mig-3g.20gb", 1}}), {});
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(two.error().message, HasSubstr("MIG devices of one profile"));
  auto both = allocator.parseRequest(limits({{"nvidia.com/mig-1g.5gb", 1}, {"nvidia.com/gpu", 1}}), {});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.error().message, HasSubstr("asks for both nvidia.com/gpu and nvidia.com/mig-1g.5gb"));
}

TEST(NvidiaMigAllocator, SingleServesMigDevicesAsGpus) {
  const NvidiaAllocator allocator(params(), serving(MigStrategy::kSingle));
  const vgpu_fit_result r =
      fitOn(allocator, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 2000}}, {}, migDevice("2g.10gb", 9856));
  EXPECT_TRUE(r.fits) << allocator.explain(r);
  EXPECT_EQ(r.take.memory_mib, 2000u);
}

}  // namespace
}  // namespace vgpu::nvidia
