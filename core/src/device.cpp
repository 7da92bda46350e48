#include "vgpu/device.h"

namespace vgpu {

const char* toString(Health health) {
  switch (health) {
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
    case Health::kUnknown:
      return "unknown";
  }
  return "unknown";
}

namespace {
struct LinkClassName {
  LinkClass linkClass;
  const char* name;
};
constexpr LinkClassName kLinkClassNames[] = {
    {LinkClass::kUnknown, "unknown"},           {LinkClass::kCrossNuma, "cross-numa"},
    {LinkClass::kSameNuma, "same-numa"},        {LinkClass::kPcieHostBridge, "pcie-host-bridge"},
    {LinkClass::kPcieSwitches, "pcie-switches"}, {LinkClass::kPcieSwitch, "pcie-switch"},
    {LinkClass::kSameBoard, "same-board"},      {LinkClass::kDirect, "direct"},
    {LinkClass::kSwitchFabric, "switch-fabric"},
};
}  // namespace

const char* toString(LinkClass linkClass) {
  for (const auto& n : kLinkClassNames)
    if (n.linkClass == linkClass) return n.name;
  return "unknown";
}

std::optional<LinkClass> parseLinkClass(std::string_view text) {
  for (const auto& n : kLinkClassNames)
    if (text == n.name) return n.linkClass;
  return std::nullopt;
}

std::uint32_t standardLinkRank(LinkClass linkClass, std::uint32_t lanes) {
  switch (linkClass) {
    case LinkClass::kUnknown: return 0;
    case LinkClass::kCrossNuma: return 10;
    case LinkClass::kSameNuma: return 20;
    case LinkClass::kPcieHostBridge: return 30;
    case LinkClass::kPcieSwitches: return 40;
    case LinkClass::kPcieSwitch: return 50;
    case LinkClass::kSameBoard: return 60;
    case LinkClass::kDirect:
    case LinkClass::kSwitchFabric: {
      // Device links beat any PCIe path; more lanes, more bandwidth.
      const std::uint64_t rank = 100 + 25 * static_cast<std::uint64_t>(lanes == 0 ? 1 : lanes);
      return static_cast<std::uint32_t>(rank < kMaxLinkRank ? rank : kMaxLinkRank);
    }
  }
  return 0;
}

}  // namespace vgpu
