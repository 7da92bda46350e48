#include "dra_allocator.h"

#include <algorithm>
#include <tuple>

#include <boost/json.hpp>

#include "vgpu/quantity.h"

namespace vgpu::simulator {
namespace {

namespace json = boost::json;

/// Devices tried before the search gives up (kube-scheduler gives up after a time limit).
constexpr std::size_t kMaxSteps = 1'000'000;
constexpr std::int64_t kMi = 1024 * 1024;

std::string str(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

Result<std::int64_t> quantityAt(const json::object& o, std::string_view key, const std::string& path) {
  const auto* v = o.if_contains(key);
  if (!v || !v->is_string()) return makeError(path + "." + std::string(key) + ": expected a quantity string");
  auto q = parseQuantityValue(std::string_view(v->get_string()));
  if (!q.ok()) return std::move(q).error().prefix(path + "." + std::string(key));
  return q;
}

Result<DraCapacity> capacityOf(const json::object& c, const std::string& path) {
  DraCapacity out;
  auto value = quantityAt(c, "value", path);
  if (!value.ok()) return std::move(value).error();
  out.value = *value;
  const std::string text = str(c, "value");
  out.binary = !text.empty() && text.back() == 'i';
  const auto* p = c.if_contains("requestPolicy");
  if (!p || !p->is_object()) return out;
  out.hasPolicy = true;
  const auto& policy = p->get_object();
  const std::string at = path + ".requestPolicy";
  if (policy.contains("default")) {
    auto d = quantityAt(policy, "default", at);
    if (!d.ok()) return std::move(d).error();
    out.defaultValue = *d;
  }
  if (const auto* r = policy.if_contains("validRange"); r && r->is_object()) {
    for (auto [key, field] : {std::tuple{"min", &out.min}, {"max", &out.max}, {"step", &out.step}}) {
      if (!r->get_object().contains(key)) continue;
      auto q = quantityAt(r->get_object(), key, at + ".validRange");
      if (!q.ok()) return std::move(q).error();
      *field = *q;
    }
    if (out.step && *out.step <= 0) return makeError(at + ".validRange.step: must be positive");
  }
  if (const auto* vv = policy.if_contains("validValues"); vv && vv->is_array()) {
    for (const auto& v : vv->get_array()) {
      auto q = v.is_string() ? parseQuantityValue(std::string_view(v.get_string()))
                             : Result<std::int64_t>(makeError("expected a quantity string"));
      if (!q.ok()) return std::move(q).error().prefix(at + ".validValues");
      out.validValues.push_back(*q);
    }
  }
  return out;
}

std::string list(const std::vector<std::string>& items, std::size_t most = 6) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? "; " : "") + items[i];
  if (items.size() > most) out += "; and " + std::to_string(items.size() - most) + " more";
  return out;
}

/// What one request makes of one device before anything is allocated.
struct StaticFit {
  enum class Kind {
    kOk,
    kClass,
    kSelectors,
    kTainted,
    kMissingCapacity,
    kPolicy,
    kOverValue,
    kNotRepresentable
  } kind = Kind::kOk;
  std::string capacity;  ///< the capacity at fault
  std::map<std::string, std::int64_t> consumed;
};

StaticFit staticFit(const ClaimRequest& r, const DeviceClass& cls, const DraPoolDevice& d) {
  StaticFit fit;
  for (const auto& s : cls.selectors)
    if (!selectorMatches(s, d.driver, d.object)) return {StaticFit::Kind::kClass, {}, {}};
  for (const auto& s : r.selectors)
    if (!selectorMatches(s, d.driver, d.object)) return {StaticFit::Kind::kSelectors, {}, {}};
  if (!toleratesTaints(r, d)) return {StaticFit::Kind::kTainted, {}, {}};
  for (const auto& [name, ask] : r.capacity)
    if (!d.capacity.contains(name)) return {StaticFit::Kind::kMissingCapacity, name, {}};
  for (const auto& [name, cap] : d.capacity) {
    const auto ask = r.capacity.find(name);
    auto amount = consumedAmount(ask == r.capacity.end() ? std::nullopt : std::optional(ask->second.amount), cap);
    if (!amount.ok()) return {StaticFit::Kind::kNotRepresentable, name, {}};
    fit.consumed[name] = *amount;
  }
  for (const auto& [name, cap] : d.capacity) {
    if (violatesPolicy(fit.consumed[name], cap)) return {StaticFit::Kind::kPolicy, name, fit.consumed};
    if (fit.consumed[name] > cap.value) return {StaticFit::Kind::kOverValue, name, fit.consumed};
  }
  return fit;
}

/// The allocator's search for one node: requests in order, each request's devices in
/// allocator order after the previous one, backtracking when a later request cannot be met.
class Search {
 public:
  struct Slot {
    std::size_t claim;
    const ClaimRequest* request;
    std::vector<StaticFit> fits;          ///< per device
    std::vector<std::size_t> constraints;  ///< into the search's constraints
  };
  /// A claim's constraint with the attribute values of the devices chosen so far.
  struct Constraint {
    const ClaimConstraint* spec;
    std::vector<json::value> values;
  };

  Search(const std::vector<DraPoolDevice>& devices, std::vector<std::map<std::string, std::int64_t>> used,
         std::vector<int> allocations, std::vector<Slot> slots, std::vector<Constraint> constraints)
      : devices_(devices),
        used_(std::move(used)),
        allocations_(std::move(allocations)),
        slots_(std::move(slots)),
        constraints_(std::move(constraints)) {}

  bool run() { return place(0, 0, 0); }
  bool gaveUp() const { return steps_ > kMaxSteps; }
  const std::vector<DraShare>& shares() const { return shares_; }

  /// The capacities device `d` lacks now for what slot `s` consumes ("" for a device
  /// already allocated whole); empty when it has room.
  std::vector<std::string> shortOf(const Slot& s, std::size_t d) const {
    if (!devices_[d].multipleAllocations) return allocations_[d] > 0 ? std::vector<std::string>{""} : std::vector<std::string>{};
    std::vector<std::string> out;
    for (const auto& [name, amount] : s.fits[d].consumed) {
      const auto used = used_[d].find(name);
      const std::int64_t now = used == used_[d].end() ? 0 : used->second;
      if (now + amount > devices_[d].capacity.at(name).value) out.push_back(name);
    }
    return out;
  }

 private:
  bool place(std::size_t slot, std::int64_t k, std::size_t start) {
    if (slot == slots_.size()) return true;
    const Slot& s = slots_[slot];
    if (k == s.request->count) return place(slot + 1, 0, 0);
    for (std::size_t d = start; d < devices_.size(); ++d) {
      if (++steps_ > kMaxSteps) return false;
      if (s.fits[d].kind != StaticFit::Kind::kOk || !shortOf(s, d).empty() || !constraintsAllow(s, d)) continue;
      for (std::size_t c : s.constraints) constraints_[c].values.push_back(*attributeOf(d, constraints_[c].spec->attribute));
      const bool multi = devices_[d].multipleAllocations;
      DraShare share{s.claim, s.request->name, d, multi ? s.fits[d].consumed : std::map<std::string, std::int64_t>{}};
      for (const auto& [name, amount] : share.consumed) used_[d][name] += amount;
      ++allocations_[d];
      shares_.push_back(share);
      if (place(slot, k + 1, d + 1)) return true;
      shares_.pop_back();
      for (std::size_t c : s.constraints) constraints_[c].values.pop_back();
      --allocations_[d];
      for (const auto& [name, amount] : share.consumed) used_[d][name] -= amount;
      if (gaveUp()) return false;
    }
    return false;
  }

  /// The device's attribute by fully qualified name (the driver's own without its domain too).
  const json::value* attributeOf(std::size_t d, const std::string& qualified) const {
    const auto* attrs = devices_[d].object.if_contains("attributes");
    if (!attrs || !attrs->is_object()) return nullptr;
    if (const auto* v = attrs->get_object().if_contains(qualified)) return v;
    const auto slash = qualified.find('/');
    if (qualified.substr(0, slash) != devices_[d].driver) return nullptr;
    return attrs->get_object().if_contains(qualified.substr(slash + 1));
  }

  bool constraintsAllow(const Slot& s, std::size_t d) const {
    for (std::size_t c : s.constraints) {
      const Constraint& con = constraints_[c];
      const json::value* v = attributeOf(d, con.spec->attribute);
      if (!v) return false;
      const bool seen = std::find(con.values.begin(), con.values.end(), *v) != con.values.end();
      if (con.spec->distinct ? seen : (!con.values.empty() && !seen)) return false;
    }
    return true;
  }

  const std::vector<DraPoolDevice>& devices_;
  std::vector<std::map<std::string, std::int64_t>> used_;
  std::vector<int> allocations_;
  std::vector<Slot> slots_;
  std::vector<Constraint> constraints_;
  std::vector<DraShare> shares_;
  std::size_t steps_ = 0;
};

std::string consumedText(const std::map<std::string, std::int64_t>& consumed, const DraPoolDevice& d) {
  std::string out;
  for (const auto& [name, amount] : consumed)
    out += (out.empty() ? "" : ", ") + name + " " + formatAmount(amount, d.capacity.at(name));
  return out;
}

/// Why slot `s` alone cannot be met on these devices, or empty when it can.
std::string whySlotFails(const Search& search, const Search::Slot& s, const std::vector<DraPoolDevice>& devices,
                         const std::vector<std::map<std::string, std::int64_t>>& used) {
  const ClaimRequest& r = *s.request;
  std::vector<std::size_t> candidates, withRoom;
  std::size_t ofClass = 0, selected = 0;
  std::vector<std::string> tainted;
  std::string missing, policy, notRepresentable;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const StaticFit& f = s.fits[d];
    if (f.kind != StaticFit::Kind::kClass) ++ofClass;
    if (f.kind != StaticFit::Kind::kClass && f.kind != StaticFit::Kind::kSelectors) ++selected;
    if (f.kind == StaticFit::Kind::kTainted) tainted.push_back(devices[d].name);
    if (f.kind == StaticFit::Kind::kMissingCapacity) missing = f.capacity;
    if (f.kind == StaticFit::Kind::kNotRepresentable) notRepresentable = f.capacity;
    if ((f.kind == StaticFit::Kind::kPolicy || f.kind == StaticFit::Kind::kOverValue) && policy.empty()) {
      const DraCapacity& cap = devices[d].capacity.at(f.capacity);
      std::string allows = "at most " + formatAmount(cap.max ? std::min(*cap.max, cap.value) : cap.value, cap);
      if (f.kind == StaticFit::Kind::kPolicy && !cap.validValues.empty()) {
        allows = "only";
        for (std::int64_t v : cap.validValues) allows += " " + formatAmount(v, cap);
      }
      const auto ask = r.capacity.find(f.capacity);
      policy = "asks " + f.capacity + " " + (ask == r.capacity.end() ? "(the default) " : ask->second.text + ", ") +
               "which consumes " + formatAmount(f.consumed.at(f.capacity), cap) + " after the device's request policy; " +
               devices[d].name + " allows " + allows;
    }
    if (f.kind == StaticFit::Kind::kOk) {
      candidates.push_back(d);
      if (search.shortOf(s, d).empty()) withRoom.push_back(d);
    }
  }
  const std::string need = std::to_string(r.count) + " device" + (r.count == 1 ? "" : "s");
  if (ofClass == 0) return "no device here is of class " + r.deviceClassName;
  if (selected == 0) return "no device of class " + r.deviceClassName + " here matches the request's selectors";
  if (!notRepresentable.empty())
    return "the amount of " + notRepresentable + " asked cannot be represented (kube-scheduler aborts such a claim)";
  if (candidates.empty() && !missing.empty()) {
    std::string names;
    for (const auto& [name, cap] : devices.front().capacity) names += (names.empty() ? "" : ", ") + name;
    return "asks capacity \"" + missing + "\", which the devices here do not have (they have " + names + ")";
  }
  if (candidates.empty() && !policy.empty()) return policy;
  if (candidates.empty() && !tainted.empty())
    return "the devices of class " + r.deviceClassName + " here are tainted and the request tolerates none (" +
           list(tainted) + ")";
  if (static_cast<std::int64_t>(candidates.size()) < r.count)
    return "asks " + need + "; only " + std::to_string(candidates.size()) + " here can hold its share";
  if (static_cast<std::int64_t>(withRoom.size()) >= r.count) return {};
  std::vector<std::string> full;
  for (std::size_t d : candidates) {
    const auto lacking = search.shortOf(s, d);
    if (lacking.empty()) continue;
    const DraPoolDevice& dev = devices[d];
    if (lacking.front().empty()) {
      full.push_back(dev.name + ": allocated whole to another claim");
      continue;
    }
    std::string left;
    for (const auto& name : lacking) {
      const DraCapacity& cap = dev.capacity.at(name);
      const auto u = used[d].find(name);
      left += (left.empty() ? "" : ", ") + name + " " + formatAmount(cap.value - (u == used[d].end() ? 0 : u->second), cap) +
              " of " + formatAmount(cap.value, cap) + " left";
    }
    full.push_back(dev.name + ": " + left);
  }
  return "asks " + need + " with " + consumedText(s.fits[candidates.front()].consumed, devices[candidates.front()]) +
         " each; " + std::to_string(withRoom.size()) + " here " + (withRoom.size() == 1 ? "has" : "have") +
         " room (" + list(full) + ")" + (tainted.empty() ? "" : "; tainted, not tolerated: " + list(tainted));
}

}  // namespace

Result<std::vector<DraPoolDevice>> poolDevices(const std::vector<json::object>& slices) {
  struct Keyed {
    std::string driver, pool, slice;
    std::size_t index;
    DraPoolDevice device;
  };
  std::vector<Keyed> all;
  for (const auto& slice : slices) {
    const std::string sliceName = slice.contains("metadata") && slice.at("metadata").is_object()
                                      ? str(slice.at("metadata").get_object(), "name")
                                      : std::string();
    const auto* spec = slice.if_contains("spec");
    if (!spec || !spec->is_object()) return makeError("ResourceSlice " + sliceName + ": spec: missing");
    const auto& sp = spec->get_object();
    const std::string driver = str(sp, "driver");
    const auto* pool = sp.if_contains("pool");
    const std::string poolName = pool && pool->is_object() ? str(pool->get_object(), "name") : std::string();
    const auto* devs = sp.if_contains("devices");
    if (!devs || !devs->is_array()) continue;
    for (std::size_t i = 0; i < devs->get_array().size(); ++i) {
      const std::string path = "ResourceSlice " + sliceName + ": spec.devices[" + std::to_string(i) + "]";
      if (!devs->get_array()[i].is_object()) return makeError(path + ": expected a map");
      DraPoolDevice d;
      d.object = devs->get_array()[i].get_object();
      d.driver = driver;
      d.pool = poolName;
      d.name = str(d.object, "name");
      if (const auto* attrs = d.object.if_contains("attributes"); attrs && attrs->is_object())
        if (const auto* m = attrs->get_object().if_contains("model"); m && m->is_object())
          d.model = str(m->get_object(), "string");
      if (const auto* taints = d.object.if_contains("taints"); taints && taints->is_array()) {
        for (const auto& t : taints->get_array()) {
          if (!t.is_object()) return makeError(path + ".taints: expected a list of maps");
          d.taints.push_back({str(t.get_object(), "key"), str(t.get_object(), "value"), str(t.get_object(), "effect"), {}});
        }
      }
      const auto* multi = d.object.if_contains("allowMultipleAllocations");
      d.multipleAllocations = multi && multi->is_bool() && multi->get_bool();
      if (const auto* caps = d.object.if_contains("capacity"); caps && caps->is_object()) {
        for (const auto& [name, c] : caps->get_object()) {
          if (!c.is_object()) return makeError(path + ".capacity." + std::string(name) + ": expected a map");
          auto cap = capacityOf(c.get_object(), path + ".capacity." + std::string(name));
          if (!cap.ok()) return std::move(cap).error();
          d.capacity[std::string(name)] = *cap;
        }
      }
      all.push_back({driver, poolName, sliceName, i, std::move(d)});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Keyed& a, const Keyed& b) {
    return std::tie(a.driver, a.pool, a.slice, a.index) < std::tie(b.driver, b.pool, b.slice, b.index);
  });
  std::vector<DraPoolDevice> out;
  for (auto& k : all) out.push_back(std::move(k.device));
  return out;
}

bool toleratesTaints(const ClaimRequest& request, const DraPoolDevice& device) {
  for (const auto& taint : device.taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;  // "None" keeps nothing off
    const bool tolerated = std::any_of(request.tolerations.begin(), request.tolerations.end(), [&](const auto& t) {
      if (!t.effect.empty() && t.effect != taint.effect) return false;
      if (t.exists) return t.key.empty() || t.key == taint.key;
      return t.key == taint.key && t.value == taint.value;
    });
    if (!tolerated) return false;
  }
  return true;
}

Result<std::int64_t> consumedAmount(const std::optional<std::int64_t>& asked, const DraCapacity& c) {
  if (!asked) return c.defaultValue.value_or(c.value);
  if (!c.hasPolicy) return *asked;
  if (c.min) {
    if (*asked < *c.min) return *c.min;
    if (!c.step) return *asked;
    const std::int64_t added = *asked - *c.min;
    const std::int64_t steps = added / *c.step + (added % *c.step != 0 ? 1 : 0);
    std::int64_t out = 0;
    if (__builtin_mul_overflow(steps, *c.step, &out) || __builtin_add_overflow(out, *c.min, &out))
      return makeError("rounding " + std::to_string(*asked) + " up to the next step passes the 64-bit range");
    return out;
  }
  for (std::int64_t v : c.validValues)
    if (*asked <= v) return v;
  return *asked;
}

bool violatesPolicy(std::int64_t amount, const DraCapacity& c) {
  if (!c.hasPolicy || (c.defaultValue && amount == *c.defaultValue)) return false;
  if (c.min || c.max || c.step) {
    if (c.max && amount > *c.max) return true;
    return c.step && (amount - c.min.value_or(0)) % *c.step != 0;
  }
  return !c.validValues.empty() && std::find(c.validValues.begin(), c.validValues.end(), amount) == c.validValues.end();
}

std::string formatAmount(std::int64_t amount, const DraCapacity& c) {
  if (c.binary && amount % kMi == 0) return std::to_string(amount / kMi) + "Mi";
  return std::to_string(amount);
}

DraNode::DraNode(std::string name, std::vector<DraPoolDevice> devices, std::string noSlices)
    : name_(std::move(name)),
      devices_(std::move(devices)),
      noSlices_(std::move(noSlices)),
      used_(devices_.size()),
      allocations_(devices_.size(), 0) {}

Result<std::vector<DraShare>> DraNode::allocate(const std::vector<const ClaimSpec*>& claims,
                                                const std::map<std::string, DeviceClass>& classes) const {
  if (devices_.empty()) return makeError(noSlices_);
  std::vector<Search::Slot> slots;
  std::vector<Search::Constraint> constraints;
  std::string constrained;
  for (std::size_t c = 0; c < claims.size(); ++c) {
    const std::size_t first = constraints.size();
    for (const auto& con : claims[c]->constraints) {
      constraints.push_back({&con, {}});
      constrained += (constrained.empty() ? "" : ", ") + std::string(con.distinct ? "distinct " : "matching ") + con.attribute;
    }
    for (const auto& r : claims[c]->requests) {
      const auto cls = classes.find(r.deviceClassName);
      if (cls == classes.end())
        return makeError("claim " + claims[c]->key() + " request " + r.name + ": DeviceClass \"" + r.deviceClassName +
                         "\" does not exist");
      Search::Slot s{c, &r, {}, {}};
      for (const auto& d : devices_) s.fits.push_back(staticFit(r, cls->second, d));
      for (std::size_t k = first; k < constraints.size(); ++k) {
        const auto& names = constraints[k].spec->requests;
        if (names.empty() || std::find(names.begin(), names.end(), r.name) != names.end()) s.constraints.push_back(k);
      }
      slots.push_back(std::move(s));
    }
  }
  Search search(devices_, used_, allocations_, slots, constraints);
  if (search.run()) return search.shares();
  if (search.gaveUp())
    return makeError("the allocator's search gave up after " + std::to_string(kMaxSteps) +
                     " devices tried (kube-scheduler too stops after a time limit)");
  for (const auto& s : slots) {
    const std::string why = whySlotFails(search, s, devices_, used_);
    if (!why.empty()) return makeError("claim " + claims[s.claim]->key() + " request " + s.request->name + ": " + why);
  }
  return makeError("each request fits alone, but not all of the pod's requests together on the " +
                   std::to_string(devices_.size()) + " devices here" +
                   (constrained.empty() ? std::string() : " with the claims' constraints (" + constrained + ")"));
}

void DraNode::commit(const std::vector<DraShare>& shares) {
  for (const auto& s : shares) {
    ++allocations_[s.device];
    for (const auto& [name, amount] : s.consumed) used_[s.device][name] += amount;
  }
}

}  // namespace vgpu::simulator
