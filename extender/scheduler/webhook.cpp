#include "webhook.h"

#include <algorithm>
#include <chrono>
#include <functional>
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

/// A container of the pod as it sits in the JSON.
struct ContainerPlace {
  std::string path;  ///< e.g. "/spec/initContainers/0"
  const char* kind;  ///< "container", "init container", "ephemeral container"
  std::string name;
  const json::object* json;  ///< null when the entry is not an object
};

constexpr std::pair<const char*, const char*> kContainerGroups[] = {
    {"initContainers", "init container"}, {"containers", "container"}, {"ephemeralContainers", "ephemeral container"}};

std::vector<ContainerPlace> containerPlaces(const json::object* spec, std::string_view onlyGroup = {}) {
  std::vector<ContainerPlace> out;
  for (const auto& [group, kind] : kContainerGroups) {
    if (!onlyGroup.empty() && onlyGroup != group) continue;
    const json::value* arr = spec ? spec->if_contains(group) : nullptr;
    if (!arr || !arr->is_array()) continue;
    for (size_t i = 0; i < arr->get_array().size(); ++i) {
      const auto& c = arr->get_array()[i];
      ContainerPlace place{"/spec/" + std::string(group) + "/" + std::to_string(i), kind, {},
                           c.is_object() ? &c.get_object() : nullptr};
      if (place.json)
        if (const json::value* n = place.json->if_contains("name"); n && n->is_string()) place.name = n->get_string();
      out.push_back(std::move(place));
    }
  }
  return out;
}

/// The backends whose resources a container names in its limits or requests.
std::vector<const Backend*> backendsAskedFor(const BackendSet& backends, const json::object& container) {
  std::vector<const Backend*> out;
  const json::object* resources = objectAt(container, "resources");
  for (const char* field : {"limits", "requests"}) {
    const json::object* amounts = resources ? objectAt(*resources, field) : nullptr;
    if (!amounts) continue;
    for (const auto& entry : *amounts)
      if (const Backend* b = backends.ownerOf(entry.key()); b && std::find(out.begin(), out.end(), b) == out.end())
        out.push_back(b);
  }
  return out;
}

/// A protected variable a container sets (env) or may set (envFrom with a prefix).
struct EnvFinding {
  std::string array;  ///< JSON pointer of the env or envFrom array
  size_t index = 0;   ///< the entry to remove when stripping
  std::string what;   ///< for messages, e.g. `container "main" sets LD_PRELOAD`
};

/// Whether variables named `prefix` + any key can be covered by `p`.
bool prefixCanMatch(std::string_view prefix, const ProtectedEnv& p) {
  const bool wildcard = !p.pattern.empty() && p.pattern.back() == '*';
  const std::string_view fixed = std::string_view(p.pattern).substr(0, p.pattern.size() - (wildcard ? 1 : 0));
  return fixed.starts_with(prefix) || (wildcard && prefix.starts_with(fixed));
}

/// The protected variables `c` sets: each backend's for containers that ask for it, and those
/// no container may set. An envFrom without a prefix cannot be inspected at admission (the
/// ConfigMap or Secret may change later) and is left alone (docs/security.md).
std::vector<EnvFinding> protectedEnvIn(const BackendSet& backends, const ContainerPlace& c) {
  std::vector<EnvFinding> out;
  if (!c.json) return out;
  const std::vector<const Backend*> used = backendsAskedFor(backends, *c.json);
  auto applies = [&](const Backend& b, const ProtectedEnv& p) {
    return p.scope == ProtectedEnv::Scope::kEveryContainer || std::find(used.begin(), used.end(), &b) != used.end();
  };
  auto firstMatch = [&](const std::function<bool(const ProtectedEnv&)>& test) -> const ProtectedEnv* {
    for (const auto& b : backends.all())
      for (const ProtectedEnv& p : b->allocator().protectedEnv())
        if (applies(*b, p) && test(p)) return &p;
    return nullptr;
  };
  const std::string who = std::string(c.kind) + " \"" + c.name + "\"";
  if (const json::value* env = c.json->if_contains("env"); env && env->is_array()) {
    for (size_t i = 0; i < env->get_array().size(); ++i) {
      const json::value& e = env->get_array()[i];
      const json::value* n = e.is_object() ? e.get_object().if_contains("name") : nullptr;
      if (!n || !n->is_string()) continue;
      const std::string_view name = n->get_string();
      if (firstMatch([&](const ProtectedEnv& p) { return p.matches(name); }))
        out.push_back({c.path + "/env", i, who + " sets " + std::string(name)});
    }
  }
  if (const json::value* from = c.json->if_contains("envFrom"); from && from->is_array()) {
    for (size_t i = 0; i < from->get_array().size(); ++i) {
      const json::value& e = from->get_array()[i];
      const json::value* pre = e.is_object() ? e.get_object().if_contains("prefix") : nullptr;
      if (!pre || !pre->is_string() || pre->get_string().empty()) continue;
      const std::string_view prefix = pre->get_string();
      if (const ProtectedEnv* p = firstMatch([&](const ProtectedEnv& p) { return prefixCanMatch(prefix, p); }))
        out.push_back({c.path + "/envFrom", i,
                       who + " takes envFrom with prefix " + std::string(prefix) + ", which could set " + p->pattern});
    }
  }
  return out;
}

/// HAMi-compatibility mode: a compute request above 100 percent, which HAMi clamps to 100
/// (the whole device) and vgpu refuses, is rewritten to 100 in `c` and in the pod (limits,
/// and requests where they name it), with a warning each.
void clampComputeAsHami(const BackendSet& backends, ContainerResources& c, const ContainerPlace& place,
                        json::array& patch, std::vector<std::string>& warnings) {
  const json::object* resources = place.json ? objectAt(*place.json, "resources") : nullptr;
  for (auto& [name, value] : c.limits) {
    const Backend* b = backends.ownerOf(name);
    if (!b || value <= 100) continue;
    const auto& owned = b->allocator().resources();
    if (std::none_of(owned.begin(), owned.end(),
                     [&](const ResourceName& r) { return r.name == name && r.role == VGPU_RESOURCE_CORES; }))
      continue;
    for (const char* field : {"limits", "requests"})
      if (const json::object* amounts = resources ? objectAt(*resources, field) : nullptr; amounts && amounts->contains(name))
        patch.push_back(json::object{{"op", "replace"},
                                     {"path", place.path + "/resources/" + field + "/" + jsonPointerEscape(name)},
                                     {"value", "100"}});
    warnings.push_back("vgpu: " + std::string(place.kind) + " \"" + c.name + "\" asks for " + name + " " +
                       std::to_string(value) + ", above 100; in HAMi-compatibility mode it is set to 100 (the whole "
                       "device's compute), as HAMi does");
    value = 100;
  }
}

std::optional<std::string> annotationOf(const json::object* object, std::string_view key) {
  if (!object) return std::nullopt;
  if (auto v = k8s::annotation(*object, key)) return std::string(*v);
  return std::nullopt;
}

std::string stringAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

}  // namespace

Result<EnvPolicy> parseEnvPolicy(std::string_view text) {
  if (text == "refuse") return EnvPolicy::kRefuse;
  if (text == "strip") return EnvPolicy::kStrip;
  return makeError("the webhook's environment policy must be \"refuse\" or \"strip\", got \"" + std::string(text) + "\"");
}

Result<std::vector<std::string>> parseTrustedUsers(std::string_view text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(' ') == std::string_view::npos) return out;
  size_t start = 0;
  for (size_t n = 1;; ++n) {
    const size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) return makeError("entry " + std::to_string(n) + " of \"" + std::string(text) + "\" is empty");
    if (item.find_first_of(" \t") != std::string_view::npos)
      return makeError("\"" + std::string(item) + "\" is not a user name (it has a space)");
    out.emplace_back(item);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

std::string jsonPointerEscape(std::string_view segment) {
  std::string out;
  for (char c : segment) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

Webhook::Webhook(const BackendSet& backends, WebhookOptions options, SchedulerMetrics& metrics, QuotaLookup quotaLimits)
    : backends_(backends), options_(std::move(options)), quotaResources_(backends), quotaLimits_(std::move(quotaLimits)),
      metrics_(metrics) {}

bool Webhook::trusted(std::string_view user) const {
  return !user.empty() && std::find(options_.trustedUsers.begin(), options_.trustedUsers.end(), user) !=
                              options_.trustedUsers.end();
}

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

  const std::string operation = stringAt(*req, "operation");
  const std::string subResource = stringAt(*req, "subResource");
  std::string user;
  if (const json::object* info = objectAt(*req, "userInfo")) user = stringAt(*info, "username");

  // Every pod, labels and scheduler notwithstanding: escape hatches (docs/security.md).
  auto secure = [&]() -> Outcome {
    Outcome ok;
    if (operation != "CREATE" && operation != "UPDATE") return ok;
    if (const json::object* kind = objectAt(*req, "kind")) {
      const json::value* k = kind->if_contains("kind");
      if (k && k->is_string() && k->get_string() != "Pod") return ok;
    }
    const json::object* object = objectAt(*req, "object");
    if (!object) return ok;  // the placement step below refuses a CREATE without one
    const json::object* old = objectAt(*req, "oldObject");
    const json::object* spec = objectAt(*object, "spec");
    const std::string ns = stringAt(*req, "namespace");
    std::string pod = ns + "/";
    if (const json::object* meta = objectAt(*object, "metadata")) {
      const std::string name = stringAt(*meta, "name");
      pod += name.empty() ? stringAt(*meta, "generateName") + "(generated)" : name;
    }

    if (subResource.empty() && !trusted(user)) {
      for (std::string_view key : keys::kReservedPodAnnotations) {
        const auto now = annotationOf(object, key);
        if (operation == "CREATE") {
          // Copies of a running pod's manifest carry them innocently: removed, with a warning.
          if (!now) continue;
          ok.patch.push_back(json::object{{"op", "remove"}, {"path", "/metadata/annotations/" + jsonPointerEscape(key)}});
          ok.warnings.push_back("vgpu: removed annotation " + std::string(key) +
                                " from pod " + pod + ": only vgpu-scheduler and the node agent write it");
        } else if (now != annotationOf(old, key)) {
          return deny(403, "Forbidden",
                      "user \"" + user + "\" may not " + (now ? "set" : "remove") + " annotation " + std::string(key) +
                          " of pod " + pod + ": only vgpu-scheduler and the node agent write it");
        }
      }
    }

    std::vector<ContainerPlace> places;
    if (operation == "CREATE" && subResource.empty()) {
      places = containerPlaces(spec);
    } else if (operation == "UPDATE" && subResource == "ephemeralcontainers") {
      // Ephemeral containers can only be added; those already there were checked before.
      std::vector<ContainerPlace> before = containerPlaces(old ? objectAt(*old, "spec") : nullptr, "ephemeralContainers");
      for (auto& c : containerPlaces(spec, "ephemeralContainers"))
        if (std::none_of(before.begin(), before.end(), [&](const ContainerPlace& b) { return b.name == c.name; }))
          places.push_back(std::move(c));
    }
    std::string serviceAccount = spec ? stringAt(*spec, "serviceAccountName") : "";
    if (serviceAccount.empty()) serviceAccount = "default";
    // A pod that runs as one of our service accounts is ours (the node agent sees every GPU).
    if (trusted("system:serviceaccount:" + ns + ":" + serviceAccount)) return ok;
    std::vector<EnvFinding> found;
    for (const auto& c : places)
      for (auto& f : protectedEnvIn(backends_, c)) found.push_back(std::move(f));
    if (found.empty()) return ok;
    if (options_.envPolicy == EnvPolicy::kRefuse) {
      std::string message = "pod " + pod + ": ";
      for (size_t i = 0; i < found.size(); ++i) message += (i ? "; " : "") + found[i].what;
      return deny(403, "Forbidden",
                  message + ": only the node agent may choose devices and limits (docs/security.md, \"Webhook\"); "
                            "remove " + (found.size() == 1 ? "it" : "them"));
    }
    // Later entries first, so that each removal leaves the indices of the next one valid.
    std::sort(found.begin(), found.end(), [](const EnvFinding& a, const EnvFinding& b) {
      return a.array != b.array ? a.array < b.array : a.index > b.index;
    });
    for (const auto& f : found) {
      ok.patch.push_back(json::object{{"op", "remove"}, {"path", f.array + "/" + std::to_string(f.index)}});
      ok.warnings.push_back("vgpu: removed from pod " + pod + ": " + f.what +
                            " (only the node agent may choose devices and limits)");
    }
    return ok;
  };

  auto decide = [&]() -> Outcome {
    const json::value* op = req->if_contains("operation");
    if (!op || !op->is_string() || op->get_string() != "CREATE") return {};
    if (const json::object* kind = objectAt(*req, "kind")) {
      const json::value* k = kind->if_contains("kind");
      if (k && k->is_string() && k->get_string() != "Pod") return {};
    }
    const json::object* object = objectAt(*req, "object");
    if (!object) return deny(400, "BadRequest", "the AdmissionReview carries no pod object");
    for (std::string_view optOutLabel : {keys::kWebhookOptOutLabel, keys::kHamiWebhookOptOutLabel})
      if (auto optOut = k8s::label(*object, optOutLabel); optOut && *optOut == "ignore") return {};
    const json::object* spec = objectAt(*object, "spec");
    std::string schedulerName;
    if (spec)
      if (const json::value* s = spec->if_contains("schedulerName"); s && s->is_string()) schedulerName = s->get_string();
    if (!schedulerName.empty() && schedulerName != "default-scheduler" && schedulerName != options_.schedulerName) return {};

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
                        "; pods that ask for shared devices must be placed by " + options_.schedulerName +
                        " so their devices are accounted (remove nodeName, use a nodeSelector instead)");

    // Where each container sits in the JSON: parsePod lists init containers first.
    std::vector<ContainerPlace> places = containerPlaces(spec, "initContainers");
    for (auto& c : containerPlaces(spec, "containers")) places.push_back(std::move(c));
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
      if (options_.hamiCompat) clampComputeAsHami(backends_, c, places[i], ok.patch, ok.warnings);
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
    if (quotaLimits_)
      if (auto limits = quotaLimits_(pod->podNamespace); !limits.empty())
        if (std::string over = quotaExceeded(pod->podNamespace, limits, {}, quotaResources_.leastUsage(*request),
                                             quotaResources_);
            !over.empty())
          return deny(403, "Forbidden", "pod " + pod->key() + " can never fit its namespace's quota: " + over);
    if (schedulerName != options_.schedulerName)
      ok.patch.push_back(json::object{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", options_.schedulerName}});
    for (const auto& c : containers)
      if (c.init)
        if (std::string w = initContainerWarning(backends_, c); !w.empty()) ok.warnings.push_back(std::move(w));
    return ok;
  };

  Outcome outcome = secure();
  if (outcome.allowed) {
    Outcome placed = decide();
    if (!placed.allowed) {
      outcome = std::move(placed);
    } else {
      for (auto& op : placed.patch) outcome.patch.push_back(std::move(op));
      for (auto& w : placed.warnings) outcome.warnings.push_back(std::move(w));
    }
  }
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
