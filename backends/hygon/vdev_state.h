#pragma once
// What the limiter holds for each container (whole DCUs and vDCUs with their CU masks, ids
// and files), persisted in the state dir so an agent restart can still reclaim them.

#include <filesystem>
#include <string>
#include <vector>

#include "cu_mask.h"
#include "vgpu/limiter.h"
#include "vgpu/result.h"

namespace vgpu::hygon {

/// One device a container holds.
struct Holding {
  ContainerRef container;
  std::string podUid;  ///< The pod the agent attributed it to when made: names its folder.
  std::string deviceId;
  int deviceIndex = 0;
  bool whole = false;  ///< The whole DCU, no vDCU made.
  CuMask mask;         ///< CUs reserved on the device (all of them when whole).
  std::uint64_t memoryMiB = 0;
  int vdevId = -1;   ///< The vDCU's id (node-wide): ours in vdev-file mode, hydmi's in hydmi mode.
  int pipeId = -1;   ///< Ours in vdev-file mode, the one hydmi picked in hydmi mode.
  bool hydmi = false;  ///< vdevId is a hydmi virtual device that release must destroy.
  std::string confDir;   ///< Host folder with vdev0.conf, mounted into the container.
  std::string copyPath;  ///< Our copy for the exporter (/etc/vdev/vdev<id>.conf, vdev-file mode); empty if none.
  bool operator==(const Holding&) const = default;
};

/// Where versions before the per-pod folders kept a container's vdev0.conf (under the
/// agent's host dir); still accepted in the state file so they are reclaimed.
inline constexpr const char* kLegacyConfDirName = "hygon-vdev";

/// The state file: `<stateDir>/holdings.json`.
std::filesystem::path stateFilePath(const std::filesystem::path& stateDir);

/// Reads the state file; a missing file is an empty state. Errors name the file and the
/// entry that is malformed.
Result<std::vector<Holding>> loadHoldings(const std::filesystem::path& file);

/// Replaces the state file atomically (write a temp file, then rename).
Status saveHoldings(const std::filesystem::path& file, const std::vector<Holding>& holdings);

}  // namespace vgpu::hygon
