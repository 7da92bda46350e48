// The link matrix from the fake libnvidia-ml.so.1 on three node shapes (issue 23), and the
// topology policy placing on what discovery published.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "discovery.h"
#include "nvidia_test_support.h"
#include "vgpu/annotations.h"
#include "vgpu/backend_loader.h"
#include "vgpu/placement.h"

#ifdef VGPU_FAKE_NVML_LIBRARY
namespace vgpu::nvidia {
namespace {

using ::testing::ElementsAre;
using testing::setEnv;
using testing::TempDir;

/// Eight GPUs, 0-3 on NUMA node 0 and 4-7 on node 1, plus `extra` lines.
std::string eightGpus(const std::string& extra) {
  std::string text;
  for (int i = 0; i < 8; ++i) text += "gpu name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 numa=" + std::to_string(i / 4) + "\n";
  return text + extra;
}

/// DGX-like: every GPU's 18 NVLinks go into the NVSwitches.
std::string dgx() {
  std::string extra;
  for (int i = 0; i < 8; ++i) extra += "nvswitch gpu=" + std::to_string(i) + " links=18\n";
  return eightGpus(extra);
}

/// "2x4": two islands of four GPUs, NVLink bridges (4 links) between every pair of an island,
/// nothing but the sockets' link between the islands.
std::string islands() {
  std::string extra;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      if (a / 4 == b / 4) extra += "nvlink gpu=" + std::to_string(a) + " peer=" + std::to_string(b) + " links=4\n";
  return eightGpus(extra);
}

/// PCIe only, two sockets: pairs (0,1), (2,3), (4,5), (6,7) each behind one PCIe switch.
std::string pcieOnly() {
  std::string extra;
  for (int a = 0; a < 8; a += 2) extra += "pcie gpu=" + std::to_string(a) + " peer=" + std::to_string(a + 1) + " level=single\n";
  return eightGpus(extra);
}

std::vector<Device> discoverFrom(const std::string& machine) {
  TempDir dir;
  setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", machine).string());
  DiscoverySettings s;
  s.nvmlLibrary = VGPU_FAKE_NVML_LIBRARY;
  s.nvidiaSmiPath = "/nonexistent/nvidia-smi";
  s.sysRoot = "/nonexistent-sys";
  s.health.enabled = false;
  NvidiaDiscovery discovery(s);
  auto devices = discovery.discover();
  EXPECT_TRUE(devices.ok()) << devices.error().message;
  return devices.ok() ? *devices : std::vector<Device>{};
}

/// The link from device `a` to device `b` (by index), or a default link when none.
DeviceLink linkBetween(const std::vector<Device>& devices, int a, int b) {
  const auto& links = devices[static_cast<std::size_t>(a)].links;
  const std::string& peer = devices[static_cast<std::size_t>(b)].id;
  auto it = std::find_if(links.begin(), links.end(), [&](const DeviceLink& l) { return l.peer == peer; });
  return it == links.end() ? DeviceLink{} : *it;
}

TEST(NvidiaTopology, DgxNodeIsOneSwitchFabricOf18Links) {
  const auto devices = discoverFrom(dgx());
  ASSERT_EQ(devices.size(), 8u);
  for (int a = 0; a < 8; ++a) {
    EXPECT_EQ(devices[static_cast<std::size_t>(a)].links.size(), 7u);
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const DeviceLink l = linkBetween(devices, a, b);
      EXPECT_EQ(l.linkClass, LinkClass::kSwitchFabric) << a << "-" << b;
      EXPECT_EQ(l.lanes, 18u);
      EXPECT_EQ(l.rank, standardLinkRank(LinkClass::kSwitchFabric, 18));
    }
  }
}

TEST(NvidiaTopology, IslandNodeHasNvLinkInsideEachIslandAndTheSocketLinkAcross) {
  const auto devices = discoverFrom(islands());
  ASSERT_EQ(devices.size(), 8u);
  EXPECT_EQ(linkBetween(devices, 0, 3).linkClass, LinkClass::kDirect);
  EXPECT_EQ(linkBetween(devices, 0, 3).lanes, 4u);
  EXPECT_EQ(linkBetween(devices, 5, 6).linkClass, LinkClass::kDirect);
  EXPECT_EQ(linkBetween(devices, 3, 4).linkClass, LinkClass::kCrossNuma);
  EXPECT_LT(linkBetween(devices, 3, 4).rank, linkBetween(devices, 0, 3).rank);
}

TEST(NvidiaTopology, PcieNodeTellsSwitchSocketAndCrossSocketApart) {
  const auto devices = discoverFrom(pcieOnly());
  ASSERT_EQ(devices.size(), 8u);
  EXPECT_EQ(linkBetween(devices, 0, 1).linkClass, LinkClass::kPcieSwitch);
  EXPECT_EQ(linkBetween(devices, 1, 0).linkClass, LinkClass::kPcieSwitch);
  EXPECT_EQ(linkBetween(devices, 0, 2).linkClass, LinkClass::kSameNuma);
  EXPECT_EQ(linkBetween(devices, 0, 4).linkClass, LinkClass::kCrossNuma);
}

class NvidiaTopologyPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"),
                               testing::params({{"nvmlLibrary", "/nonexistent/libnvidia-ml.so.1"}}));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    ASSERT_TRUE(backends_.add(std::move(backend).value()).ok());
  }
  NodeState node(std::vector<Device> devices) {
    return NodeState("n", std::make_shared<const NodeInventory>(std::move(devices), backends_));
  }
  /// Whole GPUs for the given indices, as earlier pods hold them.
  void occupy(NodeState& n, const std::vector<int>& indices) {
    Assignment a{n.name, {{"c", false, {}}}};
    for (int i : indices) {
      const Device& d = n.inventory->entries()[static_cast<std::size_t>(i)].device();
      a.containers[0].devices.push_back({"nvidia", d.id, d.index, d.memoryMiB, 100, -1, -1});
    }
    ASSERT_TRUE(n.add(a).ok());
  }
  std::vector<int> place(NodeState& n, std::int64_t gpus) {
    auto request = buildPodRequest(backends_, "default", "train", {{"train", false, {{"nvidia.com/gpu", gpus}}}},
                                   {{std::string(keys::kHamiPodDevicePolicy), "topology-aware"}});
    EXPECT_TRUE(request.ok()) << request.error().message;
    auto pod = PreparedPod::prepare(*request, backends_);
    auto a = engine_.assign(*pod, n);
    EXPECT_TRUE(a.ok()) << a.error().message;
    if (!a.ok()) return {};
    std::vector<int> out;
    for (const auto& g : a->containers[0].devices) out.push_back(g.deviceIndex);
    std::sort(out.begin(), out.end());
    return out;
  }

  BackendSet backends_;
  PlacementEngine engine_;
};

TEST_F(NvidiaTopologyPlacement, IslandNodeKeepsIslandsWhole) {
  auto n = node(discoverFrom(islands()));
  occupy(n, {4, 5, 6});
  EXPECT_THAT(place(n, 1), ElementsAre(7));  // not one of the whole island 0-3
  auto m = node(discoverFrom(islands()));
  occupy(m, {0});
  EXPECT_THAT(place(m, 4), ElementsAre(4, 5, 6, 7));
}

TEST_F(NvidiaTopologyPlacement, PcieNodeGivesAPairOneSwitch) {
  auto n = node(discoverFrom(pcieOnly()));
  occupy(n, {0, 2});
  EXPECT_THAT(place(n, 2), ElementsAre(4, 5));
  EXPECT_THAT(place(n, 1), ElementsAre(1));  // its switch partner is gone already
}

TEST_F(NvidiaTopologyPlacement, AFourGpuPodPrefersTheDgxNodeOverABusierPcieNode) {
  // The fake reads its machine once per process: the PCIe node is the same GPUs with the
  // links a 2-socket PCIe node would publish.
  auto fabric = discoverFrom(dgx());
  for (auto& d : fabric) d.id = "dgx-" + d.id;
  for (auto& d : fabric)
    for (auto& l : d.links) l.peer = "dgx-" + l.peer;
  std::vector<Device> pcie = fabric;
  for (auto& d : pcie) {
    d.id = "pcie-" + d.id;
    d.links.clear();
  }
  for (std::size_t a = 0; a < pcie.size(); ++a)
    for (std::size_t b = 0; b < pcie.size(); ++b)
      if (a != b) {
        const LinkClass c = a / 4 == b / 4 ? LinkClass::kSameNuma : LinkClass::kCrossNuma;
        pcie[a].links.push_back({pcie[b].id, c, 0, standardLinkRank(c, 0)});
      }
  std::vector<NodeState> nodes{node(pcie), node(fabric)};
  nodes[0].name = "pcie";
  nodes[1].name = "dgx";
  occupy(nodes[0], {0});  // busier: the default node policy (binpack) alone would pick it
  auto request = buildPodRequest(backends_, "default", "train", {{"train", false, {{"nvidia.com/gpu", 4}}}},
                                 {{std::string(keys::kPodDevicePolicy), "topology"}});
  ASSERT_TRUE(request.ok()) << request.error().message;
  auto pod = PreparedPod::prepare(*request, backends_);
  const Placement placement = engine_.place(*pod, nodes);
  ASSERT_TRUE(placement.chosen);
  EXPECT_EQ(nodes[*placement.chosen].name, "dgx");
}

}  // namespace
}  // namespace vgpu::nvidia
#endif
