#pragma once
// Which sMLU instance belongs to which container, kept in a file so that the node agent
// can clean up after containers that went away while it was not running.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "vgpu/limiter.h"
#include "vgpu/result.h"

namespace vgpu::cambricon {

/// One instance this backend created for a container.
struct InstanceRecord {
  ContainerRef owner;
  std::string cardId;  ///< Device id ("MLU-<uuid>").
  int cardIndex = 0;
  int profileId = 0;
  int handle = 0;  ///< cnDev's instance handle, what destroying it takes.
  int instanceId = 0;
  std::string name;
  std::string devNode;
  std::uint32_t quota = 0;
  std::uint64_t memoryMiB = 0;
  bool operator==(const InstanceRecord&) const = default;
};

/// A profile this backend created (profiles made by someone else are never destroyed).
struct ProfileRecord {
  std::string cardId;
  int profileId = 0;
  bool operator==(const ProfileRecord&) const = default;
};

/// A card a container holds whole (no instance; recorded for per-container usage).
struct WholeCardRecord {
  ContainerRef owner;
  std::string cardId;
  int cardIndex = 0;
  std::uint64_t memoryMiB = 0;
  bool operator==(const WholeCardRecord&) const = default;
};

struct SmluState {
  std::vector<InstanceRecord> instances;
  std::vector<ProfileRecord> profiles;
  std::vector<WholeCardRecord> wholeCards;  ///< absent in files of earlier versions
  bool operator==(const SmluState&) const = default;
};

/// The state in `path`; a missing file is an empty state. Errors name the file and what is
/// wrong in it.
Result<SmluState> loadSmluState(const std::filesystem::path& path);

/// Writes `state` to `path` atomically (a temporary file renamed over it), creating the
/// folder when needed.
Status saveSmluState(const std::filesystem::path& path, const SmluState& state);

/// The instance name for a container: "vgpu-" and 16 hex digits of a hash of pod UID and
/// container name, so `cnmon` shows which instances are ours and names stay under cnDev's
/// 100-character limit.
std::string instanceNameFor(const ContainerRef& owner);

}  // namespace vgpu::cambricon
