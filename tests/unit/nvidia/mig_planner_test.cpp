// Dynamic MIG's planner on the profiles an A100-40GB and an H100-80GB report through NVML
// (the fake libnvidia-ml.so.1, whose placements are the hardware's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig.h"
#include "mig_planner.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::setEnv;
using testing::TempDir;

#ifdef VGPU_FAKE_NVML_LIBRARY
/// What GPU `index` of a fake machine reports.
std::vector<MigProfile> reported(unsigned index) {
  static TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf",
                                           "gpu memory_mib=40960 mig=on mig_profiles=a100-40gb\n"
                                           "gpu memory_mib=81559 mig=on mig_profiles=h100-80gb\n")
                                     .string());
  auto session = NvmlSession::open(VGPU_FAKE_NVML_LIBRARY);
  EXPECT_TRUE(session.ok()) << session.error().message;
  if (!session.ok()) return {};
  nvml::Device h = nullptr;
  (*session)->fn().deviceGetHandleByIndex(index, &h);
  auto profiles = readMigProfiles(**session, h);
  EXPECT_TRUE(profiles.ok()) << profiles.error().message;
  return profiles.ok() ? *profiles : std::vector<MigProfile>{};
}

const std::vector<MigProfile>& a100() {
  static const auto p = reported(0);
  return p;
}

TEST(NvidiaMigProfiles, AreReadFromNvmlWithTheirPlacements) {
  std::map<std::string, std::pair<unsigned, std::vector<unsigned>>> got;
  for (const auto& p : a100()) got[p.name] = {p.id, p.starts};
  EXPECT_EQ(got.at("1g.5gb"), (std::pair<unsigned, std::vector<unsigned>>{19, {0, 1, 2, 3, 4, 5, 6}}));
  EXPECT_EQ(got.at("3g.20gb"), (std::pair<unsigned, std::vector<unsigned>>{9, {0, 4}}));
  EXPECT_EQ(got.at("7g.40gb"), (std::pair<unsigned, std::vector<unsigned>>{0, {0}}));
  EXPECT_TRUE(got.contains("1g.5gb+me"));
  const auto h100 = reported(1);
  ASSERT_FALSE(h100.empty());
  EXPECT_EQ(h100.back().name, "1g.20gb");
}

TEST(NvidiaMigPlanner, PicksTheSmallestProfileThatFitsAndFillsFromTheEnd) {
  const MigPlanner planner(a100(), {});
  auto small = planner.plan(3000, {});
  ASSERT_TRUE(small.ok()) << small.error().message;
  EXPECT_EQ(small->profile->name, "1g.5gb");
  EXPECT_EQ(small->start, 6u);  // keeps slices 0-3 (a 4g.20gb) and 4-5 free
  auto mid = planner.plan(15000, {});
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->profile->name, "3g.20gb");
  EXPECT_EQ(mid->start, 4u);  // 0-3 stays free for the 4g.20gb
  auto whole = planner.plan(30000, {});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->profile->name, "7g.40gb");
}

TEST(NvidiaMigPlanner, PrefersThePlacementThatKeepsRoomForMore) {
  const MigPlanner planner(a100(), {});
  // A 1g.5gb on slice 6: the next goes beside it, not into the 3g.20gb's slices 0-3.
  auto next = planner.plan(3000, {{19, 6, 1}});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->start, 5u);
  // A 3g.20gb on 4-7: 8000 MiB is a 1g.10gb (one compute slice) on 2-3, keeping 0-1 free.
  auto pair = planner.plan(8000, {{9, 4, 4}});
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->profile->name, "1g.10gb");
  EXPECT_EQ(pair->start, 2u);
}

TEST(NvidiaMigPlanner, TheOperatorsAllowlistNarrowsTheProfiles) {
  const MigPlanner planner(a100(), {"2g.10gb", "3g.20gb"});
  auto p = planner.plan(3000, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->profile->name, "2g.10gb");
  auto none = MigPlanner(a100(), {"4g.20gb"}).plan(30000, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "no MIG profile of this GPU has 30000 MiB (the largest allowed, 4g.20gb, has 19968 MiB)");
}

TEST(NvidiaMigPlanner, ExplainsAPlacementTheHardwareWouldRefuseInWords) {
  const MigPlanner planner(a100(), {"3g.20gb"});
  // A 1g.5gb sits on slice 5 and a 2g.10gb on 0-1: neither 3g.20gb placement is free.
  auto refused = planner.plan(15000, {{19, 5, 1}, {14, 0, 2}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "no free 3g.20gb placement: slices 0\u20133 hold a 2g.10gb; slices 4\u20137 hold a 1g.5gb");
  const MigPlanner any(a100(), {});
  EXPECT_EQ(*any.blocked(*any.byName("3g.20gb"), 1, {}), "slice 1 is no place for a 3g.20gb");
  EXPECT_EQ(*any.blocked(*any.byName("1g.5gb+me"), 3, {{20, 0, 1}}), "the GPU already has its 1 1g.5gb+me instance");
  EXPECT_EQ(*any.blocked(*any.byName("2g.10gb"), 4, {{14, 0, 2}, {14, 2, 2}, {14, 4, 2}}),
            "slices 4\u20135 hold a 2g.10gb");
  EXPECT_FALSE(any.blocked(*any.byName("1g.5gb"), 6, {{14, 0, 2}, {14, 2, 2}, {14, 4, 2}}).has_value());
}
#endif

TEST(NvidiaMigPlanner, InventoryTextRoundTrips) {
  std::vector<MigProfile> profiles{{19, "1g.5gb", 1, 7, 4864, 1, {0, 1, 2, 3, 4, 5, 6}}, {9, "3g.20gb", 3, 2, 19968, 4, {0, 4}}};
  auto back = decodeMigProfiles(encodeMigProfiles(profiles));
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].name, "3g.20gb");
  EXPECT_EQ((*back)[1].starts, (std::vector<unsigned>{0, 4}));
  EXPECT_EQ((*back)[0].memoryMiB, 4864u);
  std::vector<MigOccupant> occupants{{9, 4, 4}, {19, 2, 1}};
  auto o = decodeMigOccupants(encodeMigOccupants(occupants));
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[0].start, 4u);
  EXPECT_FALSE(decodeMigProfiles("1g.5gb:19:1").ok());
  EXPECT_THAT(decodeMigOccupants("9@x:4").error().message, HasSubstr("is not profile@start:size"));
}

TEST(NvidiaMigPlanner, APlacementTokenNamesProfileAndSlicesAndReadsBack) {
  std::vector<MigProfile> profiles{{19, "1g.5gb", 1, 7, 4864, 1, {0, 1, 2, 3, 4, 5, 6}}, {9, "3g.20gb", 3, 2, 19968, 4, {0, 4}}};
  const MigPlanner planner(profiles, {});
  EXPECT_EQ(MigPlanner::token({planner.byName("3g.20gb"), 4}), "3g.20gb@4-7");
  EXPECT_EQ(MigPlanner::token({planner.byName("1g.5gb"), 6}), "1g.5gb@6");
  auto back = planner.fromToken("3g.20gb@4-7");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->profile->id, 9u);
  EXPECT_EQ(back->start, 4u);
  EXPECT_EQ(planner.fromToken("1g.5gb@6")->start, 6u);
  EXPECT_THAT(planner.fromToken("2g.10gb@0-1").error().message, HasSubstr("names a profile this GPU does not have"));
  EXPECT_THAT(planner.fromToken("3g.20gb@2-5").error().message, HasSubstr("is no place of a 3g.20gb on this GPU"));
  EXPECT_THAT(planner.fromToken("3g.20gb@0-2").error().message, HasSubstr("is no place of a 3g.20gb"));
  EXPECT_THAT(planner.fromToken("3g.20gb").error().message, HasSubstr("is not <profile>@<first slice>-<last slice>"));
  EXPECT_THAT(planner.fromToken("3g.20gb@x-7").error().message, HasSubstr("is not <profile>@"));
  // A grant's instance that discovery also saw counts once; one it did not see is added.
  const char* tokens[] = {"1g.5gb@6", "3g.20gb@0-3"};
  auto occupants = occupantsWith(planner, {{19, 6, 1}}, {tokens, 2});
  ASSERT_TRUE(occupants.ok()) << occupants.error().message;
  ASSERT_EQ(occupants->size(), 2u);
  EXPECT_EQ((*occupants)[1].start, 0u);
  EXPECT_EQ((*occupants)[1].size, 4u);
  const char* bad[] = {"7g.80gb@0-7"};
  EXPECT_FALSE(occupantsWith(planner, {}, {bad, 1}).ok());
}

}  // namespace
}  // namespace vgpu::nvidia
