// Splits a list body into its top-level members and the items into their own texts without
// decoding them (a scan of strings and brackets), then decodes each item alone: the DOM of
// a 500-item page, ~3x its text, never exists.

#include "list_body.h"

#include <array>
#include <cctype>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>

namespace vgpu::k8s::detail {
namespace {

namespace json = boost::json;

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  void space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  /// The raw text of the string at pos (escapes left as written); false if none.
  bool string(std::string_view& out) {
    space();
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    std::size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') pos_ += s_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= s_.size()) return false;
    out = s_.substr(start, pos_ - start);
    ++pos_;
    return true;
  }
  /// The text of the value at pos, whatever it is; its syntax is checked by whoever
  /// decodes it. False at the end of the input or on unbalanced brackets.
  bool value(std::string_view& out) {
    space();
    std::size_t start = pos_;
    int depth = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '"') {
        std::string_view ignored;
        if (!string(ignored)) return false;
        if (depth == 0) break;
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;  // the end of the enclosing container: a scalar ended
        if (--depth == 0) {
          ++pos_;
          break;
        }
      } else if (depth == 0 && (c == ',' || std::isspace(static_cast<unsigned char>(c)))) {
        break;
      }
      ++pos_;
    }
    if (depth != 0 || pos_ == start) return false;
    out = s_.substr(start, pos_ - start);
    return true;
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
};

Error malformed(const std::string& what) { return makeError("the list response " + what); }

// A string member of a small object, or "".
std::string member(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

}  // namespace

Result<ListBodyMeta> readListBody(std::string_view body,
                                  const std::function<void(const json::object&)>& onItem) {
  Scanner sc(body);
  ListBodyMeta meta;
  if (!sc.eat('{')) return malformed("is not a JSON object");
  // Items decode into a buffer reused from one item to the next (an item larger than it
  // spills to the heap and is freed with the item).
  static thread_local std::array<unsigned char, 64 << 10> scratch;
  bool first = true;
  while (!sc.eat('}')) {
    if (!first && !sc.eat(',')) return malformed("is not a JSON object (expected ',' or '}')");
    first = false;
    std::string_view key;
    if (!sc.string(key) || !sc.eat(':')) return malformed("is not a JSON object (expected a member name)");
    if (key == "items" && sc.peek('[')) {
      sc.eat('[');
      bool firstItem = true;
      while (!sc.eat(']')) {
        if (!firstItem && !sc.eat(',')) return malformed("has an \"items\" array that is not valid JSON");
        firstItem = false;
        std::string_view text;
        if (!sc.value(text)) return malformed("has an \"items\" array that is not valid JSON");
        json::monotonic_resource arena(scratch.data(), scratch.size());
        boost::system::error_code ec;
        json::value item = json::parse(text, ec, &arena);
        if (ec) return malformed("has an item that is not valid JSON: " + ec.message());
        if (!item.is_object()) return malformed("has a list item that is not an object");
        onItem(item.get_object());
      }
      continue;
    }
    std::string_view text;
    if (!sc.value(text)) return malformed("is not valid JSON (member \"" + std::string(key) + "\")");
    if (key == "items" && text != "null") return malformed("has no \"items\" array");
    if (key == "metadata") {
      boost::system::error_code ec;
      json::value md = json::parse(text, ec);
      if (!ec && md.is_object()) {
        meta.resourceVersion = member(md.get_object(), "resourceVersion");
        meta.continueToken = member(md.get_object(), "continue");
      }
    }
  }
  sc.space();
  return meta;
}

}  // namespace vgpu::k8s::detail
