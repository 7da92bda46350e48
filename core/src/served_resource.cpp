#include "vgpu/served_resource.h"

namespace vgpu {

std::string_view countResourceOf(const Device& device) {
  auto it = device.attributes.find(std::string(served_attr::kCountResource));
  return it == device.attributes.end() ? std::string_view() : std::string_view(it->second);
}

bool servedUnder(const Device& device, std::string_view resource) {
  const auto named = countResourceOf(device);
  return named.empty() || named == resource;
}

}  // namespace vgpu
