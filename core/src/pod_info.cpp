#include "vgpu/pod_info.h"

#include <boost/json.hpp>

#include "vgpu/quantity.h"

namespace vgpu {
namespace {

namespace json = boost::json;

const json::object* objectAt(const json::object& o, std::string_view key) {
  auto it = o.find(key);
  return it != o.end() && it->value().is_object() ? &it->value().as_object() : nullptr;
}

std::string stringAt(const json::object& o, std::string_view key) {
  auto it = o.find(key);
  return it != o.end() && it->value().is_string() ? std::string(it->value().as_string()) : std::string();
}

Result<std::map<std::string, std::string>> stringMap(const json::object& o, std::string_view key,
                                                     const std::string& where) {
  std::map<std::string, std::string> out;
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return out;
  if (!it->value().is_object()) return makeError(where + "." + std::string(key) + ": expected a map of strings");
  for (const auto& kv : it->value().as_object()) {
    if (!kv.value().is_string())
      return makeError(where + "." + std::string(key) + "." + std::string(kv.key()) + ": expected a string");
    out.emplace(kv.key(), kv.value().as_string());
  }
  return out;
}

Result<std::int64_t> quantityOf(const json::value& v, const std::string& where) {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64()) {
    if (v.as_uint64() > static_cast<std::uint64_t>(INT64_MAX)) return makeError(where + ": value too large");
    return static_cast<std::int64_t>(v.as_uint64());
  }
  if (v.is_double()) return makeError(where + ": must be an integer");
  if (v.is_null()) return std::int64_t{0};
  if (!v.is_string()) return makeError(where + ": expected a quantity string");
  auto q = parseQuantityInteger(std::string_view(v.as_string()));
  if (!q.ok()) return std::move(q).error().prefix(where);
  return q;
}

Status readResources(const json::object& container, ContainerResources& out, const std::string& where) {
  const json::object* resources = objectAt(container, "resources");
  if (resources == nullptr) return {};
  for (const char* section : {"requests", "limits"}) {  // limits win: read last
    const json::object* amounts = objectAt(*resources, section);
    if (amounts == nullptr) continue;
    for (const auto& kv : *amounts) {
      const std::string name(kv.key());
      if (name.find('/') == std::string::npos) continue;  // cpu, memory, ...: not ours
      auto value = quantityOf(kv.value(), where + ".resources." + section + "." + name);
      if (!value.ok()) return std::move(value).error();
      out.limits[name] = *value;
    }
  }
  return {};
}

Status readContainers(const json::object& spec, std::string_view field, bool init, PodInfo& pod,
                      const std::string& where) {
  auto it = spec.find(field);
  if (it == spec.end() || it->value().is_null()) return {};
  if (!it->value().is_array()) return makeError(where + ".spec." + std::string(field) + ": expected a list");
  const auto& list = it->value().as_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ".spec." + std::string(field) + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return makeError(at + ": expected a container");
    ContainerResources c;
    c.name = stringAt(list[i].as_object(), "name");
    c.init = init;
    if (c.name.empty()) return makeError(at + ": container has no name");
    if (auto s = readResources(list[i].as_object(), c, at + " (" + c.name + ")"); !s.ok()) return s;
    pod.containers.push_back(std::move(c));
  }
  return {};
}

}  // namespace

Result<PodInfo> parsePod(const json::value& value) {
  if (!value.is_object()) return makeError("pod: expected a JSON object");
  const json::object& pod = value.as_object();
  const json::object* metadata = objectAt(pod, "metadata");
  if (metadata == nullptr) return makeError("pod: no metadata");
  PodInfo out;
  out.name = stringAt(*metadata, "name");
  if (out.name.empty()) return makeError("pod: metadata.name is missing");
  if (auto ns = stringAt(*metadata, "namespace"); !ns.empty()) out.podNamespace = ns;
  const std::string where = "pod " + out.key();
  out.uid = stringAt(*metadata, "uid");
  out.deleting = metadata->contains("deletionTimestamp") && !metadata->at("deletionTimestamp").is_null();
  auto annotations = stringMap(*metadata, "annotations", where + ": metadata");
  if (!annotations.ok()) return std::move(annotations).error();
  out.annotations = std::move(*annotations);
  auto labels = stringMap(*metadata, "labels", where + ": metadata");
  if (!labels.ok()) return std::move(labels).error();
  out.labels = std::move(*labels);
  if (const json::object* status = objectAt(pod, "status")) {
    out.phase = stringAt(*status, "phase");
    out.nominatedNodeName = stringAt(*status, "nominatedNodeName");
  }
  const json::object* spec = objectAt(pod, "spec");
  if (spec == nullptr) return makeError(where + ": no spec");
  out.nodeName = stringAt(*spec, "nodeName");
  out.schedulerName = stringAt(*spec, "schedulerName");
  if (const json::value* p = spec->if_contains("priority"); p && !p->is_null()) {
    if (!p->is_int64() || p->as_int64() < INT32_MIN || p->as_int64() > INT32_MAX)
      return makeError(where + ": spec.priority must be a 32-bit integer");
    out.priority = static_cast<std::int32_t>(p->as_int64());
  }
  if (auto s = readContainers(*spec, "initContainers", true, out, where); !s.ok()) return s.error();
  if (auto s = readContainers(*spec, "containers", false, out, where); !s.ok()) return s.error();
  return out;
}

}  // namespace vgpu
