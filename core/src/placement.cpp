#include "vgpu/placement.h"

#include <algorithm>
#include <array>
#include <bit>

#include "vgpu/backend_loader.h"
#include "vgpu/link_sets.h"

namespace vgpu {
namespace {

/// A device that fits one request, with its load before the request (0 = idle, 1 = full).
struct Candidate {
  std::uint32_t pos;
  std::uint32_t slot;  // index in the backend group
  int numa;
  double load;
  vgpu_device_usage take;
};

/// Devices of a node that `fit` cannot tell apart (NodeFits), with their one answer.
struct FitKind {
  std::uint32_t fitClass;
  DeviceUsage usage;
  std::uint16_t devices;  // how many devices of the walk so far were of this kind
  vgpu_fit_result result;
};

/// Per-thread buffers so that evaluating a node allocates nothing once warmed up.
struct Scratch {
  std::vector<DeviceUsage> apps;
  std::vector<DeviceUsage> init;
  std::vector<Candidate> candidates;
  std::vector<Candidate> chosen;
  std::vector<std::uint32_t> positions;  // the candidates' positions, for the topology policy
  std::vector<int> numas;
  std::vector<FitKind> kinds;
  NodeRefusal refusal;  // filled while choosing; copied out only when the node is refused
  // Nodes with devices that place grants (NodeInventory::placesGrants) only:
  std::vector<std::vector<std::string>> appsPlaced, initPlaced;  // tokens on each device
  std::vector<std::string> offered;  // per position: the token `fit` gave the current request
  std::vector<const char*> tokens;   // the C view of one device's tokens
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

/// Notes `devices` devices refused with `r`: the same as noting each of them in turn.
inline void noteRefusal(NodeRefusal& refusal, const vgpu_fit_result& r, std::uint16_t devices = 1) {
  // Most devices of a refused node give the reason the first one gave.
  if (refusal.reasonCount != 0 && refusal.reasons[0].example.reason == r.reason) {
    auto& entry = refusal.reasons[0];
    entry.devices = static_cast<std::uint16_t>(entry.devices + devices);
    if (r.available > entry.example.available) entry.example = r;
    return;
  }
  for (std::uint8_t i = 1; i < refusal.reasonCount; ++i) {
    auto& entry = refusal.reasons[i];
    if (entry.example.reason == r.reason) {
      entry.devices = static_cast<std::uint16_t>(entry.devices + devices);
      if (r.available > entry.example.available) entry.example = r;
      return;
    }
  }
  if (refusal.reasonCount < NodeRefusal::kMaxReasons) {
    refusal.reasons[refusal.reasonCount++] = {r, devices};
  } else {  // rare: more kinds than slots
    auto& last = refusal.reasons[NodeRefusal::kMaxReasons - 1];
    last.devices = static_cast<std::uint16_t>(last.devices + devices);
  }
}

/// Better-first order of candidates: by load under the device policy (`pack`: the most
/// loaded first), with the pod's NUMA key `N` (a template, so that the usual pod without one
/// pays nothing for it); ties go to the lower position for deterministic placements.
template <DeviceChoice::Numa N>
struct Order {
  bool pack;

  bool operator()(const Candidate& a, const Candidate& b) const {
    if constexpr (N == DeviceChoice::Numa::kFirst)
      if (a.numa != b.numa) return a.numa < b.numa;
    if (a.load != b.load) return pack ? a.load > b.load : a.load < b.load;
    if constexpr (N == DeviceChoice::Numa::kTiebreak)
      if (a.numa != b.numa) return a.numa < b.numa;
    return a.pos < b.pos;
  }
};

void sortByPosition(std::vector<Candidate>& chosen) {
  std::sort(chosen.begin(), chosen.end(), [](const Candidate& a, const Candidate& b) { return a.pos < b.pos; });
}

/// Picks `q.count` of the candidates (at least that many) in `order`, all from one NUMA node
/// with NUMA binding; fills `s.chosen`, or `refusal` when binding finds no such node.
template <class Less>
bool pick(const vgpu_device_request& q, Scratch& s, NodeRefusal& refusal, Less order) {
  const size_t count = q.count;
  if (count == 1) {
    s.chosen.push_back(*std::min_element(s.candidates.begin(), s.candidates.end(), order));
    return true;
  }
  std::sort(s.candidates.begin(), s.candidates.end(), order);
  if (!q.numa_bind) {
    s.chosen.assign(s.candidates.begin(), s.candidates.begin() + static_cast<std::ptrdiff_t>(count));
    return true;
  }
  // NUMA binding: the best NUMA node (by its best device) that has enough fitting devices.
  for (const Candidate& lead : s.candidates) {
    s.chosen.clear();
    for (const Candidate& c : s.candidates)
      if (c.numa == lead.numa && s.chosen.size() < count) s.chosen.push_back(c);
    if (s.chosen.size() == count) return true;
  }
  s.chosen.clear();
  vgpu_fit_result numa{};
  numa.reason = VGPU_REASON_NUMA_MISMATCH;
  numa.needed = count;
  noteRefusal(refusal, numa);
  refusal.kind = NodeRefusal::Kind::kTooFewDevices;
  return false;
}

/// Of sets the links rank equal (`ties`: masks of group slots, at most LinkTable::kMaxDevices
/// devices), the one first in `order`, the device policy's (load, the NUMA key, position),
/// compared member by member: where links do not decide, load does. Out of line: most
/// lookups find one set.
template <class Less>
[[gnu::noinline]] std::uint32_t breakLinkTie(std::span<const std::uint16_t> ties, Scratch& s, Less order) {
  if (std::popcount(ties.front()) == 1) {  // one device: the first in order of those tied
    std::uint32_t any = 0;
    for (const std::uint16_t set : ties) any |= set;
    const Candidate* best = nullptr;
    for (const Candidate& c : s.candidates)
      if ((any >> c.slot & 1u) != 0 && (best == nullptr || order(c, *best))) best = &c;
    return 1u << best->slot;
  }
  std::array<const Candidate*, LinkTable::kMaxDevices> bySlot{};
  for (const Candidate& c : s.candidates) bySlot[c.slot] = &c;
  if (ties.size() <= 8) {
    // Of two sets, the one first member by member holds the first device, in order, of
    // those only one of them holds: one comparison per device they do not share.
    std::uint32_t best = ties.front();
    for (std::size_t i = 1; i < ties.size(); ++i) {
      const Candidate* first = nullptr;
      for (std::uint32_t bits = best ^ ties[i]; bits != 0; bits &= bits - 1) {
        const Candidate* c = bySlot[static_cast<std::size_t>(std::countr_zero(bits))];
        if (first == nullptr || order(*c, *first)) first = c;
      }
      if ((ties[i] >> first->slot & 1u) != 0) best = ties[i];
    }
    return best;
  }
  // Many sets of several devices (an idle node of equal links): rank the devices once. By
  // slot, a bit that is the higher the earlier the device is in order: the set first
  // member by member has the largest sum.
  std::sort(s.candidates.begin(), s.candidates.end(), order);
  std::array<std::uint32_t, LinkTable::kMaxDevices> rankBit{};
  for (std::size_t i = 0; i < s.candidates.size(); ++i) rankBit[s.candidates[i].slot] = 1u << (31 - i);
  std::uint32_t best = 0, bestKey = 0;
  for (const std::uint16_t set : ties) {
    std::uint32_t key = 0;
    for (std::uint32_t bits = set; bits != 0; bits &= bits - 1)
      key |= rankBit[static_cast<std::size_t>(std::countr_zero(bits))];
    if (key > bestKey) {
      bestKey = key;
      best = set;
    }
  }
  sortByPosition(s.candidates);  // as the caller had them
  return best;
}

/// The topology policy: the best-linked `count` candidates (link_sets.h), ties broken by
/// `order`. False when the node publishes no links or the search does not apply; the
/// caller's order decides then.
template <class Less>
bool chooseLinked(const vgpu_device_request& q, const NodeInventory& inventory,
                  const NodeInventory::BackendGroup& group, Scratch& s, Less order) {
  if (!inventory.hasLinks()) return false;
  if (group.linkTable) {  // the common case: answered when the inventory was built
    std::uint32_t fitting = 0;
    for (const Candidate& c : s.candidates) fitting |= 1u << c.slot;
    const std::span<const std::uint16_t> ties = group.linkTable->best(fitting, q.count, q.numa_bind != 0);
    if (ties.empty()) return false;
    const std::uint32_t best = ties.size() == 1 ? ties.front() : breakLinkTie(ties, s, order);
    for (const Candidate& c : s.candidates)
      if (best >> c.slot & 1u) s.chosen.push_back(c);
    return true;
  }
  // Searched per pod: candidates in the policy's order, which the search's ties follow.
  std::sort(s.candidates.begin(), s.candidates.end(), order);
  s.positions.clear();
  s.numas.clear();
  for (const Candidate& c : s.candidates) {
    s.positions.push_back(c.pos);
    if (q.numa_bind) s.numas.push_back(c.numa);
  }
  const auto set = bestLinkedSet(inventory, s.positions, s.numas, q.count);
  if (!set) return false;
  for (std::size_t i = 0; i < s.candidates.size(); ++i)
    if ((*set >> i) & 1u) s.chosen.push_back(s.candidates[i]);
  sortByPosition(s.chosen);
  return true;
}

/// chooseLinked() with the pod's NUMA key: out of line, so that the usual pod's path stays
/// small.
[[gnu::noinline]] bool chooseLinkedByNuma(const vgpu_device_request& q, const NodeInventory& inventory,
                                          const NodeInventory::BackendGroup& group, Scratch& s, bool pack,
                                          DeviceChoice::Numa numa) {
  if (numa == DeviceChoice::Numa::kFirst)
    return chooseLinked(q, inventory, group, s, Order<DeviceChoice::Numa::kFirst>{pack});
  return chooseLinked(q, inventory, group, s, Order<DeviceChoice::Numa::kTiebreak>{pack});
}

/// The slowest link among the chosen devices (kMaxLinkRank for one device): the topology
/// policy's node score.
std::uint32_t worstChosenLink(const NodeInventory& inventory, const std::vector<Candidate>& chosen) {
  std::uint32_t worst = kMaxLinkRank;
  for (std::size_t i = 0; i < chosen.size(); ++i)
    for (std::size_t j = i + 1; j < chosen.size(); ++j)
      worst = std::min(worst, inventory.linkRank(chosen[i].pos, chosen[j].pos));
  return worst;
}

/// The devices of the request's backend on this node, or null (with the refusal filled)
/// when it has none this scheduler can judge.
const NodeInventory::BackendGroup* groupFor(const PreparedPod::Request& request, const NodeInventory& inventory,
                                            NodeRefusal& refusal) {
  const NodeInventory::BackendGroup* group = inventory.group(*request.allocator, request.record->request().backend);
  if (group == nullptr || group->positions.empty() || group->allocator == nullptr) {
    refusal.kind = NodeRefusal::Kind::kNoDevices;
    refusal.devicesConsidered = refusal.devicesFitting = 0;
    return nullptr;
  }
  return group;
}

/// The placements of one walk over a node whose inventory has devices that place grants
/// (Entry::placed): the tokens on each device, by position, and where the token `fit`
/// gives the request on each goes. Null for every other node.
struct Placements {
  const NodeInventory::Entry* base;                      // entries().data(), to find positions
  const std::vector<std::vector<std::string>>* placed;  // by position; may be empty
  std::vector<std::string>* offered;                     // by position; null: not kept
};

/// fitPlaced on a device that places grants; `why` (optional) receives the refusal in words.
[[gnu::noinline]] void fitPlacedOne(const Allocator& allocator, const vgpu_device_request& q,
                                    const NodeInventory::Entry& entry, const DeviceUsage& usage, const Placements* p,
                                    vgpu_fit_result& r, char* why = nullptr, std::size_t whyCapacity = 0) {
  const auto pos = p ? static_cast<std::size_t>(&entry - p->base) : 0;
  std::vector<const char*>& tokens = scratch().tokens;
  tokens.clear();
  if (p && pos < p->placed->size())
    for (const std::string& t : (*p->placed)[pos]) tokens.push_back(t.c_str());
  char token[VGPU_PLACEMENT_TOKEN_MAX] = {};
  vgpu_placement io{sizeof(vgpu_placement), {tokens.data(), tokens.size()}, token, sizeof token, why, whyCapacity};
  allocator.fitPlaced(q, entry.c(), toC(usage), io, r);
  token[sizeof token - 1] = '\0';
  if (why != nullptr && whyCapacity > 0) why[whyCapacity - 1] = '\0';
  if (p && p->offered && r.fits) (*p->offered)[pos] = token;
}

/// One device's answer. `kPlacing`: the node has devices that place grants (`p` set); the
/// usual node's code does not even look.
template <bool kPlacing>
vgpu_fit_result fitOne(const Allocator& allocator, const vgpu_device_request& q, const NodeInventory::Entry& entry,
                       const DeviceUsage& usage, const Placements* p) {
  vgpu_fit_result r{};
  if (entry.cordoned) {
    r.reason = VGPU_REASON_CORDONED;
  } else if (kPlacing && entry.placed) {
    fitPlacedOne(allocator, q, entry, usage, p, r);
  } else {
    allocator.fit(q, entry.c(), toC(usage), r);
  }
  return r;
}

/// What the pod's DeviceChoice does to the fitting devices, for the few pods that have one
/// (out of line, so the usual pod's path stays as it was): "mutex" refuses every device a
/// container uses, as exclusive use whatever the request asks; weights re-rate the load.
[[gnu::noinline]] void applyChoice(const DeviceChoice& choice, const NodeInventory& inventory,
                                   const std::vector<DeviceUsage>& usage, Scratch& s, NodeRefusal& refusal) {
  if (choice.mutex)
    std::erase_if(s.candidates, [&](const Candidate& c) {
      const std::uint32_t shares = usage[c.pos].shares;
      if (shares == 0) return false;
      noteRefusal(refusal, vgpu_fit_result{0, VGPU_REASON_EXCLUSIVE_CONFLICT, 100, shares, {}});
      return true;
    });
  if (!choice.weights.equal())
    for (Candidate& c : s.candidates) c.load = inventory.entries()[c.pos].load(usage[c.pos], choice.weights);
}

/// One request's `fit` answers on one node, asked once per kind of device: devices alike in
/// all the backend's `fit` reads (Entry::fitClass) with equal usage get one answer. With a
/// request that names ids, or a backend that declares nothing, every device is its own
/// kind. Lives for one walk over a node's devices, so nothing in it can go stale.
class NodeFits {
 public:
  using Kind = FitKind;

  NodeFits(const Allocator& allocator, const vgpu_device_request& q, std::vector<Kind>& kinds,
           const Placements* placements)
      : allocator_(allocator), q_(q), shared_(q.include_ids.count == 0 && q.exclude_ids.count == 0), kinds_(kinds),
        placements_(placements) {
    kinds_.clear();
  }

  static bool sameKind(const Kind& k, const NodeInventory::Entry& entry, const DeviceUsage& usage) {
    return k.fitClass == entry.fitClass && k.usage == usage;
  }

  /// Whether devices may share answers here; without, judge() is one `fit` per device.
  bool shares() const { return shared_; }

  /// The kind of the device: its answer, and one more device counted. Valid until the
  /// next call.
  /// Inlined: the per-device loop's call (GCC stops inlining it as chooseDevices grows; a
  /// call costs 3 % of a spread placement).
  [[gnu::always_inline]] Kind& judge(const NodeInventory::Entry& entry, const DeviceUsage& usage) {
    if (shared_ && entry.fitClass != NodeInventory::Entry::kJudgedAlone)
      for (Kind& k : kinds_)
        if (sameKind(k, entry, usage)) {
          ++k.devices;
          return k;
        }
    return add(entry, usage,
               placements_ ? fitOne<true>(allocator_, q_, entry, usage, placements_)
                           : fitOne<false>(allocator_, q_, entry, usage, nullptr));
  }

  /// A new kind, of the device whose answer is `result`.
  Kind& add(const NodeInventory::Entry& entry, const DeviceUsage& usage, const vgpu_fit_result& result) {
    return kinds_.emplace_back(Kind{entry.fitClass, usage, 1, result});
  }

  /// Notes the refused devices of the walk. Kinds are in the order of their first device,
  /// so the reasons, their counts and examples are what noting device by device gives.
  void noteRefusals(NodeRefusal& refusal) const {
    for (const Kind& k : kinds_)
      if (!k.result.fits) noteRefusal(refusal, k.result, k.devices);
  }

 private:

  const Allocator& allocator_;
  const vgpu_device_request& q_;
  const bool shared_;  // a request that names ids tells every device apart
  std::vector<Kind>& kinds_;
  const Placements* placements_;
};

/// Whether enough devices fit the request, without choosing among them: stops at the
/// first `count` that fit. A refusal is the same as chooseDevices gives. Inlined into
/// check(), its one hot caller (a call costs 20 instructions a node there); `kPlacing` as
/// for fitOne.
template <bool kPlacing>
[[gnu::always_inline]] inline bool enoughFit(const PreparedPod::Request& request, const NodeInventory& inventory,
                                             const std::vector<DeviceUsage>& usage, const Placements* placements,
                                             NodeRefusal& refusal) {
  const NodeInventory::BackendGroup* group = groupFor(request, inventory, refusal);
  if (group == nullptr) return false;
  const vgpu_device_request& q = request.record->c();
  const std::uint32_t count = q.count;
  const auto& entries = inventory.entries();
  const auto& positions = group->positions;
  const NodeInventory::Entry& front = entries[positions[0]];
  // Most nodes that fit are settled by their first device: nothing to share then.
  const vgpu_fit_result first = fitOne<kPlacing>(*request.allocator, q, front, usage[positions[0]], placements);
  if (first.fits && count == 1) return true;
  std::uint16_t fitting = first.fits ? 1 : 0;
  NodeFits fits(*request.allocator, q, scratch().kinds, placements);
  if (fits.shares() && front.fitClass != NodeInventory::Entry::kJudgedAlone) {
    // Neighbours are mostly of one kind: the last device's kind is tried first.
    FitKind* last = &fits.add(front, usage[positions[0]], first);
    for (std::size_t i = 1; i < positions.size(); ++i) {
      const NodeInventory::Entry& entry = entries[positions[i]];
      const DeviceUsage& used = usage[positions[i]];
      if (NodeFits::sameKind(*last, entry, used)) ++last->devices;
      else last = &fits.judge(entry, used);
      if (last->result.fits && ++fitting == count) return true;
    }
    fits.noteRefusals(refusal);
  } else {  // every device on its own: no kinds to keep
    if (!first.fits) noteRefusal(refusal, first);
    for (std::size_t i = 1; i < positions.size(); ++i) {
      const vgpu_fit_result r =
          fitOne<kPlacing>(*request.allocator, q, entries[positions[i]], usage[positions[i]], placements);
      if (!r.fits) noteRefusal(refusal, r);
      else if (++fitting == count) return true;
    }
  }
  refusal.kind = NodeRefusal::Kind::kTooFewDevices;
  refusal.devicesConsidered = static_cast<std::uint16_t>(group->positions.size());
  refusal.devicesFitting = fitting;
  return false;
}

/// enoughFit() on a node with devices that place grants, with the node's placements: out of
/// line, so that the usual node's check stays as it was.
[[gnu::noinline]] bool enoughFitPlaced(const PreparedPod::Request& request, const NodeState& node,
                                       NodeRefusal& refusal) {
  std::vector<std::string>& offered = scratch().offered;
  offered.assign(node.usage.size(), {});
  const Placements placements{node.inventory->entries().data(), &node.placed, &offered};
  return enoughFit<true>(request, *node.inventory, node.usage, &placements, refusal);
}

/// pick() with a NUMA key: out of line, so that the usual pod's path stays small.
[[gnu::noinline]] bool pickByNuma(const vgpu_device_request& q, Scratch& s, NodeRefusal& refusal, bool pack,
                                  DeviceChoice::Numa numa) {
  if (numa == DeviceChoice::Numa::kFirst) return pick(q, s, refusal, Order<DeviceChoice::Numa::kFirst>{pack});
  return pick(q, s, refusal, Order<DeviceChoice::Numa::kTiebreak>{pack});
}

/// Chooses the devices for one request given `usage`; fills `chosen` or `refusal`.
bool chooseDevices(const PreparedPod::Request& request, const NodeInventory& inventory,
                   const std::vector<DeviceUsage>& usage, const Placements* placements, DevicePolicy policy,
                   const DeviceChoice& choice, Scratch& s, NodeRefusal& refusal) {
  const vgpu_device_request& q = request.record->c();
  s.chosen.clear();
  const NodeInventory::BackendGroup* group = groupFor(request, inventory, refusal);
  if (group == nullptr) return false;
  s.candidates.clear();
  const auto& entries = inventory.entries();
  NodeFits fits(*request.allocator, q, s.kinds, placements);
  for (std::uint32_t slot = 0; slot < group->positions.size(); ++slot) {
    const std::uint32_t pos = group->positions[slot];
    const auto& entry = entries[pos];
    const vgpu_fit_result& r = fits.judge(entry, usage[pos]).result;
    if (r.fits) {
      s.candidates.push_back({pos, slot, entry.c().numa_node, entry.load(usage[pos]), r.take});
    } else {
      noteRefusal(refusal, r);
    }
  }
  if (choice.mutex || !choice.weights.equal()) applyChoice(choice, inventory, usage, s, refusal);
  refusal.devicesConsidered = static_cast<std::uint16_t>(group->positions.size());
  refusal.devicesFitting = static_cast<std::uint16_t>(s.candidates.size());
  const size_t count = q.count;
  if (s.candidates.size() < count || count == 0) {
    refusal.kind = NodeRefusal::Kind::kTooFewDevices;
    return false;
  }
  // Topology, where links do not decide: spread, or binpack when the pod asks for it.
  const bool pack = policy == DevicePolicy::kBinpack || (policy == DevicePolicy::kTopology && choice.packUnlinked);
  using Numa = DeviceChoice::Numa;
  if (policy == DevicePolicy::kTopology &&
      (choice.numa == Numa::kIgnore ? chooseLinked(q, inventory, *group, s, Order<Numa::kIgnore>{pack})
                                    : chooseLinkedByNuma(q, inventory, *group, s, pack, choice.numa)))
    return true;
  if (choice.numa != Numa::kIgnore) return pickByNuma(q, s, refusal, pack, choice.numa);
  return pick(q, s, refusal, Order<Numa::kIgnore>{pack});
}

void addTake(DeviceUsage& u, const vgpu_device_usage& take) { u += fromC(take); }

/// HAMi's reason for a node without the devices asked for.
constexpr std::string_view kHamiNoDevices = "NodeInsufficientDevice";

/// Places the pod on the node; builds the assignment when `out` is given.
NodeEvaluation run(const PreparedPod& pod, const NodeState& node, NodePolicy nodePolicy, DevicePolicy devicePolicy,
                   Assignment* out) {
  NodeEvaluation eval;
  if (!node.unavailable.empty()) {
    eval.refusal.kind = NodeRefusal::Kind::kUnavailable;
    return eval;
  }
  Scratch& s = scratch();
  const NodeInventory& inventory = *node.inventory;
  std::uint32_t worstLink = kMaxLinkRank;  // over every request's chosen devices
  s.apps.assign(node.usage.begin(), node.usage.end());
  // Devices that place grants: the placements of the pod's grants join the node's as they
  // are chosen, so the pod's next request sees them.
  const bool placing = inventory.placesGrants();
  const auto startPlaced = [&](std::vector<std::vector<std::string>>& to) {
    if (node.placed.size() == node.usage.size()) to = node.placed;
    else to.assign(node.usage.size(), {});
  };
  if (placing) {
    startPlaced(s.appsPlaced);
    s.offered.assign(node.usage.size(), {});
  }
  Placements placements{inventory.entries().data(), &s.appsPlaced, &s.offered};
  const auto& containers = pod.containers();
  for (size_t ci = 0; ci < containers.size(); ++ci) {
    const auto& container = containers[ci];
    std::vector<DeviceUsage>* target = &s.apps;
    std::vector<std::vector<std::string>>* targetPlaced = &s.appsPlaced;
    if (container.init) {  // init containers run alone, before the app containers
      s.init.assign(node.usage.begin(), node.usage.end());
      target = &s.init;
      if (placing) startPlaced(s.initPlaced);
      targetPlaced = &s.initPlaced;
    }
    placements.placed = targetPlaced;
    ContainerAssignment* placed = nullptr;
    if (out) {
      out->containers.push_back({container.name, container.init, {}});
      placed = &out->containers.back();
    }
    for (size_t ri = 0; ri < container.requests.size(); ++ri) {
      const auto& request = container.requests[ri];
      s.refusal.reasonCount = 0;
      if (!chooseDevices(request, inventory, *target, placing ? &placements : nullptr, devicePolicy,
                         pod.pod().deviceChoice, s, s.refusal)) {
        eval.refusal = s.refusal;
        eval.refusal.container = static_cast<std::int16_t>(ci);
        eval.refusal.request = static_cast<std::int16_t>(ri);
        return eval;
      }
      if (devicePolicy == DevicePolicy::kTopology) worstLink = std::min(worstLink, worstChosenLink(inventory, s.chosen));
      for (const Candidate& c : s.chosen) {
        addTake((*target)[c.pos], c.take);
        const bool hasToken = placing && inventory.entries()[c.pos].placed && !s.offered[c.pos].empty();
        if (hasToken) (*targetPlaced)[c.pos].push_back(s.offered[c.pos]);
        if (placed) {
          const Device& d = inventory.entries()[c.pos].device();
          placed->devices.push_back({d.backend, d.id, d.index, c.take.memory_mib, c.take.compute, -1,
                                     request.record->c().priority, hasToken ? s.offered[c.pos] : std::string()});
        }
      }
    }
  }
  double load = 0;
  const auto& entries = inventory.entries();
  for (size_t i = 0; i < entries.size(); ++i) load += entries[i].load(s.apps[i]);
  load = entries.empty() ? 0 : load / static_cast<double>(entries.size());
  eval.fits = true;
  eval.score = nodePolicy == NodePolicy::kBinpack ? load : 1.0 - load;
  // Topology: the best-linked devices first, the node policy among equals; still 0..1.
  if (devicePolicy == DevicePolicy::kTopology) eval.score = (worstLink + eval.score) / (kMaxLinkRank + 1.0);
  if (out) out->node = node.name;
  return eval;
}

/// "2 nvidia.com/gpu (3000 MiB, 30 percent compute each)": in the resource names the user
/// wrote. "percent", never '%': kube-scheduler prints refusals through a printf format.
std::string describeRequest(const DeviceRequest& r, const Allocator& allocator) {
  std::string unit = r.backend + " device" + (r.count == 1 ? "" : "s");
  for (const auto& resource : allocator.resources()) {
    if (resource.role != VGPU_RESOURCE_COUNT) continue;
    unit = resource.name;  // the first: a backend may count in several (NVIDIA's MIG resources)
    break;
  }
  const std::string memory = r.memoryMiB != 0 ? std::to_string(r.memoryMiB) + " MiB"
                             : r.memoryPercent != 0 && r.memoryPercent != 100
                                 ? std::to_string(r.memoryPercent) + " percent of the memory"
                                 : "all the memory";
  return std::to_string(r.count) + " " + unit + " (" + memory + ", " + std::to_string(r.computePercent) +
         " percent compute" + (r.count == 1 ? "" : " each") + ")";
}

/// The backend's words for a refusal like `example` by a device that places grants, asked
/// again with the node's placements and a buffer for words (the hot path asks for none);
/// empty when no such device refuses the request so. The first such device speaks.
std::string placedWords(const PreparedPod::Request& request, const NodeState& node, const vgpu_fit_result& example) {
  const NodeInventory& inventory = *node.inventory;
  if (!inventory.placesGrants() || node.usage.size() != inventory.entries().size()) return {};
  const NodeInventory::BackendGroup* group = inventory.group(*request.allocator, request.record->request().backend);
  if (group == nullptr || group->allocator == nullptr) return {};
  const Placements p{inventory.entries().data(), &node.placed, nullptr};
  for (const std::uint32_t pos : group->positions) {
    const NodeInventory::Entry& entry = inventory.entries()[pos];
    if (!entry.placed || entry.cordoned) continue;
    std::array<char, 512> why{};
    vgpu_fit_result r{};
    fitPlacedOne(*request.allocator, request.record->c(), entry, node.usage[pos], &p, r, why.data(), why.size());
    if (!r.fits && r.reason == example.reason && why[0] != '\0') return why.data();
  }
  return {};
}

}  // namespace

Result<PreparedPod> PreparedPod::prepare(const PodRequest& pod, const BackendSet& backends) {
  PreparedPod out;
  out.pod_ = pod;
  for (const auto& c : pod.containers) {
    Container container{c.name, c.init, {}};
    for (const auto& r : c.requests) {
      const Backend* backend = backends.find(r.backend);
      if (backend == nullptr)
        return makeError("pod " + pod.podNamespace + "/" + pod.podName + ": container \"" + c.name +
                         "\" asks backend \"" + r.backend + "\", which is not loaded");
      container.requests.push_back({std::make_unique<RequestRecord>(r), &backend->allocator()});
    }
    out.containers_.push_back(std::move(container));
  }
  std::size_t requests = 0;
  for (std::size_t ci = 0; ci < out.containers_.size(); ++ci) {
    if (out.containers_[ci].requests.empty()) continue;
    requests += out.containers_[ci].requests.size();
    out.soleContainer_ = static_cast<std::int16_t>(ci);
  }
  if (requests != 1) out.soleContainer_ = -1;
  return out;
}

NodePolicy PlacementEngine::nodePolicyFor(const PreparedPod& pod) const {
  return pod.pod().nodePolicy.value_or(config_.nodePolicy);
}

DevicePolicy PlacementEngine::devicePolicyFor(const PreparedPod& pod) const {
  return pod.pod().devicePolicy.value_or(config_.devicePolicy);
}

NodeEvaluation PlacementEngine::evaluate(const PreparedPod& pod, const NodeState& node) const {
  return run(pod, node, nodePolicyFor(pod), devicePolicyFor(pod), nullptr);
}

NodeEvaluation PlacementEngine::check(const PreparedPod& pod, const NodeState& node) const {
  // With one request, enough fitting devices settle it whichever they are. With more, the
  // devices chosen for one request change what is left for the next: full placement.
  const PreparedPod::Request* only = pod.soleRequest();
  if (only == nullptr || only->record->c().numa_bind || pod.pod().deviceChoice.mutex || !node.unavailable.empty())
    return evaluate(pod, node);
  NodeEvaluation eval;
  eval.fits = node.inventory->placesGrants() ? enoughFitPlaced(*only, node, eval.refusal)
                                             : enoughFit<false>(*only, *node.inventory, node.usage, nullptr, eval.refusal);
  if (!eval.fits) {
    eval.refusal.container = pod.soleRequestContainer();
    eval.refusal.request = 0;
  }
  return eval;
}

Result<Assignment> PlacementEngine::assign(const PreparedPod& pod, const NodeState& node) const {
  Assignment assignment;
  const NodeEvaluation eval = run(pod, node, nodePolicyFor(pod), devicePolicyFor(pod), &assignment);
  if (!eval.fits) return makeError(explain(pod, node, eval));
  return assignment;
}

Placement PlacementEngine::place(const PreparedPod& pod, std::span<const NodeState> nodes) const {
  Placement out;
  out.evaluations.reserve(nodes.size());
  const NodePolicy nodePolicy = nodePolicyFor(pod);
  const DevicePolicy devicePolicy = devicePolicyFor(pod);
  for (size_t i = 0; i < nodes.size(); ++i) {
    out.evaluations.push_back(run(pod, nodes[i], nodePolicy, devicePolicy, nullptr));
    const NodeEvaluation& e = out.evaluations.back();
    if (e.fits && (!out.chosen || e.score > out.evaluations[*out.chosen].score)) out.chosen = i;
  }
  if (out.chosen) run(pod, nodes[*out.chosen], nodePolicy, devicePolicy, &out.assignment);
  return out;
}

std::string PlacementEngine::explain(const PreparedPod& pod, const NodeState& node, const NodeEvaluation& e) const {
  const NodeRefusal& r = e.refusal;
  if (e.fits) return "fits";
  if (r.kind == NodeRefusal::Kind::kUnavailable) return node.unavailable;
  if (r.container < 0 || r.request < 0) return "does not fit";
  const auto& container = pod.containers()[static_cast<size_t>(r.container)];
  const auto& request = container.requests[static_cast<size_t>(r.request)];
  const DeviceRequest& q = request.record->request();
  std::string text = std::string(container.init ? "init container \"" : "container \"") + container.name +
                     "\" needs " + describeRequest(q, *request.allocator);
  if (r.kind == NodeRefusal::Kind::kNoDevices)
    return text + ": " + std::string(kHamiNoDevices) + ": the node has no " + q.backend + " devices";
  text += ": " + std::to_string(r.devicesFitting) + " of " + std::to_string(r.devicesConsidered) + " fit";
  if (r.devicesConsidered < q.count)
    text += "; " + std::string(kHamiNoDevices) + ": the node has " + std::to_string(r.devicesConsidered);
  for (std::uint8_t i = 0; i < r.reasonCount; ++i) {
    const auto& reason = r.reasons[i];
    text += i == 0 ? "; " : ", ";
    // "3/8 CardInsufficientMemory: ...": HAMi's count and name, then our words.
    text += std::to_string(reason.devices) + "/" + std::to_string(r.devicesConsidered) + " ";
    if (const std::string_view hami = hamiReasonName(reason.example); !hami.empty()) (text += hami) += ": ";
    const std::string words = placedWords(request, node, reason.example);
    text += words.empty() ? request.allocator->explain(reason.example) : words;
  }
  return text;
}

std::string PlacementEngine::category(const PreparedPod& pod, const NodeEvaluation& e) const {
  const NodeRefusal& r = e.refusal;
  if (e.fits) return "fits";
  if (r.kind == NodeRefusal::Kind::kUnavailable) return "vgpu: the node cannot take pods";
  if (r.container < 0 || r.request < 0) return "vgpu: does not fit";
  const auto& request = pod.containers()[static_cast<size_t>(r.container)].requests[static_cast<size_t>(r.request)];
  const std::string& backend = request.record->request().backend;
  if (r.kind == NodeRefusal::Kind::kNoDevices)
    return "vgpu: no " + backend + " devices on the node (" + std::string(kHamiNoDevices) + ")";
  // Too few devices in all: what the devices say would not help, whatever most of them say.
  if (r.devicesConsidered < request.record->c().count)
    return "vgpu: fewer " + backend + " devices on the node than a container asks (" + std::string(kHamiNoDevices) +
           ")";
  const NodeRefusal::ReasonCount* top = r.dominant();
  if (!top) return "vgpu: not enough fitting devices (" + std::string(kHamiNoDevices) + ")";
  const std::string_view words = categorizeCoreReason(top->example);
  if (words.empty()) return "vgpu: devices the " + backend + " backend refuses";
  return "vgpu: " + std::string(words) + " (" + std::string(hamiReasonName(top->example)) + ")";
}

double PlacementEngine::distance(const PreparedPod& pod, const NodeEvaluation& e) const {
  constexpr double kFar = 1e9;
  const NodeRefusal& r = e.refusal;
  if (e.fits) return 0;
  if (r.kind != NodeRefusal::Kind::kTooFewDevices || r.container < 0 || r.request < 0) return kFar;
  const auto& request = pod.containers()[static_cast<size_t>(r.container)].requests[static_cast<size_t>(r.request)];
  const double missing =
      static_cast<double>(request.record->c().count) - static_cast<double>(r.devicesFitting);
  double gap = 3;
  for (std::uint8_t i = 0; i < r.reasonCount; ++i) {
    const vgpu_fit_result& x = r.reasons[i].example;
    double g = 2;  // waiting does not fix it
    switch (x.reason) {
      case VGPU_REASON_INSUFFICIENT_MEMORY:
      case VGPU_REASON_INSUFFICIENT_COMPUTE:
        g = x.needed == 0 ? 1
                          : static_cast<double>(x.needed - std::min(x.needed, x.available)) / static_cast<double>(x.needed);
        break;
      case VGPU_REASON_SHARES_EXHAUSTED:
      case VGPU_REASON_EXCLUSIVE_CONFLICT:
      case VGPU_REASON_NUMA_MISMATCH:
        g = 1;
        break;
      default:
        break;
    }
    gap = std::min(gap, g);
  }
  return std::max(missing, 1.0) * 4 + gap;
}

}  // namespace vgpu
