// `kubectl vgpu explain POD`: for a pending pod, every node's verdict in vgpu-scheduler's own
// words (its cache, placement engine and filter summary over the live state, read-only) and
// the node closest to fitting with the numbers; for a placed pod, what it got and where.
#include <boost/json.hpp>

#include <algorithm>

#include "live_state.h"
#include "node_verdicts.h"
#include "output.h"
#include "verbs.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/object.h"
#include "vgpu/placement.h"
#include "vgpu/pod_info.h"
#include "vgpu/pod_request.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {


void printStructuredOr(const Invocation& inv, std::ostream& out, const json::object& data, const std::string& text) {
  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml) printStructured(out, data, inv.output);
  else out << text;
}

/// A placed pod: its grants, and whether the node agent confirmed them.
int explainPlaced(const Invocation& inv, const PodInfo& pod, const Assignment& a, std::ostream& out) {
  std::string text = "Pod " + pod.key() + " (" + (pod.phase.empty() ? "Pending" : pod.phase) + ") was placed by vgpu-scheduler on node " + a.node + ":\n";
  json::array containers;
  for (const auto& c : a.containers) {
    if (c.devices.empty()) continue;
    json::array grants;
    text += std::string("  ") + (c.init ? "init container " : "container ") + c.name + ":";
    for (const auto& g : c.devices) {
      text += " " + (g.slot >= 0 ? formatVirtualDeviceId(g.deviceId, g.slot) : g.deviceId) + " (" + g.backend + ", " +
              std::to_string(g.memoryMiB) + " MiB, " + std::to_string(g.compute) + "% compute)";
      grants.push_back(json::object{{"backend", g.backend}, {"device", g.deviceId}, {"slot", g.slot},
                                    {"memoryMiB", g.memoryMiB}, {"compute", g.compute}});
    }
    text += "\n";
    containers.push_back(json::object{{"name", c.name}, {"init", c.init}, {"devices", grants}});
  }
  const std::string phase(pod.annotations.count(std::string(keys::kPodBindPhase)) ? pod.annotations.at(std::string(keys::kPodBindPhase)) : "");
  if (phase == "success") text += "The node agent confirmed the handout (" + std::string(keys::kPodBindPhase) + "=success).\n";
  else text += "The node agent has not confirmed the handout (" + std::string(keys::kPodBindPhase) + "=" + (phase.empty() ? "<none>" : phase) + ").\n";
  if (auto e = pod.annotations.find(std::string(keys::kPodAllocateError)); e != pod.annotations.end())
    text += "Allocate failed: " + e->second + "\n";
  printStructuredOr(inv, out, json::object{{"pod", pod.key()}, {"placed", true}, {"node", a.node}, {"bindPhase", phase},
                                           {"containers", containers}}, text);
  return 0;
}

}  // namespace

int runExplain(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err) {
  if (inv.args.size() != 1) {
    err << "error: explain needs exactly one pod name: kubectl vgpu explain POD [-n NAMESPACE]\n";
    return 1;
  }
  const std::string ns = namespaceFor(inv, client);
  auto object = client.get(k8s::kPods, ns, inv.args.front());
  if (!object.ok()) {
    err << describeApiError(object.error()) << "\n";
    return 1;
  }
  auto pod = parsePod(*object);
  if (!pod.ok()) {
    err << "error: " << pod.error().message << "\n";
    return 1;
  }
  if (auto text = pod->annotations.find(std::string(keys::kPodAssignment)); text != pod->annotations.end()) {
    auto a = decodeAssignment(text->second);
    if (!a.ok()) {
      err << "error: pod " << pod->key() << ": annotation " << keys::kPodAssignment << " cannot be read: " << a.error().message << "\n";
      return 1;
    }
    return explainPlaced(inv, *pod, *a, out);
  }
  if (!pod->nodeName.empty()) {
    printStructuredOr(inv, out, json::object{{"pod", pod->key()}, {"placed", false}, {"node", pod->nodeName}},
                      "Pod " + pod->key() + " runs on node " + pod->nodeName + " without a vgpu assignment: vgpu-scheduler did not place it.\n");
    return 0;
  }

  auto state = loadLiveStateOrSay(inv, client, err);
  if (!state) return 1;
  const LiveState& live = *state;
  auto request = buildPodRequest(live.backends, pod->podNamespace, pod->name, pod->containers, pod->annotations);
  if (!request.ok()) {
    printStructuredOr(inv, out, json::object{{"pod", pod->key()}, {"invalid", request.error().message}},
                      "Pod " + pod->key() + " is Pending: invalid vgpu request: " + request.error().message + "\n");
    return 0;
  }
  if (request->empty()) {
    printStructuredOr(inv, out, json::object{{"pod", pod->key()}, {"asksForDevices", false}},
                      "Pod " + pod->key() + " asks for no vgpu device: vgpu-scheduler has no say in where it goes.\n");
    return 0;
  }
  auto prepared = PreparedPod::prepare(*request, live.backends);
  if (!prepared.ok()) {
    err << "error: " << prepared.error().message << "\n";
    return 1;
  }

  const PlacementEngine engine(live.config.scheduler);
  const Verdicts verdicts = judge(engine, *prepared, takeSnapshot(live));
  const NodeVerdict* closest = verdicts.closest;
  const std::string& summary = verdicts.summary;

  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml) {
    json::array nodes;
    for (const auto& v : verdicts.nodes)
      nodes.push_back(json::object{{"node", v.node}, {"fits", v.fits}, {"category", v.category}, {"detail", v.detail}});
    json::object data{{"pod", pod->key()}, {"placed", false}, {"summary", summary}, {"nodes", nodes}};
    if (closest) data["closest"] = json::object{{"node", closest->node}, {"detail", closest->detail}};
    printStructured(out, data, inv.output);
    return 0;
  }
  out << "Pod " << pod->key() << " is Pending. What vgpu-scheduler says about each node now:\n";
  out << summary << "\n\n";
  std::vector<Row> table;
  for (const auto& v : verdicts.nodes)
    table.push_back({v.node, v.fits ? "fits" : v.category, v.fits ? "" : v.detail});
  printTable(out, {"NODE", "VERDICT", "DETAIL"}, table);
  if (std::any_of(verdicts.nodes.begin(), verdicts.nodes.end(), [](const NodeVerdict& v) { return v.fits; })) {
    out << "\nvgpu-scheduler would take it now; if it stays Pending, another scheduler plugin refuses it "
           "(kubectl describe pod " << pod->name << " -n " << pod->podNamespace << ").\n";
  } else if (closest) {
    out << "\nClosest to fitting: " << closest->node << ": " << closest->detail << "\n";
  }
  return 0;
}

}  // namespace vgpu::kubectl
