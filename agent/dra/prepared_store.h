#pragma once
// The DRA front end's checkpoint: which claims are prepared, with the shares they hold and
// the CDI device the kubelet was given, so that a restarted driver answers a repeated
// NodePrepareResources the same way (the kubelet re-sends it after its own restart) and
// NodeUnprepareResources releases exactly what was prepared, also when the claim is gone
// from the apiserver. Kept in the node's handout journal (handout_journal.h), which the
// device-plugin front end shares: a claim is refused when that front end holds one of its
// devices. Each claim is one entry keyed "<driver>/<claim uid>"; the one file per driver of
// the plugin before the journal (<state-dir>/dra/<driver>/prepared.json) is migrated on the
// first start. Thread-safe.

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "claim_shares.h"
#include "handout_journal.h"
#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::dra {

/// One share as prepared: where it is in the pool, and what the limiter was asked for.
struct PreparedShare {
  std::string request;
  std::string pool;
  std::string device;   ///< the DRA device name
  std::string shareId;  ///< empty: the whole device
  std::string deviceId;  ///< Device::id
  int deviceIndex = 0;
  std::uint64_t memoryMiB = 0;
  std::uint32_t cores = 0;
  bool operator==(const PreparedShare&) const = default;
};

/// A prepared claim: its shares of our devices, handed to the limiter as one container
/// grant (the key `holder`), and the CDI device the kubelet gives its containers.
struct PreparedClaim {
  ClaimRef ref;
  std::string holder;
  /// What the kubelet gives the runtime: ours first, then those the limiter named (e.g. the
  /// GPU's own spec from the vendor's toolkit).
  std::vector<std::string> cdiIds;
  std::vector<PreparedShare> shares;
  /// The shared region the limiter made in the claim's folder, for /metrics; unset: none (or
  /// recorded by a plugin before it was kept: the restart's handOut names it again).
  std::optional<RegionFile> region;
  bool operator==(const PreparedClaim&) const = default;
};

class PreparedStore {
 public:
  /// The claims of `driver` (whose devices are `backend`'s) in the node's handout journal at
  /// `journal`; `legacy`: the driver's checkpoint from before that journal, migrated by load().
  PreparedStore(std::filesystem::path journal, std::string driver, std::string backend, std::filesystem::path legacy = {});

  /// Migrates the legacy checkpoint if there is one and reads what an earlier run left.
  /// Returns the journal's lines that could not be used (none of them this driver's). Errors
  /// name the file and what in it is wrong (a claim of this driver that cannot be read is one).
  Result<std::vector<std::string>> load();
  /// Records a new `claim` unless the device-plugin front end holds one of its devices (the
  /// error names the device and the holder).
  Status hold(const PreparedClaim& claim);
  /// Records `claim` (replacing one of the same uid).
  Status put(PreparedClaim claim);
  /// Forgets the claim (and rewrites the journal when it has grown well past what is live);
  /// unknown uids are fine.
  Status erase(const std::string& uid);
  std::optional<PreparedClaim> find(const std::string& uid) const;
  std::vector<PreparedClaim> all() const;
  const std::filesystem::path& file() const { return journal_.file(); }

 private:
  deviceplugin::JournalEntry entryOf(const PreparedClaim& claim) const;
  std::string driver_;
  std::string backend_;
  std::filesystem::path legacy_;
  deviceplugin::HandoutJournal journal_;
  mutable std::mutex mu_;
  std::map<std::string, PreparedClaim> claims_;
};

}  // namespace vgpu::dra
