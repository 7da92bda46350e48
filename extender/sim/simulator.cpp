#include "simulator.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "vgpu/link_sets.h"
#include "vgpu/placement.h"
#include "vgpu/preemption.h"
#include "vgpu/pod_request.h"
#include "vgpu/dra/resource_slices.h"

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

/// As kube-scheduler's FitError.Error() counts identical node messages, sorted.
std::string kubeSchedulerMessage(const std::map<std::string, int>& categories, std::size_t nodes) {
  std::vector<std::string> parts;
  for (const auto& [text, n] : categories) parts.push_back(std::to_string(n) + " " + text);
  std::sort(parts.begin(), parts.end());
  std::string out = "0/" + std::to_string(nodes) + " nodes are available:";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " ") + parts[i];
  return out + ".";
}

/// A node's devices by front end: those the device plugin advertises to the extender, and
/// the ResourceSlices vgpu-dra-plugin would publish for the rest (unhealthy ones withdrawn).
struct FrontEndSplit {
  std::vector<Device> devicePlugin;
  DraNode dra;
};

FrontEndSplit splitByFrontEnd(const ClusterNode& node, const DeviceConfig& config, const BackendSet& backends,
                              const std::string& domain) {
  std::vector<Device> dp;
  std::map<std::string, std::vector<dra::DraDevice>> byBackend;
  std::vector<std::string> refused;
  bool anyDra = false;
  for (const Device& d : node.devices) {
    const FrontEnd fe =
        node.frontEnd.value_or(config.settingsFor(d.backend, node.name).frontEnd.value_or(FrontEnd::kDevicePlugin));
    if (fe == FrontEnd::kDevicePlugin) {
      dp.push_back(d);
      continue;
    }
    anyDra = true;
    const Backend* backend = backends.find(d.backend);
    if (!backend) {
      refused.push_back("backend " + d.backend + " is not loaded");
      continue;
    }
    auto device = dra::draDevice(backend->allocator(), d);
    if (!device.ok()) {
      refused.push_back(device.error().message);
      continue;
    }
    // As vgpu-dra-plugin publishes it where the apiserver keeps taints (1.36 on).
    if (d.health == Health::kUnhealthy) device->taints.push_back(dra::unhealthyTaint(domain, ""));
    byBackend[d.backend].push_back(std::move(device).value());
  }
  std::vector<json::object> slices;
  if (node.unavailable.empty())
    for (const auto& [backend, devices] : byBackend)
      for (auto& slice : dra::buildResourceSlices({backend + "." + domain, node.name, "", 1, 128}, devices))
        slices.push_back(std::move(slice));
  std::string none;
  if (!anyDra) none = dp.empty() ? "the node has no devices" : "no ResourceSlices: its devices are served by vgpu-device-plugin (frontEnd: devicePlugin)";
  else if (!node.unavailable.empty()) none = "vgpu-dra-plugin publishes nothing here: " + node.unavailable;
  else if (refused.empty()) none = "no ResourceSlices";
  else none = "no ResourceSlices: " + refused.front();
  auto devices = poolDevices(slices);
  if (!devices.ok()) return {std::move(dp), DraNode(node.name, {}, "its ResourceSlices: " + devices.error().message)};
  return {std::move(dp), DraNode(node.name, std::move(devices).value(), none)};
}

/// The claims of a simulation: which exist, which pods use them, where they are allocated.
class ClaimBook {
 public:
  ClaimBook(const DraPodInputs& dra, const BackendSet& backends, SimulationResult& result)
      : dra_(dra), result_(result) {
    for (const auto& b : backends.all()) {
      const std::string driver = b->name() + "." + dra.driverDomain;
      classes_.emplace(driver, chartDeviceClass(driver));
    }
    for (const auto& [name, cls] : dra.objects.classes) classes_[name] = cls;
  }

  /// The pod's claims as indexes into result.claims (each new one recorded). Errors: a
  /// claim or template the input lacks, a claim naming an unknown DeviceClass.
  Result<std::vector<std::size_t>> claimsOf(const PodInfo& pod, const std::vector<PodClaimRef>& refs) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const PodClaimRef& ref = refs[i];
      const std::string at = "spec.resourceClaims[" + std::to_string(i) + "] (" + ref.name + ")";
      ClaimSpec spec;
      std::string origin = "ResourceClaim";
      if (!ref.templateName.empty()) {
        const auto t = dra_.objects.templates.find(pod.podNamespace + "/" + ref.templateName);
        if (t == dra_.objects.templates.end())
          return makeError(at + ": no ResourceClaimTemplate " + pod.podNamespace + "/" + ref.templateName + " in the input");
        spec = t->second;
        spec.ns = pod.podNamespace;
        spec.name = pod.name + "-" + ref.name;
        origin = "ResourceClaimTemplate " + ref.templateName;
      } else {
        const auto c = dra_.objects.claims.find(pod.podNamespace + "/" + ref.claimName);
        if (c == dra_.objects.claims.end())
          return makeError(at + ": no ResourceClaim " + pod.podNamespace + "/" + ref.claimName + " in the input");
        spec = c->second;
      }
      auto index = record(spec, origin);
      if (!index.ok()) return std::move(index).error();
      result_.claims[*index].pods.push_back(pod.key());
      if (std::find(out.begin(), out.end(), *index) == out.end()) out.push_back(*index);
    }
    return out;
  }

  /// Per node: the shares that would allocate the claims not yet allocated, or why not.
  std::vector<Result<std::vector<DraShare>>> fitsPerNode(const std::vector<std::size_t>& claims) const {
    std::vector<Result<std::vector<DraShare>>> out;
    const auto fixed = fixedNodes(claims);
    std::vector<const ClaimSpec*> pending;
    for (std::size_t c : unallocated(claims)) pending.push_back(&specs_.at(c));
    for (std::size_t i = 0; i < result_.draNodes.size(); ++i) {
      if (fixed.size() > 1) {
        out.push_back(makeError("its claims are allocated on different nodes (" + nodeName(*fixed.begin()) + ", " +
                                nodeName(*fixed.rbegin()) + ")"));
      } else if (fixed.size() == 1 && *fixed.begin() != i) {
        out.push_back(makeError("its claim " + result_.claims[fixedClaim(claims)].claim + " is allocated on node " +
                                nodeName(*fixed.begin())));
      } else if (pending.empty()) {
        out.push_back(std::vector<DraShare>{});
      } else {
        out.push_back(result_.draNodes[i].allocate(pending, classes_));
      }
    }
    return out;
  }

  /// kube-scheduler's words for a node where the claims do not go.
  std::string categoryOf(const std::vector<std::size_t>& claims, std::size_t node) const {
    const auto fixed = fixedNodes(claims);
    return !fixed.empty() && !fixed.contains(node) ? "resourceclaim not available on the node"
                                                   : "cannot allocate all claims";
  }

  /// Allocates the claims not yet allocated on `node` with `shares` (from fitsPerNode).
  void commit(const std::vector<std::size_t>& claims, std::size_t node, const std::vector<DraShare>& shares) {
    const auto pending = unallocated(claims);
    result_.draNodes[node].commit(shares);
    for (std::size_t c : pending) {
      result_.claims[c].kind = ClaimOutcome::Kind::kAllocated;
      result_.claims[c].node = node;
      result_.claims[c].error.clear();
    }
    for (const DraShare& s : shares) result_.claims[pending[s.claim]].shares.push_back(s);
  }

  /// A pod that asks for nothing but claims: the first node in the cluster's order where they go.
  void placeClaimsOnly(const std::vector<std::size_t>& claims, PodOutcome& outcome) {
    const auto fits = fitsPerNode(claims);
    for (std::size_t i = 0; i < fits.size(); ++i) {
      if (!fits[i].ok()) continue;
      commit(claims, i, *fits[i]);
      outcome.kind = PodOutcome::Kind::kPlaced;
      outcome.assignment.node = result_.draNodes[i].name();
      return;
    }
    outcome.kind = PodOutcome::Kind::kPending;
    std::map<std::string, int> categories;
    for (std::size_t i = 0; i < fits.size(); ++i) {
      outcome.reasons[result_.draNodes[i].name()] = fits[i].error().message;
      ++categories[categoryOf(claims, i)];
    }
    outcome.kubeScheduler = kubeSchedulerMessage(categories, fits.size());
    leavePending(claims, outcome.pod);
  }

  void leavePending(const std::vector<std::size_t>& claims, const std::string& pod) {
    for (std::size_t c : unallocated(claims)) result_.claims[c].error = "its pod " + pod + " is pending";
  }

  /// Claims of the input that no pod uses, each placed as for a first pod using it.
  void placeUnusedClaims() {
    for (const auto& key : dra_.objects.claimOrder) {
      if (index_.contains(key)) continue;
      auto index = record(dra_.objects.claims.at(key), "ResourceClaim");
      if (!index.ok()) continue;  // recorded as invalid
      const auto fits = fitsPerNode({*index});
      ClaimOutcome& outcome = result_.claims[*index];
      bool placed = false;
      for (std::size_t i = 0; i < fits.size() && !placed; ++i)
        if (fits[i].ok()) {
          commit({*index}, i, *fits[i]);
          placed = true;
        }
      if (placed) continue;
      for (std::size_t i = 0; i < fits.size(); ++i) outcome.reasons[result_.draNodes[i].name()] = fits[i].error().message;
      outcome.error = "no node fits";
    }
  }

 private:
  /// The claim's outcome index, recorded on first sight; errors (also recorded): a request
  /// naming a DeviceClass that does not exist.
  Result<std::size_t> record(const ClaimSpec& spec, const std::string& origin) {
    if (auto it = index_.find(spec.key()); it != index_.end()) {
      const ClaimOutcome& known = result_.claims[it->second];
      if (known.kind == ClaimOutcome::Kind::kInvalid) return makeError(known.error);
      return it->second;
    }
    const std::size_t index = result_.claims.size();
    index_[spec.key()] = index;
    ClaimOutcome outcome;
    outcome.claim = spec.key();
    outcome.origin = origin;
    for (const auto& r : spec.requests) {
      if (classes_.contains(r.deviceClassName)) continue;
      std::string known;
      for (const auto& [name, cls] : classes_) known += (known.empty() ? "" : ", ") + name;
      outcome.kind = ClaimOutcome::Kind::kInvalid;
      outcome.error = "ResourceClaim " + spec.key() + " request " + r.name + ": DeviceClass \"" + r.deviceClassName +
                      "\" does not exist (known: " + known + "; add a DeviceClass document to the input)";
      break;
    }
    result_.claims.push_back(outcome);
    specs_[index] = spec;
    if (outcome.kind == ClaimOutcome::Kind::kInvalid) return makeError(outcome.error);
    return index;
  }

  std::vector<std::size_t> unallocated(const std::vector<std::size_t>& claims) const {
    std::vector<std::size_t> out;
    for (std::size_t c : claims)
      if (result_.claims[c].kind != ClaimOutcome::Kind::kAllocated) out.push_back(c);
    return out;
  }
  std::set<std::size_t> fixedNodes(const std::vector<std::size_t>& claims) const {
    std::set<std::size_t> out;
    for (std::size_t c : claims)
      if (result_.claims[c].kind == ClaimOutcome::Kind::kAllocated) out.insert(result_.claims[c].node);
    return out;
  }
  std::size_t fixedClaim(const std::vector<std::size_t>& claims) const {
    for (std::size_t c : claims)
      if (result_.claims[c].kind == ClaimOutcome::Kind::kAllocated) return c;
    return claims.front();
  }
  const std::string& nodeName(std::size_t node) const { return result_.draNodes[node].name(); }

  const DraPodInputs& dra_;
  SimulationResult& result_;
  std::map<std::string, DeviceClass> classes_;
  std::map<std::string, std::size_t> index_;  ///< claim key -> result.claims
  std::map<std::size_t, ClaimSpec> specs_;
};

/// One device's capacity as "used/total" in the capacity's units.
std::string usedOf(const DraNode& node, std::size_t d, const std::string& capacity) {
  const DraPoolDevice& dev = node.devices()[d];
  const auto cap = dev.capacity.find(capacity);
  if (cap == dev.capacity.end()) return "-";
  const auto used = node.used()[d].find(capacity);
  return formatAmount(used == node.used()[d].end() ? 0 : used->second, cap->second) + "/" +
         formatAmount(cap->second.value, cap->second);
}

std::string consumedOf(const DraNode& node, const DraShare& share, const std::string& capacity) {
  if (share.consumed.empty()) return "whole";
  const auto it = share.consumed.find(capacity);
  if (it == share.consumed.end()) return "-";
  return formatAmount(it->second, node.devices()[share.device].capacity.at(capacity));
}

/// The claims kube-scheduler's allocator placed and the use of every device published through DRA.
std::string renderClaims(const SimulationResult& r) {
  std::string out;
  const bool anyDra = std::any_of(r.draNodes.begin(), r.draNodes.end(), [](const DraNode& n) { return !n.devices().empty(); });
  if (r.claims.empty() && !anyDra) return out;
  out += "\nResourceClaims (kube-scheduler's allocator: first fit in ResourceSlice order; consumed after each "
         "device's request policy)\n";
  Table claims({"CLAIM", "POD", "NODE", "REQUEST", "DEVICE", "MEMORY", "CORES", "SHARES"});
  for (const auto& c : r.claims) {
    if (c.kind != ClaimOutcome::Kind::kAllocated) continue;
    const DraNode& node = r.draNodes[c.node];
    std::string pods;  // those placed: a pending pod of the claim does not hold it
    for (const auto& p : r.pods)
      if (p.kind == PodOutcome::Kind::kPlaced && std::find(p.claims.begin(), p.claims.end(), c.claim) != p.claims.end())
        pods += (pods.empty() ? "" : ",") + p.pod;
    bool first = true;
    for (const DraShare& s : c.shares) {
      const DraPoolDevice& d = node.devices()[s.device];
      claims.add({first ? c.claim : "", first ? (pods.empty() ? "(none)" : pods) : "", first ? node.name() : "", s.request,
                  d.name + " (" + d.driver + ")", consumedOf(node, s, "memory"), consumedOf(node, s, "cores"),
                  consumedOf(node, s, "shares")});
      first = false;
    }
  }
  out += claims.render();
  out += "\nDRA device use (sum of the shares' consumed capacity / the device's capacity)\n";
  Table devices({"NODE", "DEVICE", "MODEL", "MEMORY", "CORES", "SHARES", "CLAIMS"});
  for (const auto& node : r.draNodes) {
    for (std::size_t d = 0; d < node.devices().size(); ++d) {
      const DraPoolDevice& dev = node.devices()[d];
      devices.add({d == 0 ? node.name() : "", dev.name + " (" + dev.driver + ")", dev.model, usedOf(node, d, "memory"),
                   usedOf(node, d, "cores"), usedOf(node, d, "shares"), std::to_string(node.allocations()[d])});
    }
  }
  return out + devices.render();
}

json::array claimsJson(const SimulationResult& r) {
  json::array out;
  for (const auto& c : r.claims) {
    json::object o{{"claim", c.claim}, {"origin", c.origin}};
    json::array pods;
    for (const auto& p : c.pods) pods.push_back(json::string(p));
    o["pods"] = std::move(pods);
    switch (c.kind) {
      case ClaimOutcome::Kind::kAllocated: {
        const DraNode& node = r.draNodes[c.node];
        o["status"] = "allocated";
        o["node"] = node.name();
        json::array shares;
        for (const DraShare& s : c.shares) {
          const DraPoolDevice& d = node.devices()[s.device];
          json::object consumed;
          for (const auto& [name, amount] : s.consumed) consumed[name] = formatAmount(amount, d.capacity.at(name));
          shares.push_back(json::object{{"request", s.request}, {"driver", d.driver}, {"pool", d.pool},
                                        {"device", d.name}, {"consumed", std::move(consumed)}});
        }
        o["devices"] = std::move(shares);
        break;
      }
      case ClaimOutcome::Kind::kPending: {
        o["status"] = "pending";
        if (!c.error.empty()) o["error"] = c.error;
        json::object reasons;
        for (const auto& [node, why] : c.reasons) reasons[node] = why;
        if (!reasons.empty()) o["reasons"] = std::move(reasons);
        break;
      }
      case ClaimOutcome::Kind::kInvalid:
        o["status"] = "invalid";
        o["error"] = c.error;
        break;
    }
    out.push_back(std::move(o));
  }
  return out;
}

json::array draDevicesJson(const SimulationResult& r) {
  json::array out;
  for (const auto& node : r.draNodes) {
    for (std::size_t d = 0; d < node.devices().size(); ++d) {
      const DraPoolDevice& dev = node.devices()[d];
      json::object capacity;
      for (const auto& [name, cap] : dev.capacity) {
        const auto used = node.used()[d].find(name);
        capacity[name] = json::object{{"value", cap.value}, {"used", used == node.used()[d].end() ? 0 : used->second}};
      }
      out.push_back(json::object{{"node", node.name()}, {"driver", dev.driver}, {"pool", dev.pool}, {"device", dev.name},
                                 {"model", dev.model}, {"allocations", node.allocations()[d]},
                                 {"capacity", std::move(capacity)}});
    }
  }
  return out;
}

}  // namespace

SimulationResult simulate(const std::vector<ClusterNode>& cluster, const std::vector<PodInfo>& pods,
                          const DeviceConfig& config, const BackendSet& backends, const DraPodInputs& dra) {
  SimulationResult result;
  result.assumptions = splitCountWarnings(cluster);
  result.policies = config.scheduler;
  for (const auto& node : cluster) {
    auto split = splitByFrontEnd(node, config, backends, dra.driverDomain);
    auto inventory = std::make_shared<const NodeInventory>(split.devicePlugin, backends, node.cordoned);
    NodeState state(node.name, std::move(inventory));
    state.unavailable = node.unavailable;
    result.nodes.push_back(std::move(state));
    result.draNodes.push_back(std::move(split.dra));
  }
  ClaimBook book(dra, backends, result);
  const PlacementEngine engine(config.scheduler);
  for (std::size_t p = 0; p < pods.size(); ++p) {
    const PodInfo& pod = pods[p];
    PodOutcome outcome;
    outcome.pod = pod.key();
    outcome.priority = pod.priority;
    auto claims = book.claimsOf(pod, p < dra.podClaims.size() ? dra.podClaims[p] : std::vector<PodClaimRef>{});
    auto request = buildPodRequest(backends, pod.podNamespace, pod.name, pod.containers, pod.annotations);
    if (!claims.ok()) {
      outcome.kind = PodOutcome::Kind::kInvalid;
      outcome.error = claims.error().message;
    } else if (!request.ok()) {
      outcome.kind = PodOutcome::Kind::kInvalid;
      outcome.error = request.error().message;
    } else if (request->empty() && claims->empty()) {
      outcome.kind = PodOutcome::Kind::kNotOurs;
    } else if (request->empty()) {
      for (std::size_t c : *claims) outcome.claims.push_back(result.claims[c].claim);
      book.placeClaimsOnly(*claims, outcome);
    } else if (auto prepared = PreparedPod::prepare(*request, backends); !prepared.ok()) {
      outcome.kind = PodOutcome::Kind::kInvalid;
      outcome.error = prepared.error().message;
    } else {
      for (std::size_t c : *claims) outcome.claims.push_back(result.claims[c].claim);
      // DRA first: nodes where the pod's claims cannot go are unavailable to the engine.
      const auto draFits = book.fitsPerNode(*claims);
      std::vector<NodeState> offered = result.nodes;
      for (std::size_t i = 0; i < offered.size(); ++i)
        if (!draFits[i].ok()) offered[i].unavailable = draFits[i].error().message;
      Placement placement = engine.place(*prepared, offered);
      if (placement.chosen) {
        outcome.kind = PodOutcome::Kind::kPlaced;
        outcome.assignment = std::move(placement.assignment);
        NodeState& node = result.nodes[*placement.chosen];
        (void)node.add(outcome.assignment);  // devices come from this node
        if (engine.devicePolicyFor(*prepared) == DevicePolicy::kTopology) outcome.links = describeLinks(node, outcome.assignment);
        book.commit(*claims, *placement.chosen, *draFits[*placement.chosen]);
      } else {
        outcome.kind = PodOutcome::Kind::kPending;
        std::map<std::string, int> categories;
        for (size_t i = 0; i < offered.size(); ++i) {
          if (!draFits[i].ok()) {
            outcome.reasons[offered[i].name] = draFits[i].error().message;
            ++categories[book.categoryOf(*claims, i)];
            continue;
          }
          outcome.reasons[offered[i].name] = engine.explain(*prepared, offered[i], placement.evaluations[i]);
          ++categories[engine.category(*prepared, placement.evaluations[i])];
        }
        outcome.kubeScheduler = kubeSchedulerMessage(categories, offered.size());
        book.leavePending(*claims, outcome.pod);
      }
    }
    result.pods.push_back(std::move(outcome));
  }
  book.placeUnusedClaims();
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
  if (!outcome->claims.empty())
    return makeError("--explain-preemption: " + key +
                     " uses ResourceClaims; vgpu-sim does not model preemption for claims (kube-scheduler's "
                     "DynamicResources plugin frees claims of pods it preempts)");
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
  out += renderClaims(r);

  const bool claimsLeft = std::any_of(r.claims.begin(), r.claims.end(), [](const ClaimOutcome& c) {
    return c.kind != ClaimOutcome::Kind::kAllocated && c.pods.empty();
  });
  if (pending + invalid > 0 || claimsLeft) {
    out += "\nNot placed\n";
    for (const auto& pod : r.pods) {
      if (pod.kind == PodOutcome::Kind::kInvalid) out += pod.pod + ": invalid request: " + pod.error + "\n";
      if (pod.kind != PodOutcome::Kind::kPending) continue;
      out += pod.pod + ": no node fits\n";
      out += "  kube-scheduler says: " + pod.kubeScheduler + "\n";
      for (const auto& [node, why] : pod.reasons) out += "  " + node + ": " + why + "\n";
    }
  }
  for (const auto& c : r.claims) {
    if (c.kind == ClaimOutcome::Kind::kAllocated || !c.pods.empty()) continue;
    if (c.kind == ClaimOutcome::Kind::kInvalid) {
      out += "claim " + c.claim + ": invalid: " + c.error + "\n";
      continue;
    }
    out += "claim " + c.claim + " (no pod uses it): no node fits\n";
    for (const auto& [node, why] : c.reasons) out += "  " + node + ": " + why + "\n";
  }
  out += "\n" + std::to_string(placed) + " placed, " + std::to_string(pending) + " pending, " + std::to_string(invalid) +
         " invalid, " + std::to_string(notOurs) + " without device requests";
  if (!r.claims.empty()) {
    const auto allocated = std::count_if(r.claims.begin(), r.claims.end(),
                                         [](const ClaimOutcome& c) { return c.kind == ClaimOutcome::Kind::kAllocated; });
    out += "; " + std::to_string(allocated) + " of " + std::to_string(r.claims.size()) + " ResourceClaims allocated";
  }
  out += "\n";
  if (!r.assumptions.empty()) {
    out += "\nAssumed\n";
    for (const auto& a : r.assumptions) out += a + "\n";
  }
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
    if (!pod.claims.empty()) {
      json::array claims;
      for (const auto& c : pod.claims) claims.push_back(json::string(c));
      o["claims"] = std::move(claims);
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
  json::object doc{{"pods", std::move(pods)}, {"devices", std::move(devices)}};
  if (!r.assumptions.empty()) {
    json::array assumed;
    for (const auto& a : r.assumptions) assumed.emplace_back(a);
    doc["assumptions"] = std::move(assumed);
  }
  if (!r.claims.empty() || std::any_of(r.draNodes.begin(), r.draNodes.end(), [](const DraNode& n) {
        return !n.devices().empty();
      })) {
    doc["claims"] = claimsJson(r);
    doc["draDevices"] = draDevicesJson(r);
  }
  return json::serialize(doc) + "\n";
}

}  // namespace vgpu::simulator
