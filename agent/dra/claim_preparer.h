#pragma once
// The DRA front end's half of the handout core for one backend: NodePrepareResources and
// NodeUnprepareResources in vendor-neutral terms. A claim's shares of our devices become
// one container grant, asked of the backend's limiter exactly as the device-plugin path asks
// it for a container with that memory and compute on those devices (DESIGN.md 8a); the
// answer becomes a CDI spec, and the claim is checkpointed so a repeated or post-restart
// call is answered the same way and Unprepare releases exactly what Prepare made.
// Calls are serialized (one lock), as the kubelet's own helper does.

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "claim_shares.h"
#include "folder_bound.h"
#include "prepared_store.h"
#include "vgpu/dra/resource_slices.h"
#include "region_metrics.h"
#include "vgpu/backend.h"
#include "vgpu/k8s/client.h"

namespace vgpu::dra {

struct PreparerOptions {
  std::string driver;    ///< "sim.vgpu.io"
  std::string nodeName;  ///< the pool's name
  std::filesystem::path stateDir;  ///< this driver's: one host folder per claim (and the checkpoint before the journal)
  /// The node's handout journal, shared with the device-plugin front end (<state-dir>/handouts.journal).
  std::filesystem::path journal;
  std::filesystem::path cdiDir;    ///< where the runtime reads CDI specs
  /// How each claim's folder is bounded (a tmpfs of its own, --region-tmpfs).
  deviceplugin::FolderBound bound;
};

/// One device of a prepared claim, as the kubelet's Device message carries it.
struct PreparedDevice {
  std::vector<std::string> requestNames;
  std::string pool;
  std::string device;
  std::vector<std::string> cdiDeviceIds;
  std::string shareId;  ///< empty: not a share
  bool operator==(const PreparedDevice&) const = default;
};

struct PrepareResult {
  std::vector<PreparedDevice> devices;
  std::string error;  ///< non-empty: the kubelet retries later
};

class ClaimPreparer {
 public:
  /// `client` reads ResourceClaims; `backend` must have a limiter.
  ClaimPreparer(PreparerOptions options, Backend& backend, k8s::Client& client);

  /// Loads the checkpoint (migrating the one from before the journal) and asks the limiter
  /// again for every prepared claim (the same grant and key: it makes nothing new), rewriting
  /// missing CDI specs; then tells the limiter which claims are live; folders of claims no
  /// longer prepared are unmounted and removed. Returns the journal's lines that could not be
  /// used. Errors: an unreadable checkpoint.
  Result<std::vector<std::string>> restore();
  /// The devices the driver knows now (unhealthy ones included: a claim allocated before a
  /// device failed is still prepared); by DRA device name.
  void setDevices(std::vector<DraDevice> devices);

  /// Refused, with the device and its holder named, when the device-plugin front end holds
  /// one of the claim's devices (handout_journal.h).
  PrepareResult prepare(const ClaimRef& claim);
  /// Empty on success (also for a claim never prepared here); else the error.
  std::string unprepare(const ClaimRef& claim);

  std::size_t preparedClaims() const;
  /// The regions of the prepared claims, held by (namespace, claim name), for /metrics.
  std::vector<deviceplugin::RegionSource> regionSources() const;
  /// The devices the driver knows now (setDevices).
  std::vector<Device> devices() const;
  const PreparerOptions& options() const { return options_; }

 private:
  Result<PreparedClaim> prepareNew(const ClaimRef& claim);
  /// What handOut learned from the limiter's spec.
  struct HandedOut {
    std::vector<std::string> named;    ///< the CDI devices the limiter named besides ours
    std::optional<RegionFile> region;  ///< the region it made in the claim's folder
  };
  /// The limiter's spec for `claim`, written as its CDI spec.
  Result<HandedOut> handOut(const PreparedClaim& claim);
  ContainerGrant grantOf(const PreparedClaim& claim) const;
  std::vector<PreparedDevice> devicesOf(const PreparedClaim& claim) const;
  std::filesystem::path hostDir(const PreparedClaim& claim) const;
  /// Unmounts and removes the claim folder `holder` (under <stateDir>/claims), never
  /// following a link; errors name it.
  Status removeFolder(const std::string& holder) const;
  std::string cdiFile(const ClaimRef& claim) const;
  /// What the kubelet gives the runtime for `claim`: ours, then those the limiter `named`.
  std::vector<std::string> cdiIdsOf(const ClaimRef& claim, const std::vector<std::string>& named) const;

  PreparerOptions options_;
  Backend& backend_;
  k8s::Client& client_;
  PreparedStore store_;
  mutable std::mutex mu_;
  std::map<std::string, DraDevice> devices_;
};

}  // namespace vgpu::dra
