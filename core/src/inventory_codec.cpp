// The node inventory annotation. Fields and compatibility rules: docs/wire-format.md.

#include <limits>
#include <set>

#include "json_codec.h"
#include "text_codec.h"
#include "vgpu/codec/inventory.h"

namespace vgpu {
namespace json = boost::json;
using detail::JsonFields;
using detail::Need;

namespace {

constexpr std::int64_t kInventoryVersion = 1;
constexpr std::string_view kDocument = "inventory annotation";

Result<Device> decodeDevice(const json::value& value, const std::string& path, std::string_view backend) {
  if (!value.is_object()) {
    return makeError(std::string(kDocument) + ": " + path + ": expected an object, got " +
                     detail::describeJson(value));
  }
  const json::object& obj = value.get_object();
  JsonFields f(obj, kDocument, path);
  Device d;
  d.backend = std::string(backend);
  std::int64_t index = 0, numa = -1;
  std::uint64_t computeUnits = 0, splitCount = 0;
  std::string health;
  constexpr auto kU32 = std::numeric_limits<std::uint32_t>::max();
  constexpr auto kIntMax = std::numeric_limits<int>::max();
  if (auto st = f.string("id", Need::kRequired, false, d.id); !st) return st.error();
  if (auto st = f.integer("index", Need::kRequired, 0, kIntMax, index); !st) return st.error();
  if (auto st = f.string("model", Need::kOptional, true, d.model); !st) return st.error();
  if (auto st = f.unsignedInteger("memoryMiB", Need::kRequired, std::numeric_limits<std::uint64_t>::max(),
                                  d.memoryMiB);
      !st)
    return st.error();
  if (auto st = f.unsignedInteger("computeUnits", Need::kRequired, kU32, computeUnits); !st) return st.error();
  if (auto st = f.unsignedInteger("splitCount", Need::kRequired, kU32, splitCount); !st) return st.error();
  if (splitCount == 0) return f.error("splitCount", "must be at least 1");
  if (auto st = f.integer("numa", Need::kOptional, -1, kIntMax, numa); !st) return st.error();
  if (auto st = f.string("health", Need::kRequired, false, health); !st) return st.error();
  // Absent in inventories of agents before the watchdog: nothing foreign known.
  if (auto st = f.unsignedInteger("foreignUsedMiB", Need::kOptional, std::numeric_limits<std::uint64_t>::max(),
                                  d.foreignUsedMiB);
      !st)
    return st.error();
  Status st;
  if (const json::object* attrs = f.object("attributes", Need::kOptional, st)) {
    JsonFields a(*attrs, kDocument, f.pathOf("attributes"));
    for (const auto& kv : *attrs) {
      std::string text;
      if (auto s = a.string(kv.key(), Need::kRequired, true, text); !s) return s.error();
      d.attributes.emplace(std::string(kv.key()), std::move(text));
    }
  } else if (!st) {
    return st.error();
  }
  d.index = static_cast<int>(index);
  d.numaNode = static_cast<int>(numa);
  d.computeUnits = static_cast<std::uint32_t>(computeUnits);
  d.splitCount = static_cast<std::uint32_t>(splitCount);
  // A health word from a newer agent reads as unknown: the device is not offered, and the
  // rest of the node's inventory stays usable during a rolling upgrade.
  if (health == "healthy") {
    d.health = Health::kHealthy;
  } else if (health == "unhealthy") {
    d.health = Health::kUnhealthy;
  } else {
    d.health = Health::kUnknown;
  }
  return d;
}

}  // namespace

std::string encodeInventory(const std::vector<Device>& devices) {
  json::array list;
  list.reserve(devices.size());
  for (const Device& d : devices) {
    json::object attrs;
    for (const auto& [k, v] : d.attributes) attrs[detail::toValidUtf8(k)] = detail::toValidUtf8(v);
    json::object o;
    o["id"] = detail::toValidUtf8(d.id);
    o["index"] = d.index;
    o["model"] = detail::toValidUtf8(d.model);
    o["memoryMiB"] = d.memoryMiB;
    o["computeUnits"] = d.computeUnits;
    o["splitCount"] = d.splitCount;
    o["numa"] = d.numaNode;
    o["health"] = toString(d.health);
    o["attributes"] = std::move(attrs);
    if (d.foreignUsedMiB != 0) o["foreignUsedMiB"] = d.foreignUsedMiB;
    list.emplace_back(std::move(o));
  }
  json::object root;
  root["version"] = kInventoryVersion;
  root["devices"] = std::move(list);
  return json::serialize(root);
}

Result<std::vector<Device>> decodeInventory(std::string_view text, std::string_view backend) {
  auto parsed = detail::parseJson(text, kDocument);
  if (!parsed) return std::move(parsed).error();
  const json::value& root = parsed.value();
  if (!root.is_object()) {
    return makeError(std::string(kDocument) + ": expected a JSON object, got " + detail::describeJson(root));
  }
  if (auto st = detail::checkVersion(root.get_object(), kDocument, kInventoryVersion); !st) return st.error();
  JsonFields top(root.get_object(), kDocument, "");
  Status st;
  const json::array* list = top.array("devices", Need::kRequired, st);
  if (list == nullptr) return st.error();

  std::vector<Device> devices;
  devices.reserve(list->size());
  std::set<std::string, std::less<>> ids;
  std::set<int> indices;
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::string path = "devices[" + std::to_string(i) + "]";
    auto device = decodeDevice((*list)[i], path, backend);
    if (!device) return std::move(device).error();
    if (!ids.insert(device->id).second) {
      return makeError(std::string(kDocument) + ": " + path + ".id: duplicate device id " +
                       detail::quoteForMessage(device->id));
    }
    if (!indices.insert(device->index).second) {
      return makeError(std::string(kDocument) + ": " + path + ".index: duplicate device index " +
                       std::to_string(device->index));
    }
    devices.push_back(std::move(device).value());
  }
  return devices;
}

}  // namespace vgpu
