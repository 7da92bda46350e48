#include "extender_args.h"

#include <functional>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>

#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;
using boost::system::error_code;

/// basic_parser events: the elements of the top-level NodeNames array become views, the
/// rest is built with a value_stack as Boost.JSON's own parser does (NodeNames itself is
/// left in the tree as an empty array).
class ArgsHandler {
 public:
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  ArgsHandler(std::string_view body, ExtenderArgs& out, json::storage_ptr storage) : body_(body), out_(out) {
    stack_.reset(std::move(storage));
  }

  json::value release() { return stack_.release(); }
  bool sawNames() const { return sawNames_; }
  const std::string& refusal() const { return refusal_; }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code& ec) {
    if (inNames_) return refuse(ec);
    ++depth_;
    return true;
  }
  bool on_object_end(std::size_t n, error_code&) {
    --depth_;
    stack_.push_object(n);
    return true;
  }
  bool on_array_begin(error_code& ec) {
    if (inNames_) return refuse(ec);
    if (depth_ == 1 && memberIsNames_) {
      inNames_ = true;
      out_.names.clear();  // a repeated key: the last one counts, as in a parsed tree
      out_.names.reserve(body_.size() / 16);
    }
    ++depth_;
    return true;
  }
  bool on_array_end(std::size_t n, error_code&) {
    --depth_;
    if (inNames_) {
      inNames_ = false;
      sawNames_ = true;
      n = 0;
    }
    stack_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, error_code&) {
    stack_.push_chars(s);
    if (depth_ == 1) key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, error_code&) {
    stack_.push_key(s);
    if (depth_ == 1) {
      key_.append(s.data(), s.size());
      memberIsNames_ = key_ == "NodeNames";
      key_.clear();
    }
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, error_code&) {
    if (inNames_)
      part_.append(s.data(), s.size());
    else
      stack_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, error_code&) {
    if (inNames_)
      addName(std::string_view(s.data(), s.size()));
    else
      stack_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, error_code& ec) { return !inNames_ || refuse(ec); }
  bool on_int64(std::int64_t i, json::string_view, error_code& ec) {
    if (inNames_) return refuse(ec);
    stack_.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, error_code& ec) {
    if (inNames_) return refuse(ec);
    stack_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, error_code& ec) {
    if (inNames_) return refuse(ec);
    stack_.push_double(d);
    return true;
  }
  bool on_bool(bool b, error_code& ec) {
    if (inNames_) return refuse(ec);
    stack_.push_bool(b);
    return true;
  }
  bool on_null(error_code& ec) {
    if (inNames_) return refuse(ec);
    stack_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }

 private:
  bool refuse(error_code& ec) {
    refusal_ = "NodeNames must be an array of strings";
    ec = json::error::syntax;
    return false;
  }
  /// A name unescaped in one piece is still in the body: keep a view. Escaped names come
  /// from the parser's scratch buffer, in parts: keep a copy.
  void addName(std::string_view s) {
    const std::less<const char*> before;
    if (part_.empty() && !before(s.data(), body_.data()) && !before(body_.data() + body_.size(), s.data() + s.size())) {
      out_.names.push_back(s);
      return;
    }
    part_.append(s);
    out_.unescaped.push_back(std::move(part_));
    part_.clear();
    out_.names.push_back(out_.unescaped.back());
  }

  std::string_view body_;
  ExtenderArgs& out_;
  json::value_stack stack_;
  int depth_ = 0;
  bool memberIsNames_ = false;  // the current top-level member is "NodeNames"
  bool inNames_ = false;
  bool sawNames_ = false;
  std::string key_;   // a top-level key arriving in parts
  std::string part_;  // a name arriving in parts
  std::string refusal_;
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
  json::parse_options options;
  options.max_depth = 128;
  json::basic_parser<ArgsHandler> parser(options, body, out, std::move(storage));
  error_code ec;
  const std::size_t used = parser.write_some(false, body.data(), body.size(), ec);
  if (!parser.handler().refusal().empty()) return makeError(parser.handler().refusal());
  if (!ec && used < body.size()) ec = json::error::extra_data;
  if (ec) return makeError("the body is not JSON: " + ec.message());
  json::value top = parser.handler().release();
  if (!top.is_object()) return makeError("the body is not a JSON object");
  json::value* pod = top.get_object().if_contains("Pod");
  if (!pod || !pod->is_object()) return makeError("ExtenderArgs has no Pod object");
  out.pod = std::move(*pod);
  if (parser.handler().sawNames()) {
    out.cacheCapable = true;
    return out;
  }
  if (auto s = takeNodes(top.get_object(), out); !s.ok()) return s.error();
  return out;
}

}  // namespace vgpu::scheduler
