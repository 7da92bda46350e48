#include "json_patch.h"

#include <boost/json.hpp>

namespace vgpu::e2e {
namespace json = boost::json;

namespace {

std::vector<std::string> pointerTokens(std::string_view pointer) {
  std::vector<std::string> tokens;
  size_t pos = 1;
  while (pos <= pointer.size()) {
    size_t end = pointer.find('/', pos);
    if (end == std::string_view::npos) end = pointer.size();
    std::string t(pointer.substr(pos, end - pos));
    for (size_t i = 0; (i = t.find('~', i)) != std::string::npos; ++i)
      t.replace(i, 2, t.compare(i, 2, "~1") == 0 ? "/" : "~");
    tokens.push_back(std::move(t));
    pos = end + 1;
  }
  return tokens;
}

Status applyOne(json::value& doc, const json::object& op) {
  const json::value* opName = op.if_contains("op");
  const json::value* path = op.if_contains("path");
  if (!opName || !opName->is_string() || !path || !path->is_string())
    return makeError("operation without op or path: " + json::serialize(op));
  const std::string name(opName->as_string());
  const std::string where = name + " " + std::string(path->as_string());
  if (path->as_string().empty()) return makeError(where + ": patching the whole document is not supported");
  auto tokens = pointerTokens(path->as_string());
  const std::string last = tokens.back();
  tokens.pop_back();
  json::value* parent = &doc;
  for (const auto& t : tokens) {
    if (parent->is_object() && parent->as_object().contains(t)) {
      parent = &parent->as_object()[t];
    } else if (parent->is_array() && !t.empty() && t.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(t) < parent->as_array().size()) {
      parent = &parent->as_array()[std::stoul(t)];
    } else {
      return makeError(where + ": no member " + t);
    }
  }
  const json::value* value = op.if_contains("value");
  if ((name == "add" || name == "replace") && !value) return makeError(where + ": no value");
  if (parent->is_object()) {
    auto& obj = parent->as_object();
    if (name == "add") {
      obj[last] = *value;
    } else if (name == "replace" || name == "remove") {
      if (!obj.contains(last)) return makeError(where + ": no member " + last);
      if (name == "replace")
        obj[last] = *value;
      else
        obj.erase(last);
    } else {
      return makeError(where + ": unsupported operation");
    }
    return {};
  }
  if (parent->is_array()) {
    auto& arr = parent->as_array();
    if (name == "add" && last == "-") {
      arr.push_back(*value);
      return {};
    }
    if (last.empty() || last.find_first_not_of("0123456789") != std::string::npos)
      return makeError(where + ": bad array index");
    const size_t i = std::stoul(last);
    if (name == "add" && i <= arr.size())
      arr.insert(arr.begin() + static_cast<std::ptrdiff_t>(i), *value);
    else if (name == "replace" && i < arr.size())
      arr[i] = *value;
    else if (name == "remove" && i < arr.size())
      arr.erase(arr.begin() + static_cast<std::ptrdiff_t>(i));
    else
      return makeError(where + ": index out of range or unsupported operation");
    return {};
  }
  return makeError(where + ": parent is neither an object nor an array");
}

}  // namespace

Status applyJsonPatch(json::value& doc, const json::value& patch) {
  if (!patch.is_array()) return makeError("a JSON Patch must be an array");
  for (const auto& op : patch.as_array()) {
    if (!op.is_object()) return makeError("a JSON Patch operation must be an object");
    if (auto s = applyOne(doc, op.as_object()); !s.ok()) return s;
  }
  return {};
}

}  // namespace vgpu::e2e
