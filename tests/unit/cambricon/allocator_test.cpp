#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cambricon_test_support.h"
#include "vgpu/c_views.h"

namespace vgpu::cambricon {
namespace {

using ::testing::HasSubstr;
using namespace testing;

constexpr const char* kCount = "cambricon.com/vmlu";
constexpr const char* kMemory = "cambricon.com/mlu.smlu.vmemory";
constexpr const char* kCores = "cambricon.com/mlu.smlu.vcore";

BackendParams schedulerParams() {
  BackendParams p;
  p.name = "cambricon";
  return p;
}

ContainerResources container(std::map<std::string, std::int64_t> limits) {
  ContainerResources c;
  c.name = "main";
  c.limits = std::move(limits);
  return c;
}

TEST(CambriconRequest, OwnsTheDefaultResourceNames) {
  auto backend = makeBackend(schedulerParams());
  std::vector<std::string> names;
  for (const auto& r : backend->resources()) names.push_back(r.name);
  EXPECT_THAT(names, ::testing::ElementsAre(kCount, kMemory, kCores));
  EXPECT_TRUE(backend->resources()[0].advertised);
}

TEST(CambriconRequest, TakesResourceNamesFromConfig) {
  auto params = schedulerParams();
  params.resources.count = "cambricon.com/mlu";
  params.resources.memory = "cambricon.com/mlu370.smlu.vmemory";
  params.resources.cores = "cambricon.com/mlu370.smlu.vcore";
  auto backend = makeBackend(params);
  auto r = backend->parseRequest(
      container({{"cambricon.com/mlu370.smlu.vmemory", 4}, {"cambricon.com/mlu370.smlu.vcore", 20}}), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->memoryMiB, 1024u);
  EXPECT_FALSE(backend->parseRequest(container({{kMemory, 4}, {kCores, 20}}), {})->has_value())
      << "the default names no longer belong to the backend";
}

TEST(CambriconRequest, CountsMemoryIn256MiBUnits) {
  auto r = makeBackend(schedulerParams())->parseRequest(container({{kCount, 1}, {kMemory, 16}, {kCores, 30}}), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->backend, "cambricon");
  EXPECT_EQ((*r)->count, 1u);
  EXPECT_EQ((*r)->memoryMiB, 4096u);
  EXPECT_EQ((*r)->computePercent, 30u);
}

TEST(CambriconRequest, TakesTheMemoryUnitFromConfig) {
  auto params = schedulerParams();
  params.settings.memoryUnitMiB = 1024;
  auto r = makeBackend(params)->parseRequest(container({{kMemory, 4}, {kCores, 30}}), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->memoryMiB, 4096u);
  EXPECT_EQ((*r)->count, 1u) << "memory and cores alone ask for one card";
}

TEST(CambriconRequest, ACountAloneIsAWholeCard) {
  auto r = makeBackend(schedulerParams())->parseRequest(container({{kCount, 2}}), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->count, 2u);
  EXPECT_EQ((*r)->memoryMiB, 0u);
  EXPECT_EQ((*r)->computePercent, 100u);
}

TEST(CambriconRequest, ReadsTheCambriconFilterAnnotations) {
  const Annotations a{{"cambricon.com/use-mlutype", "MLU370, MLU590"},
                      {"cambricon.com/nouse-mlutype", "MLU290"},
                      {"cambricon.com/use-gpuuuid", "MLU-a,MLU-b"},
                      {"cambricon.com/nouse-gpuuuid", "MLU-c"}};
  auto r = makeBackend(schedulerParams())->parseRequest(container({{kCount, 1}}), a);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& k = (*r)->constraints;
  EXPECT_THAT(k.includeModels, ::testing::ElementsAre("MLU370", "MLU590"));
  EXPECT_THAT(k.excludeModels, ::testing::ElementsAre("MLU290"));
  EXPECT_THAT(k.includeIds, ::testing::ElementsAre("MLU-a", "MLU-b"));
  EXPECT_THAT(k.excludeIds, ::testing::ElementsAre("MLU-c"));
}

TEST(CambriconRequest, RefusesBadValuesNamingTheResource) {
  struct Case {
    const char* what;
    std::map<std::string, std::int64_t> limits;
    const char* mentions;
  };
  const Case cases[] = {
      {"vcore above 100", {{kCount, 1}, {kMemory, 4}, {kCores, 150}}, kCores},
      {"no vmemory", {{kCount, 1}, {kMemory, 0}, {kCores, 10}}, kMemory},
      {"no cards", {{kCount, 0}}, kCount},
      {"shared card without a compute quota", {{kCount, 1}, {kMemory, 4}}, kCores},
      {"shared card with vcore 0", {{kCount, 1}, {kMemory, 4}, {kCores, 0}}, kCores},
  };
  auto backend = makeBackend(schedulerParams());
  for (const auto& c : cases) {
    auto r = backend->parseRequest(container(c.limits), {});
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_THAT(r.error().message, HasSubstr(c.mentions)) << c.what;
  }
}

TEST(CambriconRequest, DefaultCoresMakeAMemoryOnlyRequestValid) {
  auto params = schedulerParams();
  params.settings.defaultCores = 20;
  auto r = makeBackend(params)->parseRequest(container({{kMemory, 8}}), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->computePercent, 20u);
}

TEST(CambriconRequest, VendorAnnotationsAllowOnlyOneSharedCard) {
  auto params = schedulerParams();
  params.settings.options["vendorPluginAnnotations"] = "true";
  auto backend = makeBackend(params);
  auto shared = backend->parseRequest(container({{kCount, 2}, {kMemory, 4}, {kCores, 10}}), {});
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.error().message, HasSubstr("vendorPluginAnnotations"));
  EXPECT_TRUE(backend->parseRequest(container({{kCount, 2}}), {}).ok()) << "whole cards need no annotation";
}

TEST(CambriconRequest, AShareIsOfOneCardUnlessTheDriverTakesSeveral) {
  auto backend = makeBackend(schedulerParams());
  auto shared = backend->parseRequest(container({{kCount, 2}, {kMemory, 4}, {kCores, 10}}), {});
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.error().message, HasSubstr("container \"main\""));
  EXPECT_THAT(shared.error().message, HasSubstr("one sMLU instance"));
  EXPECT_THAT(shared.error().message, HasSubstr(std::string(kCount) + ": 1"));
  EXPECT_TRUE(backend->parseRequest(container({{kCount, 2}}), {}).ok()) << "whole cards are not shares";
  EXPECT_TRUE(backend->parseRequest(container({{kCount, 1}, {kMemory, 4}, {kCores, 10}}), {}).ok());
  auto params = schedulerParams();
  params.settings.options["multiCardSmlu"] = "true";
  auto several = makeBackend(params)->parseRequest(container({{kCount, 2}, {kMemory, 4}, {kCores, 10}}), {});
  ASSERT_TRUE(several.ok()) << several.error().message;
  EXPECT_EQ((*several)->count, 2u);
}

TEST(CambriconRequest, AdmissionAddsTheCountAndTheWholeCardQuota) {
  auto backend = makeBackend(schedulerParams());
  auto shared = backend->admissionDefaults(container({{kMemory, 4}, {kCores, 10}}), {});
  ASSERT_TRUE(shared.ok()) << shared.error().message;
  EXPECT_EQ(shared->at(kCount), 1);
  auto whole = backend->admissionDefaults(container({{kCount, 1}}), {});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->at(kCores), 100);
  EXPECT_FALSE(backend->admissionDefaults(container({{kMemory, 4}}), {}).ok());
}

TEST(CambriconConfig, RefusesUnknownOptionsAndOversubscription) {
  struct Case {
    const char* what;
    BackendParams params;
    const char* mentions;
  };
  std::vector<Case> cases;
  auto p = schedulerParams();
  p.settings.options["colour"] = "blue";
  cases.push_back({"unknown option", p, "backends.cambricon.options.colour"});
  p = schedulerParams();
  p.settings.options["vendorPluginAnnotations"] = "yes";
  cases.push_back({"not a boolean", p, "backends.cambricon.options.vendorPluginAnnotations"});
  p = schedulerParams();
  p.settings.options["stateDir"] = "relative/dir";
  cases.push_back({"relative state dir", p, "backends.cambricon.options.stateDir"});
  p = schedulerParams();
  p.settings.memoryScaling = 1.5;
  cases.push_back({"memory oversubscription", p, "backends.cambricon.memoryScaling"});
  p = schedulerParams();
  p.settings.coreScaling = 2;
  cases.push_back({"compute oversubscription", p, "backends.cambricon.coreScaling"});
  p = schedulerParams();
  p.settings.coreScaling = 0.5;
  cases.push_back({"compute reserve (no whole card could fit)", p, "backends.cambricon.coreScaling"});
  for (const auto& c : cases) {
    auto created = CambriconBackend::create(c.params);
    ASSERT_FALSE(created.ok()) << c.what;
    EXPECT_THAT(created.error().message, HasSubstr(c.mentions)) << c.what;
  }
}

// --- fit -------------------------------------------------------------------------------

Device card(std::string id, std::string model, std::optional<bool> smlu, std::uint32_t split = 10) {
  Device d;
  d.id = std::move(id);
  d.backend = "cambricon";
  d.model = std::move(model);
  d.memoryMiB = 24576;
  d.splitCount = split;
  d.health = Health::kHealthy;
  if (smlu) d.attributes[kSmluAttribute] = *smlu ? "on" : "off";
  return d;
}

DeviceRequest shared(std::uint64_t memory, std::uint32_t cores) {
  DeviceRequest r;
  r.backend = "cambricon";
  r.count = 1;
  r.memoryMiB = memory;
  r.computePercent = cores;
  return r;
}

DeviceRequest whole() { return shared(0, 100); }

TEST(CambriconFit, AppliesEveryRuleInWords) {
  struct Case {
    const char* what;
    Device device;
    DeviceRequest request;
    DeviceUsage usage;
    int reason;  // VGPU_REASON_NONE = fits
    const char* words;
  };
  Device sick = card("MLU-x", "MLU370-X4", true);
  sick.health = Health::kUnhealthy;
  DeviceRequest wants590 = shared(4096, 30);
  wants590.constraints.includeModels = {"MLU590"};
  DeviceRequest avoids370 = shared(4096, 30);
  avoids370.constraints.excludeModels = {"mlu370"};
  DeviceRequest wantsOther = shared(4096, 30);
  wantsOther.constraints.includeIds = {"MLU-other"};
  DeviceRequest avoidsThis = shared(4096, 30);
  avoidsThis.constraints.excludeIds = {"MLU-x"};
  // clang-format off
  const std::vector<Case> cases = {
      {"shared slice on an empty sMLU card", card("MLU-x", "MLU370-X4", true), shared(4096, 30), {}, VGPU_REASON_NONE, ""},
      {"unhealthy card", sick, shared(4096, 30), {}, VGPU_REASON_UNHEALTHY, "unhealthy"},
      {"model not in use-mlutype", card("MLU-x", "MLU370-X4", true), wants590, {}, VGPU_REASON_MODEL_MISMATCH, "model"},
      {"model in nouse-mlutype (any case)", card("MLU-x", "MLU370-X4", true), avoids370, {}, VGPU_REASON_MODEL_MISMATCH, "model"},
      {"uuid not in use-gpuuuid", card("MLU-x", "MLU370-X4", true), wantsOther, {}, VGPU_REASON_ID_MISMATCH, ""},
      {"uuid in nouse-gpuuuid", card("MLU-x", "MLU370-X4", true), avoidsThis, {}, VGPU_REASON_ID_MISMATCH, ""},
      {"more memory than the card has", card("MLU-x", "MLU370-X4", true), shared(30000, 10), {}, VGPU_REASON_REQUEST_TOO_LARGE, "30000"},
      {"memory already taken", card("MLU-x", "MLU370-X4", true), shared(8192, 10), {2, 20480, 20}, VGPU_REASON_INSUFFICIENT_MEMORY, "MiB"},
      {"compute quota already taken", card("MLU-x", "MLU370-X4", true), shared(1024, 50), {2, 2048, 80}, VGPU_REASON_INSUFFICIENT_COMPUTE, ""},
      {"all shares taken", card("MLU-x", "MLU370-X4", true, 2), shared(1024, 10), {2, 2048, 20}, VGPU_REASON_SHARES_EXHAUSTED, ""},
      {"whole card on a card in use", card("MLU-x", "MLU370-X4", true), whole(), {1, 1024, 10}, VGPU_REASON_EXCLUSIVE_CONFLICT, ""},
      {"whole card on an empty sMLU card", card("MLU-x", "MLU370-X4", true), whole(), {}, VGPU_REASON_NONE, ""},
      {"shared slice on a card not in sMLU mode", card("MLU-x", "MLU590-H8", false, 1), shared(4096, 30), {}, kReasonNotSmlu, "sMLU"},
      {"all memory but part of the compute, not in sMLU mode", card("MLU-x", "MLU590-H8", false, 1), shared(24576, 50), {}, kReasonNotSmlu, "whole"},
      {"whole card not in sMLU mode", card("MLU-x", "MLU590-H8", false, 1), whole(), {}, VGPU_REASON_NONE, ""},
      {"no attribute, split count 1: whole only", card("MLU-x", "MLU590-H8", std::nullopt, 1), shared(4096, 30), {}, kReasonNotSmlu, "sMLU"},
      {"no attribute, split count 10: shared", card("MLU-x", "MLU370-X4", std::nullopt, 10), shared(4096, 30), {}, VGPU_REASON_NONE, ""},
      {"unhealthy beats not in sMLU mode", [] { auto d = card("MLU-x", "MLU590", false, 1); d.health = Health::kUnhealthy; return d; }(),
       shared(4096, 30), {}, VGPU_REASON_UNHEALTHY, ""},
  };
  // clang-format on
  auto backend = makeBackend(schedulerParams());
  for (const auto& c : cases) {
    const DeviceRecord device(c.device);
    const RequestRecord request(c.request);
    const vgpu_device_usage usage = toC(c.usage);
    vgpu_fit_result result{};
    backend->fit(request.c(), device.c(), usage, result);
    if (c.reason == VGPU_REASON_NONE) {
      EXPECT_TRUE(result.fits) << c.what << ": " << backend->explain(result);
      continue;
    }
    EXPECT_FALSE(result.fits) << c.what;
    EXPECT_EQ(result.reason, c.reason) << c.what;
    EXPECT_THAT(backend->explain(result), HasSubstr(c.words)) << c.what;
  }
}

TEST(CambriconFit, TakesTheRequestedSliceWhenItFits) {
  auto backend = makeBackend(schedulerParams());
  const DeviceRecord device(card("MLU-x", "MLU370-X4", true));
  const RequestRecord request(shared(4096, 30));
  vgpu_fit_result result{};
  backend->fit(request.c(), device.c(), toC(DeviceUsage{1, 2048, 10}), result);
  ASSERT_TRUE(result.fits);
  EXPECT_EQ(result.take.shares, 1u);
  EXPECT_EQ(result.take.memory_mib, 4096u);
  EXPECT_EQ(result.take.compute, 30u);
}

}  // namespace
}  // namespace vgpu::cambricon
