#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vgpu/c_views.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::sdk {
namespace {

using ::testing::HasSubstr;

StandardRequestRules rules() {
  StandardRequestRules r;
  r.backend = "x";
  r.names = {"x.com/gpu", "x.com/mem", "x.com/mem-pct", "x.com/cores", "x.com/prio"};
  r.annotations = {"x.com/use-type", "x.com/nouse-type", "x.com/use-id", "x.com/nouse-id", "x.com/numa-bind"};
  return r;
}

Result<std::optional<DeviceRequest>> parse(std::map<std::string, std::int64_t> limits, Annotations a = {},
                                           const StandardRequestRules& r = rules()) {
  return parseStandardRequest(r, ContainerResources{"c", false, std::move(limits)}, a);
}

struct ParseCase {
  const char* description;
  std::map<std::string, std::int64_t> limits;
  std::uint32_t count, computePercent, memoryPercent;
  std::uint64_t memoryMiB;
};

TEST(StandardRules, ParsesRequests) {
  const ParseCase cases[] = {
      {"bare count is a whole device, alone", {{"x.com/gpu", 1}}, 1, 100, 0, 0},
      {"count, memory and cores", {{"x.com/gpu", 2}, {"x.com/mem", 3000}, {"x.com/cores", 30}}, 2, 30, 0, 3000},
      {"memory alone implies one device, shared", {{"x.com/mem", 3000}}, 1, 0, 0, 3000},
      {"percentage of memory", {{"x.com/gpu", 1}, {"x.com/mem-pct", 50}}, 1, 0, 50, 0},
      {"100 percent memory without cores is whole", {{"x.com/gpu", 1}, {"x.com/mem-pct", 100}}, 1, 100, 100, 0},
      {"cores alone", {{"x.com/cores", 20}}, 1, 20, 0, 0},
      {"zero cores is allowed (best effort)", {{"x.com/gpu", 1}, {"x.com/mem", 10}, {"x.com/cores", 0}}, 1, 0, 0, 10},
  };
  for (const auto& c : cases) {
    auto r = parse(c.limits);
    ASSERT_TRUE(r.ok()) << c.description << ": " << r.error().message;
    ASSERT_TRUE(r->has_value()) << c.description;
    const DeviceRequest& q = **r;
    EXPECT_EQ(q.count, c.count) << c.description;
    EXPECT_EQ(q.computePercent, c.computePercent) << c.description;
    EXPECT_EQ(q.memoryPercent, c.memoryPercent) << c.description;
    EXPECT_EQ(q.memoryMiB, c.memoryMiB) << c.description;
  }
}

TEST(StandardRules, RefusesInvalidValuesNamingTheResource) {
  const std::pair<std::map<std::string, std::int64_t>, const char*> cases[] = {
      {{{"x.com/gpu", 0}}, "x.com/gpu must be at least 1, got 0"},
      {{{"x.com/gpu", -2}}, "x.com/gpu must be at least 1, got -2"},
      {{{"x.com/gpu", 1}, {"x.com/mem", 0}}, "x.com/mem must be at least 1, got 0"},
      {{{"x.com/gpu", 1}, {"x.com/mem-pct", 101}}, "x.com/mem-pct must be between 1 and 100, got 101"},
      {{{"x.com/gpu", 1}, {"x.com/mem-pct", 0}}, "x.com/mem-pct must be between 1 and 100, got 0"},
      {{{"x.com/gpu", 1}, {"x.com/cores", 101}}, "x.com/cores must be between 0 and 100, got 101"},
      {{{"x.com/gpu", 1}, {"x.com/mem", 5}, {"x.com/mem-pct", 5}}, "set either x.com/mem or x.com/mem-pct, not both"},
      {{{"x.com/gpu", 1}, {"x.com/prio", 7}}, "x.com/prio must be between 0 and 1, got 7"},
      {{{"x.com/prio", 1}}, "x.com/prio is set but no x.com/gpu is requested"},
      {{{"x.com/gpu", 1}, {"x.com/mem", std::int64_t{1} << 50}}, "is too large"},
  };
  for (const auto& [limits, expected] : cases) {
    auto r = parse(limits);
    ASSERT_FALSE(r.ok()) << expected;
    EXPECT_THAT(r.error().message, HasSubstr(expected));
    EXPECT_THAT(r.error().message, HasSubstr("container \"c\""));
  }
}

TEST(StandardRules, NoneOfItsResourcesMeansNoRequest) {
  auto r = parse({{"other.com/gpu", 1}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(StandardRules, DefaultsAndMemoryUnitComeFromSettings) {
  BackendSettings s;
  s.defaultMemoryMiB = 4096;
  s.defaultCores = 25;
  s.memoryUnitMiB = 256;
  const auto withDefaults = rules().withSettings(s);
  auto bare = parse({{"x.com/gpu", 1}}, {}, withDefaults);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)->memoryMiB, 4096u);
  EXPECT_EQ((*bare)->computePercent, 25u);
  auto units = parse({{"x.com/gpu", 1}, {"x.com/mem", 4}}, {}, withDefaults);
  ASSERT_TRUE(units.ok());
  EXPECT_EQ((*units)->memoryMiB, 1024u);
}

TEST(StandardRules, ReadsFilterAnnotations) {
  auto r = parse({{"x.com/gpu", 1}}, {{"x.com/use-type", " A100 , ,H100"}, {"x.com/nouse-id", "GPU-1"},
                                      {"x.com/numa-bind", "true"}});
  ASSERT_TRUE(r.ok());
  const auto& k = (*r)->constraints;
  EXPECT_EQ(k.includeModels, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(k.excludeIds, (std::vector<std::string>{"GPU-1"}));
  EXPECT_TRUE(k.numaBind);
  auto bad = parse({{"x.com/gpu", 1}}, {{"x.com/numa-bind", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("must be \"true\" or \"false\", got \"yes\""));
}

TEST(StandardRules, AdmissionDefaultsStateWhatIsAssumed) {
  auto bare = standardAdmissionDefaults(rules(), {"c", false, {{"x.com/gpu", 1}}}, {});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, (std::map<std::string, std::int64_t>{{"x.com/cores", 100}}));
  auto memOnly = standardAdmissionDefaults(rules(), {"c", false, {{"x.com/mem", 100}}}, {});
  ASSERT_TRUE(memOnly.ok());
  EXPECT_EQ(*memOnly, (std::map<std::string, std::int64_t>{{"x.com/gpu", 1}}));
  auto explicitAll = standardAdmissionDefaults(rules(), {"c", false, {{"x.com/gpu", 1}, {"x.com/cores", 5}}}, {});
  ASSERT_TRUE(explicitAll.ok());
  EXPECT_TRUE(explicitAll->empty());
}

struct FitCase {
  const char* description;
  DeviceUsage usage;
  std::uint64_t memory;
  std::uint32_t cores;
  vgpu_reason expected;
};

// The filters alone ignore sizes and shares: a backend with its own size rules uses them.
TEST(StandardRules, FiltersAloneJudgeHealthModelsAndIds) {
  Device d;
  d.id = "GPU-0";
  d.model = "A100";
  d.memoryMiB = 1000;
  d.splitCount = 1;
  d.health = Health::kHealthy;
  DeviceRequest q;
  q.count = 1;
  q.memoryMiB = 5000;  // larger than the device: not the filters' business
  vgpu_fit_result r{};
  EXPECT_TRUE(passesStandardFilters(RequestRecord(q).c(), DeviceRecord(d).c(), r));
  q.constraints.excludeModels = {"a100"};
  EXPECT_FALSE(passesStandardFilters(RequestRecord(q).c(), DeviceRecord(d).c(), r));
  EXPECT_EQ(r.reason, VGPU_REASON_MODEL_MISMATCH);
  q.constraints = {};
  q.constraints.includeIds = {"GPU-1"};
  EXPECT_FALSE(passesStandardFilters(RequestRecord(q).c(), DeviceRecord(d).c(), r));
  EXPECT_EQ(r.reason, VGPU_REASON_ID_MISMATCH);
  q.constraints = {};
  d.health = Health::kUnhealthy;
  EXPECT_FALSE(passesStandardFilters(RequestRecord(q).c(), DeviceRecord(d).c(), r));
  EXPECT_EQ(r.reason, VGPU_REASON_UNHEALTHY);
}

TEST(StandardRules, FitChecksInOrder) {
  Device d;
  d.id = "GPU-0";
  d.model = "A100";
  d.memoryMiB = 1000;
  d.computeUnits = 100;
  d.splitCount = 3;
  d.health = Health::kHealthy;
  const DeviceRecord device(d);
  const FitCase cases[] = {
      {"fits an idle device", {}, 500, 50, VGPU_REASON_NONE},
      {"memory beyond the device", {}, 1001, 10, VGPU_REASON_REQUEST_TOO_LARGE},
      {"shares exhausted", {3, 0, 0}, 1, 1, VGPU_REASON_SHARES_EXHAUSTED},
      {"exclusive on a used device", {1, 10, 10}, 10, 100, VGPU_REASON_EXCLUSIVE_CONFLICT},
      {"best effort on a fully taken device", {1, 10, 100}, 10, 0, VGPU_REASON_EXCLUSIVE_CONFLICT},
      {"not enough memory", {1, 600, 10}, 500, 10, VGPU_REASON_INSUFFICIENT_MEMORY},
      {"not enough compute", {1, 100, 60}, 100, 50, VGPU_REASON_INSUFFICIENT_COMPUTE},
      {"exactly full is fine", {2, 500, 50}, 500, 50, VGPU_REASON_NONE},
  };
  for (const auto& c : cases) {
    DeviceRequest q;
    q.count = 1;
    q.memoryMiB = c.memory;
    q.computePercent = c.cores;
    const RequestRecord request(q);
    vgpu_fit_result r{};
    standardFit(request.c(), device.c(), toC(c.usage), r);
    EXPECT_EQ(r.reason, c.expected) << c.description;
    EXPECT_EQ(r.fits != 0, c.expected == VGPU_REASON_NONE) << c.description;
    if (r.fits) {
      EXPECT_EQ(r.take.memory_mib, c.memory) << c.description;
    }
  }
  // With core scaling a device has other than 100 units; wanting it alone takes them all.
  for (const std::uint32_t units : {50u, 200u}) {
    Device scaled = d;
    scaled.computeUnits = units;
    const DeviceRecord scaledDevice(scaled);
    DeviceRequest whole;
    whole.count = 1;
    whole.computePercent = 100;
    const RequestRecord wholeRequest(whole);
    vgpu_fit_result r{};
    standardFit(wholeRequest.c(), scaledDevice.c(), {}, r);
    EXPECT_TRUE(r.fits) << units;
    EXPECT_EQ(r.take.compute, units);
  }
  Device sick = d;
  sick.health = Health::kUnhealthy;
  const DeviceRecord sickDevice(sick);
  DeviceRequest q;
  q.count = 1;
  const RequestRecord request(q);
  vgpu_fit_result r{};
  standardFit(request.c(), sickDevice.c(), {}, r);
  EXPECT_EQ(r.reason, VGPU_REASON_UNHEALTHY);
}

}  // namespace
}  // namespace vgpu::sdk
