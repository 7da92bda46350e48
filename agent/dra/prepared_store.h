#pragma once
// The DRA front end's checkpoint: which claims are prepared, with the shares they hold and
// the CDI device the kubelet was given, so that a restarted driver answers a repeated
// NodePrepareResources the same way (the kubelet re-sends it after its own restart) and
// NodeUnprepareResources releases exactly what was prepared, also when the claim is gone
// from the apiserver. One JSON file per driver, rewritten atomically on every change
// (prepared claims are few: one per pod using the driver's devices on the node).
// Thread-safe.

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "claim_shares.h"
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
  bool operator==(const PreparedClaim&) const = default;
};

class PreparedStore {
 public:
  explicit PreparedStore(std::filesystem::path file);

  /// Reads what an earlier run left (a missing file = nothing prepared). Errors name the
  /// file and what in it is wrong.
  Status load();
  /// Records `claim` (replacing one of the same uid) and writes the file.
  Status put(PreparedClaim claim);
  /// Forgets the claim and writes the file; unknown uids are fine.
  Status erase(const std::string& uid);
  std::optional<PreparedClaim> find(const std::string& uid) const;
  std::vector<PreparedClaim> all() const;
  const std::filesystem::path& file() const { return file_; }

 private:
  Status saveLocked() const;
  std::filesystem::path file_;
  mutable std::mutex mu_;
  std::map<std::string, PreparedClaim> claims_;
};

}  // namespace vgpu::dra
