#include "topology.h"

#include <algorithm>

namespace vgpu::nvidia {
namespace {

/// NVLinks per GPU: to each other GPU of the node, and into something else (an NVSwitch).
struct NvLinkCounts {
  std::vector<std::vector<unsigned>> toGpu;  // [i][j]: links of GPU i whose far end is GPU j
  std::vector<unsigned> toSwitch;            // [i]: links of GPU i whose far end is no GPU here
};

NvLinkCounts countNvLinks(const NvmlFunctions& f, const std::vector<LinkedGpu>& gpus) {
  const std::size_t n = gpus.size();
  NvLinkCounts c{std::vector<std::vector<unsigned>>(n, std::vector<unsigned>(n, 0)), std::vector<unsigned>(n, 0)};
  if (!f.deviceGetNvLinkState || !f.deviceGetNvLinkRemotePciInfo) return c;
  for (std::size_t i = 0; i < n; ++i) {
    for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
      nvml::EnableState state = NVML_FEATURE_DISABLED;
      // GPUs without NVLink, and links past a GPU's own count, answer with an error.
      if (f.deviceGetNvLinkState(gpus[i].handle, link, &state) != nvml::kSuccess || state != NVML_FEATURE_ENABLED)
        continue;
      nvml::PciInfo remote{};
      if (f.deviceGetNvLinkRemotePciInfo(gpus[i].handle, link, &remote) != nvml::kSuccess) continue;
      auto peer = std::find_if(gpus.begin(), gpus.end(), [&](const LinkedGpu& g) {
        return g.pciDomain == remote.domain && g.pciBus == remote.bus && g.pciDevice == remote.device;
      });
      if (peer == gpus.end()) {
        ++c.toSwitch[i];
      } else if (static_cast<std::size_t>(peer - gpus.begin()) != i) {
        ++c.toGpu[i][static_cast<std::size_t>(peer - gpus.begin())];
      }
    }
  }
  return c;
}

}  // namespace

LinkClass classOfLevel(nvml::TopologyLevel level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL: return LinkClass::kSameBoard;
    case NVML_TOPOLOGY_SINGLE: return LinkClass::kPcieSwitch;
    case NVML_TOPOLOGY_MULTIPLE: return LinkClass::kPcieSwitches;
    case NVML_TOPOLOGY_HOSTBRIDGE: return LinkClass::kPcieHostBridge;
    case NVML_TOPOLOGY_NODE: return LinkClass::kSameNuma;
    case NVML_TOPOLOGY_SYSTEM: return LinkClass::kCrossNuma;
  }
  return LinkClass::kUnknown;
}

std::vector<std::vector<DeviceLink>> readNvmlLinks(const NvmlFunctions& f, const std::vector<LinkedGpu>& gpus) {
  const std::size_t n = gpus.size();
  std::vector<std::vector<DeviceLink>> out(n);
  const NvLinkCounts nv = countNvLinks(f, gpus);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      DeviceLink link{gpus[j].uuid, LinkClass::kUnknown, 0, 0};
      // Either end may have failed to report a link: the larger count is the truth.
      if (const unsigned direct = std::max(nv.toGpu[i][j], nv.toGpu[j][i]); direct > 0) {
        link.linkClass = LinkClass::kDirect;
        link.lanes = direct;
      } else if (nv.toSwitch[i] > 0 && nv.toSwitch[j] > 0) {
        // Through the NVSwitches every pair gets the links of the less connected GPU.
        link.linkClass = LinkClass::kSwitchFabric;
        link.lanes = std::min(nv.toSwitch[i], nv.toSwitch[j]);
      } else if (nvml::TopologyLevel level{};
                 f.deviceGetTopologyCommonAncestor &&
                 f.deviceGetTopologyCommonAncestor(gpus[i].handle, gpus[j].handle, &level) == nvml::kSuccess) {
        link.linkClass = classOfLevel(level);
      }
      if (link.linkClass == LinkClass::kUnknown) continue;
      link.rank = standardLinkRank(link.linkClass, link.lanes);
      out[i].push_back(std::move(link));
    }
  }
  return out;
}

}  // namespace vgpu::nvidia
