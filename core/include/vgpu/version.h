#pragma once

namespace vgpu {

/// The project version, "major.minor.patch", as printed by every binary's --version.
const char* versionString();

}  // namespace vgpu
