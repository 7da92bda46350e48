#include "extender.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "extender_args.h"
#include "filter_memo.h"
#include "filter_result.h"
#include "gzip.h"
#include "preemption_args.h"
#include "json_writer.h"

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/preemption.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;
using SteadyClock = std::chrono::steady_clock;

double secondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

http::Response badRequest(const std::string& message) { return http::Response::json(errorAnswer(message), 400); }

/// Larger answers go gzipped to a client that accepts it (kube-scheduler does, through Go's
/// transport): thousands of refused nodes under a handful of texts pack about tenfold. The
/// answer for every node fitting (names only, 60 KiB at 5,000 nodes) stays plain.
constexpr std::size_t kGzipAbove = 64 * 1024;

http::Response answer(const http::Request& request, std::string body, GzipCache& packer) {
  if (body.size() > kGzipAbove && acceptsGzip(request.header("accept-encoding"))) {
    if (auto packed = packer.compress(body)) {
      http::Response r = http::Response::json(std::move(*packed));
      r.headers.emplace_back("Content-Encoding", "gzip");
      return r;
    }
  }
  return http::Response::json(std::move(body));
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

/// What kube-scheduler gets for each refused node: a category (a handful of texts over the
/// whole cluster, so its summary "0/N nodes are available: 3000 A, 2000 B" stays one line),
/// formatted once per kind of refusal and kept with the pod's shape. The numbers go to the
/// pod's event (Closest).
class RefusalCategories {
 public:
  RefusalCategories(const PlacementEngine& engine, const PreparedPod& pod, ShapeMemo& shape, FilterResult& result)
      : engine_(engine), pod_(pod), shape_(shape), result_(result) {}

  /// The shape's category of refusal `eval`.
  std::uint16_t of(const NodeEvaluation& eval) {
    return shape_.category(eval, [&](const NodeEvaluation& e) { return engine_.category(pod_, e); });
  }
  /// Its reason in this answer.
  FilterResult::ReasonId reason(std::uint16_t category) {
    if (category >= ids_.size()) ids_.resize(category + 1u, kNone);
    if (ids_[category] == kNone) ids_[category] = result_.reason(shape_.categoryText(category));
    return ids_[category];
  }

 private:
  static constexpr FilterResult::ReasonId kNone = UINT32_MAX;
  const PlacementEngine& engine_;
  const PreparedPod& pod_;
  ShapeMemo& shape_;
  FilterResult& result_;
  std::vector<FilterResult::ReasonId> ids_;  // by the shape's category
};

/// The few refused nodes closest to taking the pod (PlacementEngine::distance), explained
/// with their numbers for the pod's event; nodes further than the current few cost a compare.
class Closest {
 public:
  static constexpr std::size_t kKeep = 3;
  void offer(double distance, std::uint32_t index, const NodeEntry* node) {
    if (count_ == kKeep && distance >= near_[kKeep - 1].distance) return;
    std::size_t at = count_ < kKeep ? count_++ : kKeep - 1;
    near_[at] = {distance, index, node};
    for (; at > 0 && near_[at].distance < near_[at - 1].distance; --at) std::swap(near_[at], near_[at - 1]);
  }
  /// "node-17: <refusal with numbers>; node-3: ..."; call while the nodes are still locked
  /// (each is judged again: its verdict may have come from the memo, without the numbers).
  std::string describe(const PlacementEngine& engine, const PreparedPod& pod) const {
    std::string out;
    for (std::size_t i = 0; i < count_; ++i) {
      if (i) out += "; ";
      const NodeState& state = near_[i].node->state;
      out += state.name + ": " + engine.explain(pod, state, engine.check(pod, state));
    }
    return out;
  }
  bool empty() const { return count_ == 0; }

 private:
  struct Near {
    double distance = 0;
    std::uint32_t index = 0;
    const NodeEntry* node = nullptr;
  };
  std::array<Near, kKeep> near_{};
  std::size_t count_ = 0;
};

/// A shape's memo lent for one request, given back when it ends.
class LentMemo {
 public:
  LentMemo(FilterMemo& memo, const PodRequest& pod) : memo_(memo), lent_(memo.take(pod)) {}
  ~LentMemo() { memo_.keep(std::move(lent_)); }
  LentMemo(const LentMemo&) = delete;
  LentMemo& operator=(const LentMemo&) = delete;
  ShapeMemo& operator*() const { return *lent_; }
  ShapeMemo* operator->() const { return lent_.get(); }

 private:
  FilterMemo& memo_;
  std::unique_ptr<ShapeMemo> lent_;
};

/// spec.schedulerName as the apiserver defaults it.
std::string_view schedulerNameOf(const json::object& pod) {
  if (const auto* spec = pod.if_contains("spec"); spec && spec->is_object())
    if (const auto* n = spec->as_object().if_contains("schedulerName"); n && n->is_string() && !n->as_string().empty())
      return n->as_string();
  return "default-scheduler";
}

std::string describeAssignment(const Assignment& a) {
  std::string out = "node " + a.node + ":";
  for (const auto& c : a.containers) {
    if (c.devices.empty()) continue;
    out += " " + std::string(c.init ? "init container " : "container ") + c.name + " ->";
    for (const auto& g : c.devices)
      out += " " + (g.slot >= 0 ? formatVirtualDeviceId(g.deviceId, g.slot) : g.deviceId) + " (" + std::to_string(g.memoryMiB) + " MiB, " +
             std::to_string(g.compute) + "%)";
    out += ";";
  }
  if (!out.empty() && out.back() == ';') out.pop_back();
  return out;
}

}  // namespace

Extender::Extender(const BackendSet& backends, const SchedulerConfig& config, ClusterCache& cache, k8s::Client& client,
                   EventRecorder& events, SchedulerMetrics& metrics,
                   std::function<k8s::ObjectPtr(const std::string&)> podLookup, ExtenderOptions options,
                   std::function<bool()> ready)
    : backends_(backends), engine_(config), cache_(cache), client_(client), events_(events), metrics_(metrics),
      podLookup_(std::move(podLookup)), options_(options), heartbeatTimeout_(config.heartbeatTimeout),
      ready_(std::move(ready)), memo_(options_.filterMemoShapes) {}

http::Response Extender::filter(const http::Request& request) {
  const auto start = SteadyClock::now();
  // One arena per request for the Pod (and a Nodes list): its tree costs no malloc per node.
  json::monotonic_resource arena(16384);
  auto args = parseExtenderArgs(request.body, &arena);
  if (!args.ok()) return badRequest("filter: " + args.error().message);
  const auto& names = args->names;

  PodContext pod = podContext(args->pod, backends_);
  FilterResult result(names.size());
  std::string closestWords;  // the nodes closest to fitting, with numbers, when none fits
  std::string quotaWords;    // why the namespace's quota refused a node that fits, with numbers
  if (!pod.ours) {
    for (std::uint32_t i = 0; i < names.size(); ++i) result.pass(i);  // not ours: every node is fine
  } else if (!isReady()) {
    // An Error, not FailedNodes: kube-scheduler puts a pod whose filter failed with an error
    // in its backoff queue (retried in 1-10 s), while nodes refused in FailedNodes park it
    // as unschedulable until some cluster event or the 5-minute flush. Every node is in
    // FailedNodes too, for readers that do not look at Error; none is unresolvable.
    result.setError(std::string(kNotReady));
    const auto why = result.reason(kNotReady);
    for (std::uint32_t i = 0; i < names.size(); ++i) result.fail(i, why, false);
    metrics_.podsRefused.inc({"not-ready"});
    metrics_.filterDuration.observe(secondsSince(start));
    spdlog::info("pod={} filter refused: not ready (caches not synced)", pod.info.key());
    return answer(request, result.toJson(*args), packer_);
  } else if (!pod.invalid.empty()) {
    const auto why = result.reason("invalid vgpu request: " + pod.invalid);
    for (std::uint32_t i = 0; i < names.size(); ++i) result.fail(i, why, true);
  } else {
    LentMemo memo(memo_, pod.prepared->pod());
    RefusalCategories categories(engine_, *pod.prepared, *memo, result);
    Closest closest;
    const HeldRoom held = heldAgainst(pod.info);
    // Namespace quotas count what the pod would really hold on each node (a memory
    // percentage as MiB of that node's device), so only quota'd namespaces pay for an assign().
    const ClusterCache::NamespaceQuota quota =
        cache_.namespaceQuota(pod.info.podNamespace);
    cache_.readNodes(names, [&](const std::vector<const NodeEntry*>& entries, std::chrono::system_clock::time_point now) {
      for (std::uint32_t i = 0; i < names.size(); ++i) {
        const NodeEntry* node = entries[i];
        if (i + 2 < entries.size() && entries[i + 2]) __builtin_prefetch(entries[i + 2]->state.usage.data());
        std::optional<NodeEntry> transient;
        if (!node && !args->cacheCapable) {
          // A node the cache has not seen (e.g. the cluster autoscaler's template): judge it
          // by the annotations in the request, with nothing placed on it yet.
          ParsedNode parsed = parseNode(args->nodes[i].get_object(), backends_);
          transient.emplace();
          transient->state = NodeState(parsed.name, std::make_shared<const NodeInventory>(std::move(parsed.devices),
                                                                                          backends_, parsed.cordoned));
          transient->state.unavailable = parsed.problem;
          transient->heartbeat = parsed.heartbeat;
          node = &*transient;
        }
        if (!node) {
          result.fail(i, result.reason(kUnknownNodeCategory), false);
          continue;
        }
        if (!nodeUsable(*node, now, heartbeatTimeout_)) {
          result.fail(i, result.reason(nodeUnusableCategory(*node, now, heartbeatTimeout_)),
                      !node->state.unavailable.empty());
          continue;
        }
        std::optional<HeldState> withHeld;
        if (!held.empty())
          if (auto h = held.find(node->state.name); h != held.end()) {
            withHeld.emplace(withRoomHeld(engine_, node->state, h->second));
            if (!withHeld->whole.empty()) {
              result.fail(i, result.reason(kHeldCategory), false);
              continue;
            }
          }
        // Nodes as the cache has them keep their verdict while unchanged; a node of the
        // request or with room held is judged on its own.
        const bool cached = !transient && !withHeld;
        ShapeMemo::Verdict verdict;
        if (const ShapeMemo::Verdict* known = cached ? memo->find(*node) : nullptr) {
          verdict = *known;
        } else {
          const NodeEvaluation eval = engine_.check(*pod.prepared, withHeld ? withHeld->state : node->state);
          verdict.fits = eval.fits;
          if (!eval.fits) {
            verdict.category = categories.of(eval);
            verdict.distance = engine_.distance(*pod.prepared, eval);
          }
          if (cached) memo->store(*node, verdict);
        }
        if (verdict.fits && !quota.limits.empty()) {
          auto assigned = engine_.assign(*pod.prepared, withHeld ? withHeld->state : node->state);
          std::string over = assigned.ok() ? quotaExceeded(pod.info.podNamespace, quota.limits, quota.used,
                                                           cache_.quotaResources().usage(*assigned), cache_.quotaResources())
                                           : std::string();
          if (!over.empty()) {
            result.fail(i, result.reason(kQuotaCategory), false);
            if (quotaWords.empty()) quotaWords = std::move(over);
            continue;
          }
        }
        if (verdict.fits) {
          result.pass(i);
          continue;
        }
        result.fail(i, categories.reason(verdict.category), false);
        if (cached) closest.offer(verdict.distance, i, node);
      }
      if (result.passedCount() == 0 && !closest.empty()) closestWords = closest.describe(engine_, *pod.prepared);
    });
  }

  std::string body = result.toJson(*args);
  metrics_.filterDuration.observe(secondsSince(start));

  if (options_.requeuer && pod.ours && pod.prepared) {
    // Woken up when capacity frees on one of these nodes (requeuer.h); placed: forgotten.
    if (result.passedCount() == 0)
      options_.requeuer->refused(pod.info, std::make_shared<const PreparedPod>(std::move(*pod.prepared)), names);
    else
      options_.requeuer->forget(pod.info.uid);
  }
  if (pod.ours && result.passedCount() == 0) {
    const std::string reason = pod.invalid.empty() ? "no-fitting-node" : "invalid-request";
    metrics_.podsRefused.inc({reason});
    std::string message = pod.invalid.empty() ? result.summary(names.size()) : "invalid vgpu request: " + pod.invalid;
    if (!quotaWords.empty()) message += ". Quota: " + quotaWords;
    if (!closestWords.empty()) message += ". Closest to fitting: " + closestWords;
    spdlog::info("pod={} filter: {}", pod.info.key(), message);
    events_.podEvent(pod.info.podNamespace, pod.info.name, pod.info.uid, "Warning", "FilteringFailed", message);
  } else if (pod.ours) {
    spdlog::debug("pod={} filter: {} of {} nodes fit", pod.info.key(), result.passedCount(), names.size());
  }
  return answer(request, std::move(body), packer_);
}

http::Response Extender::prioritize(const http::Request& request) {
  const auto start = SteadyClock::now();
  json::monotonic_resource arena(16384);
  auto args = parseExtenderArgs(request.body, &arena);
  if (!args.ok()) return badRequest("prioritize: " + args.error().message);
  const auto& names = args->names;
  PodContext pod = podContext(args->pod, backends_);
  std::vector<std::int64_t> scores(names.size(), 0);
  // Before the cache is ready every node scores 0: no preference rather than a wrong one.
  if (pod.ours && pod.invalid.empty() && isReady()) {
    // kube-scheduler places the next pod while this one's bind is still under way: a node
    // where its bind would wait behind a confusable pod's Allocate scores 0, so consecutive
    // pods of a shape go to different nodes and bind at once (binpack would send them all to
    // the fullest node, to bind there one per agent confirmation).
    const auto held = cache_.nodesWhereHeldBack(allocateKeys(pod.info, backends_));
    cache_.readNodes(names, [&](const std::vector<const NodeEntry*>& entries, std::chrono::system_clock::time_point now) {
      for (size_t i = 0; i < names.size(); ++i) {
        const NodeEntry* node = entries[i];
        if (!node || !nodeUsable(*node, now, heartbeatTimeout_)) continue;
        if (!held.empty() && held.count(node->state.name)) continue;
        NodeEvaluation eval = engine_.evaluate(*pod.prepared, node->state);
        // The engine's 0..1 (higher is better under the pod's node policy) to the API's 1..10:
        // 0 is for the nodes above, below every node where the pod binds at once.
        if (eval.fits) scores[i] = 1 + std::clamp<std::int64_t>(std::llround(eval.score * 9), 0, 9);
      }
    });
  }
  // HostPriorityList, written directly as filter's answer is.
  std::string body;
  body.reserve(2 + names.size() * 32);
  body += '[';
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i) body += ',';
    body += "{\"Host\":";
    appendJsonString(body, names[i]);
    body += ",\"Score\":";
    body += std::to_string(scores[i]);
    body += '}';
  }
  body += ']';
  metrics_.prioritizeDuration.observe(secondsSince(start));
  return http::Response::json(std::move(body));
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
    return http::Response::json(errorAnswer(message));
  };
  if (!isReady()) return fail("not-ready", std::string(kNotReady), uid);

  // The pod as it is now: the informer's copy, or the apiserver's when the cache lags.
  k8s::ObjectPtr podObj = podLookup_ ? podLookup_(key) : nullptr;
  if (!podObj || (!uid.empty() && k8s::uid(*podObj) != uid)) {
    auto fetched = client_.get(k8s::kPods, podNs, name);
    if (!fetched.ok()) return fail("pod-not-found", "cannot read pod " + key + ": " + fetched.error().describe(), uid);
    podObj = std::make_shared<const json::object>(std::move(*fetched));
  }
  if (!uid.empty() && k8s::uid(*podObj) != uid)
    return fail("pod-replaced", "pod " + key + " was replaced (uid " + std::string(k8s::uid(*podObj)) + ", not " + uid + ")", uid);
  // Only our own pods: whoever reaches /bind must not place another scheduler's pods.
  if (const std::string_view schedulerName = schedulerNameOf(*podObj); schedulerName != options_.schedulerName)
    return fail("wrong-scheduler",
                "pod " + key + " is for scheduler \"" + std::string(schedulerName) + "\", not " + options_.schedulerName +
                    ": vgpu-scheduler binds only its own pods",
                uid);

  PodContext pod = podContext(json::value(*podObj), backends_);
  if (!pod.ours) {  // not ours: bind as the default binder would
    auto bound = client_.bind({podNs, name, node, uid, {}});
    if (!bound.ok()) return fail("bind-api-error", "binding to " + node + ": " + bound.error().describe(), uid);
    metrics_.bindDuration.observe({"ok"}, secondsSince(start));
    return http::Response::json(R"({"Error":""})");
  }
  if (!pod.invalid.empty()) return fail("invalid-request", "invalid vgpu request: " + pod.invalid, pod.info.uid);

  if (HeldRoom held = heldAgainst(pod.info); held.count(node)) {
    // Filter passed it before a preemptor was nominated here: the room stays the preemptor's.
    std::string why;
    cache_.readNodes({node}, [&](const std::vector<const NodeEntry*>& entries, std::chrono::system_clock::time_point) {
      if (!entries[0]) return;
      const HeldState h = withRoomHeld(engine_, entries[0]->state, held.find(node)->second);
      if (!h.whole.empty()) why = "node " + node + " is held for " + h.whole + " until its victims are gone";
      else if (!engine_.check(*pod.prepared, h.state).fits)
        why = "what is free on node " + node + " is held for a pod of higher priority nominated there";
    });
    if (!why.empty()) return fail("held-for-preemptor", why, pod.info.uid);
  }
  auto reserved = cache_.reserve(pod.info, *pod.prepared, node, engine_, options_.bindHoldTimeout);
  if (!reserved.ok()) {
    const std::string& why = reserved.error().message;
    return fail(why.rfind("held back", 0) == 0 ? "held-back" : why.rfind("quota exceeded", 0) == 0 ? "quota-exceeded" : "no-longer-fits",
                why, pod.info.uid);
  }
  k8s::BindRequest bindRequest{podNs, name, node, pod.info.uid, {}};
  bindRequest.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(reserved->assignment);
  bindRequest.annotations[std::string(keys::kPodBindPhase)] = "allocating";
  bindRequest.annotations[std::string(keys::kPodBindTime)] = formatTimestamp(std::chrono::system_clock::now());
  auto bound = client_.bind(bindRequest);
  if (!bound.ok() && (bound.error().isConflict() || bound.error().isTransport() || bound.error().httpStatus >= 500)) {
    // Not necessarily a failed Binding: an answer lost on the way back (transport, 5xx) may
    // hide one the apiserver applied, and the client's retry of that POST then meets our own
    // Binding as 409 "already assigned". Dropping the reservation of a bound pod would give
    // its share away twice before the informer catches up, so the pod as it is now decides:
    // bound here (this instance of it) is a success.
    auto now = client_.get(k8s::kPods, podNs, name);
    if (now.ok() && k8s::uid(*now) == pod.info.uid && k8s::nodeName(*now) == node) {
      if (k8s::annotation(*now, keys::kPodAssignment) != bindRequest.annotations[std::string(keys::kPodAssignment)])
        spdlog::warn("pod={} node={} bound, but not with this bind's assignment: the informer's copy will replace "
                     "the reservation", key, node);
      bound = k8s::ApiStatus();
    }
  }
  if (!bound.ok()) {
    cache_.release(pod.info.uid, reserved->id);  // a failed bind leaves no reservation behind
    return fail("bind-api-error", "binding to " + node + ": " + bound.error().describe(), pod.info.uid);
  }
  metrics_.podsPlaced.inc();
  metrics_.bindDuration.observe({"ok"}, secondsSince(start));
  if (options_.requeuer) options_.requeuer->forget(pod.info.uid);
  const std::string message = "assigned " + describeAssignment(reserved->assignment);
  spdlog::info("pod={} node={} bound: {}", key, node, message);
  events_.podEvent(podNs, name, pod.info.uid, "Normal", "DevicesAssigned", message);
  return http::Response::json(R"({"Error":""})");
}

http::Response Extender::preempt(const http::Request& request) {
  auto args = parsePreemptionArgs(request.body);
  if (!args.ok()) return badRequest("preempt: " + args.error().message);
  std::map<std::string, NodeVictims> answer;
  PodContext pod = podContext(args->pod, backends_);
  if (!pod.ours) {
    // Not a pod of ours: kube-scheduler's victims stand (IsInterested normally spares the call).
    return http::Response::json(preemptionResultJson(args->nodes));
  }
  // Not ready or invalid: no candidates. kube-scheduler then evicts nobody and retries the pod.
  if (!isReady() || !pod.invalid.empty()) {
    spdlog::info("pod={} preempt: no victims ({})", pod.info.key(), !isReady() ? "caches not synced" : pod.invalid);
    return http::Response::json(preemptionResultJson(answer));
  }
  std::string plan;  // for the pod's event
  // Room already held for nominees of higher priority is not the preemptor's to take.
  const HeldRoom heldRoom = heldAgainst(pod.info);
  for (const auto& [nodeName, proposed] : args->nodes) {
    std::optional<NodeState> state;
    std::string unusable;
    cache_.readNodes({nodeName}, [&](const std::vector<const NodeEntry*>& entries, std::chrono::system_clock::time_point now) {
      if (!entries[0]) unusable = "not known to vgpu-scheduler";
      else if (!nodeUsable(*entries[0], now, heartbeatTimeout_)) unusable = nodeUnusableReason(*entries[0], now, heartbeatTimeout_);
      else state.emplace(entries[0]->state);
    });
    if (!state) {
      spdlog::info("pod={} preempt: node={} left out: {}", pod.info.key(), nodeName, unusable);
      continue;
    }
    // Every pod of ours on the node; which of them would break a PodDisruptionBudget is not
    // known here (kube-scheduler sends a count per node), so none is marked.
    std::vector<VictimCandidate> candidates;
    for (HeldPod& held : cache_.podsOn(nodeName))
      if (held.ours && held.uid != pod.info.uid)
        candidates.push_back({held.uid, std::move(held.key), held.priority, false,
                              std::find(proposed.uids.begin(), proposed.uids.end(), held.uid) != proposed.uids.end(),
                              std::move(held.assignment)});
    if (auto room = heldRoom.find(nodeName); room != heldRoom.end()) {
      HeldState h = withRoomHeld(engine_, *state, room->second);
      if (!h.whole.empty()) {
        spdlog::info("pod={} preempt: node={} left out: held for {}", pod.info.key(), nodeName, h.whole);
        continue;
      }
      state = std::move(h.state);
    }
    auto choice = chooseVictims(engine_, *pod.prepared, pod.info.priority, *state, candidates);
    if (!choice.ok() || choice->victims.empty()) {
      spdlog::info("pod={} preempt: node={} left out: {}", pod.info.key(), nodeName,
                   choice.ok() ? "the pod fits there without evicting anyone" : choice.error().message);
      continue;
    }
    NodeVictims& chosen = answer[nodeName];
    std::string names;
    std::size_t fromProposal = 0;
    for (std::size_t i : choice->victims) {
      chosen.uids.push_back(candidates[i].uid);
      names += (names.empty() ? "" : ", ") + candidates[i].key;
      if (candidates[i].proposed) ++fromProposal;
    }
    // At most kube-scheduler's count, and only as far as its own victims are kept.
    chosen.pdbViolations = std::min<std::int64_t>(proposed.pdbViolations, static_cast<std::int64_t>(fromProposal));
    const std::string line = nodeName + " by evicting " + names + " (then " + describeAssignment(choice->assignment) + ")";
    spdlog::info("pod={} preempt: {} of {} proposed kept; {}", pod.info.key(), fromProposal, proposed.uids.size(), line);
    plan += (plan.empty() ? "" : "; ") + line;
  }
  if (!plan.empty())
    events_.podEvent(pod.info.podNamespace, pod.info.name, pod.info.uid, "Normal", "PreemptionPlanned",
                     "vgpu-scheduler can make room on " + plan + "; kube-scheduler picks one node and evicts its pods");
  return http::Response::json(preemptionResultJson(answer));
}

}  // namespace vgpu::scheduler
