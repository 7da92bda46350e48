// `kubectl vgpu top`: live usage per device and per container from each vgpu node agent's
// /metrics, read through the apiserver's node proxy as `kubectl top` reads the kubelet;
// containers above their slice are marked.
#include <cmath>
#include <map>

#include <boost/json.hpp>

#include "live_state.h"
#include "metrics_text.h"
#include "output.h"
#include "verbs.h"
#include "vgpu/k8s/object.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string mib(double bytes) { return std::to_string(static_cast<std::uint64_t>(std::llround(bytes / kMiB))); }

/// Whether the node publishes a vgpu inventory (an agent runs there).
bool vgpuNode(const json::object& node) {
  if (const auto* a = k8s::annotations(node))
    for (const auto& kv : *a)
      if (kv.key().starts_with("vgpu.io/devices-")) return true;
  return false;
}

struct ContainerUse {
  std::string node, ns, pod, container, device;
  double memoryUsed = 0, memoryLimit = 0, computeLimit = 0;
  double utilization = -1;  ///< -1: not published (NVIDIA: the busy-seconds counter needs two scrapes)
};

struct DeviceUse {
  std::string node, id, index, model;
  double memory = 0, used = 0;
  int containers = 0;
};

}  // namespace

int runTop(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err) {
  if (!inv.args.empty()) {
    err << "error: top takes no arguments (got \"" << inv.args.front() << "\")\n";
    return 1;
  }
  auto nodes = client.list(k8s::kNodes, {});
  if (!nodes.ok()) {
    err << describeApiError(nodes.error()) << "\n";
    return 1;
  }
  std::sort(nodes->items.begin(), nodes->items.end(),
            [](const json::object& a, const json::object& b) { return k8s::name(a) < k8s::name(b); });
  const std::string ns = inv.allNamespaces ? "" : namespaceFor(inv, client);
  std::vector<DeviceUse> devices;
  std::vector<ContainerUse> containers;
  for (const auto& node : nodes->items) {
    if (!vgpuNode(node)) continue;
    const std::string name(k8s::name(node));
    auto text = client.getText("/api/v1/nodes/" + name + ":" + std::to_string(inv.metricsPort) + "/proxy/metrics");
    if (!text.ok()) {
      err << "warning: node \"" << name << "\": the agent's metrics cannot be read: " << describeApiError(text.error()) << "\n";
      continue;
    }
    auto samples = parseExposition(*text);
    if (!samples.ok()) {
      err << "warning: node \"" << name << "\": the agent's metrics do not parse: " << samples.error().message << "\n";
      continue;
    }
    std::map<std::string, DeviceUse> byId;
    std::map<std::string, ContainerUse> byContainer;  // namespace/pod/container/device
    for (const auto& s : *samples) {
      auto label = [&](const char* key) {
        auto it = s.labels.find(key);
        return it == s.labels.end() ? std::string() : it->second;
      };
      if (s.name == "vgpu_device_memory_bytes") {
        DeviceUse& d = byId[label("device_id")];
        d.node = name;
        d.id = label("device_id");
        d.index = label("backend") + "/" + label("device_index");
        d.model = label("model");
        d.memory = s.value;
        continue;
      }
      if (!s.name.starts_with("vgpu_container_")) continue;
      const std::string key = label("namespace") + "/" + label("pod") + "/" + label("container") + "/" + label("device_uuid");
      if (label("device_uuid").empty()) continue;  // per-container series without a device
      ContainerUse& c = byContainer[key];
      c.node = name;
      c.ns = label("namespace");
      c.pod = label("pod");
      c.container = label("container");
      c.device = label("device_uuid");
      if (s.name == "vgpu_container_memory_used_bytes") c.memoryUsed = s.value;
      else if (s.name == "vgpu_container_memory_limit_bytes") c.memoryLimit = s.value;
      else if (s.name == "vgpu_container_compute_limit_percent") c.computeLimit = s.value;
      else if (s.name == "vgpu_container_compute_utilization_percent") c.utilization = s.value;
    }
    for (auto& [key, c] : byContainer) {
      if (auto d = byId.find(c.device); d != byId.end()) {
        d->second.used += c.memoryUsed;
        ++d->second.containers;
      }
      if (ns.empty() || c.ns == ns) containers.push_back(c);
    }
    for (auto& [id, d] : byId) devices.push_back(d);
  }

  auto over = [](const ContainerUse& c) {
    std::string what;
    if (c.memoryLimit > 0 && c.memoryUsed > c.memoryLimit) what = "memory";
    if (c.computeLimit > 0 && c.utilization > c.computeLimit) what += what.empty() ? "compute" : ",compute";
    return what;
  };
  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml) {
    json::array ds, cs;
    for (const auto& d : devices)
      ds.push_back(json::object{{"node", d.node}, {"device", d.id}, {"model", d.model}, {"memoryBytes", d.memory},
                                {"memoryUsedBytes", d.used}, {"containers", d.containers}});
    for (const auto& c : containers) {
      json::object o{{"node", c.node}, {"namespace", c.ns}, {"pod", c.pod}, {"container", c.container}, {"device", c.device},
                     {"memoryUsedBytes", c.memoryUsed}, {"memoryLimitBytes", c.memoryLimit},
                     {"computeLimitPercent", c.computeLimit}, {"over", over(c)}};
      if (c.utilization >= 0) o["computeUtilizationPercent"] = c.utilization;
      cs.push_back(std::move(o));
    }
    printStructured(out, json::object{{"kind", "Usage"}, {"devices", ds}, {"containers", cs}}, inv.output);
    return 0;
  }
  if (devices.empty()) {
    err << "No vgpu device metrics found.\n";
    return 0;
  }
  std::vector<Row> deviceRows;
  for (const auto& d : devices)
    deviceRows.push_back({d.node, d.index, d.id, d.model, mib(d.used) + "/" + mib(d.memory) + " MiB", std::to_string(d.containers)});
  printTable(out, {"NODE", "DEVICE", "ID", "MODEL", "MEMORY USED", "CONTAINERS"}, deviceRows);
  out << "\n";
  if (containers.empty()) {
    out << (ns.empty() ? std::string("No containers on vgpu devices.\n") : "No containers on vgpu devices in " + ns + " namespace.\n");
    return 0;
  }
  std::vector<Row> rows;
  for (const auto& c : containers) {
    Row row;
    if (inv.allNamespaces) row.push_back(c.ns);
    const std::string compute = (c.utilization >= 0 ? std::to_string(std::lround(c.utilization)) + "%" : std::string("-")) + "/" +
                                (c.computeLimit > 0 ? std::to_string(std::lround(c.computeLimit)) + "%" : std::string("-"));
    const std::string o = over(c);
    row.insert(row.end(), {c.pod, c.container, c.node, c.device, mib(c.memoryUsed) + "/" + mib(c.memoryLimit) + " MiB", compute,
                           o.empty() ? "" : "OVER (" + o + ")"});
    rows.push_back(std::move(row));
  }
  Row header;
  if (inv.allNamespaces) header.push_back("NAMESPACE");
  header.insert(header.end(), {"POD", "CONTAINER", "NODE", "DEVICE", "MEMORY", "COMPUTE", "SLICE"});
  printTable(out, header, rows);
  return 0;
}

}  // namespace vgpu::kubectl
