// kubectl-style tables, and JSON/YAML renderings of the verbs' data.
#include "output.h"

#include <algorithm>

#include <boost/json/serialize.hpp>
#include <yaml-cpp/yaml.h>

namespace vgpu::kubectl {

namespace json = boost::json;

void printTable(std::ostream& out, const Row& header, const std::vector<Row>& rows) {
  std::vector<std::size_t> widths(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) widths[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  auto line = [&](const Row& row) {
    std::string text;
    for (std::size_t c = 0; c < row.size(); ++c) {
      text += row[c];
      if (c + 1 < row.size()) text.append(widths[c] - row[c].size() + 3, ' ');
    }
    text.erase(text.find_last_not_of(' ') + 1);  // an empty last cell leaves no padding behind
    out << text << "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
}

namespace {

/// Pretty JSON with two-space indents, as kubectl -o json writes it.
void writeJson(std::ostream& out, const json::value& v, int indent) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  const std::string inner(static_cast<std::size_t>(indent + 1) * 2, ' ');
  if (v.is_object()) {
    const auto& o = v.get_object();
    if (o.empty()) {
      out << "{}";
      return;
    }
    out << "{\n";
    std::size_t i = 0;
    for (const auto& kv : o) {
      out << inner << json::serialize(json::value(kv.key())) << ": ";
      writeJson(out, kv.value(), indent + 1);
      out << (++i < o.size() ? ",\n" : "\n");
    }
    out << pad << "}";
  } else if (v.is_array()) {
    const auto& a = v.get_array();
    if (a.empty()) {
      out << "[]";
      return;
    }
    out << "[\n";
    for (std::size_t i = 0; i < a.size(); ++i) {
      out << inner;
      writeJson(out, a[i], indent + 1);
      out << (i + 1 < a.size() ? ",\n" : "\n");
    }
    out << pad << "]";
  } else {
    out << json::serialize(v);
  }
}

void emitYaml(YAML::Emitter& e, const json::value& v) {
  if (v.is_object()) {
    e << YAML::BeginMap;
    for (const auto& kv : v.get_object()) {
      e << YAML::Key << std::string(kv.key()) << YAML::Value;
      emitYaml(e, kv.value());
    }
    e << YAML::EndMap;
  } else if (v.is_array()) {
    e << YAML::BeginSeq;
    for (const auto& item : v.get_array()) emitYaml(e, item);
    e << YAML::EndSeq;
  } else if (v.is_string()) {
    e << std::string(v.get_string());
  } else if (v.is_null()) {
    e << YAML::Null;
  } else {
    e << json::serialize(v);  // numbers and booleans as JSON writes them
  }
}

}  // namespace

void printStructured(std::ostream& out, const json::value& value, OutputFormat format) {
  if (format == OutputFormat::kYaml) {
    YAML::Emitter e;
    emitYaml(e, value);
    out << e.c_str() << "\n";
    return;
  }
  writeJson(out, value, 0);
  out << "\n";
}

std::string formatMemory(std::uint64_t usedMiB, std::uint64_t totalMiB) {
  return std::to_string(usedMiB) + "/" + std::to_string(totalMiB) + " MiB";
}

}  // namespace vgpu::kubectl
