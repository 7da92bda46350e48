// The pod assignment annotation. Fields and compatibility rules: docs/wire-format.md.

#include <limits>
#include <set>
#include <utility>

#include "json_codec.h"
#include "text_codec.h"
#include "vgpu/codec/assignment_codec.h"

namespace vgpu {
namespace json = boost::json;
using detail::JsonFields;
using detail::Need;

namespace {

constexpr std::int64_t kAssignmentVersion = 1;
constexpr std::string_view kDocument = "assignment annotation";

Error notAnObject(const std::string& path, const json::value& value) {
  return makeError(std::string(kDocument) + ": " + path + ": expected an object, got " +
                   detail::describeJson(value));
}

Result<DeviceGrant> decodeGrant(const json::value& value, const std::string& path) {
  if (!value.is_object()) return notAnObject(path, value);
  JsonFields f(value.get_object(), kDocument, path);
  DeviceGrant g;
  std::int64_t index = 0, slot = -1, priority = -1;
  std::uint64_t compute = 0;
  constexpr auto kIntMax = std::numeric_limits<int>::max();
  if (auto st = f.string("backend", Need::kRequired, false, g.backend); !st) return st.error();
  if (auto st = f.string("id", Need::kRequired, false, g.deviceId); !st) return st.error();
  if (auto st = f.integer("index", Need::kRequired, 0, kIntMax, index); !st) return st.error();
  if (auto st = f.unsignedInteger("memoryMiB", Need::kRequired, std::numeric_limits<std::uint64_t>::max(),
                                  g.memoryMiB);
      !st)
    return st.error();
  if (auto st = f.unsignedInteger("compute", Need::kRequired, std::numeric_limits<std::uint32_t>::max(), compute);
      !st)
    return st.error();
  if (auto st = f.integer("slot", Need::kOptional, -1, kIntMax, slot); !st) return st.error();
  if (auto st = f.integer("priority", Need::kOptional, -1, kIntMax, priority); !st) return st.error();
  if (auto st = f.string("placement", Need::kOptional, true, g.placement); !st) return st.error();
  g.deviceIndex = static_cast<int>(index);
  g.compute = static_cast<std::uint32_t>(compute);
  g.slot = static_cast<int>(slot);
  g.priority = static_cast<std::int32_t>(priority);
  return g;
}

Result<ContainerAssignment> decodeContainer(const json::value& value, const std::string& path) {
  if (!value.is_object()) return notAnObject(path, value);
  JsonFields f(value.get_object(), kDocument, path);
  ContainerAssignment c;
  if (auto st = f.string("name", Need::kRequired, false, c.name); !st) return st.error();
  if (auto st = f.boolean("init", Need::kOptional, c.init); !st) return st.error();
  Status st;
  const json::array* devices = f.array("devices", Need::kRequired, st);
  if (devices == nullptr) return st.error();
  for (std::size_t i = 0; i < devices->size(); ++i) {
    auto grant = decodeGrant((*devices)[i], path + ".devices[" + std::to_string(i) + "]");
    if (!grant) return std::move(grant).error();
    c.devices.push_back(std::move(grant).value());
  }
  return c;
}

}  // namespace

Status checkAssignment(const Assignment& assignment) {
  std::set<std::string, std::less<>> names;
  for (std::size_t i = 0; i < assignment.containers.size(); ++i) {
    const ContainerAssignment& c = assignment.containers[i];
    const std::string path = "containers[" + std::to_string(i) + "]";
    // Names are unique in a pod (init containers included); lookups by name rely on it.
    if (!names.insert(c.name).second) {
      return makeError(std::string(kDocument) + ": " + path + ".name: duplicate container name " +
                       detail::quoteForMessage(c.name));
    }
    // A container sees a device once; two grants of it would double-count its usage.
    std::set<std::pair<std::string, std::string>> seen;
    for (std::size_t j = 0; j < c.devices.size(); ++j) {
      const DeviceGrant& g = c.devices[j];
      if (!seen.emplace(g.backend, g.deviceId).second) {
        return makeError(std::string(kDocument) + ": " + path + ".devices[" + std::to_string(j) + "].id: device " +
                         detail::quoteForMessage(g.deviceId) + " of backend " + detail::quoteForMessage(g.backend) +
                         " is granted twice to container " + detail::quoteForMessage(c.name));
      }
    }
  }
  return {};
}

std::string encodeAssignment(const Assignment& assignment) {
  json::array containers;
  containers.reserve(assignment.containers.size());
  for (const ContainerAssignment& c : assignment.containers) {
    json::array devices;
    devices.reserve(c.devices.size());
    for (const DeviceGrant& g : c.devices) {
      json::object o;
      o["backend"] = detail::toValidUtf8(g.backend);
      o["id"] = detail::toValidUtf8(g.deviceId);
      o["index"] = g.deviceIndex;
      o["memoryMiB"] = g.memoryMiB;
      o["compute"] = g.compute;
      o["slot"] = g.slot;
      if (g.priority >= 0) o["priority"] = g.priority;
      if (!g.placement.empty()) o["placement"] = detail::toValidUtf8(g.placement);
      devices.emplace_back(std::move(o));
    }
    json::object o;
    o["name"] = detail::toValidUtf8(c.name);
    o["init"] = c.init;
    o["devices"] = std::move(devices);
    containers.emplace_back(std::move(o));
  }
  json::object root;
  root["version"] = kAssignmentVersion;
  root["node"] = detail::toValidUtf8(assignment.node);
  root["containers"] = std::move(containers);
  return json::serialize(root);
}

Result<Assignment> decodeAssignment(std::string_view text) {
  auto parsed = detail::parseJson(text, kDocument);
  if (!parsed) return std::move(parsed).error();
  const json::value& root = parsed.value();
  if (!root.is_object()) {
    return makeError(std::string(kDocument) + ": expected a JSON object, got " + detail::describeJson(root));
  }
  if (auto st = detail::checkVersion(root.get_object(), kDocument, kAssignmentVersion); !st) return st.error();
  JsonFields top(root.get_object(), kDocument, "");
  Assignment a;
  if (auto st = top.string("node", Need::kRequired, true, a.node); !st) return st.error();
  Status st;
  const json::array* containers = top.array("containers", Need::kRequired, st);
  if (containers == nullptr) return st.error();
  for (std::size_t i = 0; i < containers->size(); ++i) {
    auto c = decodeContainer((*containers)[i], "containers[" + std::to_string(i) + "]");
    if (!c) return std::move(c).error();
    a.containers.push_back(std::move(c).value());
  }
  if (auto valid = checkAssignment(a); !valid) return valid.error();
  return a;
}

}  // namespace vgpu
