#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vgpu {

/// The kubelet sees each physical device as `splitCount` virtual devices. Their IDs carry
/// meaning (DESIGN.md 6a): "<device id>::<slot>", so the IDs the kubelet passes to
/// Allocate name the devices and slots of the assignment the scheduler wrote.
struct VirtualDeviceId {
  std::string deviceId;
  int slot = 0;
  bool operator==(const VirtualDeviceId&) const = default;
};

inline constexpr std::string_view kVirtualIdSeparator = "::";

std::string formatVirtualDeviceId(std::string_view deviceId, int slot);

/// nullopt when `text` is not "<non-empty id>::<slot 0..65535>".
std::optional<VirtualDeviceId> parseVirtualDeviceId(std::string_view text);

}  // namespace vgpu
