#pragma once
// What each Allocate handed out, and who holds it now.
//
// The kubelet's Allocate names device IDs, never the pod (DESIGN.md 6a): the pod the agent
// attributes a container to is a guess that the PodResources pass may correct. So a
// container's host folder (the limits file and the shared region libvgpu.so writes) is
// named by the handout, i.e. the resource and the device IDs the kubelet gave, which no two
// live containers share, and never by the guessed pod. The store keeps, per handout, the
// pod and container that hold it (the guess at Allocate, PodResources' answer later), which
// labels the metrics and decides when the folder may go, and the devices that Allocate gave
// (memory and compute per ID), which the PodResources correction writes on the pod that
// really holds the IDs, also after an agent restart. Apart from the holder it keeps the pod
// and container the agent matched the Allocate to, which only a correction moves: the
// holder may already name the real pod before any correction ran for it (a pod the watch
// did not show yet, a pod still being allocated), and the correction must still learn
// which pod was served in its place.
//
// On disk: <root>/<id>/ is the folder the container's files are made in (the agent's, 0755;
// what a backend mounts of it writable is the tenant's). Every operation in it goes through
// vgpu/host_files.h: created, emptied and removed from a descriptor of the root, never
// following a link a tenant planted inside. Who holds what is recorded in the node's handout
// journal (handout_journal.h), outside the root (the container cannot rewrite it), which the
// DRA front end shares: Allocate pays one append on an open file under its lock rather than
// creating another file (a metadata operation costs ~0.4 ms on a loaded node), and is refused
// when the DRA front end holds one of the devices. An agent restart replays the journal, and
// the cleanup pass compacts it. The journal of an agent from before it (containers.journal,
// one line per change) is migrated on the first start. A record without "devices" (written
// by an agent before they were journalled) still loads, with no devices; one without
// "matchedPodUid" and "matchedContainer" was matched to the holder it names; one without
// "region" has no region the agent reads.
// Each folder can be a tmpfs of its own, mounted by the store when the folder is made (and
// checked when the kubelet admits the container again), unmounted when it goes (FolderBound):
// what a tenant writes into a file mounted from it then fails with ENOSPC past a few hundred
// KiB instead of filling the host's disk (docs/security.md, "The agent's files").
// Thread-safe; every method takes one lock, and the file work for one handout is done
// under it so a cleanup scan never sees a half-made handout.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "folder_bound.h"
#include "handout_journal.h"
#include "vgpu/assignment.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// One Allocate's handout and its current holder.
struct Handout {
  /// The folder's name: handoutId(resource, ids), or "<that>-<n>" (n >= 2) for the n-th live
  /// container given the same IDs: the kubelet hands an init container's IDs to the
  /// containers of its pod after it, so a later one never takes over an earlier one's.
  std::string id;
  std::string resource;          ///< the kubelet resource, e.g. "nvidia.com/gpu"
  std::vector<std::string> ids;  ///< the kubelet's device IDs, sorted
  std::string backend;
  /// What Allocate gave, in the kubelet's ID order; empty when an older agent made it.
  std::vector<DeviceGrant> devices;
  std::string podUid;  ///< the holder; empty when only PodResources named it (pod not watched)
  std::string podNamespace;
  std::string podName;
  std::string container;
  Annotations podAnnotations;  ///< what the backend asked to have written on the holder pod
  /// The pod and container the agent matched the Allocate to (the holder at create), moved
  /// only by the correction that set a wrongly served pod waiting again (rematch).
  std::string matchedPodUid;
  std::string matchedContainer;
  /// The shared region the backend's limiter created in the folder (path relative to it, and
  /// its inode): the one file the agent reads the container's usage from. Unset: none.
  std::optional<RegionFile> region;

  /// How the backend's limiter knows this container: unique among live containers (two
  /// handouts never share an id) and stable across corrections and agent restarts.
  ContainerRef backendRef() const { return {id, container}; }
  bool operator==(const Handout&) const = default;
};

/// "<resource with '/' as '_'>-<16 hex digits>": a file name that stands for the resource and
/// the set of IDs (in any order); the id of the first live handout of those IDs.
std::string handoutId(const std::string& resource, std::vector<std::string> ids);
/// The handoutId part of a handout's id (the id without its "-<n>").
std::string handoutKey(const std::string& id);

class HandoutStore {
 public:
  /// Folders under `root` (bounded as `bound` says), the node's handout journal at `journal`
  /// (outside `root`); `legacy`: where an agent from before that journal kept its own
  /// (migrated by load() when it exists).
  HandoutStore(std::filesystem::path root, std::filesystem::path journal, FolderBound bound = {},
               std::filesystem::path legacy = {});
  ~HandoutStore();
  HandoutStore(const HandoutStore&) = delete;
  HandoutStore& operator=(const HandoutStore&) = delete;

  /// Migrates the legacy journal if there is one, replays the node's journal and opens it for
  /// appending. Returns the records that could not be used (their folders are then strays),
  /// or an error naming the journal when it cannot be opened.
  Result<std::vector<std::string>> load();

  /// Records `h` (matched to its holder) and gives it an empty folder; its id is
  /// handoutId(resource, ids) when no live handout has those IDs (whatever an earlier holder
  /// left in that folder goes), else that with "-<n>", n above every live one's. Returns
  /// the folder's path, whose name is the id. Errors name the path, or the device and its
  /// holder when the DRA front end holds one of `h.devices`.
  Result<std::string> create(Handout h);
  /// The folder of live handout `id` again, for a container the kubelet admits again: made
  /// (empty) when it is missing, bounded as create() does; a folder already on its tmpfs is
  /// kept with what is in it (the container's region keeps its inode), and so is one on the
  /// disk that already holds files (bounding it would hide them). Errors name the path; a link
  /// in the folder's place is refused, never mounted over.
  Result<std::string> prepare(const std::string& id);
  /// Remembers the region the backend created for the handout (unset: none). False if the
  /// handout is unknown.
  bool setRegion(const std::string& id, const std::optional<RegionFile>& region);
  /// Remembers the pod annotations the backend asked for. False if the handout is unknown.
  bool setPodAnnotations(const std::string& id, const Annotations& annotations);
  /// Attributes the handout to another holder; true when that changed something.
  bool attribute(const std::string& id, const std::string& podUid, const std::string& podNamespace,
                 const std::string& podName, const std::string& container);
  /// A correction matched the handout to `podUid`'s `container`, the one the kubelet admitted
  /// with it. False if the handout is unknown.
  bool rematch(const std::string& id, const std::string& podUid, const std::string& container);
  /// Removes the record and the folder (its tmpfs unmounted first).
  void remove(const std::string& id);
  /// Removes whatever under the root belongs to no handout (left by a crash or an older
  /// version) and rewrites the journal when it has grown well past the live handouts;
  /// returns how many entries under the root went.
  std::size_t removeStrays();

  std::optional<Handout> find(const std::string& id) const;
  /// The live handouts of `ids` of `resource`, oldest first.
  std::vector<Handout> withIds(const std::string& resource, const std::vector<std::string>& ids) const;
  /// How the folders are bounded (also the node-wide folders a backend shares: boundSharedFolders).
  const FolderBound& bound() const { return bound_; }
  /// The handout PodResources means when it lists `podUid`'s `container` holding `ids`: the
  /// one already attributed to that container, else the newest of those IDs (the kubelet
  /// lists the last container it gave them to; the earlier ones are init containers, which
  /// it does not list). nullopt when none has those IDs.
  std::optional<Handout> listedAs(const std::string& resource, const std::vector<std::string>& ids,
                                  const std::string& podUid, const std::string& container) const;
  std::vector<Handout> all() const;
  std::vector<Handout> heldBy(const std::string& podUid) const;
  std::filesystem::path folder(const std::string& id) const { return root_ / id; }
  const std::filesystem::path& root() const { return root_; }

 private:
  Status recordLocked(const Handout& h);
  std::vector<const Handout*> withKeyLocked(const std::string& key) const;

  std::filesystem::path root_;
  FolderBound bound_;
  std::filesystem::path legacy_;
  mutable std::mutex mu_;
  HandoutJournal journal_;
  std::vector<Handout> handouts_;  // few (one per live container): a vector is enough
};

}  // namespace vgpu::deviceplugin
