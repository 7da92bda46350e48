// Splitting: request parsing and every fit rule, with compute percent mapped to whole CUs.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include "hygon_backend.h"
#include "vgpu/c_views.h"

namespace vgpu::hygon {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HygonBackend> scheduler(BackendParams p = {}) {
  if (p.name.empty()) p.name = "hygon";
  auto b = HygonBackend::create(p);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  return std::move(*b);
}

Device dcu(const std::string& model, std::uint64_t memory, std::optional<std::uint32_t> cuAttr = {},
           Health health = Health::kHealthy) {
  Device d;
  d.id = "DCU-" + model + "-0";
  d.backend = "hygon";
  d.model = "DCU-" + model;
  d.memoryMiB = memory;
  d.computeUnits = 100;
  d.splitCount = 4;
  d.health = health;
  if (cuAttr) d.attributes["cuCount"] = std::to_string(*cuAttr);
  return d;
}

DeviceRequest want(std::uint64_t memory, std::uint32_t compute) {
  DeviceRequest r;
  r.backend = "hygon";
  r.count = 1;
  r.memoryMiB = memory;
  r.computePercent = compute;
  return r;
}

struct FitCase {
  const char* description;
  Device device;
  DeviceRequest request;
  DeviceUsage usage;
  bool fits;
  std::int32_t reason;
  std::uint64_t needed = 0, available = 0;
  std::uint32_t takeCompute = 0;
  std::uint64_t takeMemory = 0;
};

DeviceRequest withModels(DeviceRequest r, std::vector<std::string> include, std::vector<std::string> exclude) {
  r.constraints.includeModels = std::move(include);
  r.constraints.excludeModels = std::move(exclude);
  return r;
}
DeviceRequest withIds(DeviceRequest r, std::vector<std::string> include, std::vector<std::string> exclude) {
  r.constraints.includeIds = std::move(include);
  r.constraints.excludeIds = std::move(exclude);
  return r;
}
DeviceRequest withPercent(DeviceRequest r, std::uint32_t percent) {
  r.memoryMiB = 0;
  r.memoryPercent = percent;
  return r;
}

TEST(HygonFit, AppliesEveryRuleWithComputeInWholeUnits) {
  const FitCase cases[] = {
      {"a quarter of a Z100: 15 of 60 CUs, booked as 25%", dcu("Z100", 16368), want(4000, 25), {}, true,
       VGPU_REASON_NONE, 0, 0, 25, 4000},
      {"1% of 60 CUs is one whole CU, booked as 2%", dcu("Z100", 16368), want(1000, 1), {}, true, VGPU_REASON_NONE,
       0, 0, 2, 1000},
      {"10% of 128 CUs rounds up to 13 CUs, booked as 11%", dcu("K100_LC_E_AI", 65520), want(1000, 10), {}, true,
       VGPU_REASON_NONE, 0, 0, 11, 1000},
      {"no compute asked still needs one CU", dcu("Z100", 16368), want(1000, 0), {}, true, VGPU_REASON_NONE, 0, 0, 2,
       1000},
      {"the cuCount attribute wins over the model table", dcu("Z100", 16368, 56), want(1000, 50), {}, true,
       VGPU_REASON_NONE, 0, 0, 50, 1000},
      {"memory as a percentage", dcu("K100", 65520), withPercent(want(0, 20), 50), {}, true, VGPU_REASON_NONE, 0, 0,
       20, 32760},
      {"the whole DCU", dcu("K100", 65520), want(0, 100), {}, true, VGPU_REASON_NONE, 0, 0, 100, 65520},
      {"unhealthy", dcu("Z100", 16368, {}, Health::kUnhealthy), want(1000, 10), {}, false, VGPU_REASON_UNHEALTHY},
      {"model not in the pod's list", dcu("K100", 65520), withModels(want(1000, 10), {"Z100"}, {}), {}, false,
       VGPU_REASON_MODEL_MISMATCH, 0, 0},
      {"model in the list (any case)", dcu("K100", 65520), withModels(want(1000, 10), {"dcu-k100"}, {}), {}, true,
       VGPU_REASON_NONE, 0, 0, 10, 1000},
      {"model excluded", dcu("K100_AI", 65520), withModels(want(1000, 10), {}, {"K100_AI"}), {}, false,
       VGPU_REASON_MODEL_MISMATCH, 1, 0},
      {"id not in the pod's list", dcu("Z100", 16368), withIds(want(1000, 10), {"DCU-other"}, {}), {}, false,
       VGPU_REASON_ID_MISMATCH, 0, 0},
      {"id excluded", dcu("Z100", 16368), withIds(want(1000, 10), {}, {"DCU-Z100-0"}), {}, false,
       VGPU_REASON_ID_MISMATCH, 1, 0},
      {"more memory than the DCU has", dcu("Z100", 16368), want(20000, 10), {}, false,
       VGPU_REASON_REQUEST_TOO_LARGE, 20000, 16368},
      {"every share taken", dcu("Z100", 16368), want(1000, 10), {4, 4000, 40}, false,
       VGPU_REASON_SHARES_EXHAUSTED, 1, 4},
      {"wants the DCU alone but it is shared", dcu("Z100", 16368), want(0, 100), {1, 1000, 10}, false,
       VGPU_REASON_EXCLUSIVE_CONFLICT, 100, 1},
      {"not enough free memory", dcu("Z100", 16368), want(9000, 10), {1, 8000, 10}, false,
       VGPU_REASON_INSUFFICIENT_MEMORY, 9000, 8368},
      {"exactly the free CUs", dcu("Z100", 16368), want(1000, 10), {1, 1000, 90}, true, VGPU_REASON_NONE, 0, 0, 10,
       1000},
      {"11% fits the free percent but its 7 whole CUs do not", dcu("Z100", 16368), want(1000, 11), {1, 1000, 89},
       false, kReasonComputeUnits, 7, 6},
      {"unknown CU count refuses a slice", dcu("X9", 16368), want(1000, 10), {}, false, kReasonUnknownComputeUnits},
      {"unknown CU count still gives the whole DCU", dcu("X9", 16368), want(0, 100), {}, true, VGPU_REASON_NONE, 0, 0,
       100, 16368},
      {"unknown CU count reports health first", dcu("X9", 16368, {}, Health::kUnhealthy), want(1000, 10), {}, false,
       VGPU_REASON_UNHEALTHY},
  };
  auto b = scheduler();
  for (const auto& c : cases) {
    const DeviceRecord device(c.device);
    const RequestRecord request(c.request);
    const vgpu_device_usage usage = toC(c.usage);
    vgpu_fit_result r{};
    b->fit(request.c(), device.c(), usage, r);
    EXPECT_EQ(r.fits != 0, c.fits) << c.description << ": " << b->explain(r);
    EXPECT_EQ(r.reason, c.reason) << c.description;
    if (!c.fits) {
      EXPECT_EQ(r.needed, c.needed) << c.description;
      EXPECT_EQ(r.available, c.available) << c.description;
      EXPECT_FALSE(b->explain(r).empty()) << c.description;
    } else {
      EXPECT_EQ(r.take.shares, 1u) << c.description;
      EXPECT_EQ(r.take.compute, c.takeCompute) << c.description;
      EXPECT_EQ(r.take.memory_mib, c.takeMemory) << c.description;
    }
  }
}

TEST(HygonFit, BookingsNeverPromiseMoreCusThanTheDeviceHas) {
  // Every percent a container can ask, packed until the device is full: the CUs the limiter
  // will grant for the booked percents must fit the device.
  auto b = scheduler();
  for (std::uint32_t total : {60u, 120u, 128u}) {
    for (std::uint32_t pct = 0; pct <= 99; ++pct) {
      Device d = dcu("K100", 1 << 20, total);
      d.splitCount = 1000;
      const DeviceRecord device(d);
      const RequestRecord request(want(1, pct));
      DeviceUsage usage;
      std::uint32_t grantedCus = 0;
      for (;;) {
        vgpu_fit_result r{};
        b->fit(request.c(), device.c(), toC(usage), r);
        if (!r.fits) break;
        EXPECT_GE(grantedComputeUnits(r.take.compute, total), computeUnitsFor(pct, total));
        grantedCus += grantedComputeUnits(r.take.compute, total);
        usage += fromC(r.take);
      }
      EXPECT_LE(grantedCus, total) << pct << "% on " << total << " CUs";
      EXPECT_LE(usage.compute, 100u);
    }
  }
}

TEST(HygonFit, ExplainsItsOwnReasonsInWords) {
  auto b = scheduler();
  vgpu_fit_result r{};
  r.reason = kReasonComputeUnits;
  r.needed = 7;
  r.available = 6;
  EXPECT_THAT(b->explain(r), HasSubstr("needs 7 whole compute units"));
  EXPECT_THAT(b->explain(r), HasSubstr("has only 6 free"));
  r.reason = kReasonUnknownComputeUnits;
  EXPECT_THAT(b->explain(r), HasSubstr("compute-unit count is unknown"));
  r.reason = VGPU_REASON_INSUFFICIENT_MEMORY;
  r.needed = 10;
  r.available = 5;
  EXPECT_THAT(b->explain(r), HasSubstr("not enough free memory"));
}

TEST(HygonRequest, UsesHamiNamesByDefaultAndTheMemoryFactor) {
  BackendParams p;
  p.name = "hygon";
  p.settings.memoryUnitMiB = 1024;
  auto b = scheduler(p);
  std::vector<std::string> names;
  for (const auto& r : b->resources()) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"hygon.com/dcunum", "hygon.com/dcumem", "hygon.com/dcucores"}));
  EXPECT_TRUE(b->resources()[0].advertised);
  auto r = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 4}, {"hygon.com/dcucores", 30}}},
                           {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->memoryMiB, 4096u);
  EXPECT_EQ((*r)->computePercent, 30u);
  EXPECT_EQ((*r)->count, 1u);
}

TEST(HygonRequest, ResourceNamesComeFromConfig) {
  BackendParams p;
  p.name = "hygon";
  p.resources.count = "example.com/dcu";
  p.resources.memory = "example.com/dcu-mem";
  auto b = scheduler(p);
  auto r = b->parseRequest({"c", false, {{"example.com/dcu", 1}, {"example.com/dcu-mem", 2000}}}, {});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->memoryMiB, 2000u);
  auto none = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}}}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(HygonRequest, ReadsTheHygonAnnotations) {
  auto b = scheduler();
  auto r = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 1000}}},
                           {{"hygon.com/use-dcutype", "Z100, K100"},
                            {"hygon.com/nouse-dcutype", "K100_AI"},
                            {"hygon.com/use-gpuuuid", "DCU-SN1"},
                            {"hygon.com/nouse-gpuuuid", "DCU-SN2,DCU-SN3"}});
  ASSERT_TRUE(r.ok());
  const auto& k = (*r)->constraints;
  EXPECT_EQ(k.includeModels, (std::vector<std::string>{"Z100", "K100"}));
  EXPECT_EQ(k.excludeModels, (std::vector<std::string>{"K100_AI"}));
  EXPECT_EQ(k.includeIds, (std::vector<std::string>{"DCU-SN1"}));
  EXPECT_EQ(k.excludeIds, (std::vector<std::string>{"DCU-SN2", "DCU-SN3"}));
}

TEST(HygonRequest, AContainerGetsAtMostOneVirtualDcu) {
  auto b = scheduler();
  auto sliced = b->parseRequest({"train", false, {{"hygon.com/dcunum", 2}, {"hygon.com/dcumem", 1000}}}, {});
  ASSERT_FALSE(sliced.ok());
  EXPECT_THAT(sliced.error().message, HasSubstr("container \"train\""));
  EXPECT_THAT(sliced.error().message, HasSubstr("at most one virtual DCU"));
  auto whole = b->parseRequest({"train", false, {{"hygon.com/dcunum", 2}}}, {});
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ((*whole)->count, 2u);
  EXPECT_EQ((*whole)->computePercent, 100u);
}

TEST(HygonRequest, ASliceWithoutCoresGetsTheWholeDcusComputeUnlessConfigured) {
  // HAMi gives a DCU request without hygon.com/dcucores 100 %, not one CU.
  auto b = scheduler();
  auto r = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 4000}}}, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->computePercent, 100u);
  auto add = b->admissionDefaults({"c", false, {{"hygon.com/dcumem", 4000}}}, {});
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->at("hygon.com/dcucores"), 100);  // the pod states what it gets
  BackendParams p;
  p.name = "hygon";
  p.settings.defaultCores = 25;
  auto configured = scheduler(p);
  auto c = configured->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 4000}}}, {});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ((*c)->computePercent, 25u);
}

TEST(HygonRequest, RefusesBadValuesNamingTheResource) {
  auto b = scheduler();
  auto cores = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcucores", 150}}}, {});
  ASSERT_FALSE(cores.ok());
  EXPECT_THAT(cores.error().message, HasSubstr("hygon.com/dcucores must be between 0 and 100"));
  auto mem = b->parseRequest({"c", false, {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 0}}}, {});
  ASSERT_FALSE(mem.ok());
  EXPECT_THAT(mem.error().message, HasSubstr("hygon.com/dcumem"));
}

TEST(HygonRequest, AdmissionAddsTheCountForMemoryOnlyContainers) {
  auto b = scheduler();
  auto add = b->admissionDefaults({"c", false, {{"hygon.com/dcumem", 1000}}}, {});
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->at("hygon.com/dcunum"), 1);
  auto bad = b->admissionDefaults({"c", false, {{"hygon.com/dcunum", 3}, {"hygon.com/dcucores", 20}}}, {});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace vgpu::hygon
