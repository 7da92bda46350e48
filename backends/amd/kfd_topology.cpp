// Reading one KFD topology node's properties file ("<name> <value>" per line).
#include "kfd_topology.h"

#include <fstream>
#include <sstream>
#include <string>

namespace vgpu::amd {

std::optional<std::uint32_t> kfdRenderMinor(const std::filesystem::path& sysfsRoot, std::uint32_t node) {
  std::ifstream in(sysfsRoot / "class/kfd/kfd/topology/nodes" / std::to_string(node) / "properties");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    long long value = -1;
    if (words >> name >> value && name == "drm_render_minor")
      return value >= 128 && value < 256 ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(value)) : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace vgpu::amd
