#include "vgpu/node_state.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "vgpu/backend_loader.h"
#include "vgpu/link_sets.h"

namespace vgpu {

NodeInventory::NodeInventory(std::vector<Device> devices, const BackendSet& backends,
                             const std::set<std::string>& cordoned)
    : devices_(std::move(devices)) {
  auto inverse = [](double capacity) { return capacity > 0 ? 1.0 / capacity : 0.0; };
  attributes_.resize(devices_.size());
  entries_.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    for (const auto& [k, v] : d.attributes) attributes_[i].push_back({k.c_str(), v.c_str()});
    const Backend* backend = backends.find(d.backend);
    Entry e;
    e.view = DeviceRecord::viewOf(d, attributes_[i]);
    e.perShare = inverse(d.splitCount);
    e.perMiB = inverse(static_cast<double>(d.memoryMiB));
    e.perComputeUnit = inverse(d.computeUnits);
    e.allocator = backend ? &backend->allocator() : nullptr;
    e.cordoned = cordoned.contains(d.id);
    e.placed = e.allocator != nullptr && e.allocator->placesGrants(e.view);
    placesGrants_ = placesGrants_ || e.placed;
    e.full = &d;
    entries_.push_back(e);
    auto group = std::find_if(groups_.begin(), groups_.end(), [&](const BackendGroup& g) { return g.backend == d.backend; });
    if (group == groups_.end()) group = groups_.insert(groups_.end(), BackendGroup{d.backend, e.allocator, {}, nullptr});
    group->positions.push_back(static_cast<std::uint32_t>(i));
  }
  indexLinks();
  classifyForFit();
}

namespace {

bool sameText(const char* a, const char* b) {
  return a == b || (a != nullptr && b != nullptr && std::strcmp(a, b) == 0);
}

bool sameAttributes(const vgpu_kv_list& a, const vgpu_kv_list& b) {
  if (a.count != b.count) return false;
  for (std::size_t i = 0; i < a.count; ++i)
    if (!sameText(a.items[i].key, b.items[i].key) || !sameText(a.items[i].value, b.items[i].value)) return false;
  return true;
}

/// Whether a `fit` that reads only the fields in `reads` (no id or index) answers `a` and
/// `b` alike.
bool fitCannotTell(const vgpu_device& a, const vgpu_device& b, std::uint32_t reads) {
  return (!(reads & VGPU_FIT_READS_MODEL) || sameText(a.model, b.model)) &&
         (!(reads & VGPU_FIT_READS_MEMORY) || a.memory_mib == b.memory_mib) &&
         (!(reads & VGPU_FIT_READS_COMPUTE) || a.compute_units == b.compute_units) &&
         (!(reads & VGPU_FIT_READS_SPLIT_COUNT) || a.split_count == b.split_count) &&
         (!(reads & VGPU_FIT_READS_NUMA_NODE) || a.numa_node == b.numa_node) &&
         (!(reads & VGPU_FIT_READS_HEALTH) || a.health == b.health) &&
         (!(reads & VGPU_FIT_READS_ATTRIBUTES) || sameAttributes(a.attributes, b.attributes));
}

}  // namespace

void NodeInventory::classifyForFit() {
  for (const BackendGroup& g : groups_) {
    if (g.allocator == nullptr) continue;
    const std::uint32_t reads = g.allocator->fitReads();
    if (reads & (VGPU_FIT_READS_ID | VGPU_FIT_READS_INDEX)) continue;  // no two devices alike
    for (std::size_t i = 0; i < g.positions.size(); ++i) {
      Entry& e = entries_[g.positions[i]];
      if (e.placed) continue;  // its answer depends on the placements on it: judged alone
      e.fitClass = g.positions[i];
      for (std::size_t j = 0; j < i; ++j) {
        const Entry& earlier = entries_[g.positions[j]];
        if (earlier.fitClass == g.positions[j] && !earlier.placed && earlier.cordoned == e.cordoned &&
            fitCannotTell(earlier.view, e.view, reads)) {
          e.fitClass = g.positions[j];
          break;
        }
      }
    }
  }
}

void NodeInventory::indexLinks() {
  const std::size_t n = devices_.size();
  for (std::size_t a = 0; a < n; ++a) {
    for (const DeviceLink& link : devices_[a].links) {
      const int b = find(devices_[a].backend, link.peer);
      if (b < 0 || static_cast<std::size_t>(b) == a) continue;
      if (linkRanks_.empty()) linkRanks_.assign(n * n, 0);
      const auto rank = static_cast<std::uint16_t>(std::min(link.rank, kMaxLinkRank));
      // Both ends may publish the pair; if they disagree the slower word counts.
      for (auto [x, y] : {std::pair{a, static_cast<std::size_t>(b)}, std::pair{static_cast<std::size_t>(b), a}}) {
        std::uint16_t& slot = linkRanks_[x * n + y];
        slot = slot == 0 ? rank : std::min(slot, rank);
      }
    }
  }
  if (linkRanks_.empty()) return;
  for (BackendGroup& g : groups_) g.linkTable = LinkTable::forGroup(*this, g.positions);
}

const NodeInventory::BackendGroup* NodeInventory::group(std::string_view backend) const {
  for (const auto& g : groups_)
    if (g.backend == backend) return &g;
  return nullptr;
}

const NodeInventory::BackendGroup* NodeInventory::group(const Allocator& allocator, std::string_view backend) const {
  for (const auto& g : groups_)
    if (g.allocator == &allocator) return &g;
  return group(backend);
}

int NodeInventory::find(std::string_view backend, std::string_view deviceId) const {
  const BackendGroup* g = group(backend);
  if (g == nullptr) return -1;
  for (auto pos : g->positions)
    if (entries_[pos].device().id == deviceId) return static_cast<int>(pos);
  return -1;
}

NodeState::NodeState(std::string nodeName, std::shared_ptr<const NodeInventory> inv)
    : name(std::move(nodeName)), inventory(std::move(inv)), usage(inventory->entries().size()) {
  // Memory that processes outside vgpu's containers hold is gone for placement too.
  const auto& entries = inventory->entries();
  for (std::size_t i = 0; i < entries.size(); ++i) usage[i].memoryMiB = entries[i].device().foreignUsedMiB;
  if (inventory->placesGrants()) placed.resize(entries.size());
}

Result<std::vector<std::pair<int, DeviceUsage>>> podUsage(const NodeInventory& inventory, const Assignment& a) {
  std::map<int, DeviceUsage> apps;
  std::map<int, DeviceUsage> initPeak;
  for (const auto& c : a.containers) {
    for (const auto& g : c.devices) {
      const int pos = inventory.find(g.backend, g.deviceId);
      if (pos < 0) return makeError("the node has no " + g.backend + " device " + g.deviceId);
      const DeviceUsage take{1, g.memoryMiB, g.compute};
      if (!c.init) {
        apps[pos] += take;
      } else {
        auto& peak = initPeak[pos];
        peak = {std::max(peak.shares, take.shares), std::max(peak.memoryMiB, take.memoryMiB),
                std::max(peak.compute, take.compute)};
      }
    }
  }
  for (const auto& [pos, peak] : initPeak) {
    auto& u = apps[pos];
    u = {std::max(u.shares, peak.shares), std::max(u.memoryMiB, peak.memoryMiB), std::max(u.compute, peak.compute)};
  }
  return std::vector<std::pair<int, DeviceUsage>>(apps.begin(), apps.end());
}

namespace {

/// Calls `each(position, token)` for every grant of `a` with a placement on a device that
/// takes placements (a grant of a device that does not, or no longer does, has none to keep).
template <class F>
void forEachPlacement(const NodeInventory& inventory, const Assignment& a, F each) {
  if (!inventory.placesGrants()) return;
  for (const auto& c : a.containers)
    for (const auto& g : c.devices) {
      if (g.placement.empty()) continue;
      const int pos = inventory.find(g.backend, g.deviceId);
      if (pos >= 0 && inventory.entries()[static_cast<std::size_t>(pos)].placed) each(static_cast<std::size_t>(pos), g.placement);
    }
}

}  // namespace

Status NodeState::add(const Assignment& assignment) {
  auto taken = podUsage(*inventory, assignment);
  if (!taken.ok()) return std::move(taken).error().prefix("node " + name);
  for (const auto& [pos, u] : *taken) usage[pos] += u;
  if (placed.size() == usage.size())
    forEachPlacement(*inventory, assignment, [&](std::size_t pos, const std::string& token) { placed[pos].push_back(token); });
  return {};
}

Status NodeState::remove(const Assignment& assignment) {
  auto taken = podUsage(*inventory, assignment);
  if (!taken.ok()) return std::move(taken).error().prefix("node " + name);
  for (const auto& [pos, u] : *taken) {
    auto& cur = usage[pos];
    cur.shares -= std::min(cur.shares, u.shares);
    cur.memoryMiB -= std::min(cur.memoryMiB, u.memoryMiB);
    cur.compute -= std::min(cur.compute, u.compute);
  }
  if (placed.size() == usage.size())
    forEachPlacement(*inventory, assignment, [&](std::size_t pos, const std::string& token) {
      auto& tokens = placed[pos];
      if (auto it = std::find(tokens.begin(), tokens.end(), token); it != tokens.end()) tokens.erase(it);
    });
  return {};
}

}  // namespace vgpu
