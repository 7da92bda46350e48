#include "simulator.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "vgpu/link_sets.h"
#include "vgpu/placement.h"
#include "vgpu/preemption.h"
#include "vgpu/pod_request.h"

namespace vgpu::simulator {
namespace {

namespace json = boost::json;

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

/// A text table whose columns fit their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) line += i + 1 == row.size() ? row[i] : pad(row[i], widths[i] + 2);
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string percentOf(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "-";
  return std::to_string(part * 100 / whole) + "%";
}

/// For each container's devices of each backend on a node with links: how they are linked,
/// and which islands of wholly free devices the placement left.
std::vector<std::string> describeLinks(const NodeState& node, const Assignment& assignment) {
  std::vector<std::string> out;
  const NodeInventory& inventory = *node.inventory;
  if (!inventory.hasLinks()) return out;
  for (const auto& c : assignment.containers) {
    std::map<std::string, std::vector<std::uint32_t>> chosen;  // backend -> positions
    for (const auto& g : c.devices) {
      const int pos = inventory.find(g.backend, g.deviceId);
      if (pos >= 0) chosen[g.backend].push_back(static_cast<std::uint32_t>(pos));
    }
    for (const auto& [backend, positions] : chosen) {
      std::vector<std::uint32_t> left;
      for (std::uint32_t pos : inventory.group(backend)->positions)
        if (node.usage[pos].shares == 0) left.push_back(pos);
      out.push_back(c.name + ": " + describeLinkedSet(inventory, positions, left));
    }
  }
  return out;
}

}  // namespace

SimulationResult simulate(const std::vector<ClusterNode>& cluster, const std::vector<PodInfo>& pods,
                          const DeviceConfig& config, const BackendSet& backends) {
  SimulationResult result;
  result.policies = config.scheduler;
  for (const auto& node : cluster) {
    auto inventory = std::make_shared<const NodeInventory>(node.devices, backends, node.cordoned);
    NodeState state(node.name, std::move(inventory));
    state.unavailable = node.unavailable;
    result.nodes.push_back(std::move(state));
  }
  const PlacementEngine engine(config.scheduler);
  for (const auto& pod : pods) {
    PodOutcome outcome;
    outcome.pod = pod.key();
    outcome.priority = pod.priority;
    auto request = buildPodRequest(backends, pod.podNamespace, pod.name, pod.containers, pod.annotations);
    if (!request.ok()) {
      outcome.kind = PodOutcome::Kind::kInvalid;
      outcome.error = request.error().message;
    } else if (request->empty()) {
      outcome.kind = PodOutcome::Kind::kNotOurs;
    } else if (auto prepared = PreparedPod::prepare(*request, backends); !prepared.ok()) {
      outcome.kind = PodOutcome::Kind::kInvalid;
      outcome.error = prepared.error().message;
    } else {
      Placement placement = engine.place(*prepared, result.nodes);
      if (placement.chosen) {
        outcome.kind = PodOutcome::Kind::kPlaced;
        outcome.assignment = std::move(placement.assignment);
        NodeState& node = result.nodes[*placement.chosen];
        (void)node.add(outcome.assignment);  // devices come from this node
        if (engine.devicePolicyFor(*prepared) == DevicePolicy::kTopology) outcome.links = describeLinks(node, outcome.assignment);
      } else {
        outcome.kind = PodOutcome::Kind::kPending;
        std::map<std::string, int> categories;
        for (size_t i = 0; i < result.nodes.size(); ++i) {
          outcome.reasons[result.nodes[i].name] = engine.explain(*prepared, result.nodes[i], placement.evaluations[i]);
          ++categories[engine.category(*prepared, placement.evaluations[i])];
        }
        // As kube-scheduler's FitError.Error() counts identical node messages, sorted.
        std::vector<std::string> parts;
        for (const auto& [text, n] : categories) parts.push_back(std::to_string(n) + " " + text);
        std::sort(parts.begin(), parts.end());
        outcome.kubeScheduler = "0/" + std::to_string(result.nodes.size()) + " nodes are available:";
        for (size_t i = 0; i < parts.size(); ++i) outcome.kubeScheduler += (i ? ", " : " ") + parts[i];
        outcome.kubeScheduler += ".";
      }
    }
    result.pods.push_back(std::move(outcome));
  }
  return result;
}

Result<std::string> explainPreemption(const SimulationResult& result, const std::vector<PodInfo>& pods,
                                      const std::string& pod, const DeviceConfig& config, const BackendSet& backends) {
  const std::string key = pod.find('/') == std::string::npos ? "default/" + pod : pod;
  const PodInfo* info = nullptr;
  const PodOutcome* outcome = nullptr;
  for (std::size_t i = 0; i < pods.size() && i < result.pods.size(); ++i)
    if (pods[i].key() == key) {
      info = &pods[i];
      outcome = &result.pods[i];
    }
  if (!info) return makeError("--explain-preemption: no pod " + key + " in the pods file");
  if (outcome->kind == PodOutcome::Kind::kPlaced)
    return key + " is placed on " + outcome->assignment.node + ": nothing to preempt\n";
  if (outcome->kind != PodOutcome::Kind::kPending)
    return makeError("--explain-preemption: " + key + " is not a pending pod asking for vgpu devices" +
                     (outcome->error.empty() ? std::string() : " (" + outcome->error + ")"));
  auto request = buildPodRequest(backends, info->podNamespace, info->name, info->containers, info->annotations);
  if (!request.ok()) return std::move(request).error();
  auto prepared = PreparedPod::prepare(*request, backends);
  if (!prepared.ok()) return std::move(prepared).error();
  const PlacementEngine engine(config.scheduler);

  std::string out = "Preemption for " + key + " (priority " + std::to_string(info->priority) + "), pending:\n";
  // kube-scheduler's default order between candidate nodes (PDBs aside: vgpu-sim has none):
  // the lowest highest-priority victim, then the lowest sum of priorities, then the fewest.
  struct Rank {
    std::int64_t highest = 0, sum = 0, count = 0;
    auto operator<=>(const Rank&) const = default;
  };
  std::optional<std::pair<Rank, std::string>> pick;
  for (const NodeState& node : result.nodes) {
    std::vector<VictimCandidate> candidates;
    for (const PodOutcome& placed : result.pods)
      if (placed.kind == PodOutcome::Kind::kPlaced && placed.assignment.node == node.name)
        candidates.push_back({placed.pod, placed.pod, placed.priority, false, false, placed.assignment});
    auto choice = chooseVictims(engine, *prepared, info->priority, node, candidates);
    if (!choice.ok()) {
      out += "  " + node.name + ": no victims help: " + choice.error().message + "\n";
      continue;
    }
    if (choice->victims.empty()) {
      out += "  " + node.name + ": fits without evicting anyone\n";
      continue;
    }
    Rank rank{std::numeric_limits<std::int64_t>::min(), 0, static_cast<std::int64_t>(choice->victims.size())};
    std::string names;
    for (std::size_t i : choice->victims) {
      const VictimCandidate& v = candidates[i];
      rank.highest = std::max<std::int64_t>(rank.highest, v.priority);
      rank.sum += static_cast<std::int64_t>(v.priority) - std::numeric_limits<std::int32_t>::min();
      names += (names.empty() ? "" : ", ") + v.key + " (priority " + std::to_string(v.priority) + ")";
    }
    std::string devices;
    for (const auto& c : choice->assignment.containers)
      for (const auto& g : c.devices)
        devices += (devices.empty() ? "" : ", ") + c.name + " -> " + g.deviceId + " (" + std::to_string(g.memoryMiB) +
                   " MiB, " + std::to_string(g.compute) + "%)";
    out += "  " + node.name + ": evict " + names + "; then " + devices + "\n";
    if (!pick || rank < pick->first) pick.emplace(rank, node.name);
  }
  out += pick ? "kube-scheduler would choose " + pick->second +
                    " (lowest highest victim priority, then lowest sum of priorities, then fewest victims)\n"
              : "No node: preemption does not help this pod.\n";
  return out;
}

std::string renderText(const SimulationResult& r) {
  std::string out;
  size_t placed = 0, pending = 0, invalid = 0, notOurs = 0;
  out += "Placements (node policy " + std::string(toString(r.policies.nodePolicy)) + ", device policy " +
         toString(r.policies.devicePolicy) + ")\n";
  // A PLACEMENT column only where some grant has one (a device its backend places grants on,
  // such as NVIDIA's dynamic MIG: the instance's profile and slices).
  bool anyPlacement = false;
  for (const auto& pod : r.pods)
    for (const auto& c : pod.assignment.containers)
      for (const auto& d : c.devices) anyPlacement = anyPlacement || !d.placement.empty();
  std::vector<std::string> header{"POD", "NODE", "CONTAINER", "DEVICE", "MEMORY", "COMPUTE"};
  if (anyPlacement) header.emplace_back("PLACEMENT");
  Table placements(std::move(header));
  for (const auto& pod : r.pods) {
    switch (pod.kind) {
      case PodOutcome::Kind::kPlaced: {
        ++placed;
        bool first = true;
        for (const auto& c : pod.assignment.containers) {
          for (const auto& d : c.devices) {
            std::vector<std::string> row{first ? pod.pod : "", first ? pod.assignment.node : "",
                                         (c.init ? "init:" : "") + c.name, d.deviceId,
                                         std::to_string(d.memoryMiB) + " MiB", std::to_string(d.compute) + "%"};
            if (anyPlacement) row.push_back(d.placement.empty() ? "-" : d.placement);
            placements.add(std::move(row));
            first = false;
          }
        }
        break;
      }
      case PodOutcome::Kind::kPending: ++pending; break;
      case PodOutcome::Kind::kInvalid: ++invalid; break;
      case PodOutcome::Kind::kNotOurs: ++notOurs; break;
    }
  }
  out += placements.render();
  bool linksHeading = false;
  for (const auto& pod : r.pods) {
    for (const auto& line : pod.links) {
      if (!linksHeading) out += "\nLinks (topology policy)\n";
      linksHeading = true;
      out += pod.pod + " on " + pod.assignment.node + ": " + line + "\n";
    }
  }

  out += "\nDevice use\n";
  Table devices({"NODE", "DEVICE", "MODEL", "HEALTH", "MEMORY USED/TOTAL", "COMPUTE", "SHARES"});
  for (const auto& node : r.nodes) {
    const auto& entries = node.inventory->entries();
    for (size_t i = 0; i < entries.size(); ++i) {
      const Device& d = entries[i].device();
      const DeviceUsage& u = node.usage[i];
      std::string health = entries[i].cordoned ? "cordoned" : toString(d.health);
      devices.add({i == 0 ? node.name + (node.unavailable.empty() ? "" : " (unavailable)") : "", d.id, d.model, health,
                   std::to_string(u.memoryMiB) + "/" + std::to_string(d.memoryMiB) + " MiB (" +
                       percentOf(u.memoryMiB, d.memoryMiB) + ")",
                   std::to_string(u.compute) + "/" + std::to_string(d.computeUnits),
                   std::to_string(u.shares) + "/" + std::to_string(d.splitCount)});
    }
  }
  out += devices.render();

  if (pending + invalid > 0) {
    out += "\nNot placed\n";
    for (const auto& pod : r.pods) {
      if (pod.kind == PodOutcome::Kind::kInvalid) out += pod.pod + ": invalid request: " + pod.error + "\n";
      if (pod.kind != PodOutcome::Kind::kPending) continue;
      out += pod.pod + ": no node fits\n";
      out += "  kube-scheduler says: " + pod.kubeScheduler + "\n";
      for (const auto& [node, why] : pod.reasons) out += "  " + node + ": " + why + "\n";
    }
  }
  out += "\n" + std::to_string(placed) + " placed, " + std::to_string(pending) + " pending, " + std::to_string(invalid) +
         " invalid, " + std::to_string(notOurs) + " without device requests\n";
  return out;
}

std::string renderJson(const SimulationResult& r) {
  json::array pods;
  for (const auto& pod : r.pods) {
    json::object o;
    o["pod"] = pod.pod;
    switch (pod.kind) {
      case PodOutcome::Kind::kPlaced: {
        o["status"] = "placed";
        o["node"] = pod.assignment.node;
        json::array containers;
        for (const auto& c : pod.assignment.containers) {
          json::array devices;
          for (const auto& d : c.devices) {
            json::object device{{"backend", d.backend}, {"id", d.deviceId}, {"index", d.deviceIndex},
                                {"memoryMiB", d.memoryMiB}, {"compute", d.compute}};
            if (!d.placement.empty()) device["placement"] = d.placement;
            devices.push_back(std::move(device));
          }
          containers.push_back(json::object{{"name", c.name}, {"init", c.init}, {"devices", std::move(devices)}});
        }
        o["containers"] = std::move(containers);
        if (!pod.links.empty()) {
          json::array links;
          for (const auto& line : pod.links) links.push_back(json::string(line));
          o["links"] = std::move(links);
        }
        break;
      }
      case PodOutcome::Kind::kPending: {
        o["status"] = "pending";
        json::object reasons;
        for (const auto& [node, why] : pod.reasons) reasons[node] = why;
        o["reasons"] = std::move(reasons);
        o["kubeScheduler"] = pod.kubeScheduler;
        break;
      }
      case PodOutcome::Kind::kInvalid:
        o["status"] = "invalid";
        o["error"] = pod.error;
        break;
      case PodOutcome::Kind::kNotOurs: o["status"] = "no-device-request"; break;
    }
    pods.push_back(std::move(o));
  }
  json::array devices;
  for (const auto& node : r.nodes) {
    const auto& entries = node.inventory->entries();
    for (size_t i = 0; i < entries.size(); ++i) {
      const Device& d = entries[i].device();
      const DeviceUsage& u = node.usage[i];
      devices.push_back(json::object{{"node", node.name}, {"backend", d.backend}, {"id", d.id}, {"model", d.model},
                                     {"health", entries[i].cordoned ? "cordoned" : toString(d.health)},
                                     {"memoryMiB", d.memoryMiB}, {"usedMemoryMiB", u.memoryMiB},
                                     {"computeUnits", d.computeUnits}, {"usedCompute", u.compute},
                                     {"splitCount", d.splitCount}, {"usedShares", u.shares}});
    }
  }
  return json::serialize(json::object{{"pods", std::move(pods)}, {"devices", std::move(devices)}}) + "\n";
}

}  // namespace vgpu::simulator
