// `nvidia-smi topo -m`: the parser on the tool's layout, and discovery through the fake
// nvidia-smi when NVML is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "discovery.h"
#include "nvidia_test_support.h"
#include "smi_topo.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::setEnv;
using testing::TempDir;

// Laid out as the tool does: an underlined header, tabs, a NIC column and row, the legend.
constexpr std::string_view kFourGpusAndANic =
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV12\tPIX\tSYS\tNODE\t0-47\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tPXB\tSYS\tNODE\t0-47\t0\t\tN/A\n"
    "GPU2\tPIX\tPXB\t X \tSOC\tPHB\t0-47\t0\t\tN/A\n"
    "GPU3\tSYS\tSYS\tSOC\t X \tSYS\t48-95\t1\t\tN/A\n"
    "NIC0\tNODE\tNODE\tPHB\tSYS\t X \n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n";

TEST(SmiTopology, ReadsEveryGpuPairAndSkipsTheRest) {
  auto m = parseTopoMatrix(kFourGpusAndANic);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 4u);
  EXPECT_FALSE((*m)[0][0].has_value());
  EXPECT_EQ((*m)[0][1]->linkClass, LinkClass::kDirect);
  EXPECT_EQ((*m)[0][1]->lanes, 12u);
  EXPECT_EQ((*m)[0][2]->linkClass, LinkClass::kPcieSwitch);
  EXPECT_EQ((*m)[1][2]->linkClass, LinkClass::kPcieSwitches);
  EXPECT_EQ((*m)[2][3]->linkClass, LinkClass::kCrossNuma);  // SOC, the old word
  EXPECT_EQ((*m)[3][0]->linkClass, LinkClass::kCrossNuma);
}

TEST(SmiTopology, UnknownWordsLeaveThePairUnknownAndNoHeaderIsAnError) {
  auto m = parseTopoMatrix("\tGPU0\tGPU1\nGPU0\t X \tWARP9\nGPU1\tNV\t X \n");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE((*m)[0][1].has_value());
  EXPECT_FALSE((*m)[1][0].has_value());
  auto none = parseTopoMatrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().message, HasSubstr("no header with GPU columns"));
}

TEST(SmiTopology, DiscoveryThroughNvidiaSmiPublishesTheLinks) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG",
         dir.write("machine.conf",
                   "gpu uuid=GPU-11111111-1111-1111-1111-111111111111 numa=0\n"
                   "gpu uuid=GPU-22222222-2222-2222-2222-222222222222 numa=0\n"
                   "gpu uuid=GPU-33333333-3333-3333-3333-333333333333 numa=1\n"
                   "nvlink gpu=0 peer=1 links=4\npcie gpu=1 peer=2 level=multiple\n")
             .string());
  DiscoverySettings s;
  s.nvmlLibrary = "/nonexistent/libnvidia-ml.so.1";
  s.nvidiaSmiPath = VGPU_FAKE_NVIDIA_SMI;
  s.sysRoot = "/nonexistent-sys";
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].links,
            (std::vector<DeviceLink>{
                {"GPU-22222222-2222-2222-2222-222222222222", LinkClass::kDirect, 4, standardLinkRank(LinkClass::kDirect, 4)},
                {"GPU-33333333-3333-3333-3333-333333333333", LinkClass::kCrossNuma, 0, 10}}));
  EXPECT_EQ((*devices)[1].links[1].linkClass, LinkClass::kPcieSwitches);
}

}  // namespace
}  // namespace vgpu::nvidia
