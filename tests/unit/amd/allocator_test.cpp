// The AMD fit: a whole GPU by the standard rules; a GPU in a compute partition mode gives
// each grant one free partition, placed by the tokens of the grants already there.
#include <gtest/gtest.h>

#include "amd_backend.h"
#include "gpu_layout.h"

namespace vgpu::amd {
namespace {

const vgpu_kv kCpx[] = {{kComputePartitionAttribute, "CPX"}, {kMemoryPartitionAttribute, "NPS4"}};
const vgpu_kv kSpx[] = {{kComputePartitionAttribute, "SPX"}};

vgpu_device gpu(std::uint32_t split, const vgpu_kv* attrs, size_t n) {
  vgpu_device d{};
  d.struct_size = sizeof(d);
  d.id = "AMD-B0";
  d.model = "AMD Instinct MI300X";
  d.memory_mib = 196608;
  d.compute_units = 100;
  d.split_count = split;
  d.health = VGPU_HEALTHY;
  d.attributes = {attrs, n};
  return d;
}

vgpu_device_request ask(std::uint64_t memory, std::uint32_t cores) {
  vgpu_device_request q{};
  q.struct_size = sizeof(q);
  q.count = 1;
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
  fitPartition(q, d, usage, &tokens, p.result, &p.token, &p.why);
  return p;
}

TEST(AmdFit, OnlyAGpuInAPartitionModeIsPlaced) {
  EXPECT_TRUE(isPartitionedDevice(gpu(8, kCpx, 2)));
  EXPECT_FALSE(isPartitionedDevice(gpu(10, kSpx, 1)));
  EXPECT_FALSE(isPartitionedDevice(gpu(10, nullptr, 0)));
}

TEST(AmdFit, EachGrantTakesTheFirstFreePartition) {
  const auto d = gpu(8, kCpx, 2);
  auto p = place(ask(8192, 0), d, {});
  ASSERT_TRUE(p.result.fits);
  EXPECT_EQ(p.token, "CPX@0");
  EXPECT_EQ(p.result.take.memory_mib, 24576u);
  EXPECT_EQ(p.result.take.compute, 12u);
  EXPECT_EQ(place(ask(8192, 0), d, {"CPX@0", "CPX@2"}).token, "CPX@1");
  // A bare count (the whole device, 100% memory and cores) is one whole partition.
  EXPECT_EQ(place(ask(0, 100), d, {"CPX@0"}).token, "CPX@1");
}

TEST(AmdFit, GrantsWithoutTokensTakeTheLowestPartitions) {
  const auto d = gpu(8, kCpx, 2);
  EXPECT_EQ(place(ask(1024, 0), d, {}, {2, 24, 49152}).token, "CPX@2");
  EXPECT_EQ(place(ask(1024, 0), d, {"CPX@0"}, {2, 24, 49152}).token, "CPX@2");
}

TEST(AmdFit, RefusesMoreThanAPartitionAndAFullGpuInWords) {
  const auto d = gpu(8, kCpx, 2);
  auto p = place(ask(30000, 0), d, {});
  EXPECT_FALSE(p.result.fits);
  EXPECT_EQ(p.result.reason, VGPU_REASON_REQUEST_TOO_LARGE);
  EXPECT_EQ(p.why, "asks 30000 MiB; a CPX partition of AMD-B0 has 24576 MiB");
  std::vector<std::string_view> all;
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) names.push_back("CPX@" + std::to_string(i));
  for (const auto& n : names) all.push_back(n);
  p = place(ask(1024, 0), d, all);
  EXPECT_EQ(p.result.reason, VGPU_REASON_SHARES_EXHAUSTED);
  EXPECT_EQ(p.why, "all 8 CPX partitions of AMD-B0 are taken");
}

TEST(AmdFit, TokensRoundTrip) {
  EXPECT_EQ(partitionToken("QPX", 3), "QPX@3");
  EXPECT_EQ(partitionOfToken("QPX@3"), 3u);
  EXPECT_FALSE(partitionOfToken("QPX"));
  EXPECT_FALSE(partitionOfToken("@3"));
  EXPECT_FALSE(partitionOfToken("QPX@x"));
}

TEST(AmdLayout, PartitionsOfOnePciDeviceAreOneGpu) {
  std::vector<Processor> ps;
  for (std::uint32_t i = 0; i < 4; ++i) {
    Processor p;
    p.uuid = "B" + std::to_string(3 - i);
    p.bdf = 0x200 | (3 - i);  // a partition may differ in the function number
    p.partitionId = 3 - i;
    p.computePartition = "QPX";
    p.memoryPartition = "NPS1";
    p.memoryMiB = 196608;
    ps.push_back(p);
  }
  Processor whole;
  whole.uuid = "A";
  whole.bdf = 0x100;
  whole.computePartition = "SPX";
  whole.memoryMiB = 196608;
  ps.push_back(whole);
  const auto gpus = groupPhysical(ps);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].first().uuid, "B0");
  EXPECT_EQ(gpus[0].partitionMode(), "QPX");
  EXPECT_EQ(gpus[0].memoryMiB(), 196608u);  // NPS1: one pool every partition sees
  EXPECT_EQ(gpus[1].partitionMode(), "");
}

}  // namespace
}  // namespace vgpu::amd
