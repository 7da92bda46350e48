#include "device_selector.h"

#include <cctype>
#include <charconv>

namespace vgpu::simulator {
namespace {

const char* const kSubset =
    "vgpu-sim evaluates only `device.driver == \"...\"` and `device.attributes[\"<domain>\"].<name> == <string, "
    "integer or bool>`, joined by &&";

/// A cursor over the expression with the few tokens the subset has.
class Scanner {
 public:
  explicit Scanner(const std::string& text) : s_(text) {}
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool done() {
    skipSpace();
    return i_ >= s_.size();
  }
  bool take(const std::string& word) {
    skipSpace();
    if (s_.compare(i_, word.size(), word) != 0) return false;
    i_ += word.size();
    return true;
  }
  std::string identifier() {
    skipSpace();
    const std::size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    return s_.substr(start, i_ - start);
  }
  /// A "..." or '...' literal without escapes; false (nothing taken) when there is none.
  bool quoted(std::string& out) {
    skipSpace();
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return false;
    const char q = s_[i_];
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos || s_.find('\\', i_ + 1) < end) return false;
    out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return true;
  }
  bool integer(std::int64_t& out) {
    skipSpace();
    const char* begin = s_.data() + i_;
    auto [ptr, ec] = std::from_chars(begin, s_.data() + s_.size(), out);
    if (ec != std::errc() || ptr == begin) return false;
    i_ += static_cast<std::size_t>(ptr - begin);
    return true;
  }
  std::string rest() const { return s_.substr(std::min(i_, s_.size())); }

 private:
  const std::string& s_;
  std::size_t i_ = 0;
};

Error beyond(const std::string& expression, const std::string& at) {
  return makeError("CEL expression \"" + expression + "\": cannot evaluate \"" + at + "\": " + kSubset +
                   " (kube-scheduler evaluates full CEL; check such selectors on a cluster)");
}

const boost::json::value* attribute(const boost::json::object& device, const std::string& driver,
                                    const std::string& domain, const std::string& name) {
  const auto* attrs = device.if_contains("attributes");
  if (!attrs || !attrs->is_object()) return nullptr;
  // Published without a domain: the driver's domain.
  if (domain == driver)
    if (const auto* v = attrs->get_object().if_contains(name)) return v;
  return attrs->get_object().if_contains(domain + "/" + name);
}

}  // namespace

Result<DeviceSelector> parseDeviceSelector(const std::string& expression) {
  DeviceSelector out{expression, {}};
  Scanner sc(expression);
  do {
    SelectorTerm term;
    if (!sc.take("device.")) return beyond(expression, sc.rest());
    if (sc.take("driver")) {
      term.driver = true;
    } else if (sc.take("attributes[")) {
      if (!sc.quoted(term.domain) || !sc.take("]")) return beyond(expression, sc.rest());
      if (sc.take(".")) {
        term.name = sc.identifier();
      } else if (!(sc.take("[") && sc.quoted(term.name) && sc.take("]"))) {
        return beyond(expression, sc.rest());
      }
      if (term.name.empty()) return beyond(expression, sc.rest());
    } else {
      return beyond(expression, sc.rest());
    }
    if (!sc.take("==")) return beyond(expression, sc.rest());
    std::string text;
    std::int64_t number = 0;
    if (sc.quoted(text)) term.literal = text;
    else if (sc.take("true")) term.literal = true;
    else if (sc.take("false")) term.literal = false;
    else if (!term.driver && sc.integer(number)) term.literal = number;
    else return beyond(expression, sc.rest());
    if (term.driver && !std::holds_alternative<std::string>(term.literal)) return beyond(expression, sc.rest());
    out.terms.push_back(std::move(term));
  } while (sc.take("&&"));
  if (!sc.done()) return beyond(expression, sc.rest());
  return out;
}

bool selectorMatches(const DeviceSelector& selector, const std::string& driver, const boost::json::object& device) {
  for (const auto& t : selector.terms) {
    if (t.driver) {
      if (std::get<std::string>(t.literal) != driver) return false;
      continue;
    }
    const auto* v = attribute(device, driver, t.domain, t.name);
    if (!v || !v->is_object()) return false;
    const auto& typed = v->get_object();
    if (const auto* s = std::get_if<std::string>(&t.literal)) {
      const auto* got = typed.if_contains("string");
      if (!got || !got->is_string() || got->get_string() != *s) return false;
    } else if (const auto* n = std::get_if<std::int64_t>(&t.literal)) {
      const auto* got = typed.if_contains("int");
      if (!got || !got->is_int64() || got->get_int64() != *n) return false;
    } else {
      const auto* got = typed.if_contains("bool");
      if (!got || !got->is_bool() || got->get_bool() != std::get<bool>(t.literal)) return false;
    }
  }
  return true;
}

}  // namespace vgpu::simulator
