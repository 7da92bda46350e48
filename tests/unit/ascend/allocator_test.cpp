// The Ascend fit: a chip whole, or the smallest vNPU template holding the request, placed by
// the templates already on the chip (AI cores and memory are fixed slices).
#include <gtest/gtest.h>

#include "ascend_backend.h"
#include "vnpu_templates.h"

namespace vgpu::ascend {
namespace {

vgpu_device chip(const char* model, std::uint64_t memory, std::uint32_t split) {
  vgpu_device d{};
  d.struct_size = sizeof(d);
  d.id = "Ascend-0";
  d.model = model;
  d.memory_mib = memory;
  d.compute_units = 100;
  d.split_count = split;
  d.health = VGPU_HEALTHY;
  return d;
}

vgpu_device_request ask(std::uint32_t count, std::uint64_t memory, std::uint32_t cores) {
  vgpu_device_request q{};
  q.struct_size = sizeof(q);
  q.count = count;
  q.memory_mib = memory;
  q.compute_percent = cores;
  q.memory_percent = memory ? 0 : 100;
  return q;
}

struct Placed {
  vgpu_fit_result result{};
  std::string token, why;
};

Placed place(const vgpu_device_request& q, const vgpu_device& d, const std::vector<std::string_view>& tokens,
             vgpu_device_usage usage = {}) {
  Placed p;
  fitChip(q, d, usage, &tokens, p.result, &p.token, &p.why);
  return p;
}

TEST(AscendFit, MemoryRoundsUpToTheSmallestTemplateThatHoldsIt) {
  const auto d = chip("Ascend910B3", 65536, 4);
  auto p = place(ask(1, 2000, 0), d, {});
  ASSERT_TRUE(p.result.fits);
  EXPECT_EQ(p.token, "vir05_1c_16g");
  EXPECT_EQ(p.result.take.memory_mib, 16384u);
  EXPECT_EQ(p.result.take.compute, 25u);
  p = place(ask(1, 20000, 0), d, {});
  EXPECT_EQ(p.token, "vir10_3c_32g");
  p = place(ask(1, 1000, 40), d, {});  // 40% of 20 AI cores = 8: the 10-core template
  EXPECT_EQ(p.token, "vir10_3c_32g");
}

TEST(AscendFit, InferenceTemplatesOn310P) {
  const auto d = chip("Ascend310P3", 24576, 8);
  EXPECT_EQ(place(ask(1, 3000, 0), d, {}).token, "vir01");
  EXPECT_EQ(place(ask(1, 5000, 0), d, {}).token, "vir02");
  EXPECT_EQ(place(ask(1, 7000, 0), d, {}).token, "vir04");
}

TEST(AscendFit, EightSmallest310PTemplatesFitWhenTheDriverReportsLessThanTheNominalMemory) {
  const auto d = chip("Ascend310P3", 21527, 8);  // what HAMi calls the 310P3's allocatable memory
  const std::vector<std::string_view> seven(7, "vir01");
  auto p = place(ask(1, 3000, 0), d, seven, {7, 84, 7 * 3072});
  EXPECT_TRUE(p.result.fits) << p.why;
  EXPECT_EQ(p.token, "vir01");
}

TEST(AscendFit, TemplatesAlreadyPlacedLimitTheAiCores) {
  const auto d = chip("Ascend910B3", 65536, 4);
  // 10 + 5 + 5 of 20 AI cores are taken: nothing is left, though the shares allow a fourth.
  auto p = place(ask(1, 2000, 0), d, {"vir10_3c_32g", "vir05_1c_16g", "vir05_1c_16g"}, {3, 100, 65536});
  EXPECT_FALSE(p.result.fits);
  // 10 + 5: a 5-core template still fits, a 10-core one does not.
  p = place(ask(1, 2000, 0), d, {"vir10_3c_32g", "vir05_1c_16g"}, {2, 75, 49152});
  EXPECT_TRUE(p.result.fits);
  p = place(ask(1, 20000, 0), d, {"vir10_3c_32g", "vir05_1c_16g"}, {2, 75, 49152});
  EXPECT_FALSE(p.result.fits);
  EXPECT_EQ(p.result.reason, kReasonNoAiCores);
  EXPECT_NE(p.why.find("vir10_3c_32g needs 10 AI cores"), std::string::npos) << p.why;
}

TEST(AscendFit, FourSmallestTemplatesFillA910B3AndTheRefusalSaysSo) {
  const auto d = chip("Ascend910B3", 65536, 4);
  const std::vector<std::string_view> four{"vir05_1c_16g", "vir05_1c_16g", "vir05_1c_16g", "vir05_1c_16g"};
  auto p = place(ask(1, 2000, 0), d, four, {4, 100, 65536});
  EXPECT_FALSE(p.result.fits);
  EXPECT_EQ(p.result.reason, VGPU_REASON_SHARES_EXHAUSTED);  // not "held whole": all compute, four grants
  EXPECT_NE(p.why.find("holds 4 vNPUs"), std::string::npos) << p.why;
}

TEST(AscendFit, AWholeChipNeedsAnEmptyChipAndBlocksVnpus) {
  const auto d = chip("Ascend910B3", 65536, 4);
  auto p = place(ask(1, 0, 100), d, {});
  ASSERT_TRUE(p.result.fits);
  EXPECT_EQ(p.token, kWholeToken);
  EXPECT_EQ(p.result.take.compute, 100u);
  EXPECT_FALSE(place(ask(1, 0, 100), d, {"vir05_1c_16g"}, {1, 25, 16384}).result.fits);
  p = place(ask(1, 2000, 0), d, {kWholeToken}, {1, 100, 65536});
  EXPECT_FALSE(p.result.fits);
  EXPECT_EQ(p.result.reason, VGPU_REASON_EXCLUSIVE_CONFLICT);
}

TEST(AscendFit, SeveralChipsPerContainerAreGivenWholeAsInHami) {
  const auto d = chip("Ascend910B3", 65536, 4);
  auto p = place(ask(2, 2000, 0), d, {});
  ASSERT_TRUE(p.result.fits);
  EXPECT_EQ(p.token, kWholeToken);
}

TEST(AscendFit, ChipsWithoutTemplatesAreWholeOnly) {
  const auto d = chip("Ascend910C", 65536, 1);
  auto p = place(ask(1, 2000, 0), d, {});
  ASSERT_TRUE(p.result.fits);
  EXPECT_EQ(p.token, kWholeToken);
  EXPECT_EQ(p.result.take.memory_mib, 65536u);
}

TEST(AscendFit, UnplacedGrantsCountByTheirTotals) {
  const auto d = chip("Ascend910B3", 65536, 4);
  vgpu_fit_result r{};
  fitChip(ask(1, 20000, 0), d, {2, 75, 49152}, nullptr, r, nullptr, nullptr);
  EXPECT_FALSE(r.fits);  // 15 of 20 cores taken: no room for a 10-core template
  fitChip(ask(1, 2000, 0), d, {2, 75, 49152}, nullptr, r, nullptr, nullptr);
  EXPECT_TRUE(r.fits);
}

TEST(AscendBackendConfig, RefusesScalingAndUnknownOptions) {
  BackendParams p;
  p.name = "ascend";
  p.settings.memoryScaling = 2.0;
  auto b = AscendBackend::create(p);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("memoryScaling"), std::string::npos);
  p.settings.memoryScaling.reset();
  p.settings.coreScaling = 0.5;
  EXPECT_FALSE(AscendBackend::create(p).ok());
  p.settings.coreScaling.reset();
  p.settings.options["template"] = "vir02";
  b = AscendBackend::create(p);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("backends.ascend.options.template: unknown option"), std::string::npos);
}

TEST(AscendBackendConfig, HamiResourceNamesAndDeviceAnnotations) {
  BackendParams p;
  p.name = "ascend";
  p.resources.count = "huawei.com/Ascend310P";
  p.resources.memory = "huawei.com/Ascend310P-memory";
  auto b = AscendBackend::create(p);
  ASSERT_TRUE(b.ok()) << b.error().message;
  ContainerResources c;
  c.name = "main";
  c.limits = {{"huawei.com/Ascend310P", 1}, {"huawei.com/Ascend310P-memory", 2000}};
  auto r = (*b)->parseRequest(c, {{"hami.io/use-Ascend310P-uuid", "Ascend-a,Ascend-b"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->memoryMiB, 2000u);
  EXPECT_EQ((*r)->constraints.includeIds, (std::vector<std::string>{"Ascend-a", "Ascend-b"}));
}

TEST(AscendBackendConfig, FamiliesServeHamisPerFamilyNamesEachForItsChips) {
  BackendParams p;
  p.name = "ascend";
  p.settings.options["families"] = "Ascend910B3,Ascend310P";
  auto b = AscendBackend::create(p);
  ASSERT_TRUE(b.ok()) << b.error().message;
  std::vector<std::string> names;
  for (const auto& r : (*b)->resources()) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory",
                                             "huawei.com/Ascend310P", "huawei.com/Ascend310P-memory"}));
  ContainerResources c;
  c.name = "main";
  c.limits = {{"huawei.com/Ascend310P", 1}, {"huawei.com/Ascend310P-memory", 3000}};
  auto r = (*b)->parseRequest(c, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->constraints.includeModels, std::vector<std::string>{"Ascend310P"});
  c.limits["huawei.com/Ascend910B3"] = 1;
  r = (*b)->parseRequest(c, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("one container gets chips of one family"), std::string::npos) << r.error().message;

  p.resources.count = "huawei.com/Ascend910B";
  b = AscendBackend::create(p);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("set resources or options.families, not both"), std::string::npos);
  p.resources.count.reset();
  p.settings.options["families"] = "910B3";
  EXPECT_FALSE(AscendBackend::create(p).ok());
}

}  // namespace
}  // namespace vgpu::ascend
