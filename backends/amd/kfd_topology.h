#pragma once
// The KFD topology in sysfs (<sysfs>/class/kfd/kfd/topology/nodes/<node>/properties): where a
// GPU's render minor is found when AMD SMI is older than ROCm 6.4 (no enumeration info).

#include <cstdint>
#include <filesystem>
#include <optional>

namespace vgpu::amd {

/// The `drm_render_minor` of KFD node `node`; nullopt when the file or the line is missing,
/// or the value is not a render minor (the CPU nodes have 0).
std::optional<std::uint32_t> kfdRenderMinor(const std::filesystem::path& sysfsRoot, std::uint32_t node);

}  // namespace vgpu::amd
