// Builds the ResourceSlices a node publishes from its inventory (resource.k8s.io/v1), for the
// DRA front end (agent) and for vgpu-sim alike; it depends on core only.

#include "vgpu/dra/resource_slices.h"

#include <algorithm>
#include <cctype>

#include <boost/json.hpp>

namespace vgpu::dra {
namespace json = boost::json;

namespace {

const ResourceName* withRole(const Allocator& allocator, vgpu_resource_role role) {
  for (const auto& r : allocator.resources())
    if (r.role == role) return &r;
  return nullptr;
}

/// What the allocator makes of one container asking `limits`; the request must exist.
Result<DeviceRequest> probe(const Allocator& allocator, std::map<std::string, std::int64_t> limits) {
  ContainerResources c;
  c.name = "dra-probe";
  c.limits = std::move(limits);
  auto parsed = allocator.parseRequest(c, {});
  if (!parsed.ok()) return parsed.error();
  if (!parsed->has_value()) return makeError("the allocator ignored a request for its own resources");
  return **parsed;
}

std::string quantity(std::int64_t v, const std::string& unit) { return std::to_string(v) + unit; }

json::object capacityJson(const CapacityPolicy& p) {
  return {{"value", quantity(p.value, p.unit)},
          {"requestPolicy",
           {{"default", quantity(p.defaultValue, p.unit)},
            {"validRange",
             {{"min", quantity(p.min, p.unit)}, {"max", quantity(p.max, p.unit)}, {"step", quantity(p.step, p.unit)}}}}}};
}

/// A QualifiedName attribute: a C identifier of at most 32 characters.
bool attributeName(const std::string& key) {
  if (key.empty() || key.size() > 32 || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

/// Health words change with the device's state and would bump the pool's generation.
bool healthKey(std::string key) {
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  return key.find("health") != std::string::npos;
}

json::object deviceJson(const DraDevice& d) {
  json::object attrs;
  attrs["vendor"] = json::object{{"string", d.device.backend}};
  attrs["model"] = json::object{{"string", d.device.model.substr(0, 64)}};
  attrs["uuid"] = json::object{{"string", d.device.id.substr(0, 64)}};
  attrs["index"] = json::object{{"int", d.device.index}};
  if (d.device.numaNode >= 0) attrs["numaNode"] = json::object{{"int", d.device.numaNode}};
  // Attributes and capacities together at most 32 per device; ours take 8 at most.
  constexpr std::size_t kMaxAttributes = 32 - 3;
  for (const auto& [key, value] : d.device.attributes) {
    if (attrs.size() >= kMaxAttributes) break;
    if (!attributeName(key) || healthKey(key) || attrs.contains(key) || value.size() > 64) continue;
    attrs[key] = json::object{{"string", value}};
  }
  json::object capacity{{"memory", capacityJson(d.memory)},
                        {"cores", capacityJson(d.cores)},
                        {"shares",
                         {{"value", std::to_string(d.shares)},
                          {"requestPolicy", {{"default", "1"}, {"validValues", json::array{"1"}}}}}}};
  json::object out{{"name", d.name}, {"attributes", std::move(attrs)}, {"capacity", std::move(capacity)},
                   {"allowMultipleAllocations", true}};
  if (!d.taints.empty()) {
    json::array taints;
    for (const auto& t : d.taints) {
      json::object o{{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) o["value"] = t.value;
      if (!t.timeAdded.empty()) o["timeAdded"] = t.timeAdded;
      taints.push_back(std::move(o));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

const json::array* devicesOf(const json::object& slice) {
  const auto* spec = slice.if_contains("spec");
  const auto* devs = spec && spec->is_object() ? spec->get_object().if_contains("devices") : nullptr;
  return devs && devs->is_array() ? &devs->get_array() : nullptr;
}

const json::object* deviceNamed(const json::array* devices, const json::value& name) {
  if (devices)
    for (const auto& g : *devices)
      if (g.is_object() && g.get_object().if_contains("name") && g.get_object().at("name") == name) return &g.get_object();
  return nullptr;
}

/// Calls `check(sent device, its stored copy or null, its name, dropped)` for every device sent.
template <class Check>
std::vector<std::string> compareDevices(const json::object& sent, const json::object& stored, Check check) {
  std::vector<std::string> dropped;
  const json::array* want = devicesOf(sent);
  const json::array* got = devicesOf(stored);
  if (!want) return dropped;
  for (const auto& w : *want) {
    const auto& wd = w.as_object();
    check(wd, deviceNamed(got, wd.at("name")), std::string(wd.at("name").as_string()), dropped);
  }
  return dropped;
}

}  // namespace

std::string draDeviceName(const Device& device) {
  std::string name;
  for (char c : device.backend) {
    const auto u = static_cast<unsigned char>(c);
    name.push_back(std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '-');
  }
  name = name.substr(0, 40);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return (name.empty() ? "dev" : name) + "-" + std::to_string(device.index);
}

Result<DraDevice> draDevice(const Allocator& allocator, const Device& device) {
  const ResourceName* count = withRole(allocator, VGPU_RESOURCE_COUNT);
  const ResourceName* memory = withRole(allocator, VGPU_RESOURCE_MEMORY);
  const ResourceName* cores = withRole(allocator, VGPU_RESOURCE_CORES);
  const std::string who = "device " + device.id + " of backend " + device.backend;
  if (!count || !memory || !cores)
    return makeError(who + ": the backend names no count, memory or cores resource, so its devices cannot be offered "
                           "as shares through DRA");
  auto unit = probe(allocator, {{count->name, 1}, {memory->name, 1}, {cores->name, 1}});
  auto noMemory = probe(allocator, {{count->name, 1}, {cores->name, 1}});
  for (auto* r : {&unit, &noMemory})
    if (!r->ok()) return makeError(who + ": the allocator refused a one-device request: " + r->error().message);
  // A backend may refuse a share that names no compute (Cambricon: every sMLU instance needs
  // a quota) where the device-plugin path then refuses the container. Through DRA a claim
  // naming nothing consumes the default whatever it is, so such a share gets the whole
  // compute, as an exclusive allocation does, and one naming cores at least 1.
  auto noCores = probe(allocator, {{count->name, 1}, {memory->name, 1}});

  DraDevice d;
  d.name = draDeviceName(device);
  d.device = device;
  d.shares = std::max<std::uint32_t>(device.splitCount, 1);

  CapacityPolicy& m = d.memory;
  m.unit = "Mi";
  m.value = static_cast<std::int64_t>(device.memoryMiB);
  m.step = static_cast<std::int64_t>(std::max<std::uint64_t>(unit->memoryMiB, 1));
  if (m.value < m.step)
    return makeError(who + ": " + std::to_string(m.value) + " MiB of memory is less than one unit of " +
                     std::to_string(m.step) + " MiB");
  m.min = m.step;
  m.max = m.min + (m.value - m.min) / m.step * m.step;
  const auto wanted = static_cast<std::int64_t>(noMemory->memoryOn(device.memoryMiB));
  m.defaultValue = m.min + (std::clamp(wanted, m.min, m.max) - m.min) / m.step * m.step;

  CapacityPolicy& c = d.cores;
  c.value = std::max<std::int64_t>(device.computeUnits, 1);
  c.min = noCores.ok() ? 0 : 1;
  c.max = c.value;
  c.step = 1;
  c.defaultValue = noCores.ok() ? std::clamp<std::int64_t>(noCores->computePercent, 0, c.max) : c.max;
  return d;
}

std::string sliceName(const SliceParams& params, std::size_t index) {
  return params.nodeName + "-" + params.driver + "-" + std::to_string(index);
}

DeviceTaint unhealthyTaint(const std::string& domain, std::string timeAdded) {
  return {domain + "/unhealthy", "", "NoSchedule", std::move(timeAdded)};
}

std::vector<json::object> buildResourceSlices(const SliceParams& params, const std::vector<DraDevice>& devices) {
  constexpr std::size_t kMaxWithTaints = 64;
  const bool tainted = std::any_of(devices.begin(), devices.end(), [](const DraDevice& d) { return !d.taints.empty(); });
  const std::size_t per =
      std::max<std::size_t>(tainted ? std::min(params.maxDevicesPerSlice, kMaxWithTaints) : params.maxDevicesPerSlice, 1);
  const std::size_t count = std::max<std::size_t>((devices.size() + per - 1) / per, 1);
  std::vector<json::object> out;
  for (std::size_t i = 0; i < count; ++i) {
    json::array devs;
    for (std::size_t k = i * per; k < std::min(devices.size(), (i + 1) * per); ++k) devs.push_back(deviceJson(devices[k]));
    json::object meta{{"name", sliceName(params, i)}};
    if (!params.nodeUid.empty())
      meta["ownerReferences"] = json::array{
          json::object{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", params.nodeName}, {"uid", params.nodeUid}}};
    out.push_back({{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceSlice"},
                   {"metadata", std::move(meta)},
                   {"spec",
                    {{"driver", params.driver},
                     {"nodeName", params.nodeName},
                     {"pool",
                      {{"name", params.nodeName},
                       {"generation", params.generation},
                       {"resourceSliceCount", static_cast<std::int64_t>(count)}}},
                     {"devices", std::move(devs)}}}});
  }
  return out;
}

std::vector<std::string> droppedSharingFields(const json::object& sent, const json::object& stored) {
  return compareDevices(sent, stored, [](const json::object& wd, const json::object* gd, const std::string& name,
                                         std::vector<std::string>& dropped) {
    if (!gd) {
      dropped.push_back(name + ": the whole device");
      return;
    }
    const auto* multi = gd->if_contains("allowMultipleAllocations");
    if (wd.contains("allowMultipleAllocations") && !(multi && multi->is_bool() && multi->get_bool()))
      dropped.push_back(name + ": allowMultipleAllocations");
    const auto* wcap = wd.if_contains("capacity");
    const auto* gcap = gd->if_contains("capacity");
    if (!wcap || !wcap->is_object()) return;
    for (const auto& [cname, cval] : wcap->get_object()) {
      if (!cval.is_object() || !cval.get_object().contains("requestPolicy")) continue;
      const json::value* g = gcap && gcap->is_object() ? gcap->get_object().if_contains(cname) : nullptr;
      if (!g || !g->is_object() || !g->get_object().contains("requestPolicy"))
        dropped.push_back(name + ": capacity " + std::string(cname) + " requestPolicy");
    }
  });
}

std::vector<std::string> droppedTaints(const json::object& sent, const json::object& stored) {
  return compareDevices(sent, stored, [](const json::object& wd, const json::object* gd, const std::string& name,
                                         std::vector<std::string>& dropped) {
    const auto* sentTaints = wd.if_contains("taints");
    if (!sentTaints || !sentTaints->is_array() || sentTaints->get_array().empty()) return;
    const auto* kept = gd ? gd->if_contains("taints") : nullptr;
    if (!kept || !kept->is_array() || kept->get_array().size() < sentTaints->get_array().size()) dropped.push_back(name);
  });
}

}  // namespace vgpu::dra
