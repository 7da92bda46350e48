#include "cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <stdexcept>

namespace vgpu::simulator {
namespace {

class Context {
 public:
  explicit Context(std::string file) : file_(std::move(file)) {}
  Error error(const YAML::Node& node, const std::string& path, const std::string& what) const {
    std::string message = file_;
    if (!node.Mark().is_null()) message.append(":").append(std::to_string(node.Mark().line + 1));
    message.append(": ").append(path).append(": ").append(what);
    return makeError(std::move(message));
  }

 private:
  std::string file_;
};

template <class T>
Result<T> number(const Context& ctx, const YAML::Node& node, const std::string& path) {
  try {
    if (!node.IsScalar()) return ctx.error(node, path, "expected a number");
    const T value = node.as<T>();
    if constexpr (std::is_signed_v<T>) {
      if (value < 0) return ctx.error(node, path, "must not be negative");
    }
    return value;
  } catch (const YAML::Exception&) {
    return ctx.error(node, path, "expected a whole number, got \"" + node.Scalar() + "\"");
  }
}

Result<std::string> text(const Context& ctx, const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar() || node.Scalar().empty()) return ctx.error(node, path, "expected a non-empty string");
  return node.Scalar();
}

/// One pair's link in a matrix: "<class>" or "<class> x<lanes>" ("direct x4"); "none" for
/// no link published.
Result<DeviceLink> parseMatrixLink(const Context& ctx, const YAML::Node& cell, const std::string& at) {
  if (!cell.IsScalar()) return ctx.error(cell, at, "expected a link such as \"direct x4\", \"pcie-switch\" or \"none\"");
  const std::string word = cell.Scalar();
  if (word == "none") return DeviceLink{};
  std::string name = word;
  std::uint32_t lanes = 0;
  if (const auto space = word.find(" x"); space != std::string::npos) {
    name = word.substr(0, space);
    const std::string count = word.substr(space + 2);
    try {
      std::size_t used = 0;
      const unsigned long n = std::stoul(count, &used);
      if (used != count.size() || n == 0 || n > 1024) throw std::invalid_argument(count);
      lanes = static_cast<std::uint32_t>(n);
    } catch (const std::exception&) {
      return ctx.error(cell, at, "\"" + word + "\": the lanes after \" x\" must be a whole number from 1 to 1024");
    }
  }
  const auto c = parseLinkClass(name);
  if (!c || *c == LinkClass::kUnknown)
    return ctx.error(cell, at,
                     "\"" + word + "\" is not a link (expected none, cross-numa, same-numa, pcie-host-bridge, "
                     "pcie-switches, pcie-switch, same-board, direct or switch-fabric, optionally with \" x<lanes>\")");
  return DeviceLink{"", *c, lanes, standardLinkRank(*c, lanes)};
}

/// `links.matrix`: `count` rows of `count` links (the diagonal "-"), equal across the
/// diagonal, as `nvidia-smi topo -m` prints a node: any topology, e.g. a star or mixed
/// NVLink counts. Result[i][p] is the link from position i to p (kUnknown: none).
Result<std::vector<std::vector<DeviceLink>>> parseLinkMatrix(const Context& ctx, const YAML::Node& m,
                                                             const std::string& at, std::uint32_t count) {
  if (!m.IsSequence() || m.size() != count)
    return ctx.error(m, at, "expected a list of " + std::to_string(count) + " rows, one per device (count)");
  std::vector<std::vector<DeviceLink>> out(count, std::vector<DeviceLink>(count));
  for (std::uint32_t i = 0; i < count; ++i) {
    const YAML::Node row = m[i];
    const std::string rowAt = at + "[" + std::to_string(i) + "]";
    if (!row.IsSequence() || row.size() != count)
      return ctx.error(row, rowAt, "expected a row of " + std::to_string(count) + " links, one per device");
    for (std::uint32_t p = 0; p < count; ++p) {
      const std::string cellAt = rowAt + "[" + std::to_string(p) + "]";
      if (p == i) {
        if (!row[p].IsScalar() || row[p].Scalar() != "-")
          return ctx.error(row[p], cellAt, "a device's link to itself is written \"-\"");
        continue;
      }
      auto l = parseMatrixLink(ctx, row[p], cellAt);
      if (!l.ok()) return std::move(l).error();
      out[i][p] = *l;
      if (p < i && (out[p][i].linkClass != l->linkClass || out[p][i].lanes != l->lanes))
        return ctx.error(row[p], cellAt,
                         "\"" + row[p].Scalar() + "\" differs from " + at + "[" + std::to_string(p) + "][" +
                             std::to_string(i) + "] (\"" + m[p][i].Scalar() + "\"): a link is the same both ways");
    }
  }
  return out;
}

Status parseDeviceGroup(const Context& ctx, const YAML::Node& group, const std::string& path, const std::string& node,
                        const DeviceConfig& config, const SplitCountSource& backendSays,
                        std::map<std::string, int>& nextIndex, ClusterNode& cn) {
  std::vector<Device>& out = cn.devices;
  if (!group.IsMap()) return ctx.error(group, path, "expected a map");
  std::string backend, model, idPrefix;
  std::uint64_t memory = 0;
  std::uint32_t count = 1, numaNodes = 1, computeUnits = 100;
  std::optional<std::uint32_t> splitCount;
  std::set<std::uint32_t> unhealthy;
  std::map<std::string, std::string> attributes;
  struct Links {
    std::uint32_t groupsOf = 0;
    LinkClass within = LinkClass::kUnknown, across = LinkClass::kUnknown;
    std::uint32_t lanes = 0;
    const YAML::Node* matrix = nullptr;  // exact links, pair by pair; read once count is known
    std::string matrixAt;
  } links;
  YAML::Node matrixNode;
  for (const auto& kv : group) {
    const std::string key = kv.first.Scalar();
    const std::string at = path + "." + key;
    if (key == "backend" || key == "model" || key == "idPrefix") {
      auto v = text(ctx, kv.second, at);
      if (!v.ok()) return v.error();
      (key == "backend" ? backend : key == "model" ? model : idPrefix) = *v;
    } else if (key == "memoryMiB") {
      auto v = number<std::uint64_t>(ctx, kv.second, at);
      if (!v.ok()) return v.error();
      memory = *v;
    } else if (key == "count" || key == "numaNodes" || key == "computeUnits" || key == "splitCount") {
      auto v = number<std::uint32_t>(ctx, kv.second, at);
      if (!v.ok()) return v.error();
      if (*v == 0) return ctx.error(kv.second, at, "must be at least 1");
      if (key == "count") count = *v;
      else if (key == "numaNodes") numaNodes = *v;
      else if (key == "computeUnits") computeUnits = *v;
      else splitCount = *v;
    } else if (key == "attributes") {
      if (!kv.second.IsMap()) return ctx.error(kv.second, at, "expected a map of strings");
      for (const auto& a : kv.second) {
        if (!a.second.IsScalar()) return ctx.error(a.second, at + "." + a.first.Scalar(), "expected a string");
        attributes[a.first.Scalar()] = a.second.Scalar();
      }
    } else if (key == "links") {
      // Islands of `groupsOf` devices (by position) linked `within`, islands linked `across`;
      // or `matrix`, every pair's link, for topologies islands cannot describe.
      if (!kv.second.IsMap())
        return ctx.error(kv.second, at, "expected a map (groupsOf, within, lanes, across; or matrix)");
      for (const auto& l : kv.second) {
        const std::string lkey = l.first.Scalar();
        const std::string lat = at + "." + lkey;
        if (lkey == "matrix") {
          matrixNode = l.second;
          links.matrix = &matrixNode;
          links.matrixAt = lat;
        } else if (lkey == "groupsOf" || lkey == "lanes") {
          auto v = number<std::uint32_t>(ctx, l.second, lat);
          if (!v.ok()) return v.error();
          (lkey == "lanes" ? links.lanes : links.groupsOf) = *v;
        } else if (lkey == "within" || lkey == "across") {
          auto v = text(ctx, l.second, lat);
          if (!v.ok()) return v.error();
          auto c = parseLinkClass(*v);
          if (!c || *c == LinkClass::kUnknown)
            return ctx.error(l.second, lat,
                             "expected cross-numa, same-numa, pcie-host-bridge, pcie-switches, pcie-switch, "
                             "same-board, direct or switch-fabric");
          (lkey == "within" ? links.within : links.across) = *c;
        } else {
          return ctx.error(l.first, lat, "unknown key (expected groupsOf, within, lanes, across, matrix)");
        }
      }
      if (links.matrix != nullptr && links.groupsOf != 0)
        return ctx.error(kv.second, at, "give either matrix or groupsOf/within/across, not both");
      if (links.matrix == nullptr && (links.groupsOf == 0 || links.within == LinkClass::kUnknown))
        return ctx.error(kv.second, at, "needs groupsOf (at least 1) and within, or matrix");
    } else if (key == "unhealthy") {
      if (!kv.second.IsSequence()) return ctx.error(kv.second, at, "expected a list of device positions");
      for (size_t i = 0; i < kv.second.size(); ++i) {
        auto v = number<std::uint32_t>(ctx, kv.second[i], at + "[" + std::to_string(i) + "]");
        if (!v.ok()) return v.error();
        unhealthy.insert(*v);
      }
    } else {
      return ctx.error(kv.first, at,
                       "unknown key (expected backend, model, memoryMiB, count, numaNodes, computeUnits, "
                       "splitCount, idPrefix, unhealthy, attributes, links)");
    }
  }
  if (backend.empty()) return ctx.error(group, path + ".backend", "is required");
  if (memory == 0) return ctx.error(group, path + ".memoryMiB", "is required and must be > 0");
  if (!config.backend(backend))
    return ctx.error(group, path + ".backend", "\"" + backend + "\" has no section in the device config");
  if (count > 1024) return ctx.error(group, path + ".count", "more than 1024 devices on one node");
  std::vector<std::vector<DeviceLink>> exact;
  if (links.matrix != nullptr) {
    auto m = parseLinkMatrix(ctx, *links.matrix, links.matrixAt, count);
    if (!m.ok()) return std::move(m).error();
    exact = std::move(m).value();
  }
  const BackendSettings settings = config.settingsFor(backend, node);
  if (idPrefix.empty()) idPrefix = node + "-" + backend;
  // A per-node splitCount is one the backend (created with the shared settings) cannot know of.
  const bool nodeOverrides = settings.splitCount != config.settingsFor(backend, "").splitCount;
  if (!splitCount && !nodeOverrides && backendSays) splitCount = backendSays(backend, model);
  if (!splitCount) splitCount = settings.splitCount;
  if (!splitCount) cn.assumedSplitCount.emplace_back(path, backend);
  for (std::uint32_t i = 0; i < count; ++i) {
    Device d;
    int& index = nextIndex[backend];
    d.id = idPrefix + "-" + std::to_string(i);
    d.index = index++;
    d.backend = backend;
    d.model = model.empty() ? backend + " device" : model;
    d.memoryMiB = static_cast<std::uint64_t>(std::floor(static_cast<double>(memory) * settings.memoryScaling.value_or(1.0)));
    d.computeUnits = static_cast<std::uint32_t>(std::lround(computeUnits * settings.coreScaling.value_or(1.0)));
    d.splitCount = splitCount.value_or(kAssumedSplitCount);
    d.numaNode = static_cast<int>(i * numaNodes / count);
    d.health = unhealthy.contains(i) ? Health::kUnhealthy : Health::kHealthy;
    d.attributes = attributes;
    for (std::uint32_t p = 0; p < count && !exact.empty(); ++p) {
      DeviceLink l = exact[i][p];
      if (p == i || l.linkClass == LinkClass::kUnknown) continue;
      l.peer = idPrefix + "-" + std::to_string(p);
      d.links.push_back(std::move(l));
    }
    for (std::uint32_t p = 0; p < count && links.groupsOf != 0; ++p) {
      if (p == i) continue;
      const bool together = p / links.groupsOf == i / links.groupsOf;
      const LinkClass c = together ? links.within : links.across;
      if (c == LinkClass::kUnknown) continue;
      const std::uint32_t lanes = together ? links.lanes : 0;
      d.links.push_back({idPrefix + "-" + std::to_string(p), c, lanes, standardLinkRank(c, lanes)});
    }
    out.push_back(std::move(d));
  }
  for (auto pos : unhealthy)
    if (pos >= count) return ctx.error(group, path + ".unhealthy", "position " + std::to_string(pos) + " is beyond count");
  return {};
}

}  // namespace

Result<std::vector<ClusterNode>> parseClusterFile(const std::string& yamlText, const std::string& fileName,
                                                  const DeviceConfig& config, const SplitCountSource& backendSays) {
  const Context ctx(fileName);
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    return makeError(fileName + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap() || !root["nodes"] || !root["nodes"].IsSequence())
    return ctx.error(root, "nodes", "expected a top-level `nodes:` list");
  for (const auto& kv : root)
    if (kv.first.Scalar() != "nodes") return ctx.error(kv.first, kv.first.Scalar(), "unknown key (expected nodes)");
  std::vector<ClusterNode> out;
  std::set<std::string> names;
  const YAML::Node nodes = root["nodes"];
  for (size_t n = 0; n < nodes.size(); ++n) {
    const YAML::Node node = nodes[n];
    const std::string path = "nodes[" + std::to_string(n) + "]";
    if (!node.IsMap()) return ctx.error(node, path, "expected a map");
    ClusterNode cn;
    if (!node["name"]) return ctx.error(node, path + ".name", "is required");
    auto name = text(ctx, node["name"], path + ".name");
    if (!name.ok()) return std::move(name).error();
    cn.name = *name;
    if (!names.insert(cn.name).second) return ctx.error(node, path + ".name", "duplicate node \"" + cn.name + "\"");
    std::map<std::string, int> nextIndex;
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      const std::string at = path + "." + key;
      if (key == "name") continue;
      if (key == "devices") {
        if (!kv.second.IsSequence()) return ctx.error(kv.second, at, "expected a list");
        for (size_t i = 0; i < kv.second.size(); ++i) {
          if (auto s = parseDeviceGroup(ctx, kv.second[i], at + "[" + std::to_string(i) + "]", cn.name, config,
                                        backendSays, nextIndex, cn);
              !s.ok())
            return s.error();
        }
      } else if (key == "cordoned") {
        if (!kv.second.IsSequence()) return ctx.error(kv.second, at, "expected a list of device ids");
        for (const auto& id : kv.second) cn.cordoned.insert(id.Scalar());
      } else if (key == "frontEnd") {
        auto v = text(ctx, kv.second, at);
        if (!v.ok()) return std::move(v).error();
        cn.frontEnd = parseFrontEnd(*v);
        if (!cn.frontEnd) return ctx.error(kv.second, at, "expected devicePlugin or dra, got \"" + *v + "\"");
      } else if (key == "unavailable") {
        auto v = text(ctx, kv.second, at);
        if (!v.ok()) return std::move(v).error();
        cn.unavailable = *v;
      } else {
        return ctx.error(kv.first, at, "unknown key (expected name, devices, cordoned, unavailable, frontEnd)");
      }
    }
    std::set<std::string> ids;
    for (const auto& d : cn.devices)
      if (!ids.insert(d.id).second) return ctx.error(node, path, "duplicate device id " + d.id);
    out.push_back(std::move(cn));
  }
  return out;
}

std::vector<std::string> splitCountWarnings(const std::vector<ClusterNode>& cluster) {
  std::map<std::string, std::vector<std::string>> where;  // backend -> key paths
  for (const auto& node : cluster)
    for (const auto& [path, backend] : node.assumedSplitCount) where[backend].push_back(path);
  std::vector<std::string> out;
  for (const auto& [backend, paths] : where) {
    std::string at = paths.front();
    if (paths.size() > 1) at += " and " + std::to_string(paths.size() - 1) + " more device group(s)";
    out.push_back("backend \"" + backend + "\": splitCount assumed " + std::to_string(kAssumedSplitCount) + " at " +
                  at + ": neither the cluster file, device-config.yaml nor the backend gives one, and a node publishes " +
                  "what the backend's discovery says of the device (per model or mode); set splitCount in the " +
                  "device group or in device-config.yaml's backends." + backend + " section");
  }
  return out;
}

}  // namespace vgpu::simulator
