#include "json_writer.h"

#include <algorithm>

namespace vgpu::scheduler {
namespace {

bool needsEscape(char c) { return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\'; }

void appendEscaped(std::string& out, char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto u = static_cast<unsigned char>(c);
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  // Node names are DNS names: the common case is one copy.
  for (auto it = text.begin(); it != text.end();) {
    auto plainEnd = std::find_if(it, text.end(), needsEscape);
    out.append(it, plainEnd);
    if (plainEnd == text.end()) break;
    appendEscaped(out, *plainEnd);
    it = plainEnd + 1;
  }
  out += '"';
}

}  // namespace vgpu::scheduler
