#pragma once
// Dynamic MIG: which GPU instance to create for a container, from what the GPU reports
// through NVML (its profiles and their placements, mig.h) and what already sits on it. Pure
// logic, shared by the scheduler's fit and the node agent, which plans again on the real state.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mig.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// A GPU instance that exists (or is promised) on the GPU.
struct MigOccupant {
  unsigned profileId = 0;
  unsigned start = 0;  ///< first memory slice
  unsigned size = 0;   ///< memory slices
};

/// The planner's answer: create `profile` at memory slice `start`.
struct MigPlan {
  const MigProfile* profile = nullptr;
  unsigned start = 0;
};

class MigPlanner {
 public:
  /// `profiles`: what the GPU reports; `allowed`: the operator's allowlist of profile names
  /// (empty = all). Profiles with media extensions ("+me") are never chosen for memory.
  MigPlanner(std::vector<MigProfile> profiles, std::vector<std::string> allowed);

  /// The smallest allowed profile with at least `memoryMiB` that has a free placement next to
  /// `occupants`, at the placement that keeps the most room for more instances (the largest
  /// profile still placeable, then how many placements stay free). Errors, in words: no
  /// profile is large enough (naming the largest), or none of those large enough has a free
  /// placement ("no free 3g.20gb placement: slices 4–7 hold a 1g.5gb").
  Result<MigPlan> plan(std::uint64_t memoryMiB, const std::vector<MigOccupant>& occupants) const;

  /// Whether `profile` can go at `start` next to `occupants` (free slices, instance count,
  /// compute slices); when not, why, in words.
  std::optional<std::string> blocked(const MigProfile& profile, unsigned start,
                                     const std::vector<MigOccupant>& occupants) const;

  const std::vector<MigProfile>& profiles() const { return profiles_; }
  const MigProfile* byId(unsigned id) const;
  const MigProfile* byName(const std::string& name) const;

 private:
  std::vector<MigProfile> profiles_;  ///< allowed ones, smallest memory first
  std::vector<MigProfile> all_;       ///< every profile the GPU reports (to name occupants)
  unsigned computeSlices_ = 0;        ///< the GPU's, from its largest profile
};

/// Text forms for the inventory (device attributes): profiles as
/// "name:id:slices:instances:memoryMiB:size:start,start;..." and occupants as "id@start:size,...".
std::string encodeMigProfiles(const std::vector<MigProfile>& profiles);
Result<std::vector<MigProfile>> decodeMigProfiles(const std::string& text);
std::string encodeMigOccupants(const std::vector<MigOccupant>& occupants);
Result<std::vector<MigOccupant>> decodeMigOccupants(const std::string& text);

}  // namespace vgpu::nvidia
