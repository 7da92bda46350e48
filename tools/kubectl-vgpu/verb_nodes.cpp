// `kubectl vgpu nodes`: per node and device, what the inventory publishes and what the pods'
// assignments take, counted by the scheduler's cache (foreign memory and foreign pods included).
#include <map>
#include <set>

#include <boost/json.hpp>

#include "live_state.h"
#include "output.h"
#include "verbs.h"
#include "vgpu/device.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {

struct DeviceRow {
  std::string node, status, id, backend, model, health;
  int index = 0;
  std::uint64_t memoryUsed = 0, memoryTotal = 0;
  std::uint32_t computeUsed = 0, computeUnits = 100, sharesUsed = 0, splitCount = 1;
  std::set<std::string> pods;
};

/// "Ready", or why the scheduler offers the node nothing (its category without "vgpu: ").
std::string nodeStatus(const scheduler::NodeEntry& node, const LiveState& state) {
  std::string category(scheduler::nodeUnusableCategory(node, std::chrono::system_clock::now(),
                                                        state.config.scheduler.heartbeatTimeout));
  if (category.empty()) return "Ready";
  if (category.rfind("vgpu: ", 0) == 0) category.erase(0, 6);
  return category;
}

}  // namespace

int runNodes(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err) {
  if (!inv.args.empty()) {
    err << "error: nodes takes no arguments (got \"" << inv.args.front() << "\")\n";
    return 1;
  }
  auto state = loadLiveStateOrSay(inv, client, err);
  if (!state) return 1;
  const LiveState& live = *state;

  // The pods on each device (node, device id), from the assignments the cache counts.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> podsOn;
  live.cache->forEachHeldPod([&](const scheduler::ClusterCache::HeldPodView& pod) {
    for (const auto& c : pod.assignment.containers)
      for (const auto& g : c.devices) podsOn[{std::string(pod.node), g.deviceId}].insert(std::string(pod.key));
  });

  std::vector<DeviceRow> rows;
  live.cache->forEachNode([&](const scheduler::NodeEntry& node) {
    static const std::vector<NodeInventory::Entry> kNone;
    const auto& entries = node.state.inventory ? node.state.inventory->entries() : kNone;
    if (entries.empty()) {
      // A node with no inventory at all is simply not a vgpu node; a broken one is worth a word.
      if (node.unavailableCategory != "vgpu: no vgpu devices are published on the node")
        err << "warning: node \"" << node.state.name << "\": " << node.state.unavailable << "\n";
      return;
    }
    const std::string status = nodeStatus(node, live);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Device& d = entries[i].device();
      const DeviceUsage& u = node.state.usage[i];
      DeviceRow row;
      row.node = node.state.name;
      row.status = status;
      row.id = d.id;
      row.backend = d.backend;
      row.model = d.model;
      row.health = toString(d.health);
      row.index = d.index;
      row.memoryUsed = u.memoryMiB;
      row.memoryTotal = d.memoryMiB;
      row.computeUsed = u.compute;
      row.computeUnits = d.computeUnits;
      row.sharesUsed = u.shares;
      row.splitCount = d.splitCount;
      if (auto p = podsOn.find({node.state.name, d.id}); p != podsOn.end()) row.pods = p->second;
      rows.push_back(std::move(row));
    }
  });
  std::sort(rows.begin(), rows.end(),
            [](const DeviceRow& a, const DeviceRow& b) { return std::tie(a.node, a.backend, a.index) < std::tie(b.node, b.backend, b.index); });

  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml) {
    json::array items;
    for (const auto& r : rows) {
      json::array pods;
      for (const auto& p : r.pods) pods.emplace_back(p);
      items.push_back(json::object{{"node", r.node}, {"nodeStatus", r.status}, {"backend", r.backend},
                                   {"index", r.index}, {"id", r.id}, {"model", r.model}, {"health", r.health},
                                   {"memoryUsedMiB", r.memoryUsed}, {"memoryMiB", r.memoryTotal},
                                   {"computeUsed", r.computeUsed}, {"computeUnits", r.computeUnits},
                                   {"sharesUsed", r.sharesUsed}, {"splitCount", r.splitCount}, {"pods", pods}});
    }
    printStructured(out, json::object{{"kind", "DeviceList"}, {"items", items}}, inv.output);
    return 0;
  }
  if (rows.empty()) {
    err << "No vgpu devices found.\n";  // kubectl's "No resources found." habit
    return 0;
  }
  const bool wide = inv.output == OutputFormat::kWide;
  Row header{"NODE", "STATUS", "DEVICE", "MODEL", "HEALTH", "MEMORY", "COMPUTE", "SHARES"};
  if (wide) header.insert(header.end(), {"ID", "PODS"});
  std::vector<Row> table;
  for (const auto& r : rows) {
    Row row{r.node, r.status, r.backend + "/" + std::to_string(r.index), r.model, r.health,
            formatMemory(r.memoryUsed, r.memoryTotal), std::to_string(r.computeUsed) + "%",
            std::to_string(r.sharesUsed) + "/" + std::to_string(r.splitCount)};
    if (wide) {
      std::string pods;
      for (const auto& p : r.pods) pods += (pods.empty() ? "" : ",") + p;
      row.insert(row.end(), {r.id, pods.empty() ? "<none>" : pods});
    }
    table.push_back(std::move(row));
  }
  printTable(out, header, table);
  return 0;
}

}  // namespace vgpu::kubectl
