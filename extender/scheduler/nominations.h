#pragma once
// Room held for preemptors. Once kube-scheduler has evicted the victims it chose with our
// preempt verb, it sets the preemptor's status.nominatedNodeName and retries it; until
// then the freed slice must not go to a pod of lower priority. kube-scheduler counts
// nominated pods in its own plugins only, not in what extenders are asked, so the filter
// counts them here: a pending pod of ours nominated to a node holds its request there
// against every pod of lower priority. Released when it is bound (anywhere), deleted, or
// its nomination is cleared; all three arrive as pod events.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/backend_loader.h"
#include "vgpu/node_state.h"
#include "vgpu/placement.h"

namespace vgpu::scheduler {

/// A pending pod of ours nominated to a node.
struct Nominee {
  std::string uid, key, node;
  std::int32_t priority = 0;
  std::shared_ptr<const PreparedPod> pod;
};

/// The nominees that hold room against one pod, by node.
using HeldRoom = std::map<std::string, std::vector<std::shared_ptr<const Nominee>>, std::less<>>;

/// What a node looks like to a pod once the room held against it is taken: each nominee
/// (highest priority first) placed with the engine. `whole` is set when a nominee does not
/// fit yet (its victims are still leaving): then the whole node is held until it does.
struct HeldState {
  NodeState state;
  std::string whole;  ///< non-empty: the nominee that holds the whole node, in words
};
HeldState withRoomHeld(const PlacementEngine& engine, const NodeState& node,
                       const std::vector<std::shared_ptr<const Nominee>>& nominees);

/// Thread-safe; fed by the pod informer.
class Nominations {
 public:
  explicit Nominations(const BackendSet& backends) : backends_(backends) {}

  void upsertPod(const boost::json::object& pod);
  void removePod(const boost::json::object& pod);

  /// The nominees of higher priority than `priority` (other than `uid`), by node; empty
  /// (and cheap) when nobody is nominated.
  HeldRoom heldAgainst(std::int32_t priority, std::string_view uid) const;
  std::size_t size() const;

 private:
  const BackendSet& backends_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Nominee>> byUid_;
};

}  // namespace vgpu::scheduler
