// `kubectl vgpu pods`: the pods holding slices (a vgpu.io/assignment), where, how much, and
// whether the node agent confirmed the handout (vgpu.io/bind-phase).
#include <set>

#include <boost/json.hpp>

#include "live_state.h"
#include "output.h"
#include "verbs.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/object.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {

/// "yes" once the agent answered the kubelet's Allocate; else what it is waiting for.
std::string confirmation(std::string_view phase) {
  if (phase == "success") return "yes";
  if (phase == "allocating") return "no (allocating)";
  if (phase == "failed") return "no (failed)";
  return phase.empty() ? "no (no bind-phase)" : "no (" + std::string(phase) + ")";
}

std::int64_t priorityOf(const json::object& pod) {
  const auto* v = k8s::findPath(pod, {"spec", "priority"});
  return v && v->is_int64() ? v->as_int64() : 0;
}

}  // namespace

int runPods(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err) {
  if (!inv.args.empty()) {
    err << "error: pods takes no arguments (got \"" << inv.args.front() << "\")\n";
    return 1;
  }
  k8s::ListOptions options;
  const std::string ns = inv.allNamespaces ? "" : namespaceFor(inv, client);
  options.ns = ns;
  auto list = client.list(k8s::kPods, options);
  if (!list.ok()) {
    err << describeApiError(list.error()) << "\n";
    return 1;
  }
  auto& pods = list->items;
  std::sort(pods.begin(), pods.end(), [](const json::object& a, const json::object& b) {
    return std::pair(k8s::namespaceOf(a), k8s::name(a)) < std::pair(k8s::namespaceOf(b), k8s::name(b));
  });

  const bool wide = inv.output == OutputFormat::kWide;
  std::vector<Row> table;
  json::array items;
  for (const auto& pod : pods) {
    auto text = k8s::annotation(pod, keys::kPodAssignment);
    if (!text) continue;
    const std::string phase(k8s::podPhase(pod));
    if (phase == "Succeeded" || phase == "Failed") continue;  // they no longer hold devices
    auto a = decodeAssignment(*text);
    if (!a.ok()) {
      err << "warning: pod " << k8s::objectKey(pod) << ": annotation " << keys::kPodAssignment
          << " cannot be read: " << a.error().message << "\n";
      continue;
    }
    const std::string bindPhase(k8s::annotation(pod, keys::kPodBindPhase).value_or(""));
    std::set<std::string> devices;
    std::uint64_t memory = 0;
    std::uint32_t compute = 0;
    std::string grants;
    json::array containers;
    for (const auto& c : a->containers) {
      if (c.devices.empty()) continue;
      json::array cg;
      std::string words;
      for (const auto& g : c.devices) {
        devices.insert(g.deviceId);
        memory += g.memoryMiB;
        compute += g.compute;
        const std::string id = g.slot >= 0 ? formatVirtualDeviceId(g.deviceId, g.slot) : g.deviceId;
        words += (words.empty() ? "" : " ") + id + " " + std::to_string(g.memoryMiB) + "MiB " + std::to_string(g.compute) + "%";
        cg.push_back(json::object{{"backend", g.backend}, {"device", g.deviceId}, {"slot", g.slot},
                                  {"memoryMiB", g.memoryMiB}, {"compute", g.compute}});
      }
      grants += (grants.empty() ? "" : "; ") + std::string(c.init ? "init " : "") + c.name + ": " + words;
      containers.push_back(json::object{{"name", c.name}, {"init", c.init}, {"devices", cg}});
    }
    std::string deviceList;
    for (const auto& d : devices) deviceList += (deviceList.empty() ? "" : ",") + d;
    const std::int64_t priority = priorityOf(pod);
    items.push_back(json::object{{"namespace", k8s::namespaceOf(pod)}, {"name", k8s::name(pod)}, {"node", a->node},
                                 {"priority", priority}, {"bindPhase", bindPhase},
                                 {"confirmed", bindPhase == "success"}, {"containers", containers}});
    Row row;
    if (inv.allNamespaces) row.emplace_back(k8s::namespaceOf(pod));
    row.insert(row.end(), {std::string(k8s::name(pod)), a->node, deviceList, std::to_string(memory) + " MiB",
                           std::to_string(compute) + "%", std::to_string(priority), confirmation(bindPhase)});
    if (wide) row.push_back(grants);
    table.push_back(std::move(row));
  }
  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml) {
    printStructured(out, json::object{{"kind", "PodSliceList"}, {"items", items}}, inv.output);
    return 0;
  }
  if (table.empty()) {
    if (ns.empty()) err << "No pods holding vgpu slices found.\n";
    else err << "No pods holding vgpu slices found in " << ns << " namespace.\n";
    return 0;
  }
  Row header;
  if (inv.allNamespaces) header.emplace_back("NAMESPACE");
  header.insert(header.end(), {"NAME", "NODE", "DEVICES", "MEMORY", "COMPUTE", "PRIORITY", "CONFIRMED"});
  if (wide) header.emplace_back("GRANTS");
  printTable(out, header, table);
  return 0;
}

}  // namespace vgpu::kubectl
