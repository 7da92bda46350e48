#include "vgpu/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>

namespace vgpu {
namespace {

namespace json = boost::json;

/// A plain (unquoted) scalar as the JSON type YAML 1.2's core schema gives it.
json::value plainScalar(const std::string& s) {
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::int64_t i = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && p == s.data() + s.size()) return i;
  double d = 0;
  auto [pd, ecd] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ecd == std::errc() && pd == s.data() + s.size()) return d;
  return json::string(s);
}

Result<json::value> convert(const YAML::Node& node, const std::string& source, int depth) {
  if (depth > 64) return makeError(source + ": nesting deeper than 64 levels");
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return json::value(nullptr);
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? json::value(json::string(node.Scalar())) : plainScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json::array out;
      for (const auto& item : node) {
        auto v = convert(item, source, depth + 1);
        if (!v.ok()) return v;
        out.push_back(std::move(*v));
      }
      return json::value(std::move(out));
    }
    case YAML::NodeType::Map: {
      json::object out;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar())
          return makeError(source + " line " + std::to_string(kv.first.Mark().line + 1) + ": map keys must be scalars");
        auto v = convert(kv.second, source, depth + 1);
        if (!v.ok()) return v;
        out[kv.first.Scalar()] = std::move(*v);
      }
      return json::value(std::move(out));
    }
  }
  return json::value(nullptr);
}

}  // namespace

Result<std::vector<json::value>> yamlDocumentsToJson(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return makeError(source + ": " + e.what());
  }
  std::vector<json::value> out;
  for (const auto& doc : docs) {
    if (doc.IsNull()) continue;  // empty documents between `---` separators
    auto v = convert(doc, source, 0);
    if (!v.ok()) return std::move(v).error();
    out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace vgpu
