#include "vgpu/virtual_device_id.h"

#include <charconv>

namespace vgpu {

std::string formatVirtualDeviceId(std::string_view deviceId, int slot) {
  std::string out(deviceId);
  out.append(kVirtualIdSeparator);
  out.append(std::to_string(slot));
  return out;
}

std::optional<VirtualDeviceId> parseVirtualDeviceId(std::string_view text) {
  const auto at = text.rfind(kVirtualIdSeparator);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const std::string_view digits = text.substr(at + kVirtualIdSeparator.size());
  int slot = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || slot < 0 || slot > 65535)
    return std::nullopt;
  return VirtualDeviceId{std::string(text.substr(0, at)), slot};
}

}  // namespace vgpu
