// resource.k8s.io/v1 as the apiserver stores it: ResourceSlice defaulting and validation
// (the limits, request-policy and taint rules of reference/k8s-protocols.md 6.1) and the
// dropping of fields whose feature gate is off (DRAConsumableCapacity:
// allowMultipleAllocations, requestPolicy; DRADeviceTaints: taints, kept where the stored
// slice already has some).
#include <algorithm>
#include <cctype>

#include <boost/json.hpp>

#include "store.h"
#include "vgpu/quantity.h"

namespace vgpu::fakes::detail {
namespace json = boost::json;

namespace {

std::optional<Reply> invalid(const std::string& name, const std::string& field, const std::string& what) {
  return statusReply(422, "Invalid", "ResourceSlice.resource.k8s.io \"" + name + "\" is invalid: " + field + ": " + what);
}

std::optional<std::int64_t> milli(const json::value* v) {
  if (!v || !v->is_string()) return std::nullopt;
  auto q = parseQuantityMilli(v->get_string());
  if (!q.ok()) return std::nullopt;
  return *q;
}

/// A DNS-1123 label-ish segment: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63.
bool nameSegment(std::string_view v) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (v.empty() || v.size() > 63 || !alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

/// A label name: [prefix/]name, the prefix a lower-case DNS subdomain of at most 253.
bool labelName(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) return nameSegment(key);
  const auto prefix = key.substr(0, slash);
  const bool dns = !prefix.empty() && prefix.size() <= 253 &&
                   std::all_of(prefix.begin(), prefix.end(), [](char c) {
                     return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
                   });
  return dns && nameSegment(key.substr(slash + 1));
}

bool hasTaints(const json::object* slice) {
  const auto* spec = slice ? slice->if_contains("spec") : nullptr;
  const auto* devs = spec && spec->is_object() ? spec->get_object().if_contains("devices") : nullptr;
  if (!devs || !devs->is_array()) return false;
  return std::any_of(devs->get_array().begin(), devs->get_array().end(), [](const json::value& d) {
    const auto* t = d.is_object() ? d.get_object().if_contains("taints") : nullptr;
    return t && t->is_array() && !t->get_array().empty();
  });
}

/// Defaults (timeAdded, as the apiserver's decoding does whatever the gate) and checks a
/// device's taints.
std::optional<Reply> admitTaints(const std::string& slice, const std::string& at, json::value& taints) {
  if (!taints.is_array()) return invalid(slice, at + ".taints", "must be a list");
  if (taints.get_array().size() > 16) return invalid(slice, at + ".taints", "Too many: must have at most 16 items");
  std::size_t i = 0;
  for (auto& t : taints.get_array()) {
    const std::string ta = at + ".taints[" + std::to_string(i++) + "]";
    if (!t.is_object()) return invalid(slice, ta, "must be an object");
    auto& o = t.get_object();
    const auto* key = o.if_contains("key");
    if (!key || !key->is_string() || !labelName(key->get_string()))
      return invalid(slice, ta + ".key", "Invalid value: must be a label name");
    if (const auto* v = o.if_contains("value");
        v && (!v->is_string() || (!v->get_string().empty() && !nameSegment(v->get_string()))))
      return invalid(slice, ta + ".value", "Invalid value: must be a label value");
    const auto* effect = o.if_contains("effect");
    if (!effect || !effect->is_string() || effect->get_string().empty())
      return invalid(slice, ta + ".effect", "Required value");
    if (effect->get_string() != "NoSchedule" && effect->get_string() != "NoExecute" && effect->get_string() != "None")
      return invalid(slice, ta + ".effect",
                     "Unsupported value: \"" + std::string(effect->get_string()) +
                         "\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"");
  }
  return std::nullopt;
}

void defaultTaints(json::object& device) {
  auto* taints = device.if_contains("taints");
  if (!taints || !taints->is_array()) return;
  for (auto& t : taints->get_array())
    if (t.is_object() && !t.get_object().contains("timeAdded")) t.get_object()["timeAdded"] = nowRfc3339();
}

void dropGatedFields(json::object& device) {
  device.erase("allowMultipleAllocations");
  if (auto* cap = device.if_contains("capacity"); cap && cap->is_object())
    for (auto& [n, c] : cap->get_object())
      if (c.is_object()) c.get_object().erase("requestPolicy");
}

std::optional<Reply> checkPolicy(const std::string& slice, const std::string& at, const json::object& capacity) {
  const auto* policy = capacity.if_contains("requestPolicy");
  if (!policy) return std::nullopt;
  if (!policy->is_object()) return invalid(slice, at + ".requestPolicy", "must be an object");
  const auto& p = policy->get_object();
  const auto value = milli(capacity.if_contains("value"));
  if (!value) return invalid(slice, at + ".value", "Required value");
  const auto* range = p.if_contains("validRange");
  const auto* values = p.if_contains("validValues");
  if (range && values) return invalid(slice, at + ".requestPolicy", "validValues and validRange are mutually exclusive");
  const auto def = milli(p.if_contains("default"));
  if ((range || values) && !def) return invalid(slice, at + ".requestPolicy.default", "Required value");
  if (values) {
    if (!values->is_array() || values->get_array().empty() || values->get_array().size() > 10)
      return invalid(slice, at + ".requestPolicy.validValues", "must list 1 to 10 quantities");
    bool hasDefault = false;
    std::int64_t last = -1;
    for (const auto& v : values->get_array()) {
      const auto m = milli(&v);
      if (!m || *m <= last || *m > *value)
        return invalid(slice, at + ".requestPolicy.validValues", "must be ascending and at most the capacity's value");
      last = *m;
      hasDefault = hasDefault || *m == *def;
    }
    if (!hasDefault) return invalid(slice, at + ".requestPolicy.default", "must be one of validValues");
  }
  if (range) {
    if (!range->is_object()) return invalid(slice, at + ".requestPolicy.validRange", "must be an object");
    const auto& r = range->get_object();
    const auto min = milli(r.if_contains("min"));
    if (!min) return invalid(slice, at + ".requestPolicy.validRange.min", "Required value");
    const auto max = r.contains("max") ? milli(r.if_contains("max")) : value;
    const std::int64_t step = r.contains("step") ? milli(r.if_contains("step")).value_or(-1) : 0;  // 0: none
    if (!max || !(*min <= *def && *def <= *max && *max <= *value))
      return invalid(slice, at + ".requestPolicy", "must have min <= default <= max <= value");
    if (step != 0) {
      if (step < 0 || *min + step > *value) return invalid(slice, at + ".requestPolicy.validRange.step", "Invalid value");
      if ((*def - *min) % step != 0 || (*max - *min) % step != 0)
        return invalid(slice, at + ".requestPolicy", "default and max must be min plus a multiple of step");
    }
  }
  return std::nullopt;
}

std::optional<Reply> admitSlice(json::object& obj, const DraGates& gates, const json::object* old) {
  const bool keepTaints = gates.deviceTaints || hasTaints(old);
  const std::string name = [&] {
    const auto* md = obj.if_contains("metadata");
    const auto* n = md && md->is_object() ? md->get_object().if_contains("name") : nullptr;
    return n && n->is_string() ? std::string(n->get_string()) : std::string();
  }();
  auto* specV = obj.if_contains("spec");
  if (!specV || !specV->is_object()) return invalid(name, "spec", "Required value");
  auto& spec = specV->get_object();
  const auto* driver = spec.if_contains("driver");
  if (!driver || !driver->is_string() || driver->get_string().empty() || driver->get_string().size() > 63)
    return invalid(name, "spec.driver", "Required value: a DNS subdomain of at most 63 characters");
  const auto* pool = spec.if_contains("pool");
  if (!pool || !pool->is_object() || !pool->get_object().contains("name"))
    return invalid(name, "spec.pool.name", "Required value");
  const auto* count = pool->get_object().if_contains("resourceSliceCount");
  if (!count || !count->is_int64() || count->get_int64() <= 0)
    return invalid(name, "spec.pool.resourceSliceCount", "must be greater than zero");
  int placements = 0;
  for (const char* k : {"nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"})
    if (spec.contains(k)) ++placements;
  if (placements != 1)
    return invalid(name, "spec", "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required");
  auto* devices = spec.if_contains("devices");
  if (!devices) return std::nullopt;
  if (!devices->is_array()) return invalid(name, "spec.devices", "must be a list");
  auto& list = devices->get_array();
  // Decoding defaults, then the gated fields go, before validation (as in the apiserver).
  for (auto& d : list) {
    if (!d.is_object()) continue;
    defaultTaints(d.get_object());
    if (!gates.consumableCapacity) dropGatedFields(d.get_object());
    if (!keepTaints) d.get_object().erase("taints");
  }
  std::size_t limit = 128;
  for (const auto& d : list)
    if (d.is_object() && (d.get_object().contains("taints") || d.get_object().contains("consumesCounters"))) limit = 64;
  if (list.size() > limit)
    return invalid(name, "spec.devices", "Too many: " + std::to_string(list.size()) + ": must have at most " +
                                             std::to_string(limit) + " items");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "spec.devices[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return invalid(name, at, "must be an object");
    auto& d = list[i].get_object();
    if (auto* taints = d.if_contains("taints"))
      if (auto bad = admitTaints(name, at, *taints)) return bad;
    const auto* dn = d.if_contains("name");
    if (!dn || !dn->is_string() || dn->get_string().empty()) return invalid(name, at + ".name", "Required value");
    std::size_t entries = 0;
    for (const char* k : {"attributes", "capacity"})
      if (const auto* m = d.if_contains(k); m && m->is_object()) entries += m->get_object().size();
    if (entries > 32) return invalid(name, at, "attributes and capacity must have at most 32 entries together");
    const auto* multi = d.if_contains("allowMultipleAllocations");
    const bool shared = multi && multi->is_bool() && multi->get_bool();
    if (const auto* cap = d.if_contains("capacity"); cap && cap->is_object()) {
      for (const auto& [cn, c] : cap->get_object()) {
        const std::string cat = at + ".capacity[" + std::string(cn) + "]";
        if (!c.is_object()) return invalid(name, cat, "must be an object");
        if (c.get_object().contains("requestPolicy") && !shared)
          return invalid(name, cat + ".requestPolicy", "Forbidden: allowed only when allowMultipleAllocations is true");
        if (auto bad = checkPolicy(name, cat, c.get_object())) return bad;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Reply> admitResource(std::string_view plural, json::object& obj, const DraGates& gates,
                                   const json::object* old) {
  if (plural == "resourceslices") return admitSlice(obj, gates, old);
  return std::nullopt;
}

}  // namespace vgpu::fakes::detail
