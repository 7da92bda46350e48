#pragma once
// Dynamic MIG: which GPU instance to create for a container, from what the GPU reports
// through NVML (its profiles and their placements, mig.h) and what already sits on it. Pure
// logic, shared by the scheduler's fit, which chooses the placement (its token travels with
// the grant), and the node agent, which creates there or plans again on the real state.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mig.h"
#include "vgpu/backend_abi.h"
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

  /// The smallest allowed profile with at least `memoryMiB`, placeable or not; null: none.
  const MigProfile* smallestWith(std::uint64_t memoryMiB) const;

  /// Whether `profile` can go at `start` next to `occupants` (free slices, instance count,
  /// compute slices); when not, why, in words.
  std::optional<std::string> blocked(const MigProfile& profile, unsigned start,
                                     const std::vector<MigOccupant>& occupants) const;

  const std::vector<MigProfile>& profiles() const { return profiles_; }
  const MigProfile* byId(unsigned id) const;
  const MigProfile* byName(const std::string& name) const;

  /// The placement token of `plan` (vgpu_placement, the grant's DeviceGrant::placement):
  /// "<profile>@<first slice>-<last slice>", e.g. "3g.40gb@4-7"; "1g.10gb@6" for one slice.
  static std::string token(const MigPlan& plan);
  /// The plan a token names, read against this GPU's profiles. Errors: not a token, or a
  /// profile or place this GPU does not have (in words).
  Result<MigPlan> fromToken(const std::string& token) const;

 private:
  std::vector<MigProfile> profiles_;  ///< allowed ones, smallest memory first
  std::vector<MigProfile> all_;       ///< every profile the GPU reports (to name occupants)
  unsigned computeSlices_ = 0;        ///< the GPU's, from its largest profile
};

/// What sits on a GPU for the scheduler: the instances in its inventory (`inventory`, the
/// operator's and any the agent had made at discovery) and those of the grants placed on it
/// (`tokens`), each instance once (a grant's instance that discovery saw is in both).
/// Errors: a token that names no place on this GPU.
Result<std::vector<MigOccupant>> occupantsWith(const MigPlanner& planner, std::vector<MigOccupant> inventory,
                                               const vgpu_str_list& tokens);

/// Text forms for the inventory (device attributes): profiles as
/// "name:id:slices:instances:memoryMiB:size:start,start;..." and occupants as "id@start:size,...".
std::string encodeMigProfiles(const std::vector<MigProfile>& profiles);
Result<std::vector<MigProfile>> decodeMigProfiles(const std::string& text);
std::string encodeMigOccupants(const std::vector<MigOccupant>& occupants);
Result<std::vector<MigOccupant>> decodeMigOccupants(const std::string& text);

}  // namespace vgpu::nvidia
