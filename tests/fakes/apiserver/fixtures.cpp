#include "fixtures.h"

#include <cstdlib>

#include <boost/json/parse.hpp>
#include <yaml-cpp/yaml.h>

#include "store.h"

namespace vgpu::fakes::detail {
namespace {

namespace json = boost::json;

// YAML 1.2 core-schema typing for plain scalars; quoted scalars stay strings.
json::value scalarToJson(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return json::value(s);
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  char* end = nullptr;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && end != s.c_str()) return json::value(static_cast<std::int64_t>(i));
  double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && end != s.c_str() && s.find_first_of(".eE") != std::string::npos) return d;
  return json::value(s);
}

json::value yamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json::object o;
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json::array a;
      for (const auto& item : n) a.push_back(yamlToJson(item));
      return a;
    }
    case YAML::NodeType::Scalar:
      return scalarToJson(n);
    default:
      return nullptr;
  }
}

Status addDocument(const json::value& doc, const std::string& where,
                   std::vector<std::pair<std::string, json::object>>& out) {
  if (doc.is_null()) return {};
  if (!doc.is_object()) return makeError(where + ": a document must be an object");
  const auto& o = doc.get_object();
  auto* kindV = o.if_contains("kind");
  if (kindV == nullptr || !kindV->is_string()) return makeError(where + ": kind is missing");
  std::string kind(kindV->get_string());
  if (kind == "List" || (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "List") == 0)) {
    auto* items = o.if_contains("items");
    if (items == nullptr || !items->is_array()) return makeError(where + ": a " + kind + " needs items");
    std::size_t i = 0;
    for (const auto& item : items->get_array()) {
      auto s = addDocument(item, where + ": items[" + std::to_string(i++) + "]", out);
      if (!s) return s;
    }
    return {};
  }
  const KindInfo* info = kindByKind(kind);
  if (info == nullptr) {
    return makeError(where + ": kind " + kind + " is not served (only Node, Pod, Event, ResourceSlice, ResourceClaim and DeviceClass)");
  }
  out.emplace_back(std::string(info->plural), o);
  return {};
}

}  // namespace

Result<std::vector<std::pair<std::string, json::object>>> parseFixtures(const std::string& text,
                                                                      const std::string& source) {
  std::vector<std::pair<std::string, json::object>> out;
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    boost::system::error_code ec;
    auto v = json::parse(text, ec);
    if (ec) return makeError(source + ": not valid JSON: " + ec.message());
    auto s = addDocument(v, source, out);
    if (!s) return s.error();
    return out;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return makeError(source + ": not valid YAML at line " + std::to_string(e.mark.line + 1) +
                     ": " + e.msg);
  }
  std::size_t i = 0;
  for (const auto& d : docs) {
    auto s = addDocument(yamlToJson(d), source + " (document " + std::to_string(++i) + ")", out);
    if (!s) return s.error();
  }
  return out;
}

}  // namespace vgpu::fakes::detail
