#include "json_codec.h"

#include <exception>

#include "text_codec.h"

namespace vgpu::detail {
namespace json = boost::json;

Result<json::value> parseJson(std::string_view text, std::string_view document) {
  if (text.empty()) return makeError(std::string(document) + ": empty; expected a JSON object");
  try {
    json::error_code ec;
    json::parse_options options;  // defaults: depth 32, strict JSON, UTF-8 validated
    json::value value = json::parse(text, ec, json::storage_ptr(), options);
    if (ec) {
      return makeError(std::string(document) + ": not valid JSON: " + ec.message());
    }
    return value;
  } catch (const std::exception& e) {
    // Only allocation failure can get here; still an error value, never an escape.
    return makeError(std::string(document) + ": could not be parsed: " + e.what());
  }
}

std::string toValidUtf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char b = byte(i);
    std::size_t length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = length != 0 && i + length <= text.size();
    std::uint32_t cp = length == 1 ? b : length == 2 ? (b & 0x1F) : length == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; ok && k < length; ++k) {
      ok = (byte(i + k) & 0xC0) == 0x80;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    ok = ok && !(length == 2 && cp < 0x80) && !(length == 3 && cp < 0x800) && !(length == 4 && cp < 0x10000) &&
         !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    if (ok) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

std::string describeJson(const json::value& value) {
  switch (value.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return value.get_bool() ? "true" : "false";
    case json::kind::string:
      return "the string " + quoteForMessage(value.get_string());
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
    default:
      return "the number " + quoteForMessage(json::serialize(value));
  }
}

Status checkVersion(const json::object& root, std::string_view document, std::int64_t supported) {
  JsonFields fields(root, document, "");
  std::int64_t version = 0;
  if (auto st = fields.integer("version", Need::kRequired, 1, INT64_MAX, version); !st) return st;
  if (version != supported) {
    return makeError(std::string(document) + ": unsupported version " + std::to_string(version) +
                     " (this build reads version " + std::to_string(supported) +
                     "; a newer writer needs a newer reader)");
  }
  return {};
}

std::string JsonFields::pathOf(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Error JsonFields::error(std::string_view key, const std::string& what) const {
  return makeError(std::string(document_) + ": " + pathOf(key) + ": " + what);
}

const json::value* JsonFields::find(std::string_view key, Need need, Status& status) const {
  const json::value* v = object_.if_contains(key);
  if (v == nullptr || v->is_null()) {
    if (need == Need::kRequired) status = error(key, "missing (required)");
    return nullptr;
  }
  return v;
}

Status JsonFields::string(std::string_view key, Need need, bool allowEmpty, std::string& out) const {
  Status st;
  const json::value* v = find(key, need, st);
  if (v == nullptr) return st;
  if (!v->is_string()) return error(key, "expected a string, got " + describeJson(*v));
  if (!allowEmpty && v->get_string().empty()) return error(key, "must not be empty");
  out = std::string(v->get_string());
  return {};
}

Status JsonFields::boolean(std::string_view key, Need need, bool& out) const {
  Status st;
  const json::value* v = find(key, need, st);
  if (v == nullptr) return st;
  if (!v->is_bool()) return error(key, "expected true or false, got " + describeJson(*v));
  out = v->get_bool();
  return {};
}

Status JsonFields::integer(std::string_view key, Need need, std::int64_t min, std::int64_t max,
                           std::int64_t& out) const {
  Status st;
  const json::value* v = find(key, need, st);
  if (v == nullptr) return st;
  std::string range = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (v->is_int64()) {
    std::int64_t n = v->get_int64();
    if (n < min || n > max) return error(key, "expected " + range + ", got " + std::to_string(n));
    out = n;
    return {};
  }
  if (v->is_uint64()) return error(key, "expected " + range + ", got " + std::to_string(v->get_uint64()));
  return error(key, "expected " + range + ", got " + describeJson(*v));
}

Status JsonFields::unsignedInteger(std::string_view key, Need need, std::uint64_t max,
                                   std::uint64_t& out) const {
  Status st;
  const json::value* v = find(key, need, st);
  if (v == nullptr) return st;
  std::string range = "an integer from 0 to " + std::to_string(max);
  std::uint64_t n = 0;
  if (v->is_uint64()) {
    n = v->get_uint64();
  } else if (v->is_int64()) {
    if (v->get_int64() < 0) return error(key, "expected " + range + ", got " + std::to_string(v->get_int64()));
    n = static_cast<std::uint64_t>(v->get_int64());
  } else {
    // Doubles are what the parser makes of fractions, exponents and integers past 2^64.
    return error(key, "expected " + range + ", got " + describeJson(*v));
  }
  if (n > max) return error(key, "expected " + range + ", got " + std::to_string(n));
  out = n;
  return {};
}

const json::array* JsonFields::array(std::string_view key, Need need, Status& status) const {
  const json::value* v = find(key, need, status);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    status = error(key, "expected an array, got " + describeJson(*v));
    return nullptr;
  }
  return &v->get_array();
}

const json::object* JsonFields::object(std::string_view key, Need need, Status& status) const {
  const json::value* v = find(key, need, status);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    status = error(key, "expected an object, got " + describeJson(*v));
    return nullptr;
  }
  return &v->get_object();
}

}  // namespace vgpu::detail
