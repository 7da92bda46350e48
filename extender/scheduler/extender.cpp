#include "extender.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

double secondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

http::Response badRequest(const std::string& message) {
  return http::Response::json(json::serialize(json::object{{"Error", message}}), 400);
}

/// `storage`: where the parsed tree lives (a per-request arena for the big filter bodies).
Result<json::object> parseBody(const std::string& body, const char* what, json::storage_ptr storage = {}) {
  json::parse_options opts;
  opts.max_depth = 128;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, std::move(storage), opts);
  if (ec) return makeError(std::string(what) + ": the body is not JSON: " + ec.message());
  if (!v.is_object()) return makeError(std::string(what) + ": the body is not a JSON object");
  return std::move(v.get_object());
}

/// `text` as a JSON string literal; node names are plain DNS names, so the fast path is a copy.
void appendJsonString(std::string& out, std::string_view text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c != '"' && c != '\\' && static_cast<unsigned char>(c) < 0x80;
  });
  if (plain) {
    out += '"';
    out += text;
    out += '"';
  } else {
    out += json::serialize(json::string(text));
  }
}

/// The pod of a request, with its device request resolved (when it asks for any).
struct PodContext {
  PodInfo info;
  bool ours = false;
  std::optional<PreparedPod> prepared;
  std::string invalid;  ///< non-empty: the request cannot be placed anywhere, in words
};

PodContext podContext(const json::value& podJson, const BackendSet& backends) {
  PodContext ctx;
  auto info = parsePod(podJson);
  if (!info.ok()) {
    ctx.ours = true;
    ctx.invalid = info.error().message;
    return ctx;
  }
  ctx.info = std::move(*info);
  auto request = buildPodRequest(backends, ctx.info.podNamespace, ctx.info.name, ctx.info.containers, ctx.info.annotations);
  if (!request.ok()) {
    ctx.ours = true;
    ctx.invalid = request.error().message;
    return ctx;
  }
  if (request->empty()) return ctx;
  ctx.ours = true;
  auto prepared = PreparedPod::prepare(*request, backends);
  if (!prepared.ok()) {
    ctx.invalid = prepared.error().message;
    return ctx;
  }
  ctx.prepared.emplace(std::move(*prepared));
  return ctx;
}

/// The candidates of ExtenderArgs: NodeNames (nodeCacheCapable) or Nodes.items.
struct Candidates {
  bool cacheCapable = false;
  std::vector<std::string_view> names;  ///< into the parsed request, which outlives them
  std::vector<const json::object*> objects;  ///< parallel to names when !cacheCapable
};

Result<Candidates> candidates(const json::object& args) {
  Candidates c;
  const json::value* names = args.if_contains("NodeNames");
  const json::value* nodes = args.if_contains("Nodes");
  if (names && names->is_array()) {
    c.cacheCapable = true;
    for (const auto& n : names->get_array()) {
      if (!n.is_string()) return makeError("NodeNames must be an array of strings");
      c.names.push_back(std::string_view(n.get_string()));
    }
    return c;
  }
  if (nodes && nodes->is_object()) {
    const json::value* items = nodes->get_object().if_contains("items");
    if (items && items->is_array()) {
      for (const auto& n : items->get_array()) {
        if (!n.is_object()) return makeError("Nodes.items must hold Node objects");
        const std::string_view name = k8s::name(n.get_object());
        if (name.empty()) return makeError("a node in Nodes.items has no metadata.name");
        c.names.push_back(name);
        c.objects.push_back(&n.get_object());
      }
      return c;
    }
    if (!items || items->is_null()) return c;  // an empty list
  }
  return makeError("ExtenderArgs needs NodeNames (nodeCacheCapable) or Nodes.items");
}

/// Evaluation of one candidate.
struct Verdict {
  bool fits = false;
  bool unresolvable = false;
  double score = 0;
  std::string reason;
};

/// "no fitting node: 3 nodes: <reason>; 2 nodes: <reason>" for events.
std::string summarize(const std::map<std::string, std::string>& failed, size_t total) {
  std::map<std::string, size_t> byReason;
  for (const auto& [node, why] : failed) ++byReason[why];
  std::vector<std::pair<size_t, std::string>> sorted;
  for (auto& [why, n] : byReason) sorted.emplace_back(n, why);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = "0/" + std::to_string(total) + " nodes can take the pod";
  for (size_t i = 0; i < sorted.size() && i < 3; ++i) out += "; " + std::to_string(sorted[i].first) + " node(s): " + sorted[i].second;
  return out;
}

std::string describeAssignment(const Assignment& a) {
  std::string out = "node " + a.node + ":";
  for (const auto& c : a.containers) {
    if (c.devices.empty()) continue;
    out += " " + std::string(c.init ? "init container " : "container ") + c.name + " ->";
    for (const auto& g : c.devices)
      out += " " + formatVirtualDeviceId(g.deviceId, g.slot) + " (" + std::to_string(g.memoryMiB) + " MiB, " +
             std::to_string(g.compute) + "%)";
    out += ";";
  }
  if (!out.empty() && out.back() == ';') out.pop_back();
  return out;
}

}  // namespace

Extender::Extender(const BackendSet& backends, const SchedulerConfig& config, ClusterCache& cache, k8s::Client& client,
                   EventRecorder& events, SchedulerMetrics& metrics,
                   std::function<k8s::ObjectPtr(const std::string&)> podLookup, ExtenderOptions options)
    : backends_(backends), engine_(config), cache_(cache), client_(client), events_(events), metrics_(metrics),
      podLookup_(std::move(podLookup)), options_(options), heartbeatTimeout_(config.heartbeatTimeout) {}

http::Response Extender::filter(const http::Request& request) {
  const auto start = SteadyClock::now();
  // One arena per request: thousands of node names parse without a malloc each.
  json::monotonic_resource arena(request.body.size() * 2 + 4096);
  auto args = parseBody(request.body, "filter", &arena);
  if (!args.ok()) return badRequest(args.error().message);
  const json::value* podJson = args->if_contains("Pod");
  if (!podJson || !podJson->is_object()) return badRequest("filter: ExtenderArgs has no Pod object");
  auto cands = candidates(*args);
  if (!cands.ok()) return badRequest("filter: " + cands.error().message);

  PodContext pod = podContext(*podJson, backends_);
  std::vector<size_t> passed;  // indices into the candidates
  json::array passedObjects;
  std::map<std::string, std::string> failed, unresolvable;
  auto pass = [&](size_t i) {
    if (cands->cacheCapable) passed.push_back(i);
    else passedObjects.push_back(*cands->objects[i]);
  };

  if (!pod.ours) {
    for (size_t i = 0; i < cands->names.size(); ++i) pass(i);  // not ours: every node is fine
  } else if (!pod.invalid.empty()) {
    for (const auto& n : cands->names) unresolvable[std::string(n)] = "invalid vgpu request: " + pod.invalid;
  } else {
    std::vector<Verdict> verdicts(cands->names.size());
    cache_.readNodes(cands->names, [&](const std::vector<const NodeEntry*>& entries, std::chrono::system_clock::time_point now) {
      for (size_t i = 0; i < cands->names.size(); ++i) {
        Verdict& v = verdicts[i];
        const NodeEntry* node = entries[i];
        if (i + 2 < entries.size() && entries[i + 2]) __builtin_prefetch(entries[i + 2]->state.usage.data());
        std::optional<NodeEntry> transient;
        if (!node && !cands->cacheCapable) {
          // A node the cache has not seen (e.g. the cluster autoscaler's template): judge it
          // by the annotations in the request, with nothing placed on it yet.
          ParsedNode parsed = parseNode(*cands->objects[i], backends_);
          transient.emplace();
          transient->state = NodeState(parsed.name, std::make_shared<const NodeInventory>(std::move(parsed.devices),
                                                                                          backends_, parsed.cordoned));
          transient->state.unavailable = parsed.problem;
          transient->heartbeat = parsed.heartbeat;
          node = &*transient;
        }
        if (!node) {
          v.reason = "node is not known to vgpu-scheduler yet (its Node object has not been seen)";
          continue;
        }
        if (auto why = nodeUnusableReason(*node, now, heartbeatTimeout_); !why.empty()) {
          v.reason = why;
          v.unresolvable = !node->state.unavailable.empty();
          continue;
        }
        NodeEvaluation eval = engine_.evaluate(*pod.prepared, node->state);
        v.fits = eval.fits;
        if (!eval.fits) v.reason = engine_.explain(*pod.prepared, node->state, eval);
      }
    });
    for (size_t i = 0; i < verdicts.size(); ++i) {
      if (verdicts[i].fits) pass(i);
      else (verdicts[i].unresolvable ? unresolvable : failed)[std::string(cands->names[i])] = std::move(verdicts[i].reason);
    }
  }

  // Written by hand: with thousands of names this is the largest part of the answer.
  std::string body;
  body.reserve(64 + passed.size() * (cands->names.empty() ? 0 : cands->names[0].size() + 3));
  if (cands->cacheCapable) {
    body += "{\"Nodes\":null,\"NodeNames\":[";  // always an array: null would reject every node
    for (size_t k = 0; k < passed.size(); ++k) {
      if (k) body += ',';
      appendJsonString(body, cands->names[passed[k]]);
    }
    body += "],";
  } else {
    body += "{\"Nodes\":" + json::serialize(json::object{{"metadata", json::object()}, {"items", passedObjects}}) +
            ",\"NodeNames\":null,";
  }
  const bool none = pod.ours && (cands->cacheCapable ? passed.empty() : passedObjects.empty());
  auto appendMap = [&body](const std::map<std::string, std::string>& m) {
    body += '{';
    bool first = true;
    for (const auto& [n, why] : m) {
      if (!first) body += ',';
      first = false;
      appendJsonString(body, n);
      body += ':';
      appendJsonString(body, why);
    }
    body += '}';
  };
  body += "\"FailedNodes\":";
  appendMap(failed);
  body += ",\"FailedAndUnresolvableNodes\":";
  appendMap(unresolvable);
  body += ",\"Error\":\"\"}";
  metrics_.filterDuration.observe(secondsSince(start));

  if (none) {
    std::map<std::string, std::string> all = failed;
    all.insert(unresolvable.begin(), unresolvable.end());
    const std::string reason = pod.invalid.empty() ? "no-fitting-node" : "invalid-request";
    metrics_.podsRefused.inc({reason});
    const std::string message = pod.invalid.empty() ? summarize(all, cands->names.size()) : "invalid vgpu request: " + pod.invalid;
    spdlog::info("pod={} filter: {}", pod.info.key(), message);
    events_.podEvent(pod.info.podNamespace, pod.info.name, pod.info.uid, "Warning", "FilteringFailed", message);
  } else if (pod.ours) {
    spdlog::debug("pod={} filter: {} of {} nodes fit", pod.info.key(),
                  cands->names.size() - failed.size() - unresolvable.size(), cands->names.size());
  }
  return http::Response::json(std::move(body));
}

http::Response Extender::prioritize(const http::Request& request) {
  const auto start = SteadyClock::now();
  json::monotonic_resource arena(request.body.size() * 2 + 4096);
  auto args = parseBody(request.body, "prioritize", &arena);
  if (!args.ok()) return badRequest(args.error().message);
  const json::value* podJson = args->if_contains("Pod");
  if (!podJson || !podJson->is_object()) return badRequest("prioritize: ExtenderArgs has no Pod object");
  auto cands = candidates(*args);
  if (!cands.ok()) return badRequest("prioritize: " + cands.error().message);
  PodContext pod = podContext(*podJson, backends_);
  std::vector<std::int64_t> scores(cands->names.size(), 0);
  if (pod.ours && pod.invalid.empty()) {
    cache_.read([&](const ClusterCache::Lookup& lookup, std::chrono::system_clock::time_point now) {
      for (size_t i = 0; i < cands->names.size(); ++i) {
        const NodeEntry* node = lookup(cands->names[i]);
        if (!node || !nodeUnusableReason(*node, now, heartbeatTimeout_).empty()) continue;
        NodeEvaluation eval = engine_.evaluate(*pod.prepared, node->state);
        // The engine's 0..1 (higher is better under the pod's node policy) to the API's 0..10.
        if (eval.fits) scores[i] = std::clamp<std::int64_t>(std::llround(eval.score * 10), 0, 10);
      }
    });
  }
  json::array out;
  for (size_t i = 0; i < scores.size(); ++i) out.push_back(json::object{{"Host", cands->names[i]}, {"Score", scores[i]}});
  metrics_.prioritizeDuration.observe(secondsSince(start));
  return http::Response::json(json::serialize(out));
}

http::Response Extender::bind(const http::Request& request) {
  const auto start = SteadyClock::now();
  auto args = parseBody(request.body, "bind");
  if (!args.ok()) return badRequest(args.error().message);
  auto field = [&](const char* key) -> std::string {
    const json::value* v = args->if_contains(key);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  const std::string ns = field("PodNamespace"), name = field("PodName"), uid = field("PodUID"), node = field("Node");
  if (name.empty() || node.empty())
    return badRequest("bind: ExtenderBindingArgs needs PodName, PodNamespace and Node (strings)");
  const std::string podNs = ns.empty() ? "default" : ns;
  const std::string key = podNs + "/" + name;

  auto fail = [&](const std::string& reason, const std::string& message, const std::string& podUid) {
    metrics_.podsRefused.inc({reason});
    metrics_.bindDuration.observe({"error"}, secondsSince(start));
    spdlog::warn("pod={} node={} bind failed: {}", key, node, message);
    events_.podEvent(podNs, name, podUid, "Warning", "BindingFailed", message);
    return http::Response::json(json::serialize(json::object{{"Error", message}}));
  };

  // The pod as it is now: the informer's copy, or the apiserver's when the cache lags.
  k8s::ObjectPtr podObj = podLookup_ ? podLookup_(key) : nullptr;
  if (!podObj || (!uid.empty() && k8s::uid(*podObj) != uid)) {
    auto fetched = client_.get(k8s::kPods, podNs, name);
    if (!fetched.ok()) return fail("pod-not-found", "cannot read pod " + key + ": " + fetched.error().describe(), uid);
    podObj = std::make_shared<const json::object>(std::move(*fetched));
  }
  if (!uid.empty() && k8s::uid(*podObj) != uid)
    return fail("pod-replaced", "pod " + key + " was replaced (uid " + std::string(k8s::uid(*podObj)) + ", not " + uid + ")", uid);

  PodContext pod = podContext(json::value(*podObj), backends_);
  if (!pod.ours) {  // not ours: bind as the default binder would
    auto bound = client_.bind({podNs, name, node, uid, {}});
    if (!bound.ok()) return fail("bind-api-error", "binding to " + node + ": " + bound.error().describe(), uid);
    metrics_.bindDuration.observe({"ok"}, secondsSince(start));
    return http::Response::json(R"({"Error":""})");
  }
  if (!pod.invalid.empty()) return fail("invalid-request", "invalid vgpu request: " + pod.invalid, pod.info.uid);

  auto reserved = cache_.reserve(pod.info, *pod.prepared, node, engine_, options_.bindHoldTimeout);
  if (!reserved.ok()) {
    const bool held = reserved.error().message.rfind("held back", 0) == 0;
    return fail(held ? "held-back" : "no-longer-fits", reserved.error().message, pod.info.uid);
  }
  k8s::BindRequest bindRequest{podNs, name, node, pod.info.uid, {}};
  bindRequest.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(reserved->assignment);
  bindRequest.annotations[std::string(keys::kPodBindPhase)] = "allocating";
  bindRequest.annotations[std::string(keys::kPodBindTime)] = formatTimestamp(std::chrono::system_clock::now());
  auto bound = client_.bind(bindRequest);
  if (!bound.ok() && (bound.error().isTransport() || bound.error().httpStatus >= 500)) {
    // The answer was lost, not necessarily the Binding: if the apiserver applied it, the
    // reservation must stay, or its share could be given twice before the informer catches up.
    auto now = client_.get(k8s::kPods, podNs, name);
    if (now.ok() && k8s::nodeName(*now) == node && k8s::uid(*now) == pod.info.uid &&
        k8s::annotation(*now, keys::kPodAssignment) == bindRequest.annotations[std::string(keys::kPodAssignment)])
      bound = k8s::ApiStatus();
  }
  if (!bound.ok()) {
    cache_.release(pod.info.uid);  // a failed bind leaves no reservation behind
    return fail("bind-api-error", "binding to " + node + ": " + bound.error().describe(), pod.info.uid);
  }
  metrics_.podsPlaced.inc();
  metrics_.bindDuration.observe({"ok"}, secondsSince(start));
  const std::string message = "assigned " + describeAssignment(reserved->assignment);
  spdlog::info("pod={} node={} bound: {}", key, node, message);
  events_.podEvent(podNs, name, pod.info.uid, "Normal", "DevicesAssigned", message);
  return http::Response::json(R"({"Error":""})");
}

}  // namespace vgpu::scheduler
