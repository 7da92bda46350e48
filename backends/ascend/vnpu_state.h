#pragma once
// What the Ascend limiter holds per container (the vNPUs it created, the chips it gave whole),
// kept in a file so that release and reconcile still find it after an agent restart.

#include <filesystem>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::ascend {

struct HeldChip {
  std::string holder;
  std::string container;
  std::string deviceId;
  int card = 0;
  int device = 0;
  std::string templateName;  ///< a vNPU template, or kWholeToken
  unsigned int vdevId = 0;   ///< the vNPU's id (/dev/vdavinci<vdevId>); unused for a whole chip
  bool operator==(const HeldChip&) const = default;
};

/// Reads the state file; a missing file is an empty state, a malformed line an error naming it.
Result<std::vector<HeldChip>> loadHeld(const std::filesystem::path& file);
/// Replaces the state file (written beside it and renamed, so a crash leaves one or the other).
Status saveHeld(const std::filesystem::path& file, const std::vector<HeldChip>& held);

}  // namespace vgpu::ascend
