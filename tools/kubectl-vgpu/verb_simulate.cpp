// `kubectl vgpu simulate -f pods.yaml`: places a manifest's pods in order on a snapshot of
// the live cluster with the scheduler's engine (each placed pod counts for the next), read-only.
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/json.hpp>

#include "live_state.h"
#include "node_verdicts.h"
#include "output.h"
#include "verbs.h"
#include "vgpu/pod_info.h"
#include "vgpu/pod_request.h"
#include "vgpu/yaml_json.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {

/// The Pods of a manifest (documents, or v1 Lists of them), each with a namespace.
Result<std::vector<json::object>> readPods(const std::string& file, const std::string& ns) {
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) return makeError("the path \"" + file + "\" cannot be read");
    text << in.rdbuf();
  }
  auto docs = yamlDocumentsToJson(text.str(), file);
  if (!docs.ok()) return docs.error();
  std::vector<json::object> pods;
  std::vector<json::value> queue(docs->begin(), docs->end());
  for (std::size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].is_null()) continue;  // an empty document
    if (!queue[i].is_object()) return makeError(file + ": document " + std::to_string(i + 1) + " is not an object");
    auto& o = queue[i].as_object();
    const auto* kind = o.if_contains("kind");
    const std::string k = kind && kind->is_string() ? std::string(kind->as_string()) : "";
    if (k == "List" || k == "PodList") {
      if (const auto* items = o.if_contains("items"); items && items->is_array())
        for (const auto& item : items->as_array()) queue.push_back(item);
      continue;
    }
    if (k != "Pod") return makeError(file + ": document " + std::to_string(i + 1) + " is a " + (k.empty() ? "document without a kind" : k) + ", not a Pod");
    auto& meta = o["metadata"];
    if (!meta.is_object()) meta = json::object();
    if (!meta.as_object().contains("namespace")) meta.as_object()["namespace"] = ns;
    pods.push_back(std::move(o));
  }
  if (pods.empty()) return makeError(file + ": no Pod in it");
  return pods;
}

std::string describeGrants(const Assignment& a) {
  std::string out;
  for (const auto& c : a.containers)
    for (const auto& g : c.devices)
      out += (out.empty() ? "" : ", ") + c.name + ": " + g.deviceId + " (" + std::to_string(g.memoryMiB) + " MiB, " +
             std::to_string(g.compute) + "%)";
  return out;
}

}  // namespace

int runSimulate(const Invocation& inv, k8s::Client& client, std::ostream& out, std::ostream& err) {
  if (inv.filename.empty() || !inv.args.empty()) {
    err << "error: simulate needs the pods as a file: kubectl vgpu simulate -f PODS.yaml\n";
    return 1;
  }
  auto manifests = readPods(inv.filename, namespaceFor(inv, client));
  if (!manifests.ok()) {
    err << "error: " << manifests.error().message << "\n";
    return 1;
  }
  auto state = loadLiveStateOrSay(inv, client, err);
  if (!state) return 1;
  const LiveState& live = *state;
  const PlacementEngine engine(live.config.scheduler);
  Snapshot snapshot = takeSnapshot(live);

  std::vector<Row> table;
  json::array items;
  bool failed = false;
  for (const auto& manifest : *manifests) {
    auto pod = parsePod(manifest);
    if (!pod.ok()) {
      err << "error: " << pod.error().message << "\n";
      failed = true;
      continue;
    }
    auto request = buildPodRequest(live.backends, pod->podNamespace, pod->name, pod->containers, pod->annotations);
    std::optional<PreparedPod> prepared;
    std::string invalid;
    if (!request.ok()) invalid = request.error().message;
    else if (!request->empty()) {
      auto p = PreparedPod::prepare(*request, live.backends);
      if (p.ok()) prepared.emplace(std::move(*p));
      else invalid = p.error().message;
    }
    if (!invalid.empty()) {
      table.push_back({pod->key(), "invalid", "", "invalid vgpu request: " + invalid});
      items.push_back(json::object{{"pod", pod->key()}, {"result", "invalid"}, {"reason", invalid}});
      continue;
    }
    if (!prepared) {
      table.push_back({pod->key(), "not ours", "", "asks for no vgpu device"});
      items.push_back(json::object{{"pod", pod->key()}, {"result", "not ours"}});
      continue;
    }
    // The nodes the scheduler would offer it: known and usable now.
    std::vector<std::size_t> offered;
    std::vector<NodeState> states;
    for (std::size_t i = 0; i < snapshot.nodes.size(); ++i)
      if (snapshot.nodes[i].state && snapshot.nodes[i].unusableCategory.empty()) {
        offered.push_back(i);
        states.push_back(*snapshot.nodes[i].state);
      }
    const Placement placement = engine.place(*prepared, states);
    if (placement.chosen) {
      Snapshot::Node& node = snapshot.nodes[offered[*placement.chosen]];
      if (auto added = node.state->add(placement.assignment); !added.ok()) {
        err << "error: " << pod->key() << ": " << added.error().message << "\n";
        return 1;
      }
      table.push_back({pod->key(), "placed", node.name, describeGrants(placement.assignment)});
      items.push_back(json::object{{"pod", pod->key()}, {"result", "placed"}, {"node", node.name},
                                   {"grants", describeGrants(placement.assignment)}});
      continue;
    }
    const Verdicts verdicts = judge(engine, *prepared, snapshot);
    std::string why = verdicts.summary;
    if (verdicts.closest) why += ". Closest to fitting: " + verdicts.closest->node + ": " + verdicts.closest->detail;
    table.push_back({pod->key(), "pending", "", why});
    items.push_back(json::object{{"pod", pod->key()}, {"result", "pending"}, {"reason", why}});
  }
  if (inv.output == OutputFormat::kJson || inv.output == OutputFormat::kYaml)
    printStructured(out, json::object{{"kind", "SimulationList"}, {"items", items}}, inv.output);
  else
    printTable(out, {"POD", "RESULT", "NODE", "DEVICES / WHY"}, table);
  return failed ? 1 : 0;
}

}  // namespace vgpu::kubectl
