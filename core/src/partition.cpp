#include "vgpu/partition.h"

#include <charconv>

#include "json_codec.h"

namespace vgpu {
namespace {

constexpr std::string_view kKeyPrefix = "vgpu.io/partitions-";
constexpr std::string_view kDocument = "partitions annotation";

/// Each attribute with the Partition field it fills, in one list for both directions.
template <class P, class F>
void eachField(P& p, F&& f) {
  f(partition_attr::kParent, p.parent);
  f(partition_attr::kKind, p.kind);
  f(partition_attr::kProfile, p.profile);
  f(partition_attr::kPlacement, p.placement);
  f(partition_attr::kInstanceId, p.instanceId);
  f(partition_attr::kSubInstanceId, p.subInstanceId);
}

std::string_view attributeOf(const Device& d, std::string_view key) {
  auto it = d.attributes.find(std::string(key));
  return it == d.attributes.end() ? std::string_view() : std::string_view(it->second);
}

std::optional<unsigned> wholeNumber(std::string_view text) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<Partition> partitionOf(const Device& device) {
  if (attributeOf(device, partition_attr::kParent).empty()) return std::nullopt;
  Partition p;
  p.id = device.id;
  eachField(p, [&](std::string_view key, std::string& field) { field = attributeOf(device, key); });
  return p;
}

void setPartitionAttributes(const Partition& p, std::map<std::string, std::string>& attributes) {
  eachField(p, [&](std::string_view key, const std::string& field) {
    if (!field.empty()) attributes[std::string(key)] = field;
  });
}

std::optional<std::pair<unsigned, unsigned>> parsePlacement(std::string_view placement) {
  const auto colon = placement.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto start = wholeNumber(placement.substr(0, colon));
  auto size = wholeNumber(placement.substr(colon + 1));
  if (!start || !size) return std::nullopt;
  return std::pair{*start, *size};
}

std::string madePartitionsKey(int containerIndex) { return std::string(kKeyPrefix) + std::to_string(containerIndex); }

bool isMadePartitionsKey(std::string_view key) {
  return key.starts_with(kKeyPrefix) && wholeNumber(key.substr(kKeyPrefix.size())).has_value();
}

std::string encodePartitions(const std::vector<Partition>& partitions) {
  boost::json::array out;
  for (const auto& p : partitions) {
    boost::json::object o;
    o["id"] = detail::toValidUtf8(p.id);
    eachField(p, [&](std::string_view key, const std::string& field) {
      if (!field.empty()) o[key] = detail::toValidUtf8(field);
    });
    out.push_back(std::move(o));
  }
  return boost::json::serialize(out);
}

Result<std::vector<Partition>> decodePartitions(std::string_view json) {
  auto parsed = detail::parseJson(json, kDocument);
  if (!parsed.ok()) return parsed.error();
  if (!parsed->is_array()) return makeError(std::string(kDocument) + ": expected a JSON array of partitions");
  std::vector<Partition> out;
  const auto& items = parsed->as_array();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string path = "[" + std::to_string(i) + "]";
    if (!items[i].is_object()) return makeError(std::string(kDocument) + ": " + path + " is not an object");
    const detail::JsonFields fields(items[i].as_object(), kDocument, path);
    Partition p;
    if (auto s = fields.string("id", detail::Need::kRequired, false, p.id); !s.ok()) return s.error();
    Status bad;
    eachField(p, [&](std::string_view key, std::string& field) {
      if (!bad.ok()) return;
      const auto need = key == partition_attr::kParent ? detail::Need::kRequired : detail::Need::kOptional;
      bad = fields.string(key, need, need == detail::Need::kOptional, field);
    });
    if (!bad.ok()) return bad.error();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace vgpu
