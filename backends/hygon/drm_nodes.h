#pragma once
// Finding a DCU's DRM nodes (/dev/dri/cardN, /dev/dri/renderDN) through sysfs. Both roots
// are parameters so tests use a tree built in a temp dir.

#include <filesystem>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::hygon {

struct DrmNodes {
  std::string card;    ///< "card1"
  std::string render;  ///< "renderD128"
  bool operator==(const DrmNodes&) const = default;
};

/// "card10" after "card2": names compared with their digit runs as numbers.
bool naturalLess(const std::string& a, const std::string& b);

/// The entries of <devRoot>/dri whose <sysfsRoot>/class/drm/<entry>/device/vendor is
/// Hygon's, naturally sorted.
std::vector<std::string> hygonDrmEntries(const std::filesystem::path& sysfsRoot, const std::filesystem::path& devRoot);

/// The nodes of one DCU. With a render minor (from ROCm-SMI) the render node is
/// renderD<minor> and the card is the one whose sysfs `device` is the same PCI device;
/// without one (minor < 0), the device's position among the Hygon entries, as HAMi does.
/// Errors say which node is missing and where it was looked for.
Result<DrmNodes> findDrmNodes(const std::filesystem::path& sysfsRoot, const std::filesystem::path& devRoot,
                              int renderMinor, int deviceIndex);

}  // namespace vgpu::hygon
