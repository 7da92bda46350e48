#include "cluster_cache.h"

#include <cstring>

#include <algorithm>
#include <mutex>

#include <spdlog/spdlog.h>

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;
using Clock = std::chrono::system_clock;

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

/// Multiset of (backend, device, memory, compute) per container, slots left out.
std::vector<std::vector<std::string>> shape(const Assignment& a) {
  std::vector<std::vector<std::string>> out;
  for (const auto& c : a.containers) {
    std::vector<std::string> grants;
    for (const auto& g : c.devices)
      grants.push_back(g.backend + "/" + g.deviceId + "/" + std::to_string(g.memoryMiB) + "/" + std::to_string(g.compute));
    std::sort(grants.begin(), grants.end());
    out.push_back(std::move(grants));
  }
  return out;
}

/// Distinct (position, slot) pairs a pod holds on a node.
std::set<std::pair<int, int>> heldSlots(const NodeInventory& inventory, const Assignment& a) {
  std::set<std::pair<int, int>> out;
  for (const auto& c : a.containers)
    for (const auto& g : c.devices)
      if (g.slot >= 0)
        if (int pos = inventory.find(g.backend, g.deviceId); pos >= 0) out.emplace(pos, g.slot);
  return out;
}

std::string ago(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

}  // namespace

std::string implausibleAssignment(const Assignment& a, const std::vector<ContainerResources>& containers,
                                  const BackendSet& backends) {
  for (const auto& granted : a.containers) {
    if (granted.devices.empty()) continue;
    auto c = std::find_if(containers.begin(), containers.end(),
                          [&](const ContainerResources& r) { return r.name == granted.name; });
    if (c == containers.end()) return "gives devices to container \"" + granted.name + "\", which the pod lacks";
    for (const auto& g : granted.devices) {
      const bool asks = std::any_of(c->limits.begin(), c->limits.end(), [&](const auto& limit) {
        const Backend* owner = backends.ownerOf(limit.first);
        return owner && owner->name() == g.backend && limit.second > 0;
      });
      if (!asks)
        return "gives container \"" + granted.name + "\" a device of backend " + g.backend +
               ", whose resources the container does not ask for";
    }
  }
  return {};
}

std::string nodeUnusableReason(const NodeEntry& node, Clock::time_point now, std::chrono::seconds heartbeatTimeout) {
  if (nodeUsable(node, now, heartbeatTimeout)) return {};
  if (!node.state.unavailable.empty()) return node.state.unavailable;
  if (!node.heartbeat)
    return "the node agent has not published a heartbeat (no node Lease, no readable vgpu.io/heartbeat annotation): is "
           "vgpu-device-plugin running on this node?";
  if (now - *node.heartbeat > heartbeatTimeout)
    return "the node agent's heartbeat is stale (last " + formatTimestamp(*node.heartbeat) + ", " +
           ago(now - *node.heartbeat) + " ago, limit " + std::to_string(heartbeatTimeout.count()) +
           "s): is vgpu-device-plugin running on this node?";
  return {};
}

std::string_view nodeUnusableCategory(const NodeEntry& node, Clock::time_point now,
                                      std::chrono::seconds heartbeatTimeout) {
  if (nodeUsable(node, now, heartbeatTimeout)) return {};
  if (!node.state.unavailable.empty())
    return node.unavailableCategory.empty() ? "vgpu: the node cannot take pods" : node.unavailableCategory;
  if (!node.heartbeat) return "vgpu: vgpu-device-plugin has not published a heartbeat";
  return "vgpu: vgpu-device-plugin's heartbeat is stale";
}

AllocateKeys allocateKeys(const PodInfo& pod, const BackendSet& backends) {
  AllocateKeys keys;
  for (const auto& c : pod.containers) {
    for (const auto& [name, value] : c.limits) {
      const Backend* owner = backends.ownerOf(name);
      if (!owner) continue;
      for (const auto& r : owner->allocator().resources()) {
        if (r.name == name && r.advertised) keys.push_back(name + "=" + std::to_string(value));
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

bool confusable(const AllocateKeys& a, const AllocateKeys& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return true;
    if (*i < *j) ++i; else ++j;
  }
  return false;
}

bool interchangeable(const Assignment& a, const Assignment& b) { return shape(a) == shape(b); }

Assignment everyDeviceItCouldHold(const PreparedPod& pod, const NodeInventory& inventory) {
  Assignment out;
  const vgpu_device_usage idle{};
  for (const auto& container : pod.containers()) {
    ContainerAssignment c{container.name, container.init, {}};
    for (const auto& request : container.requests) {
      const auto* group = inventory.group(*request.allocator, request.record->request().backend);
      if (group == nullptr) continue;
      for (const std::uint32_t pos : group->positions) {
        const auto& entry = inventory.entries()[pos];
        vgpu_fit_result r{};
        request.allocator->fit(request.record->c(), entry.c(), idle, r);
        if (!r.fits) continue;  // it cannot be on a device that is too small for it
        const Device& d = entry.device();
        c.devices.push_back({d.backend, d.id, d.index, r.take.memory_mib, r.take.compute, -1,
                             request.record->c().priority, {}});
      }
    }
    if (!c.devices.empty()) out.containers.push_back(std::move(c));
  }
  return out;
}

ParsedNode parseNode(const json::object& node, const BackendSet& backends) {
  ParsedNode out;
  out.name = std::string(k8s::name(node));
  std::map<std::string, std::string> inventories;
  if (const json::object* ann = k8s::annotations(node)) {
    for (const auto& [key, value] : *ann) {
      if (!value.is_string()) continue;
      std::string_view k = key;
      if (k.substr(0, keys::kNodeDevicesPrefix.size()) == keys::kNodeDevicesPrefix)
        inventories[std::string(k.substr(keys::kNodeDevicesPrefix.size()))] = std::string(value.get_string());
    }
  }
  for (const auto& [backend, text] : inventories) {
    out.fingerprint += backend + "=" + text + "\n";
    if (!backends.find(backend)) continue;  // published by a backend this scheduler does not load
    auto devices = decodeInventory(text, backend);
    if (!devices.ok()) {
      out.problem = "annotation " + keys::nodeDevices(backend) + " cannot be read: " + devices.error().message;
      out.problemCategory = "vgpu: the device inventory annotation cannot be read";
      continue;
    }
    for (auto& d : *devices) out.devices.push_back(std::move(d));
  }
  if (out.devices.empty() && out.problem.empty()) {
    out.problem = "no vgpu devices are published on this node (no vgpu.io/devices-<backend> annotation of an "
                  "enabled backend)";
    out.problemCategory = "vgpu: no vgpu devices are published on the node";
  }
  if (auto cordon = k8s::annotation(node, keys::kNodeDeviceCordon)) {
    out.fingerprint += "cordon=" + std::string(*cordon);
    std::string_view rest = *cordon;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string id = trim(rest.substr(0, comma));
      if (!id.empty()) out.cordoned.insert(std::move(id));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  if (auto hb = k8s::annotation(node, keys::kNodeHeartbeat)) {
    if (auto t = parseTimestamp(*hb); t.ok()) out.heartbeat = *t;
  }
  return out;
}

ClusterCache::ClusterCache(const BackendSet& backends, Options options)
    : backends_(backends), options_(std::move(options)), quotaResources_(backends) {}

void ClusterCache::upsertNode(const json::object& obj) {
  ParsedNode parsed = parseNode(obj, backends_);
  if (parsed.name.empty()) return;
  {
    std::unique_lock lock(mu_);
    auto it = nodes_.find(parsed.name);
    if (auto lease = leases_.find(parsed.name); lease != leases_.end() && (!parsed.heartbeat || *parsed.heartbeat < lease->second))
      parsed.heartbeat = lease->second;
    if (it != nodes_.end() && it->second.fingerprint == parsed.fingerprint && it->second.state.unavailable == parsed.problem) {
      // The common case: only the heartbeat moved. A node back from a stale heartbeat has room again.
      const auto now = options_.now();
      const bool wasUsable = nodeUsable(it->second, now, options_.scheduler.heartbeatTimeout);
      it->second.heartbeat = parsed.heartbeat;
      if (!wasUsable && nodeUsable(it->second, now, options_.scheduler.heartbeatTimeout)) freed(parsed.name);
      return;
    }
  }
  // A new or changed inventory: build it outside the lock, then recount the node's pods.
  auto inventory = std::make_shared<const NodeInventory>(std::move(parsed.devices), backends_, parsed.cordoned);
  NodeEntry entry;
  entry.state = NodeState(parsed.name, inventory);
  entry.state.unavailable = parsed.problem;
  entry.unavailableCategory = parsed.problemCategory;
  entry.heartbeat = parsed.heartbeat;
  entry.fingerprint = std::move(parsed.fingerprint);
  for (const auto& e : inventory->entries()) entry.slots.emplace_back(std::max<std::uint32_t>(1, e.device().splitCount), 0);
  std::unique_lock lock(mu_);
  if (auto old = nodes_.find(parsed.name); old != nodes_.end()) {
    entry.slot = old->second.slot;
  } else if (!freeSlots_.empty()) {
    entry.slot = freeSlots_.back();
    freeSlots_.pop_back();
  } else {
    entry.slot = slots_++;
  }
  auto [it, inserted] = nodes_.insert_or_assign(parsed.name, std::move(entry));
  if (inserted) indexInsert(&it->second);
  rebuildNode(parsed.name);
  changed(it->second);
  changed_.notify_all();
  freed(parsed.name);  // new or changed devices: pods refused before may fit
}

void ClusterCache::renewNode(const std::string& node, std::chrono::system_clock::time_point renewed) {
  std::unique_lock lock(mu_);
  auto& last = leases_[node];
  if (renewed > last) last = renewed;
  auto it = nodes_.find(node);
  if (it == nodes_.end() || (it->second.heartbeat && *it->second.heartbeat >= renewed)) return;
  const auto now = options_.now();
  const bool wasUsable = nodeUsable(it->second, now, options_.scheduler.heartbeatTimeout);
  it->second.heartbeat = renewed;
  if (!wasUsable && nodeUsable(it->second, now, options_.scheduler.heartbeatTimeout)) freed(node);
}

void ClusterCache::forgetLease(const std::string& node) {
  std::unique_lock lock(mu_);
  leases_.erase(node);
}

void ClusterCache::removeNode(std::string_view name) {
  std::unique_lock lock(mu_);
  if (auto it = nodes_.find(name); it != nodes_.end()) {
    freeSlots_.push_back(it->second.slot);
    nodes_.erase(it);
    indexRebuild();
  }
  changed_.notify_all();
}

void ClusterCache::rebuildNode(const std::string& name) {
  auto node = nodes_.find(name);
  if (node == nodes_.end()) return;
  auto holders = podsByNode_.find(name);
  if (holders == podsByNode_.end()) return;
  for (const auto& uid : holders->second) {
    auto pod = pods_.find(uid);
    if (pod != pods_.end()) {
      applyToNode(node->second, pod->second, true);
      if (pod->second.foreign) recountQuota(pod->second);  // counted on this inventory's devices
    }
  }
}

/// A foreign pod's assignment names every device it could hold; for its namespace's quota it
/// holds only as many of them per container and backend as it asks for.
static Assignment asManyAsAsked(const Assignment& everyDevice, const PreparedPod& pod) {
  Assignment out = everyDevice;
  for (auto& c : out.containers) {
    std::map<std::string, std::uint32_t> left;
    for (const auto& pc : pod.containers())
      if (pc.name == c.name)
        for (const auto& r : pc.requests) left[r.record->request().backend] = r.record->request().count;
    std::erase_if(c.devices, [&](const DeviceGrant& g) {
      auto& n = left[g.backend];
      if (n == 0) return true;
      --n;
      return false;
    });
  }
  return out;
}

void ClusterCache::recountQuota(PodRecord& record) {
  addUsage(namespaceUsage_[record.podNamespace], record.quotaUsage, -1);
  record.quotaUsage = quotaResources_.usage(record.foreign ? asManyAsAsked(record.assignment, *record.foreign)
                                                           : record.assignment);
  addUsage(namespaceUsage_[record.podNamespace], record.quotaUsage, 1);
  if (namespaceUsage_[record.podNamespace].empty()) namespaceUsage_.erase(record.podNamespace);
}

void ClusterCache::applyToNode(NodeEntry& node, PodRecord& record, bool add) {
  // A foreign pod's share of this inventory; remove() takes back what add() added.
  if (record.foreign && add) {
    std::optional<Assignment> exact;
    if (record.hami) {
      auto resolved = resolveHamiPlacement(*record.hami, *node.state.inventory, backends_);
      if (resolved.ok()) exact = std::move(*resolved);
      else
        spdlog::warn("pod={} node={} placed by HAMi, counted on every device it could use instead: {}", record.key,
                     record.node, resolved.error().message);
    }
    record.assignment = exact ? std::move(*exact) : everyDeviceItCouldHold(*record.foreign, *node.state.inventory);
  }
  Status s = add ? node.state.add(record.assignment) : node.state.remove(record.assignment);
  changed(node);
  if (!s.ok()) {
    // The pod names a device the node no longer publishes: nothing to count there.
    if (add) spdlog::warn("pod={} node={} assignment not counted: {}", record.key, record.node, s.error().message);
    return;
  }
  for (const auto& [pos, slot] : heldSlots(*node.state.inventory, record.assignment)) {
    auto& slots = node.slots[static_cast<size_t>(pos)];
    if (static_cast<size_t>(slot) >= slots.size()) continue;
    auto& holders = slots[static_cast<size_t>(slot)];
    holders = add ? holders + 1 : (holders > 0 ? holders - 1 : 0);
  }
}

void ClusterCache::addHolder(PodRecord record) {
  const std::string uid = record.uid, nodeName = record.node;
  auto [it, inserted] = pods_.insert_or_assign(uid, std::move(record));
  (void)inserted;
  podsByNode_[nodeName].insert(uid);
  if (it->second.inFlight) flying_.insert(uid);
  if (auto node = nodes_.find(nodeName); node != nodes_.end()) applyToNode(node->second, it->second, true);
  recountQuota(it->second);
}

void ClusterCache::dropHolder(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  if (auto node = nodes_.find(it->second.node); node != nodes_.end()) {
    applyToNode(node->second, it->second, false);
    freed(it->second.node);
  }
  addUsage(namespaceUsage_[it->second.podNamespace], it->second.quotaUsage, -1);
  if (namespaceUsage_[it->second.podNamespace].empty()) namespaceUsage_.erase(it->second.podNamespace);
  if (auto byNode = podsByNode_.find(it->second.node); byNode != podsByNode_.end()) {
    byNode->second.erase(uid);
    if (byNode->second.empty()) podsByNode_.erase(byNode);
  }
  flying_.erase(uid);
  pods_.erase(it);
}

void ClusterCache::upsertPod(const json::object& obj) {
  auto pod = parsePod(json::value(obj));
  const std::string uid(k8s::uid(obj));
  if (uid.empty()) return;
  // The kubelet lists container statuses once it has admitted the pod (Allocate is behind it).
  const json::value* statuses = nullptr;
  if (const auto* status = obj.if_contains("status"); status && status->is_object())
    statuses = status->as_object().if_contains("containerStatuses");
  const bool admitted = statuses && statuses->is_array() && !statuses->as_array().empty();
  std::optional<PodRecord> record;
  bool hamiProblem = false;  // the pod carries HAMi annotations that cannot be used
  if (pod.ok() && !pod->nodeName.empty() && !pod->terminated()) {
    auto it = pod->annotations.find(std::string(keys::kPodAssignment));
    if (it == pod->annotations.end()) {
      auto placedByHami = readHamiPlacement(*pod);
      std::string why = "has no " + std::string(keys::kPodAssignment) + " annotation (schedulerName \"" +
                        pod->schedulerName + "\")";
      if (!placedByHami.ok()) {
        hamiProblem = true;
        why += " and HAMi's annotations are ignored: " + placedByHami.error().message;
      }
      record = foreignRecord(*pod, uid, why, admitted);
      if (record && placedByHami.ok() && *placedByHami)
        record->hami = std::make_shared<const HamiPlacement>(std::move(**placedByHami));
    } else {
      auto assignment = decodeAssignment(it->second);
      if (!assignment.ok()) {
        record = foreignRecord(*pod, uid, "has an unreadable " + std::string(keys::kPodAssignment) +
                                              " annotation (" + assignment.error().message + ")", admitted);
      } else if (!assignment->node.empty() && assignment->node != pod->nodeName) {
        record = foreignRecord(*pod, uid, "has an assignment for node " + assignment->node, admitted);
      } else if (std::string why = implausibleAssignment(*assignment, pod->containers, backends_); !why.empty()) {
        record = foreignRecord(*pod, uid, "has a " + std::string(keys::kPodAssignment) + " annotation that " + why, admitted);
      } else {
        PodRecord r;
        r.uid = uid;
        r.key = pod->key();
        r.podNamespace = pod->podNamespace;
        r.priority = pod->priority;
        r.node = pod->nodeName;
        r.assignment = std::move(*assignment);
        auto phase = pod->annotations.find(std::string(keys::kPodBindPhase));
        r.inFlight = phase != pod->annotations.end() && phase->second == "allocating" && pod->phase != "Running";
        if (r.inFlight) r.keys = allocateKeys(*pod, backends_);  // read only while in flight
        r.boundAt = options_.now();
        if (auto t = pod->annotations.find(std::string(keys::kPodBindTime)); t != pod->annotations.end())
          if (auto parsed = parseTimestamp(t->second); parsed.ok()) r.boundAt = *parsed;
        record = std::move(r);
      }
    }
  }
  std::unique_lock lock(mu_);
  auto existing = pods_.find(uid);
  if (record && record->foreign && existing != pods_.end() && existing->second.foreign &&
      existing->second.node == record->node &&
      (existing->second.hami == record->hami || (existing->second.hami && record->hami && existing->second.hami->devices == record->hami->devices))) {
    existing->second.inFlight = record->inFlight;  // still foreign on the same node: nothing to recount
    if (record->inFlight) flying_.insert(uid);
    else flying_.erase(uid);
    existing->second.keys = std::move(record->keys);
    changed_.notify_all();
    return;
  }
  if (record && record->hami && (existing == pods_.end() || !existing->second.hami))
    spdlog::info("pod={} node={} was placed by HAMi: counted as its hami.io/*-devices-allocated annotations say",
                 record->key, record->node);
  else if (record && record->foreign && (existing == pods_.end() || existing->second.foreignWhy != record->foreignWhy)) {
    if (hamiProblem && options_.onHamiIgnored) options_.onHamiIgnored(pod->podNamespace, pod->name, uid, record->foreignWhy);
    spdlog::info("pod={} node={} asks for vgpu resources but {}: counted on every device it could use until it ends",
                 record->key, record->node, record->foreignWhy);
  }
  if (!record) {
    // An older event of a pod we are binding (not yet bound in it) must not undo the reservation.
    const bool staleBeforeBind = existing != pods_.end() && existing->second.reservation && pod.ok() &&
                                 pod->nodeName.empty() && !pod->terminated() && !pod->deleting;
    if (!staleBeforeBind && existing != pods_.end()) dropHolder(uid);
  } else if (existing != pods_.end() && existing->second.node == record->node &&
             existing->second.assignment == record->assignment) {
    existing->second.inFlight = record->inFlight;
    if (record->inFlight) flying_.insert(uid);
    else flying_.erase(uid);
    existing->second.reservation = false;
    existing->second.boundAt = record->boundAt;
    existing->second.keys = record->keys;
  } else {
    if (existing != pods_.end()) dropHolder(uid);
    addHolder(std::move(*record));
  }
  changed_.notify_all();
}

std::optional<ClusterCache::PodRecord> ClusterCache::foreignRecord(const PodInfo& pod, const std::string& uid,
                                                                   const std::string& why, bool admitted) const {
  auto request = buildPodRequest(backends_, pod.podNamespace, pod.name, pod.containers, pod.annotations);
  if (!request.ok() || request->empty()) return std::nullopt;  // none of ours, or nothing could serve it
  auto prepared = PreparedPod::prepare(*request, backends_);
  if (!prepared.ok()) return std::nullopt;
  PodRecord r;
  r.uid = uid;
  r.key = pod.key();
  r.podNamespace = pod.podNamespace;
  r.priority = pod.priority;
  r.node = pod.nodeName;
  r.foreign = std::make_shared<const PreparedPod>(std::move(*prepared));
  r.foreignWhy = why;
  // Until the kubelet has admitted it, a bind the node agent could confuse with it waits (6a).
  r.inFlight = pod.phase != "Running" && !admitted;
  if (r.inFlight) r.keys = allocateKeys(pod, backends_);  // read only while in flight
  r.boundAt = options_.now();
  return r;
}

void ClusterCache::removePod(const json::object& obj) {
  const std::string uid(k8s::uid(obj));
  std::unique_lock lock(mu_);
  dropHolder(uid);
  changed_.notify_all();
}

void ClusterCache::read(const std::function<void(const Lookup&, Clock::time_point)>& fn) const {
  std::shared_lock lock(mu_);
  const Lookup lookup = [this](std::string_view name) -> const NodeEntry* {
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : &it->second;
  };
  fn(lookup, options_.now());
}

std::size_t nodeNameHash(std::string_view name) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = (name.size() + 1) * kMul;
  auto mix = [&h](std::uint64_t word) {  // a folded 128-bit product: every input bit reaches every output bit
    __extension__ using Wide = unsigned __int128;  // GCC and Clang on 64-bit targets
    const Wide product = static_cast<Wide>(h ^ word) * kMul;
    h = static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
  };
  const char* p = name.data();
  std::size_t left = name.size();
  if (left < 8) {
    for (; left > 0; --left, ++p) mix(static_cast<unsigned char>(*p));
    return h;
  }
  std::uint64_t word;
  for (; left > 8; left -= 8, p += 8) {
    std::memcpy(&word, p, 8);
    mix(word);
  }
  std::memcpy(&word, name.data() + name.size() - 8, 8);
  mix(word);
  return h;
}

void ClusterCache::indexRebuild() {
  std::size_t capacity = 16;
  while (capacity < nodes_.size() * 2) capacity *= 2;
  index_.assign(capacity, IndexSlot{});
  indexed_ = 0;
  for (const auto& [name, node] : nodes_) indexInsert(&node);
}

void ClusterCache::indexInsert(const NodeEntry* node) {
  if ((indexed_ + 1) * 2 > index_.size()) return indexRebuild();  // rebuild re-inserts this one too
  const std::size_t mask = index_.size() - 1;
  const std::size_t hash = nodeNameHash(node->state.name);
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    if (!index_[i].node) {
      index_[i] = {hash, node};
      ++indexed_;
      return;
    }
  }
}

const NodeEntry* ClusterCache::indexFind(std::string_view name, std::size_t hash) const {
  if (index_.empty()) return nullptr;
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const IndexSlot& slot = index_[i];
    if (!slot.node) return nullptr;
    if (slot.hash == hash && slot.node->state.name == name) return slot.node;
  }
}

void ClusterCache::readNodes(
    const std::vector<std::string_view>& names,
    const std::function<void(const std::vector<const NodeEntry*>&, Clock::time_point)>& fn) const {
  constexpr std::size_t kAhead = 8;
  std::vector<std::size_t> hashes(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) hashes[i] = nodeNameHash(names[i]);
  std::vector<const NodeEntry*> found(names.size());
  std::shared_lock lock(mu_);
  const std::size_t mask = index_.empty() ? 0 : index_.size() - 1;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!index_.empty() && i + kAhead < names.size()) __builtin_prefetch(&index_[hashes[i + kAhead] & mask]);
    found[i] = indexFind(names[i], hashes[i]);
    if (i >= 4 && found[i - 4]) __builtin_prefetch(found[i - 4]);
  }
  fn(found, options_.now());
}

void ClusterCache::forEachNode(const std::function<void(const NodeEntry&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const auto& [name, node] : nodes_) fn(node);
}

bool ClusterCache::inFlightNow(const PodRecord& r, Clock::time_point now) const {
  return r.inFlight && now - r.boundAt < options_.inFlightExpiry;
}

Result<ClusterCache::Reserved> ClusterCache::reserve(const PodInfo& pod, const PreparedPod& prepared,
                                                     const std::string& nodeName, const PlacementEngine& engine,
                                                     std::chrono::milliseconds holdTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + holdTimeout;
  const AllocateKeys keys = allocateKeys(pod, backends_);
  std::unique_lock lock(mu_);
  bool waiting = false;  // a confusable pod is in flight there: reserve, then wait for it
  {
    auto nodeIt = nodes_.find(nodeName);
    if (nodeIt == nodes_.end()) return makeError("node " + nodeName + " is not known to vgpu-scheduler");
    NodeEntry& node = nodeIt->second;
    const auto now = options_.now();
    if (auto why = nodeUnusableReason(node, now, options_.scheduler.heartbeatTimeout); !why.empty())
      return makeError("node " + nodeName + ": " + why);
    if (auto mine = pods_.find(pod.uid); mine != pods_.end())
      return makeError(mine->second.foreign ? "pod " + pod.key() + " is already bound to node " + mine->second.node
                                            : "pod " + pod.key() + " already holds devices on node " + mine->second.node);
    auto assigned = engine.assign(prepared, node.state);
    if (!assigned.ok()) return makeError("pod no longer fits node " + nodeName + ": " + assigned.error().message);
    if (auto limits = limitsOf(pod.podNamespace); !limits.empty()) {
      const auto used = namespaceUsage_.find(pod.podNamespace);
      const std::string over = quotaExceeded(pod.podNamespace, limits, used == namespaceUsage_.end() ? QuotaUsage{} : used->second,
                                             quotaResources_.usage(*assigned), quotaResources_);
      if (!over.empty()) return makeError("quota exceeded: " + over);
    }

    // DESIGN.md 6a: hold back only a bind the node agent could confuse with one in flight.
    if (const PodRecord* conflict = confusableInFlight(nodeName, pod.uid, keys, *assigned, now, UINT64_MAX)) {
      if (std::chrono::steady_clock::now() >= deadline || holdTimeout.count() <= 0) return heldBack(*conflict, nodeName);
      // Waits with its share reserved: filter and prioritize count it meanwhile, so the pods
      // kube-scheduler places next are not sent to the room this one is about to take.
      waiting = true;
    }
    // The lowest free slot per device, so virtual device ids <id>::<slot> stay unique on the node.
    Assignment a = std::move(*assigned);
    std::map<int, std::vector<int>> mine;  // position -> slots this pod took
    auto takeSlot = [&](int pos) -> int {
      const auto& slots = node.slots[static_cast<size_t>(pos)];
      auto& taken = mine[pos];
      for (int s = 0; s < static_cast<int>(slots.size()); ++s)
        if (slots[static_cast<size_t>(s)] == 0 && std::find(taken.begin(), taken.end(), s) == taken.end()) {
          taken.push_back(s);
          return s;
        }
      return -1;
    };
    for (int pass = 0; pass < 2; ++pass) {  // app containers first: init containers reuse their slots
      for (auto& c : a.containers) {
        if (c.init != (pass == 1)) continue;
        for (auto& g : c.devices) {
          const int pos = node.state.inventory->find(g.backend, g.deviceId);
          if (pos < 0) return makeError("internal: assigned device " + g.deviceId + " is not on node " + nodeName);
          if (c.init && !mine[pos].empty()) {
            g.slot = mine[pos].front();
            continue;
          }
          g.slot = takeSlot(pos);
          if (g.slot < 0)
            return makeError("device " + g.deviceId + " on node " + nodeName +
                             " has no free slot (all virtual devices are held by other pods)");
        }
      }
    }
    PodRecord r;
    r.uid = pod.uid;
    r.key = pod.key();
    r.podNamespace = pod.podNamespace;
    r.priority = pod.priority;
    r.node = nodeName;
    r.assignment = a;
    r.keys = keys;
    r.inFlight = true;
    r.reservation = true;
    r.reservationId = nextReservation_++;
    r.boundAt = now;
    const std::uint64_t id = r.reservationId;
    addHolder(std::move(r));
    if (!waiting) return Reserved{std::move(a), id};
    // Only for pods that were in flight on the node before this one (FIFO): two waiting
    // binds never wait for each other, and they leave in the order they came.
    for (;;) {
      auto mine = pods_.find(pod.uid);
      if (mine == pods_.end() || !mine->second.reservation || mine->second.reservationId != id)
        return makeError("pod " + pod.key() + " was deleted or replaced while its bind waited");
      const auto t = options_.now();
      auto nodeNow = nodes_.find(nodeName);
      std::string unusable = nodeNow == nodes_.end() ? "is no longer known to vgpu-scheduler"
                                                     : nodeUnusableReason(nodeNow->second, t, options_.scheduler.heartbeatTimeout);
      if (!unusable.empty()) {
        dropHolder(pod.uid);
        changed_.notify_all();
        return makeError("node " + nodeName + ": " + unusable);
      }
      const PodRecord* conflict = confusableInFlight(nodeName, pod.uid, keys, a, t, id);
      if (!conflict) return Reserved{std::move(a), id};
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string why = heldBack(*conflict, nodeName).message;
        dropHolder(pod.uid);
        changed_.notify_all();
        return makeError(std::move(why));
      }
      changed_.wait_until(lock, deadline);
    }
  }
}

std::unordered_set<std::string> ClusterCache::nodesWhereHeldBack(const AllocateKeys& keys) const {
  std::unordered_set<std::string> out;
  if (keys.empty()) return out;
  std::shared_lock lock(mu_);
  const auto now = options_.now();
  for (const auto& uid : flying_) {
    const PodRecord& r = pods_.at(uid);
    if (inFlightNow(r, now) && confusable(r.keys, keys)) out.insert(r.node);
  }
  return out;
}

const ClusterCache::PodRecord* ClusterCache::confusableInFlight(const std::string& nodeName, const std::string& uid,
                                                                const AllocateKeys& keys, const Assignment& assigned,
                                                                Clock::time_point now, std::uint64_t before) const {
  auto holders = podsByNode_.find(nodeName);
  if (holders == podsByNode_.end()) return nullptr;
  for (const auto& other : holders->second) {
    if (other == uid) continue;
    const PodRecord& r = pods_.at(other);
    // Waiting binds wait only for the ones reserved before them (the informer's are older).
    if (r.reservation && r.reservationId >= before) continue;
    // A foreign pod is never interchangeable with ours: serving it our slice is the harm.
    if (inFlightNow(r, now) && confusable(r.keys, keys) && (r.foreign || !interchangeable(r.assignment, assigned)))
      return &r;
  }
  return nullptr;
}

Error ClusterCache::heldBack(const PodRecord& conflict, const std::string& nodeName) {
  return makeError("held back: pod " + conflict.key + ", which asks for devices in the same counts, is still waiting for "
                   "its Allocate on node " + nodeName + " and the node agent could not tell the two apart; "
                   "the scheduler will retry");
}

void ClusterCache::release(const std::string& uid, std::uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = pods_.find(uid);
  if (it != pods_.end() && it->second.reservation && it->second.reservationId == id) dropHolder(uid);
  changed_.notify_all();
}

void ClusterCache::upsertQuota(const json::object& quota) {
  auto limits = parseResourceQuota(quota, quotaResources_);
  const std::string ns(k8s::namespaceOf(quota)), name(k8s::name(quota));
  std::unique_lock lock(mu_);
  auto& ofNamespace = quotas_[ns];
  if (limits.empty()) ofNamespace.erase(name);
  else ofNamespace[name] = std::move(limits);
  if (ofNamespace.empty()) quotas_.erase(ns);
}

void ClusterCache::removeQuota(const json::object& quota) {
  const std::string ns(k8s::namespaceOf(quota));
  std::unique_lock lock(mu_);
  auto it = quotas_.find(ns);
  if (it == quotas_.end()) return;
  it->second.erase(std::string(k8s::name(quota)));
  if (it->second.empty()) quotas_.erase(it);
}

std::vector<QuotaLimit> ClusterCache::limitsOf(const std::string& ns) const {
  std::vector<QuotaLimit> out;
  if (auto it = quotas_.find(ns); it != quotas_.end())
    for (const auto& [name, limits] : it->second) out.insert(out.end(), limits.begin(), limits.end());
  return out;
}

ClusterCache::NamespaceQuota ClusterCache::namespaceQuota(const std::string& ns) const {
  std::shared_lock lock(mu_);
  NamespaceQuota out;
  out.limits = limitsOf(ns);
  if (auto it = namespaceUsage_.find(ns); it != namespaceUsage_.end()) out.used = it->second;
  return out;
}

void ClusterCache::forEachNamespace(const std::function<void(const std::string&, const NamespaceQuota&)>& fn) const {
  std::shared_lock lock(mu_);
  std::set<std::string> names;
  for (const auto& [ns, usage] : namespaceUsage_) names.insert(ns);
  for (const auto& [ns, quotas] : quotas_) names.insert(ns);
  for (const auto& ns : names) {
    NamespaceQuota q;
    q.limits = limitsOf(ns);
    if (auto it = namespaceUsage_.find(ns); it != namespaceUsage_.end()) q.used = it->second;
    fn(ns, q);
  }
}

CacheStats ClusterCache::stats() const {
  std::shared_lock lock(mu_);
  CacheStats s;
  s.nodes = nodes_.size();
  s.pods = pods_.size();
  const auto now = options_.now();
  for (const auto& [uid, r] : pods_) {
    s.reservations += r.reservation;
    s.inFlight += inFlightNow(r, now);
  }
  return s;
}

std::optional<DeviceUsage> ClusterCache::deviceUsage(std::string_view node, std::string_view deviceId) const {
  std::shared_lock lock(mu_);
  auto it = nodes_.find(std::string(node));
  if (it == nodes_.end()) return std::nullopt;
  const auto& entries = it->second.state.inventory->entries();
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].device().id == deviceId) return it->second.state.usage[i];
  return std::nullopt;
}

void ClusterCache::forEachHeldPod(const std::function<void(const HeldPodView&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const auto& [uid, r] : pods_)
    if (nodes_.contains(r.node)) fn({r.node, r.uid, r.key, r.foreign == nullptr, r.assignment});
}

std::vector<HeldPod> ClusterCache::podsOn(std::string_view node) const {
  std::shared_lock lock(mu_);
  std::vector<HeldPod> out;
  auto byNode = podsByNode_.find(std::string(node));
  if (byNode == podsByNode_.end()) return out;
  for (const std::string& uid : byNode->second) {
    const PodRecord& r = pods_.at(uid);
    out.push_back({r.uid, r.key, r.priority, r.foreign == nullptr, r.assignment});
  }
  return out;
}

}  // namespace vgpu::scheduler
