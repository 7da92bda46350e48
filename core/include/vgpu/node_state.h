#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/allocator.h"
#include "vgpu/assignment.h"
#include "vgpu/c_views.h"
#include "vgpu/device.h"
#include "vgpu/device_usage.h"
#include "vgpu/result.h"

namespace vgpu {

class BackendSet;
class LinkTable;

/// A node's devices across backends, with their C views and allocators resolved once
/// (the inventory changes rarely; placement reads it for every pod). Immutable, and laid
/// out for the hot path: what `fit` and the policies read sits in one compact array.
class NodeInventory {
 public:
  struct Entry {
    /// The first position of the group whose device `fit` cannot tell from this one (equal
    /// in every field the allocator's fitReads names, and in `cordoned`), or kJudgedAlone
    /// when the allocator reads everything (or the id or index): the placement engine asks
    /// `fit` once per such class and usage.
    /// First: the one field read of every device when their answers are shared.
    std::uint32_t fitClass = kJudgedAlone;
    static constexpr std::uint32_t kJudgedAlone = UINT32_MAX;
    vgpu_device view{};                    ///< Points into device().
    double perShare = 0, perMiB = 0, perComputeUnit = 0;  ///< 1/capacity, 0 for none
    const Allocator* allocator = nullptr;  ///< Null when the backend is not loaded here.
    bool cordoned = false;
    /// The allocator places grants on this device (Allocator::placesGrants): judged alone,
    /// with fitPlaced and the placement tokens of the grants on it.
    bool placed = false;
    const Device* full = nullptr;

    const vgpu_device& c() const { return view; }
    const Device& device() const { return *full; }
    /// How full the device is with `usage`: 0 idle, 1 full (the mean of the three ratios),
    /// without a division: evaluated for every device of every node.
    double load(const DeviceUsage& usage) const {
      return (usage.shares * perShare + static_cast<double>(usage.memoryMiB) * perMiB +
              usage.compute * perComputeUnit) / 3.0;
    }
    /// load() with each ratio weighted; still 0..1.
    double load(const DeviceUsage& usage, const LoadWeights& w) const {
      return (w.shares * usage.shares * perShare + w.memory * static_cast<double>(usage.memoryMiB) * perMiB +
              w.compute * usage.compute * perComputeUnit) / (w.shares + w.memory + w.compute);
    }
  };
  /// Devices of one backend, as positions in entries().
  struct BackendGroup {
    std::string backend;
    const Allocator* allocator = nullptr;
    std::vector<std::uint32_t> positions;
    /// The topology policy's answers for this group (link_sets.h); null without links or
    /// for groups too large for a table.
    std::shared_ptr<const LinkTable> linkTable;
  };

  /// `devices` of any backends; ids in `cordoned` are refused to every pod.
  NodeInventory(std::vector<Device> devices, const BackendSet& backends, const std::set<std::string>& cordoned = {});
  NodeInventory(const NodeInventory&) = delete;
  NodeInventory& operator=(const NodeInventory&) = delete;

  const std::vector<Entry>& entries() const { return entries_; }
  const BackendGroup* group(std::string_view backend) const;
  /// group(backend), found first by the allocator's address: the hot path's lookup, where
  /// inventory and request come from the same BackendSet and a string compare per node
  /// would cost more than the rest of the check.
  const BackendGroup* group(const Allocator& allocator, std::string_view backend) const;
  /// Position of a device in entries(), or -1.
  int find(std::string_view backend, std::string_view deviceId) const;

  /// The link rank between the devices at positions `a` and `b` (DeviceLink::rank; 0 when
  /// unknown or of different backends). Precomputed: read for every pair of every node.
  std::uint32_t linkRank(std::uint32_t a, std::uint32_t b) const {
    return linkRanks_.empty() ? 0 : linkRanks_[a * entries_.size() + b];
  }
  /// Whether any device of the node published links.
  bool hasLinks() const { return !linkRanks_.empty(); }
  /// Whether any device's allocator places grants on it (Entry::placed).
  bool placesGrants() const { return placesGrants_; }

 private:
  std::vector<Device> devices_;  // never resized after construction: views point into it
  std::vector<std::vector<vgpu_kv>> attributes_;
  std::vector<Entry> entries_;
  std::vector<BackendGroup> groups_;
  void indexLinks();
  void classifyForFit();

  std::vector<std::uint16_t> linkRanks_;  // entries² ranks, row-major; empty without links
  bool placesGrants_ = false;
};

/// A node as the placement engine sees it: its inventory and what is taken on each device
/// (usage[i] belongs to inventory->entries()[i]).
struct NodeState {
  std::string name;
  std::shared_ptr<const NodeInventory> inventory;
  std::vector<DeviceUsage> usage;
  /// The placement tokens (DeviceGrant::placement) of the grants on each device, by position
  /// like `usage`, for the devices whose allocator places grants; empty when the inventory
  /// has none (NodeInventory::placesGrants).
  std::vector<std::vector<std::string>> placed;
  /// Non-empty when the node must not get pods at all (e.g. a stale heartbeat): the reason.
  std::string unavailable;

  NodeState() = default;
  /// Starts each device's usage at the memory foreign processes hold (Device::foreignUsedMiB).
  NodeState(std::string nodeName, std::shared_ptr<const NodeInventory> inv);

  /// Adds what a placed pod takes: per device, the sum over its app containers or the
  /// largest single init container, whichever is larger (init containers run one at a
  /// time before the app containers), and the placements of all its grants. Errors name a
  /// device the node does not have.
  Status add(const Assignment& assignment);
  /// Takes back what add() added for the same assignment.
  Status remove(const Assignment& assignment);
};

/// Per-device usage of one pod (see NodeState::add), keyed by inventory position.
Result<std::vector<std::pair<int, DeviceUsage>>> podUsage(const NodeInventory& inventory, const Assignment& assignment);

}  // namespace vgpu
