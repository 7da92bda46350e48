#pragma once
// Strict field readers shared by the JSON codecs (inventory, assignment). Each error names
// the document, the field path ("devices[2].memoryMiB") and what was expected.

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "vgpu/result.h"

namespace vgpu::detail {

enum class Need : std::uint8_t { kRequired, kOptional };

/// Parses `json` (never throws). `document` names it in errors ("inventory annotation").
/// Nesting deeper than 32 levels is refused by the parser, so hostile input cannot exhaust
/// the stack.
Result<boost::json::value> parseJson(std::string_view json, std::string_view document);

/// Checks `version` in `root`: present, an integer, and a major version this build reads.
Status checkVersion(const boost::json::object& root, std::string_view document, std::int64_t supported);

/// A JSON object being decoded, with its path for messages. Optional fields that are
/// absent or null leave `out` unchanged; required ones are errors.
class JsonFields {
 public:
  JsonFields(const boost::json::object& object, std::string_view document, std::string path)
      : object_(object), document_(document), path_(std::move(path)) {}

  Status string(std::string_view key, Need need, bool allowEmpty, std::string& out) const;
  Status boolean(std::string_view key, Need need, bool& out) const;
  /// A JSON integer literal in [min, max]; fractions, exponents and doubles are refused.
  Status integer(std::string_view key, Need need, std::int64_t min, std::int64_t max,
                 std::int64_t& out) const;
  Status unsignedInteger(std::string_view key, Need need, std::uint64_t max, std::uint64_t& out) const;
  /// Nullptr with `status` set when the field is missing (required) or not an array.
  const boost::json::array* array(std::string_view key, Need need, Status& status) const;
  const boost::json::object* object(std::string_view key, Need need, Status& status) const;

  std::string pathOf(std::string_view key) const;
  Error error(std::string_view key, const std::string& what) const;

 private:
  const boost::json::value* find(std::string_view key, Need need, Status& status) const;

  const boost::json::object& object_;
  std::string_view document_;
  std::string path_;
};

/// `text` with every byte sequence that is not valid UTF-8 replaced by U+FFFD, so that an
/// encoder never writes JSON its own decoder refuses (a vendor library may hand us
/// Latin-1 in a model name). Valid text comes back unchanged.
std::string toValidUtf8(std::string_view text);

/// Short printable rendering of a JSON value for error messages.
std::string describeJson(const boost::json::value& value);

}  // namespace vgpu::detail
