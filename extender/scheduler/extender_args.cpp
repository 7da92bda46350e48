#include "extender_args.h"

#include <array>

#include <boost/json/parse.hpp>
#include <boost/json/parser.hpp>

#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;
using boost::system::error_code;

constexpr std::size_t kMaxDepth = 128;

/// Bytes a name can hold and still be a view into the body: printable ASCII but for '"'
/// and '\\'. Anything else (escapes, UTF-8, control bytes to refuse) goes through Boost.
constexpr std::array<bool, 256> kPlainNameByte = [] {
  std::array<bool, 256> table{};
  for (int c = 0x20; c < 0x80; ++c) table[c] = true;
  table['"'] = table['\\'] = false;
  return table;
}();

Status notJson(const std::string& why) { return makeError("the body is not JSON: " + why); }
Status notJson(const error_code& ec) { return notJson(ec.message()); }

/// The top level of ExtenderArgs read by hand, so that the NodeNames array (nearly all of
/// the body with nodeCacheCapable) is scanned without building or even tokenizing it as
/// Boost.JSON would; every other member value is parsed by Boost.JSON in place.
class ArgsReader {
 public:
  ArgsReader(std::string_view body, ExtenderArgs& out, json::storage_ptr storage)
      : bodyBegin_(body.data()), at_(body.data()), end_(body.data() + body.size()), out_(out), top_(storage),
        storage_(std::move(storage)) {}

  /// Fills `top` with the members but NodeNames, which goes to out.names.
  Status read() {
    skipSpace();
    if (at_ == end_ || *at_ != '{') return notAnObject();
    ++at_;
    skipSpace();
    if (at_ != end_ && *at_ == '}') return finish(at_ + 1);
    for (;;) {
      auto key = readKey();
      if (!key.ok()) return key.error();
      skipSpace();
      if (at_ == end_ || *at_ != ':') return syntax("':' after a key");
      ++at_;
      skipSpace();
      if (*key == "NodeNames" && at_ != end_ && *at_ == '[') {
        if (auto s = readNames(); !s.ok()) return s;
        out_.cacheCapable = true;
        top_.erase("NodeNames");
      } else {
        auto value = readValue();
        if (!value.ok()) return value.error();
        if (*key == "NodeNames") {  // not an array: the last NodeNames counts, as in a tree
          out_.cacheCapable = false;
          out_.names.clear();
        }
        top_.insert_or_assign(*key, std::move(*value));
      }
      skipSpace();
      if (at_ != end_ && *at_ == ',') {
        ++at_;
        skipSpace();
        continue;
      }
      if (at_ != end_ && *at_ == '}') return finish(at_ + 1);
      return syntax("',' or '}' after a member");
    }
  }

  json::object& top() { return top_; }

 private:
  void skipSpace() {
    while (at_ != end_ && (*at_ == ' ' || *at_ == '\n' || *at_ == '\r' || *at_ == '\t')) ++at_;
  }

  Status syntax(const char* expected) {
    if (at_ == end_) return notJson("incomplete JSON");
    return notJson(std::string("expected ") + expected + " at byte " + std::to_string(at_ - bodyBegin_));
  }

  /// Not an object: whether it is JSON at all decides the words.
  Status notAnObject() {
    error_code ec;
    json::parse(std::string_view(bodyBegin_, static_cast<std::size_t>(end_ - bodyBegin_)), ec);
    return ec ? notJson(ec) : makeError("the body is not a JSON object");
  }

  Status finish(const char* after) {
    at_ = after;
    skipSpace();
    if (at_ != end_) return notJson(json::make_error_code(json::error::extra_data));
    return {};
  }

  /// A string's closing quote (the body from `open`, its opening quote, on), or null.
  const char* stringEnd(const char* open) const {
    for (const char* p = open + 1; p < end_; ++p) {
      if (*p == '\\') ++p;
      else if (*p == '"') return p;
    }
    return nullptr;
  }

  /// A string token through Boost.JSON: unescaped, its UTF-8 and control bytes checked.
  Result<std::string> decodeString(const char* open) {
    const char* close = stringEnd(open);
    if (close == nullptr) return notJson("incomplete JSON").error();
    error_code ec;
    json::value v = json::parse(std::string_view(open, static_cast<std::size_t>(close + 1 - open)), ec);
    if (ec) return notJson(ec).error();
    at_ = close + 1;
    return std::string(v.get_string());
  }

  Result<std::string> readKey() {
    if (at_ == end_ || *at_ != '"') return syntax("a key in double quotes").error();
    const char* first = at_ + 1;
    const char* p = first;
    while (p != end_ && kPlainNameByte[static_cast<unsigned char>(*p)]) ++p;
    if (p != end_ && *p == '"') {
      at_ = p + 1;
      return std::string(first, p);
    }
    return decodeString(at_);
  }

  Result<json::value> readValue() {
    parser_.reset(storage_);
    error_code ec;
    const std::size_t used = parser_.write_some(at_, static_cast<std::size_t>(end_ - at_), ec);
    if (ec) return notJson(ec).error();
    at_ += used;
    return parser_.release();
  }

  Status notStrings() { return makeError("NodeNames must be an array of strings"); }

  /// From '[': plain names become views into the body, the others decoded copies.
  Status readNames() {
    out_.names.clear();  // a repeated key: the last one counts, as in a parsed tree
    out_.names.reserve(static_cast<std::size_t>(end_ - at_) / 12);
    ++at_;
    skipSpace();
    if (at_ != end_ && *at_ == ']') {
      ++at_;
      return {};
    }
    for (;;) {
      if (at_ == end_) return notJson("incomplete JSON");
      if (*at_ == ']') return syntax("a name after ','");
      if (*at_ != '"') return notStrings();
      const char* first = at_ + 1;
      const char* p = first;
      while (p != end_ && kPlainNameByte[static_cast<unsigned char>(*p)]) ++p;
      if (p != end_ && *p == '"') {
        out_.names.emplace_back(first, static_cast<std::size_t>(p - first));
        at_ = p + 1;
      } else {
        auto name = decodeString(at_);
        if (!name.ok()) return name.error();
        out_.unescaped.push_back(std::move(*name));
        out_.names.emplace_back(out_.unescaped.back());
      }
      skipSpace();
      if (at_ != end_ && *at_ == ',') {
        ++at_;
        skipSpace();
        continue;
      }
      if (at_ != end_ && *at_ == ']') {
        ++at_;
        return {};
      }
      if (at_ == end_) return notJson("incomplete JSON");
      return syntax("',' or ']' in NodeNames");
    }
  }

  const char* const bodyBegin_;
  const char* at_;
  const char* const end_;
  ExtenderArgs& out_;
  json::object top_;
  json::storage_ptr storage_;
  json::parser parser_{json::storage_ptr{}, parseOptions()};

  static json::parse_options parseOptions() {
    json::parse_options options;
    options.max_depth = kMaxDepth - 1;  // the top-level object is one level
    return options;
  }
};

/// Nodes.items (without nodeCacheCapable): the Node objects and their names.
Status takeNodes(json::object& top, ExtenderArgs& out) {
  json::value* nodes = top.if_contains("Nodes");
  if (nodes && nodes->is_object()) {
    json::value* items = nodes->get_object().if_contains("items");
    if (items && items->is_array()) {
      out.nodes = std::move(items->get_array());
      out.names.reserve(out.nodes.size());
      for (const auto& n : out.nodes) {
        if (!n.is_object()) return makeError("Nodes.items must hold Node objects");
        const std::string_view name = k8s::name(n.get_object());
        if (name.empty()) return makeError("a node in Nodes.items has no metadata.name");
        out.names.push_back(name);
      }
      return {};
    }
    if (!items || items->is_null()) return {};  // an empty list
  }
  return makeError("ExtenderArgs needs NodeNames (nodeCacheCapable) or Nodes.items");
}

}  // namespace

Result<ExtenderArgs> parseExtenderArgs(std::string_view body, json::storage_ptr storage) {
  ExtenderArgs out(storage);
  out.body = body;
  ArgsReader reader(body, out, std::move(storage));
  if (auto s = reader.read(); !s.ok()) return s.error();
  json::value* pod = reader.top().if_contains("Pod");
  if (!pod || !pod->is_object()) return makeError("ExtenderArgs has no Pod object");
  out.pod = std::move(*pod);
  if (out.cacheCapable) return out;
  if (auto s = takeNodes(reader.top(), out); !s.ok()) return s.error();
  return out;
}

}  // namespace vgpu::scheduler
