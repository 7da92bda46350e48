#pragma once
// What the PCI device id and the model name tell about a Hygon DCU.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vgpu::hygon {

/// The PCI vendor id of Hygon devices in /sys/class/drm/<node>/device/vendor.
inline constexpr std::string_view kHygonPciVendor = "0x1d94";

/// The model ("Z100", "K100_AI") for a PCI device id, or nullopt when the table lacks it.
std::optional<std::string> modelForPciDeviceId(std::uint16_t pciDeviceId);

/// Compute units of a model; accepts the published type too ("DCU-K100_AI"), any case.
/// 0 when the model is not in the table.
std::uint32_t computeUnitsForModel(std::string_view model);

/// The type string a device is published with: "DCU-<model>", as HAMi names it.
std::string dcuType(std::string_view model);

}  // namespace vgpu::hygon
