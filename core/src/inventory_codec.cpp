// The node inventory annotation. Fields and compatibility rules: docs/wire-format.md.

#include <algorithm>
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

Result<DeviceLink> decodeLink(const json::value& value, const std::string& path) {
  if (!value.is_object()) {
    return makeError(std::string(kDocument) + ": " + path + ": expected an object, got " +
                     detail::describeJson(value));
  }
  JsonFields f(value.get_object(), kDocument, path);
  DeviceLink link;
  std::string linkClass;
  std::uint64_t lanes = 0, rank = 0;
  if (auto st = f.string("peer", Need::kRequired, false, link.peer); !st) return st.error();
  if (auto st = f.string("class", Need::kRequired, false, linkClass); !st) return st.error();
  if (auto st = f.unsignedInteger("lanes", Need::kOptional, std::numeric_limits<std::uint32_t>::max(), lanes); !st)
    return st.error();
  if (auto st = f.unsignedInteger("rank", Need::kRequired, kMaxLinkRank, rank); !st) return st.error();
  // A class word from a newer agent reads as unknown: the rank alone orders the pair.
  link.linkClass = parseLinkClass(linkClass).value_or(LinkClass::kUnknown);
  link.lanes = static_cast<std::uint32_t>(lanes);
  link.rank = static_cast<std::uint32_t>(rank);
  return link;
}

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
  // Absent in inventories of agents before topology, and from backends that cannot tell.
  if (const json::array* links = f.array("links", Need::kOptional, st)) {
    for (std::size_t i = 0; i < links->size(); ++i) {
      auto link = decodeLink((*links)[i], f.pathOf("links") + "[" + std::to_string(i) + "]");
      if (!link) return std::move(link).error();
      d.links.push_back(std::move(link).value());
    }
  } else if (!st) {
    return st.error();
  }
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
    if (!d.links.empty()) {
      json::array links;
      links.reserve(d.links.size());
      for (const DeviceLink& l : d.links) {
        json::object link;
        link["peer"] = detail::toValidUtf8(l.peer);
        link["class"] = toString(l.linkClass);
        if (l.lanes != 0) link["lanes"] = l.lanes;
        link["rank"] = std::min(l.rank, kMaxLinkRank);
        links.emplace_back(std::move(link));
      }
      o["links"] = std::move(links);
    }
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
  for (std::size_t i = 0; i < devices.size(); ++i) {
    for (std::size_t k = 0; k < devices[i].links.size(); ++k) {
      const std::string& peer = devices[i].links[k].peer;
      if (peer == devices[i].id || !ids.contains(peer)) {
        return makeError(std::string(kDocument) + ": devices[" + std::to_string(i) + "].links[" + std::to_string(k) +
                         "].peer: " + detail::quoteForMessage(peer) +
                         (peer == devices[i].id ? " is the device itself" : " is not a device of this inventory"));
      }
    }
  }
  return devices;
}

}  // namespace vgpu
