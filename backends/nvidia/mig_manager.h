#pragma once
// Node side of dynamic MIG: creates the GPU and compute instance a container gets at
// Allocate, destroys them when it ends, and reclaims what a dead agent left.
//
// Crash safety: before creating, the manager writes an intent record (GPU, placement, holder)
// to its state folder; once the instance exists it completes the record. An agent killed in
// between leaves an intent, which the next reconcile turns back into free slices. Only
// instances this manager recorded are ever destroyed, never one with processes on it, and a
// GPU is never reset.

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mig.h"
#include "mig_planner.h"
#include "nvml.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// The GPU instances (their starts) on `gpuUuid` that a MigManager with state folder
/// `stateDir` created where the scheduler placed them. Discovery leaves them out of what it
/// publishes as the GPU's instances: the scheduler knows them from their grants' placements,
/// and one listed there would block its slices after it is destroyed, until the inventory is
/// published again. Instances the node placed elsewhere (or for grants without a placement)
/// stay listed: their grants do not say where they are.
std::set<unsigned> migStartsPlacedByScheduler(const std::string& stateDir, const std::string& gpuUuid);

class MigManager {
 public:
  /// `stateDir`: where records live (created if missing); `allowed`: the profile allowlist.
  MigManager(const NvmlSession& nvml, std::string stateDir, std::vector<std::string> allowed);

  /// What sits on GPU `gpuUuid` now (every GPU instance, ours or not) and its profiles.
  Result<std::vector<MigOccupant>> occupants(const std::string& gpuUuid) const;
  Result<std::vector<MigProfile>> profiles(const std::string& gpuUuid) const;

  /// A MIG device of at least `memoryMiB` on `gpuUuid` for `holder`, created with NVML and
  /// recorded; the one it already has when asked again. Where: at `placement` (the token the
  /// scheduler's fit chose, MigPlanner::token) when that profile is allowed, has the memory
  /// and its place is free on the GPU's real state; else (no token, or the real state
  /// disagrees) planned on the real state (MigPlanner), and `replanned`, when given, says
  /// why the scheduler's place was not taken. Errors: the planner's words, or what NVML
  /// answered (naming the call), or the record could not be written.
  Result<MigDevice> acquire(const std::string& holder, const std::string& gpuUuid, std::uint64_t memoryMiB,
                            const std::string& placement = {}, std::string* replanned = nullptr);
  /// Destroys the instances of `holder`. Thread-safe, as acquire and reconcile. Errors: an instance NVML will not destroy (in use).
  Status release(const std::string& holder);
  /// Destroys the instances recorded for holders not in `live` and those only intended
  /// (an agent died while creating them); keeps any with processes on them.
  Status reconcile(const std::set<std::string>& live);

 private:
  struct Record {
    std::string file;
    std::string holder, gpu, state;  ///< state: "intent" or "created"
    unsigned profileId = 0, start = 0;
    bool scheduled = false;  ///< created at the placement the scheduler chose
  };
  std::vector<Record> records() const;
  static std::vector<Record> readRecords(const std::string& dir);
  friend std::set<unsigned> migStartsPlacedByScheduler(const std::string& stateDir, const std::string& gpuUuid);
  Status writeRecord(const Record& r) const;
  Result<nvml::Device> gpu(const std::string& uuid) const;
  /// Where to create: the scheduler's `placement` when it holds on `occupants`, else the
  /// planner's choice, with why in `replanned`.
  static Result<MigPlan> choose(const MigPlanner& planner, std::uint64_t memoryMiB, const std::string& placement,
                                const std::vector<MigOccupant>& occupants, std::string* replanned);
  /// Destroys the GPU instance at `start` on `gpuUuid` (and its compute instances) unless
  /// processes run on it. Gone already: success.
  Status destroy(const std::string& gpuUuid, unsigned start);
  /// Destroys the instances of the records `drop` picks and removes those records.
  Status reclaim(const std::function<bool(const Record&)>& drop);

  const NvmlSession& nvml_;
  std::mutex mutex_;  ///< held by acquire, release and reconcile: they change the GPUs' instances
  std::string dir_;
  std::vector<std::string> allowed_;
};

}  // namespace vgpu::nvidia
