#include "webhook.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "vgpu/annotations.h"
#include "vgpu/codec/base64.h"
#include "vgpu/k8s/object.h"
#include "vgpu/pod_info.h"
#include "vgpu/pod_request.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";

struct Outcome {
  bool allowed = true;
  int code = 200;
  std::string reason;
  std::string message;
  json::array patch;
  std::vector<std::string> warnings;  ///< AdmissionResponse.warnings: shown to the client, never blocking
};

Outcome deny(int code, std::string reason, std::string message) {
  Outcome o;
  o.allowed = false;
  o.code = code;
  o.reason = std::move(reason);
  o.message = "vgpu: " + std::move(message);
  return o;
}

const json::object* objectAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

/// Whether node agents register `resource` with the kubelet (a device count), rather than
/// it existing only in vgpu-scheduler's accounting (memory, cores, ...).
bool advertised(const Backend& backend, std::string_view resource) {
  for (const auto& r : backend.allocator().resources())
    if (r.name == resource) return r.advertised;
  return false;
}

/// Kubelets before 1.31 drop extended resources missing from the node's allocatable from
/// app containers only, not from init containers (kubernetes/kubernetes#124255, fixed in
/// 1.31 by #124273): an init container naming a resource no node advertises fails
/// admission there with OutOf<resource>. Empty when `c` names none.
std::string initContainerWarning(const BackendSet& backends, const ContainerResources& c) {
  std::vector<std::string> missing, counts;
  for (const auto& [name, value] : c.limits) {
    const Backend* b = backends.ownerOf(name);
    if (!b || advertised(*b, name)) continue;
    missing.push_back(name);
    for (const auto& r : b->allocator().resources())
      if (r.advertised && std::find(counts.begin(), counts.end(), r.name) == counts.end()) counts.push_back(r.name);
  }
  if (missing.empty()) return {};
  auto join = [](const std::vector<std::string>& v, std::string_view last) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? std::string(last) : ", ") + v[i];
    return out;
  };
  std::string w = "vgpu: init container \"" + c.name + "\" asks for " + join(missing, " and ") +
                  ", which no node advertises; kubelets older than 1.31 reject such a pod (OutOf" + missing.front() +
                  ", kubernetes issue 124255): run kubelet 1.31 or newer";
  if (!counts.empty()) w += ", or ask for " + join(counts, " or ") + " alone in init containers";
  return w;
}

}  // namespace

std::string jsonPointerEscape(std::string_view segment) {
  std::string out;
  for (char c : segment) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

Webhook::Webhook(const BackendSet& backends, std::string schedulerName, SchedulerMetrics& metrics)
    : backends_(backends), schedulerName_(std::move(schedulerName)), metrics_(metrics) {}

http::Response Webhook::review(const http::Request& request) {
  const auto start = std::chrono::steady_clock::now();
  json::parse_options opts;
  opts.max_depth = 128;
  boost::system::error_code ec;
  json::value body = json::parse(request.body, ec, {}, opts);
  auto bad = [&](const std::string& message) {
    metrics_.webhookReviews.inc({"malformed"});
    spdlog::warn("webhook: malformed AdmissionReview from {}: {}", request.remote, message);
    return http::Response::text("vgpu webhook: " + message + "\n", 400);
  };
  if (ec) return bad("the body is not JSON: " + ec.message());
  if (!body.is_object()) return bad("the body is not a JSON object");
  const json::object& review = body.get_object();
  if (auto* v = review.if_contains("apiVersion"); v && (!v->is_string() || v->get_string() != kApiVersion))
    return bad("only AdmissionReview " + std::string(kApiVersion) + " is served (set admissionReviewVersions: [v1])");
  const json::object* req = objectAt(review, "request");
  if (!req) return bad("AdmissionReview has no request");
  const json::value* uidValue = req->if_contains("uid");
  if (!uidValue || !uidValue->is_string() || uidValue->get_string().empty()) return bad("AdmissionReview request has no uid");
  const std::string uid(uidValue->get_string());

  auto decide = [&]() -> Outcome {
    const json::value* op = req->if_contains("operation");
    if (!op || !op->is_string() || op->get_string() != "CREATE") return {};
    if (const json::object* kind = objectAt(*req, "kind")) {
      const json::value* k = kind->if_contains("kind");
      if (k && k->is_string() && k->get_string() != "Pod") return {};
    }
    const json::object* object = objectAt(*req, "object");
    if (!object) return deny(400, "BadRequest", "the AdmissionReview carries no pod object");
    if (auto optOut = k8s::label(*object, keys::kWebhookOptOutLabel); optOut && *optOut == "ignore") return {};
    const json::object* spec = objectAt(*object, "spec");
    std::string schedulerName;
    if (spec)
      if (const json::value* s = spec->if_contains("schedulerName"); s && s->is_string()) schedulerName = s->get_string();
    if (!schedulerName.empty() && schedulerName != "default-scheduler" && schedulerName != schedulerName_) return {};

    // At CREATE the name may still be empty (generateName) and the namespace only in the request.
    json::object copy = *object;
    auto& meta = copy["metadata"];
    if (!meta.is_object()) meta = json::object();
    auto& m = meta.get_object();
    std::string ns;
    if (const json::value* n = req->if_contains("namespace"); n && n->is_string()) ns = n->get_string();
    if (!ns.empty()) m["namespace"] = ns;
    if (const json::value* n = m.if_contains("name"); !n || !n->is_string() || n->get_string().empty()) {
      std::string generate;
      if (const json::value* g = m.if_contains("generateName"); g && g->is_string()) generate = g->get_string();
      m["name"] = generate.empty() ? "(unnamed)" : generate + "(generated)";
    }
    auto pod = parsePod(json::value(std::move(copy)));
    if (!pod.ok()) return deny(400, "BadRequest", pod.error().message);

    bool managed = false;
    for (const auto& c : pod->containers)
      for (const auto& [name, value] : c.limits)
        if (backends_.ownerOf(name)) managed = true;
    if (!managed) return {};

    if (spec)
      if (const json::value* n = spec->if_contains("nodeName"); n && n->is_string() && !n->get_string().empty())
        return deny(403, "Forbidden",
                    "pod " + pod->key() + " sets spec.nodeName=" + std::string(n->get_string()) +
                        "; pods that ask for shared devices must be placed by " + schedulerName_ +
                        " so their devices are accounted (remove nodeName, use a nodeSelector instead)");

    // Where each container sits in the JSON: parsePod lists init containers first.
    struct Place {
      std::string path;
      const json::object* json;
    };
    std::vector<Place> places;
    for (const char* group : {"initContainers", "containers"}) {
      const json::value* arr = spec ? spec->if_contains(group) : nullptr;
      if (!arr || !arr->is_array()) continue;
      for (size_t i = 0; i < arr->get_array().size(); ++i) {
        const auto& c = arr->get_array()[i];
        places.push_back({"/spec/" + std::string(group) + "/" + std::to_string(i), c.is_object() ? &c.get_object() : nullptr});
      }
    }
    if (places.size() != pod->containers.size()) return deny(400, "BadRequest", "the pod's containers cannot be read");

    Outcome ok;
    std::vector<ContainerResources> containers = pod->containers;
    for (size_t i = 0; i < containers.size(); ++i) {
      ContainerResources& c = containers[i];
      std::vector<const Backend*> used;
      for (const auto& [name, value] : c.limits)
        if (const Backend* b = backends_.ownerOf(name); b && std::find(used.begin(), used.end(), b) == used.end())
          used.push_back(b);
      if (used.empty()) continue;
      const json::object* cj = places[i].json;
      if (const json::object* sc = cj ? objectAt(*cj, "securityContext") : nullptr) {
        const json::value* priv = sc->if_contains("privileged");
        if (priv && priv->is_bool() && priv->get_bool())
          return deny(403, "Forbidden",
                      "container \"" + c.name + "\" is privileged and asks for a device share: a privileged container "
                      "sees every device and escapes its limits; drop privileged or the device resources");
      }
      std::map<std::string, std::int64_t> added;
      for (const Backend* b : used) {
        auto defaults = b->allocator().admissionDefaults(c, pod->annotations);
        if (!defaults.ok())
          return deny(400, "BadRequest", defaults.error().message);
        for (const auto& [name, value] : *defaults)
          // Only a statement of what the scheduler assumes anyway; on an init container a
          // resource no node advertises would make kubelets before 1.31 reject the pod.
          if (!c.limits.contains(name) && (!c.init || advertised(*b, name))) added[name] = value;
      }
      if (added.empty()) continue;
      const json::object* resources = cj ? objectAt(*cj, "resources") : nullptr;
      const json::object* limits = resources ? objectAt(*resources, "limits") : nullptr;
      json::object addedJson;
      for (const auto& [name, value] : added) {
        c.limits[name] = value;
        addedJson[name] = std::to_string(value);
      }
      if (!resources) {
        ok.patch.push_back(json::object{{"op", "add"}, {"path", places[i].path + "/resources"},
                                        {"value", json::object{{"limits", addedJson}}}});
      } else if (!limits) {
        ok.patch.push_back(json::object{{"op", "add"}, {"path", places[i].path + "/resources/limits"}, {"value", addedJson}});
      } else {
        for (const auto& [name, value] : added)
          ok.patch.push_back(json::object{{"op", "add"},
                                          {"path", places[i].path + "/resources/limits/" + jsonPointerEscape(name)},
                                          {"value", std::to_string(value)}});
      }
    }
    // The request as the scheduler will see it must be valid, or the pod would pend forever.
    auto request = buildPodRequest(backends_, pod->podNamespace, pod->name, containers, pod->annotations);
    if (!request.ok()) return deny(400, "BadRequest", request.error().message);
    if (schedulerName != schedulerName_)
      ok.patch.push_back(json::object{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", schedulerName_}});
    for (const auto& c : containers)
      if (c.init)
        if (std::string w = initContainerWarning(backends_, c); !w.empty()) ok.warnings.push_back(std::move(w));
    return ok;
  };

  Outcome outcome = decide();
  json::object response{{"uid", uid}, {"allowed", outcome.allowed}};
  if (!outcome.warnings.empty()) {
    json::array warnings;
    for (const auto& w : outcome.warnings) {
      warnings.emplace_back(w);
      spdlog::info("webhook: warned {}: {}", uid, w);
    }
    response["warnings"] = std::move(warnings);
  }
  if (!outcome.allowed) {
    response["status"] = json::object{{"metadata", json::object()}, {"status", "Failure"},
                                      {"message", outcome.message}, {"reason", outcome.reason}, {"code", outcome.code}};
    metrics_.webhookReviews.inc({"denied"});
    spdlog::info("webhook: denied {}: {}", uid, outcome.message);
  } else if (!outcome.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64Encode(json::serialize(outcome.patch));
    metrics_.webhookReviews.inc({"mutated"});
  } else {
    metrics_.webhookReviews.inc({"untouched"});
  }
  json::object out{{"apiVersion", kApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(response)}};
  metrics_.webhookDuration.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return http::Response::json(json::serialize(out));
}

}  // namespace vgpu::scheduler
