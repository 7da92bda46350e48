#include "vgpu/preemption.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace vgpu {
namespace {

/// One eligible candidate with what it takes per device, for the orderings.
struct Eligible {
  std::size_t index = 0;
  const VictimCandidate* pod = nullptr;
  std::vector<std::pair<int, DeviceUsage>> usage;  // by inventory position
  double size = 0;                                 // sum of its load over the devices

  double loadOn(const NodeInventory& inventory, int position) const {
    for (const auto& [at, u] : usage)
      if (at == position) return inventory.entries()[static_cast<std::size_t>(at)].load(u);
    return 0;
  }
};

/// More important pods are reprieved first and evicted last.
bool moreImportant(const Eligible& a, const Eligible& b) {
  if (a.pod->violatesPdb != b.pod->violatesPdb) return a.pod->violatesPdb;
  if (a.pod->priority != b.pod->priority) return a.pod->priority > b.pod->priority;
  if (a.size != b.size) return a.size < b.size;  // small pods back first: fewer, larger victims
  return !a.pod->proposed && b.pod->proposed;    // kube-scheduler's own pick goes last
}

struct Cost {
  std::int64_t pdb = 0, count = 0, prioritySum = 0, notProposed = 0;
  auto operator<=>(const Cost&) const = default;
};

Cost costOf(const std::vector<const Eligible*>& victims) {
  Cost c;
  c.count = static_cast<std::int64_t>(victims.size());
  for (const Eligible* v : victims) {
    c.pdb += v->pod->violatesPdb ? 1 : 0;
    c.notProposed += v->pod->proposed ? 0 : 1;
    // Shifted as kube-scheduler does, so that negative priorities do not favour more pods.
    c.prioritySum += static_cast<std::int64_t>(v->pod->priority) - std::numeric_limits<std::int32_t>::min();
  }
  return c;
}

bool fits(const PlacementEngine& engine, const PreparedPod& pod, const NodeState& state) {
  return engine.check(pod, state).fits;
}

/// From `state` (every pod of `victims` removed, the pod fitting), gives back each victim
/// in order of importance while the pod still fits; returns those that must go.
std::vector<const Eligible*> reprieve(const PlacementEngine& engine, const PreparedPod& pod, NodeState state,
                                      std::vector<const Eligible*> victims) {
  std::stable_sort(victims.begin(), victims.end(),
                   [](const Eligible* a, const Eligible* b) { return moreImportant(*a, *b); });
  std::vector<const Eligible*> out;
  for (const Eligible* v : victims) {
    if (!state.add(v->pod->assignment).ok()) {
      out.push_back(v);
      continue;
    }
    if (fits(engine, pod, state)) continue;
    (void)state.remove(v->pod->assignment);
    out.push_back(v);
  }
  return out;
}

NodeState without(const NodeState& node, const std::vector<const Eligible*>& victims) {
  NodeState state = node;
  for (const Eligible* v : victims) (void)state.remove(v->pod->assignment);
  return state;
}

}  // namespace

Result<VictimChoice> chooseVictims(const PlacementEngine& engine, const PreparedPod& preemptor,
                                   std::int32_t preemptorPriority, const NodeState& node,
                                   std::span<const VictimCandidate> candidates) {
  if (!node.unavailable.empty()) return makeError("node " + node.name + " cannot take pods: " + node.unavailable);
  if (!node.inventory) return makeError("node " + node.name + " has no device inventory");
  VictimChoice choice;
  if (auto now = engine.assign(preemptor, node); now.ok()) {
    choice.assignment = std::move(*now);
    return choice;
  }
  std::vector<Eligible> eligible;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const VictimCandidate& c = candidates[i];
    if (c.priority >= preemptorPriority) continue;  // never a pod of equal or higher priority
    auto usage = podUsage(*node.inventory, c.assignment);
    if (!usage.ok() || usage->empty()) continue;  // holds nothing here: evicting it frees nothing
    Eligible e{i, &c, std::move(*usage), 0};
    for (const auto& [at, u] : e.usage) e.size += node.inventory->entries()[static_cast<std::size_t>(at)].load(u);
    eligible.push_back(std::move(e));
  }
  std::vector<const Eligible*> all;
  for (const Eligible& e : eligible) all.push_back(&e);
  const NodeState emptied = without(node, all);
  if (eligible.empty() || !fits(engine, preemptor, emptied)) {
    const NodeEvaluation eval = engine.evaluate(preemptor, emptied);
    return makeError("evicting every pod of lower priority (" + std::to_string(eligible.size()) + ") from node " +
                     node.name + " would not make room: " + engine.explain(preemptor, emptied, eval));
  }

  std::optional<std::vector<const Eligible*>> best;
  Cost bestCost;
  auto offer = [&](std::vector<const Eligible*> victims) {
    const Cost cost = costOf(victims);
    if (best && !(cost < bestCost)) return;
    best = std::move(victims);
    bestCost = cost;
  };
  offer(reprieve(engine, preemptor, emptied, all));

  // Per device: its pods, least important first and largest share first, until the pod fits.
  const std::size_t devices = node.inventory->entries().size();
  for (std::size_t d = 0; d < devices; ++d) {
    const int position = static_cast<int>(d);
    std::vector<const Eligible*> onDevice;
    for (const Eligible& e : eligible)
      if (std::any_of(e.usage.begin(), e.usage.end(), [&](const auto& u) { return u.first == position; }))
        onDevice.push_back(&e);
    if (onDevice.empty()) continue;
    std::stable_sort(onDevice.begin(), onDevice.end(), [&](const Eligible* a, const Eligible* b) {
      if (a->pod->violatesPdb != b->pod->violatesPdb) return !a->pod->violatesPdb;
      if (a->pod->priority != b->pod->priority) return a->pod->priority < b->pod->priority;
      const double la = a->loadOn(*node.inventory, position), lb = b->loadOn(*node.inventory, position);
      if (la != lb) return la > lb;
      return a->pod->proposed && !b->pod->proposed;
    });
    NodeState state = node;
    std::vector<const Eligible*> taken;
    bool fitted = false;
    for (const Eligible* e : onDevice) {
      (void)state.remove(e->pod->assignment);
      taken.push_back(e);
      if ((fitted = fits(engine, preemptor, state))) break;
    }
    if (fitted) offer(reprieve(engine, preemptor, state, std::move(taken)));
  }

  // Verified where the pod goes; the reprieve kept the pod fitting at every step.
  auto assignment = engine.assign(preemptor, without(node, *best));
  if (!assignment.ok()) return makeError("node " + node.name + ": " + assignment.error().message);  // broken invariant
  std::stable_sort(best->begin(), best->end(),
                   [](const Eligible* a, const Eligible* b) { return moreImportant(*a, *b); });
  for (const Eligible* v : *best) choice.victims.push_back(v->index);
  choice.pdbViolations = bestCost.pdb;
  choice.assignment = std::move(*assignment);
  return choice;
}

}  // namespace vgpu
