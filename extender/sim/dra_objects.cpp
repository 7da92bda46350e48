#include "dra_objects.h"

#include <algorithm>

#include <boost/json.hpp>

#include "vgpu/quantity.h"

namespace vgpu::simulator {
namespace {

namespace json = boost::json;

constexpr const char* kApiVersion = "resource.k8s.io/v1";

std::string str(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

/// "<Kind> <ns>/<name>" for messages, and the checks every object of ours shares.
Result<std::string> identify(const json::object& m, const std::string& kind, bool namespaced, std::string& ns,
                             std::string& name) {
  const auto* meta = m.if_contains("metadata");
  if (meta && meta->is_object()) {
    name = str(meta->get_object(), "name");
    if (namespaced && !str(meta->get_object(), "namespace").empty()) ns = str(meta->get_object(), "namespace");
  }
  if (name.empty()) return makeError(kind + ": metadata.name is required");
  const std::string who = kind + " " + (namespaced ? ns + "/" : "") + name;
  const std::string api = str(m, "apiVersion");
  if (api != kApiVersion)
    return makeError(who + ": apiVersion \"" + api + "\": vgpu-sim reads " + kApiVersion +
                     " (the GA API; v1beta1 named deviceClassName directly on the request)");
  return who;
}

Result<std::vector<DeviceToleration>> tolerationsAt(const json::object& o, const std::string& path) {
  std::vector<DeviceToleration> out;
  const auto* list = o.if_contains("tolerations");
  if (!list || list->is_null()) return out;
  if (!list->is_array()) return makeError(path + ".tolerations: expected a list");
  for (std::size_t i = 0; i < list->get_array().size(); ++i) {
    const std::string at = path + ".tolerations[" + std::to_string(i) + "]";
    const auto& item = list->get_array()[i];
    if (!item.is_object()) return makeError(at + ": expected a map");
    const auto& t = item.get_object();
    for (const auto& [key, value] : t) {
      if (key != "key" && key != "operator" && key != "value" && key != "effect" && key != "tolerationSeconds")
        return makeError(at + "." + std::string(key) + ": unknown field (expected key, operator, value, effect, "
                                                        "tolerationSeconds)");
      if (key != "tolerationSeconds" && !value.is_string())
        return makeError(at + "." + std::string(key) + ": expected a string");
    }
    DeviceToleration tol{str(t, "key"), false, str(t, "value"), str(t, "effect")};
    const std::string op = t.contains("operator") ? str(t, "operator") : "Equal";
    if (op != "Equal" && op != "Exists") return makeError(at + ".operator: expected Equal or Exists, got \"" + op + "\"");
    tol.exists = op == "Exists";
    if (tol.exists && !tol.value.empty()) return makeError(at + ".value: must be empty with operator Exists");
    if (!tol.exists && tol.key.empty()) return makeError(at + ".key: is required with operator Equal");
    if (!tol.effect.empty() && tol.effect != "NoSchedule" && tol.effect != "NoExecute" && tol.effect != "None")
      return makeError(at + ".effect: expected NoSchedule, NoExecute or None, got \"" + tol.effect + "\"");
    out.push_back(std::move(tol));
  }
  return out;
}

Result<std::vector<DeviceSelector>> selectorsAt(const json::object& o, const std::string& path) {
  std::vector<DeviceSelector> out;
  const auto* list = o.if_contains("selectors");
  if (!list || list->is_null()) return out;
  if (!list->is_array()) return makeError(path + ".selectors: expected a list");
  for (std::size_t i = 0; i < list->get_array().size(); ++i) {
    const std::string at = path + ".selectors[" + std::to_string(i) + "]";
    const auto& s = list->get_array()[i];
    const auto* cel = s.is_object() ? s.get_object().if_contains("cel") : nullptr;
    const auto* expr = cel && cel->is_object() ? cel->get_object().if_contains("expression") : nullptr;
    if (!expr || !expr->is_string()) return makeError(at + ".cel.expression: expected a string");
    auto parsed = parseDeviceSelector(std::string(expr->get_string()));
    if (!parsed.ok()) return std::move(parsed).error().prefix(at + ".cel.expression");
    out.push_back(std::move(*parsed));
  }
  return out;
}

Result<std::map<std::string, CapacityAsk>> capacityAt(const json::object& exactly, const std::string& path) {
  std::map<std::string, CapacityAsk> out;
  const auto* cap = exactly.if_contains("capacity");
  if (!cap || cap->is_null()) return out;
  const auto* req = cap->is_object() ? cap->get_object().if_contains("requests") : nullptr;
  if (!req || !req->is_object()) return makeError(path + ".capacity.requests: expected a map of quantities");
  for (const auto& [key, v] : req->get_object()) {
    const std::string at = path + ".capacity.requests." + std::string(key);
    std::string text;
    if (v.is_string()) text = std::string(v.get_string());
    else if (v.is_int64() || v.is_uint64()) text = json::serialize(v);
    else return makeError(at + ": expected a quantity such as \"3000Mi\" or \"30\"");
    auto amount = parseQuantityValue(text);
    if (!amount.ok()) return std::move(amount).error().prefix(at);
    if (*amount < 0) return makeError(at + ": \"" + text + "\" is negative");
    out[std::string(key)] = {*amount, text};
  }
  return out;
}

Result<ClaimRequest> requestAt(const json::value& v, const std::string& path) {
  if (!v.is_object()) return makeError(path + ": expected a map");
  const auto& r = v.get_object();
  ClaimRequest out;
  out.name = str(r, "name");
  if (out.name.empty()) return makeError(path + ".name: is required");
  if (r.contains("firstAvailable"))
    return makeError(path + ".firstAvailable: prioritized lists are not modelled by vgpu-sim; write one request with "
                            "`exactly`");
  if (r.contains("deviceClassName"))
    return makeError(path + ".deviceClassName: in " + std::string(kApiVersion) +
                     " it goes under `exactly` (exactly.deviceClassName)");
  const auto* ex = r.if_contains("exactly");
  if (!ex || !ex->is_object()) return makeError(path + ".exactly: is required (a map with deviceClassName)");
  const auto& e = ex->get_object();
  const std::string at = path + ".exactly";
  for (const auto& [key, value] : e) {
    if (key == "deviceClassName" || key == "count" || key == "capacity" || key == "selectors" || key == "tolerations")
      continue;
    if (key == "allocationMode") {
      if (value.is_string() && value.get_string() == "ExactCount") continue;
      return makeError(at + ".allocationMode: vgpu-sim models ExactCount only, got " + json::serialize(value));
    }
    if (key == "adminAccess") {
      if (value.is_bool() && !value.get_bool()) continue;
      return makeError(at + ".adminAccess: admin access is not modelled by vgpu-sim");
    }
    return makeError(at + "." + std::string(key) +
                     ": unknown field (expected deviceClassName, allocationMode, count, capacity, selectors, "
                     "tolerations)");
  }
  out.deviceClassName = str(e, "deviceClassName");
  if (out.deviceClassName.empty()) return makeError(at + ".deviceClassName: is required");
  if (const auto* count = e.if_contains("count")) {
    if (!count->is_int64() || count->get_int64() < 1)
      return makeError(at + ".count: expected a whole number of at least 1, got " + json::serialize(*count));
    out.count = count->get_int64();
  }
  auto cap = capacityAt(e, at);
  if (!cap.ok()) return std::move(cap).error();
  out.capacity = std::move(*cap);
  auto sel = selectorsAt(e, at);
  if (!sel.ok()) return std::move(sel).error();
  out.selectors = std::move(*sel);
  auto tol = tolerationsAt(e, at);
  if (!tol.ok()) return std::move(tol).error();
  out.tolerations = std::move(*tol);
  return out;
}

Result<std::vector<ClaimConstraint>> constraintsAt(const json::object& devices, const std::string& path,
                                                   const std::vector<ClaimRequest>& requests) {
  std::vector<ClaimConstraint> out;
  const auto* list = devices.if_contains("constraints");
  if (!list || list->is_null()) return out;
  if (!list->is_array()) return makeError(path + ".constraints: expected a list");
  for (std::size_t i = 0; i < list->get_array().size(); ++i) {
    const std::string at = path + ".constraints[" + std::to_string(i) + "]";
    const auto& v = list->get_array()[i];
    if (!v.is_object()) return makeError(at + ": expected a map");
    ClaimConstraint c;
    const std::string match = str(v.get_object(), "matchAttribute");
    const std::string distinct = str(v.get_object(), "distinctAttribute");
    if (match.empty() == distinct.empty()) return makeError(at + ": needs exactly one of matchAttribute and distinctAttribute");
    c.distinct = !distinct.empty();
    c.attribute = c.distinct ? distinct : match;
    const std::string field = at + (c.distinct ? ".distinctAttribute" : ".matchAttribute");
    const auto slash = c.attribute.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == c.attribute.size())
      return makeError(field + ": \"" + c.attribute + "\" is not a fully qualified name (<domain>/<name>, e.g. " +
                       "nvidia.vgpu.io/numaNode)");
    if (const auto* names = v.get_object().if_contains("requests"); names && !names->is_null()) {
      if (!names->is_array()) return makeError(at + ".requests: expected a list of request names");
      for (const auto& n : names->get_array()) {
        const std::string name = n.is_string() ? std::string(n.get_string()) : std::string();
        if (std::none_of(requests.begin(), requests.end(), [&](const ClaimRequest& r) { return r.name == name; }))
          return makeError(at + ".requests: \"" + name + "\" is not a request of this claim");
        c.requests.push_back(name);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

/// spec (of a claim) at `path`.
Result<ClaimSpec> claimSpecAt(const json::value* spec, const std::string& path, ClaimSpec out) {
  const auto* devices = spec && spec->is_object() ? spec->get_object().if_contains("devices") : nullptr;
  const auto* requests = devices && devices->is_object() ? devices->get_object().if_contains("requests") : nullptr;
  if (!requests || !requests->is_array() || requests->get_array().empty())
    return makeError(path + ".devices.requests: expected a non-empty list");
  for (std::size_t i = 0; i < requests->get_array().size(); ++i) {
    auto r = requestAt(requests->get_array()[i], path + ".devices.requests[" + std::to_string(i) + "]");
    if (!r.ok()) return std::move(r).error();
    for (const auto& prior : out.requests)
      if (prior.name == r->name)
        return makeError(path + ".devices.requests[" + std::to_string(i) + "].name: duplicate request \"" + r->name + "\"");
    out.requests.push_back(std::move(*r));
  }
  auto constraints = constraintsAt(devices->get_object(), path + ".devices", out.requests);
  if (!constraints.ok()) return std::move(constraints).error();
  out.constraints = std::move(*constraints);
  return out;
}

}  // namespace

Result<ClaimSpec> parseResourceClaim(const json::object& m) {
  ClaimSpec c;
  auto who = identify(m, "ResourceClaim", true, c.ns, c.name);
  if (!who.ok()) return std::move(who).error();
  auto spec = claimSpecAt(m.if_contains("spec"), "spec", std::move(c));
  if (!spec.ok()) return std::move(spec).error().prefix(*who);
  return spec;
}

Result<ClaimSpec> parseResourceClaimTemplate(const json::object& m) {
  ClaimSpec c;
  auto who = identify(m, "ResourceClaimTemplate", true, c.ns, c.name);
  if (!who.ok()) return std::move(who).error();
  const auto* outer = m.if_contains("spec");
  const auto* inner = outer && outer->is_object() ? outer->get_object().if_contains("spec") : nullptr;
  if (!inner) return makeError(*who + ": spec.spec: is required (the claim's spec)");
  auto spec = claimSpecAt(inner, "spec.spec", std::move(c));
  if (!spec.ok()) return std::move(spec).error().prefix(*who);
  return spec;
}

Result<DeviceClass> parseDeviceClass(const json::object& m) {
  DeviceClass c;
  std::string ns;
  auto who = identify(m, "DeviceClass", false, ns, c.name);
  if (!who.ok()) return std::move(who).error();
  const auto* spec = m.if_contains("spec");
  if (spec && spec->is_object()) {
    auto sel = selectorsAt(spec->get_object(), "spec");
    if (!sel.ok()) return std::move(sel).error().prefix(*who);
    c.selectors = std::move(*sel);
  }
  return c;
}

Result<std::vector<PodClaimRef>> parsePodClaims(const json::object& pod) {
  std::vector<PodClaimRef> out;
  const auto* spec = pod.if_contains("spec");
  const auto* list = spec && spec->is_object() ? spec->get_object().if_contains("resourceClaims") : nullptr;
  if (!list || list->is_null()) return out;
  if (!list->is_array()) return makeError("spec.resourceClaims: expected a list");
  for (std::size_t i = 0; i < list->get_array().size(); ++i) {
    const std::string at = "spec.resourceClaims[" + std::to_string(i) + "]";
    const auto& v = list->get_array()[i];
    if (!v.is_object()) return makeError(at + ": expected a map");
    PodClaimRef r{str(v.get_object(), "name"), str(v.get_object(), "resourceClaimName"),
                  str(v.get_object(), "resourceClaimTemplateName")};
    if (r.name.empty()) return makeError(at + ".name: is required");
    if (r.claimName.empty() == r.templateName.empty())
      return makeError(at + ": needs exactly one of resourceClaimName and resourceClaimTemplateName");
    out.push_back(std::move(r));
  }
  return out;
}

DeviceClass chartDeviceClass(const std::string& driver) {
  auto selector = parseDeviceSelector("device.driver == \"" + driver + "\"");
  return {driver, {std::move(*selector)}};
}

}  // namespace vgpu::simulator
