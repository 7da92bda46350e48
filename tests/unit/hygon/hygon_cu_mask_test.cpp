// CU masks: the bitmap helpers and the allocator under churn.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "cu_mask.h"

namespace vgpu::hygon {
namespace {

TEST(HygonCuMask, FirstNSetsTheLowestCus) {
  EXPECT_EQ(CuMask::firstN(0), (CuMask{0, 0}));
  EXPECT_EQ(CuMask::firstN(4), (CuMask{0xf, 0}));
  EXPECT_EQ(CuMask::firstN(64), (CuMask{~0ull, 0}));
  EXPECT_EQ(CuMask::firstN(66), (CuMask{~0ull, 0x3}));
  EXPECT_EQ(CuMask::firstN(128).count(), 128u);
  EXPECT_EQ(CuMask::firstN(500).count(), 128u);
}

TEST(HygonCuMask, HexRoundTripsAndRefusesJunk) {
  EXPECT_EQ(toHex(0xff00), "0x000000000000ff00");
  auto v = parseHex("0x000000000000FF00");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 0xff00u);
  for (const char* bad : {"", "0x", "0xzz", "0x11112222333344445", "12 3"}) EXPECT_FALSE(parseHex(bad).ok()) << bad;
}

TEST(HygonCuMask, PrefersTheSmallestContiguousRunThatFits) {
  // Free: 0-3 (4 CUs) and 10-59 (50 CUs); a 4-CU request takes the small hole.
  CuMask used = CuMask::firstN(10);
  used &= ~CuMask::firstN(4);
  auto m = allocateComputeUnits(used, 60, 4);
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, CuMask::firstN(4));
  auto big = allocateComputeUnits(used, 60, 8);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->low, 0xffull << 10);
}

TEST(HygonCuMask, ScattersWhenNoRunIsLongEnough) {
  CuMask used;
  for (std::uint32_t cu = 0; cu < 60; cu += 2) used.set(cu);  // every other CU taken
  auto m = allocateComputeUnits(used, 60, 5);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->count(), 5u);
  EXPECT_FALSE(m->overlaps(used));
  EXPECT_FALSE(allocateComputeUnits(used, 60, 31));
  EXPECT_FALSE(allocateComputeUnits({}, 60, 61));
  EXPECT_FALSE(allocateComputeUnits({}, 60, 0));
}

TEST(HygonCuMask, ChurnNeverOverlapsNeverLeaksAndNeverRefusesWhatFits) {
  std::mt19937 rng(20261202);
  for (std::uint32_t total : {60u, 120u, 128u}) {
    std::vector<CuMask> live;
    for (int step = 0; step < 5000; ++step) {
      CuMask used;
      for (const auto& m : live) used |= m;
      const std::uint32_t freeCus = total - used.count();
      if (!live.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
        live.erase(live.begin() + std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
        continue;
      }
      const std::uint32_t want = std::uniform_int_distribution<std::uint32_t>(1, total / 3)(rng);
      auto m = allocateComputeUnits(used, total, want);
      ASSERT_EQ(m.has_value(), want <= freeCus) << "step " << step;
      if (!m) continue;
      ASSERT_EQ(m->count(), want);
      ASSERT_FALSE(m->overlaps(used)) << "step " << step;
      for (std::uint32_t cu = total; cu < kMaxComputeUnits; ++cu) ASSERT_FALSE(m->test(cu)) << "beyond the device";
      live.push_back(*m);
    }
  }
}

}  // namespace
}  // namespace vgpu::hygon
