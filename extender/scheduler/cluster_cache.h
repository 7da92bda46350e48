#pragma once
// The scheduler's view of the cluster: per node its device inventory (from the node
// agent's annotations) and the usage of every device, kept up to date incrementally from
// node and pod events (never rebuilt per request), plus the reservations of binds in
// flight. Pods that end or are deleted give their devices back at once.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/json/object.hpp>

#include "hami_pods.h"
#include "namespace_quota.h"
#include "vgpu/assignment.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/node_state.h"
#include "vgpu/placement.h"
#include "vgpu/pod_info.h"
#include "vgpu/result.h"

namespace vgpu::scheduler {

using WallClock = std::function<std::chrono::system_clock::time_point()>;

/// One node as the cache keeps it.
struct NodeEntry {
  NodeState state;  ///< inventory + usage; state.unavailable = a lasting problem (no inventory...)
  /// When the agent last published; nullopt = never (no heartbeat annotation).
  std::optional<std::chrono::system_clock::time_point> heartbeat;
  std::string fingerprint;  ///< the annotations the inventory was built from
  /// Per inventory position, how many grants hold each slot (size = the device's split count).
  std::vector<std::vector<std::uint16_t>> slots;
  /// state.unavailable in a few words without numbers (see nodeUnusableCategory).
  std::string_view unavailableCategory;
  /// Changes with every change of `state` (a new inventory, a pod counted or taken back),
  /// and no two states of any nodes share one: what filter concluded from a node holds
  /// while its generation is the same (filter_memo.h). Not moved by heartbeats.
  std::uint64_t generation = 0;
  /// This node's number among the cached nodes, small and reused after a node is removed:
  /// an index into per-node tables (the filter's memo).
  std::uint32_t slot = 0;
};

/// Whether a node can take pods now: no lasting problem and a fresh heartbeat. Inline: the
/// filter asks it for every candidate.
inline bool nodeUsable(const NodeEntry& node, std::chrono::system_clock::time_point now,
                       std::chrono::seconds heartbeatTimeout) {
  return node.state.unavailable.empty() && node.heartbeat && now - *node.heartbeat <= heartbeatTimeout;
}

/// Why a node cannot take any pod now (a lasting problem or a stale heartbeat), "" if it can.
std::string nodeUnusableReason(const NodeEntry& node, std::chrono::system_clock::time_point now,
                               std::chrono::seconds heartbeatTimeout);

/// nodeUnusableReason() in a few words, without times or names: what kube-scheduler gets,
/// so that it counts nodes in the same state into one line. "" if the node is usable.
std::string_view nodeUnusableCategory(const NodeEntry& node, std::chrono::system_clock::time_point now,
                                      std::chrono::seconds heartbeatTimeout);

/// The category of a node the cache has not seen.
inline constexpr std::string_view kUnknownNodeCategory = "vgpu: node not known to vgpu-scheduler yet";

/// What the kubelet's Allocate calls for a pod's containers carry: one key per container
/// and advertised resource, "<resource>=<count>" (DESIGN.md 6a). The node agent matches one
/// container's call at a time, so two pods whose key sets meet can be confused, also when
/// the pods differ in their other containers.
using AllocateKeys = std::vector<std::string>;  ///< sorted, unique
AllocateKeys allocateKeys(const PodInfo& pod, const BackendSet& backends);
bool confusable(const AllocateKeys& a, const AllocateKeys& b);

/// What a pod bound to the node without an assignment of ours is counted as holding (a pod
/// of another scheduler, or one given spec.nodeName directly: the node agent refuses to serve
/// it, but an older agent may have, and until the kubelet admits it nobody knows). Which
/// devices the kubelet gives it is unknown, so on every device of `inventory` each request
/// could use, it takes what it asks of one device (shares, memory, compute); slots stay
/// unnumbered. Conservative: no share it may hold is promised to another pod.
Assignment everyDeviceItCouldHold(const PreparedPod& pod, const NodeInventory& inventory);

/// Why `a` cannot have been written for a pod with `containers` by a scheduler or the node
/// agent, or empty when it can. The kubelet hands a container devices only for the resources
/// it asks for, so a grant to a container the pod lacks, or of a backend the container asks
/// nothing of, is somebody else's writing (a forged annotation) and must not count as used.
std::string implausibleAssignment(const Assignment& a, const std::vector<ContainerResources>& containers,
                                  const BackendSet& backends);

/// Whether two assignments give every container the same slices of the same devices (slots
/// aside), so the node agent serving them in either order does no harm.
bool interchangeable(const Assignment& a, const Assignment& b);

/// Builds a node's inventory from its annotations. A node without any
/// vgpu.io/devices-<backend> annotation gets an empty inventory and a reason.
struct ParsedNode {
  std::string name;
  std::vector<Device> devices;
  std::set<std::string> cordoned;
  std::optional<std::chrono::system_clock::time_point> heartbeat;
  std::string problem;      ///< non-empty: the node cannot take pods (no/undecodable inventory)
  std::string_view problemCategory;  ///< the problem in a few words
  std::string fingerprint;
};
ParsedNode parseNode(const boost::json::object& node, const BackendSet& backends);

/// A node name's hash (the cache's index, the requeuer's candidate sets): node names are
/// short, so eight bytes at a time (the last word overlapping) beat std::hash's general
/// loop by ~3x per filter candidate.
std::size_t nodeNameHash(std::string_view name);

/// A pod holding devices on a node, as preemption sees it (ClusterCache::podsOn).
struct HeldPod {
  std::string uid, key;
  std::int32_t priority = 0;
  bool ours = true;  ///< placed with an assignment of ours (false: counted on every device it could hold)
  Assignment assignment;
};

struct CacheStats {
  std::size_t nodes = 0, pods = 0, reservations = 0, inFlight = 0;
};

/// Thread-safe. Readers (filter, prioritize, metrics) share a lock; node and pod events and
/// binds take it exclusively for the few microseconds their bookkeeping needs.
class ClusterCache {
 public:
  struct Options {
    SchedulerConfig scheduler;
    /// A pod stays "in flight" (bound, Allocate not yet answered) at most this long.
    std::chrono::seconds inFlightExpiry{300};
    WallClock now = [] { return std::chrono::system_clock::now(); };
    /// Called (under the cache's lock: keep it short, never call back) with a node where
    /// capacity was freed: a pod gone, a reservation dropped, a new inventory, a node that
    /// became usable.
    std::function<void(const std::string& node)> onCapacityFreed;
    /// Called (under the cache's lock: keep it short) when a pod's HAMi annotations cannot be
    /// used and the pod is counted as a foreign pod instead: namespace, name, uid, why.
    std::function<void(const std::string&, const std::string&, const std::string&, const std::string&)> onHamiIgnored;
  };
  ClusterCache(const BackendSet& backends, Options options);

  void upsertNode(const boost::json::object& node);
  void removeNode(std::string_view name);
  /// The node agent's Lease (vgpu/k8s/node_lease.h) was renewed at `renewed`: the node's
  /// heartbeat is the later of it and its annotation's. Kept for a node not seen yet.
  void renewNode(const std::string& node, std::chrono::system_clock::time_point renewed);
  /// The Lease is gone (the agent stopped): its renewals no longer count.
  void forgetLease(const std::string& node);
  void upsertPod(const boost::json::object& pod);
  void removePod(const boost::json::object& pod);

  /// Runs `fn(lookup, now)` under the shared lock; `lookup(name)` is null for unknown nodes.
  using Lookup = std::function<const NodeEntry*(std::string_view)>;
  void read(const std::function<void(const Lookup&, std::chrono::system_clock::time_point)>& fn) const;
  /// The entries of `names` (null = unknown), resolved with the hash index and prefetching
  /// (the lookups of a 5,000-node filter are otherwise mostly cache misses); `fn` runs under
  /// the shared lock.
  void readNodes(const std::vector<std::string_view>& names,
                 const std::function<void(const std::vector<const NodeEntry*>&, std::chrono::system_clock::time_point)>& fn) const;
  /// Every node, under the shared lock (metrics).
  void forEachNode(const std::function<void(const NodeEntry&)>& fn) const;

  /// What reserve() decided.
  struct Reserved {
    Assignment assignment;  ///< with slots chosen
    std::uint64_t id = 0;   ///< names this reservation for release()
  };
  /// Re-checks that `pod` fits `node` now, chooses the lowest free slot per device and
  /// records the pod's usage as a reservation, atomically with respect to other binds. If
  /// a pod it is confusable with (allocateKeys) and not interchangeable with is in
  /// flight on that node, waits up to `holdTimeout` for it to leave flight, then fails; it
  /// waits with its reservation made (filter and prioritize count it), dropped if it fails.
  /// Errors are words for the pod's events.
  Result<Reserved> reserve(const PodInfo& pod, const PreparedPod& prepared, const std::string& node,
                           const PlacementEngine& engine, std::chrono::milliseconds holdTimeout);
  /// The nodes where a bind of a pod with these Allocate keys would be held back now (a
  /// confusable pod in flight there; interchangeable assignments aside): prioritize ranks
  /// them last, so consecutive pods of a shape bind on different nodes at once instead of
  /// one after another behind the node agent's confirmations.
  std::unordered_set<std::string> nodesWhereHeldBack(const AllocateKeys& keys) const;
  /// Drops reservation `id` of pod `uid`, whose bind failed: a no-op once the informer has
  /// confirmed the pod, or when the pod's record is no longer that reservation.
  void release(const std::string& uid, std::uint64_t id);

  /// The pods holding devices on `node` (bound, or reserved by a bind in flight).
  std::vector<HeldPod> podsOn(std::string_view node) const;
  /// A pod holding devices, as forEachHeldPod shows it: views into the cache, valid during the call.
  struct HeldPodView {
    std::string_view node, uid, key;
    bool ours;  ///< as HeldPod::ours
    const Assignment& assignment;
  };
  /// podsOn() of every node the cache knows, in one walk under the shared lock (metrics).
  void forEachHeldPod(const std::function<void(const HeldPodView&)>& fn) const;

  /// ResourceQuota events (namespace_quota.h): a quota's limits on our resources.
  void upsertQuota(const boost::json::object& quota);
  void removeQuota(const boost::json::object& quota);
  /// A namespace's quota limits on our resources and what its pods hold (bound or reserved).
  struct NamespaceQuota {
    std::vector<QuotaLimit> limits;
    QuotaUsage used;
  };
  NamespaceQuota namespaceQuota(const std::string& ns) const;
  /// Every namespace whose pods hold devices or that has quota limits, under the shared lock (metrics).
  void forEachNamespace(const std::function<void(const std::string&, const NamespaceQuota&)>& fn) const;
  const QuotaResources& quotaResources() const { return quotaResources_; }

  CacheStats stats() const;
  /// Usage on one device (tests).
  std::optional<DeviceUsage> deviceUsage(std::string_view node, std::string_view deviceId) const;

 private:
  struct PodRecord {
    std::string uid, key, node;
    std::int32_t priority = 0;  ///< spec.priority, for preemption
    Assignment assignment;
    /// Bound without an assignment of ours: counted with everyDeviceItCouldHold(), which
    /// depends on the node's inventory (recomputed when it changes).
    std::shared_ptr<const PreparedPod> foreign;
    std::string podNamespace;
    QuotaUsage quotaUsage;  ///< what it counts against its namespace's quotas (quotaHeld)
    std::string foreignWhy;  ///< for the log
    /// Placed by HAMi (hami_pods.h): counted as its annotations say where the node publishes
    /// those devices, else as any foreign pod.
    std::shared_ptr<const HamiPlacement> hami;
    AllocateKeys keys;  ///< set while inFlight (the only time they are compared)
    bool inFlight = false;
    bool reservation = false;  ///< made by reserve(), not yet seen from the informer
    std::uint64_t reservationId = 0;
    std::chrono::system_clock::time_point boundAt{};
  };
  void addHolder(PodRecord record);      // requires mu_ exclusive
  void dropHolder(const std::string& uid);
  void applyToNode(NodeEntry& node, PodRecord& record, bool add);
  std::optional<PodRecord> foreignRecord(const PodInfo& pod, const std::string& uid, const std::string& why,
                                         bool admitted) const;
  void rebuildNode(const std::string& name);
  bool inFlightNow(const PodRecord& r, std::chrono::system_clock::time_point now) const;
  /// A pod in flight on `node` (not `uid`) that the agent could confuse with a pod of `keys`
  /// given `assigned`, counting reservations only if made before reservation `before`; null if none.
  const PodRecord* confusableInFlight(const std::string& node, const std::string& uid, const AllocateKeys& keys,
                                      const Assignment& assigned, std::chrono::system_clock::time_point now,
                                      std::uint64_t before) const;  // requires mu_
  static Error heldBack(const PodRecord& conflict, const std::string& node);
  void freed(const std::string& node) const {
    if (options_.onCapacityFreed) options_.onCapacityFreed(node);
  }
  void changed(NodeEntry& node) { node.generation = ++generations_; }  // requires mu_ exclusive

  /// Recounts `record`'s share of its namespace's quota usage from its assignment.
  void recountQuota(PodRecord& record);
  std::vector<QuotaLimit> limitsOf(const std::string& ns) const;

  const BackendSet& backends_;
  Options options_;
  QuotaResources quotaResources_;
  std::unordered_map<std::string, QuotaUsage> namespaceUsage_;  // by namespace
  std::unordered_map<std::string, std::map<std::string, std::vector<QuotaLimit>>> quotas_;  // ns -> quota name -> limits
  mutable std::shared_mutex mu_;
  std::condition_variable_any changed_;  // a pod left flight or went away
  // Looked up by the string_views of a filter request, without building a string each.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, NodeEntry, NameHash, std::equal_to<>> nodes_;
  /// The last renewal of each node's Lease (renewNode), also for nodes not seen yet.
  std::unordered_map<std::string, std::chrono::system_clock::time_point> leases_;
  /// Open-addressing index over nodes_ (entries never move in an unordered_map): one
  /// compact array probed once per name. Rebuilt when a node is removed or it fills up.
  struct IndexSlot {
    std::size_t hash = 0;
    const NodeEntry* node = nullptr;
  };
  std::vector<IndexSlot> index_;
  std::size_t indexed_ = 0;
  void indexInsert(const NodeEntry* node);
  void indexRebuild();
  const NodeEntry* indexFind(std::string_view name, std::size_t hash) const;
  std::uint64_t generations_ = 0;        // the last NodeEntry::generation given
  std::uint32_t slots_ = 0;              // NodeEntry::slot values given so far
  std::vector<std::uint32_t> freeSlots_;  // of removed nodes, given again first
  std::unordered_map<std::string, PodRecord> pods_;  // by uid: pods holding devices
  std::unordered_set<std::string> flying_;           // the uids of pods_ in flight (a few)
  std::uint64_t nextReservation_ = 1;
  std::unordered_map<std::string, std::unordered_set<std::string>> podsByNode_;  // also for nodes not (yet) known
};

}  // namespace vgpu::scheduler
