#include "json_writer.h"

#include <algorithm>
#include <array>

namespace vgpu::scheduler {
namespace {

/// Bytes JSON requires escaped in a string: control characters, '"' and '\\'.
constexpr std::array<bool, 256> kNeedsEscape = [] {
  std::array<bool, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = true;
  table['"'] = table['\\'] = true;
  return table;
}();

bool needsEscape(char c) { return kNeedsEscape[static_cast<unsigned char>(c)]; }

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
  const char* at = text.data();
  const char* const end = at + text.size();
  for (;;) {
    const char* plainEnd = std::find_if(at, end, needsEscape);
    out.append(at, static_cast<std::size_t>(plainEnd - at));  // (pointer, size): no temporary string
    if (plainEnd == end) break;
    appendEscaped(out, *plainEnd);
    at = plainEnd + 1;
  }
  out += '"';
}

std::string printfSafe(std::string_view text) {
  if (text.find('%') == std::string_view::npos) return std::string(text);
  auto word = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  std::string out;
  out.reserve(text.size() + 16);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (!out.empty() && word(out.back())) out += ' ';
    out += "percent";
    if (i + 1 < text.size() && word(text[i + 1])) out += ' ';
  }
  return out;
}

std::string errorAnswer(std::string_view error) {
  std::string out = "{\"Error\":";
  appendJsonString(out, printfSafe(error));
  out += '}';
  return out;
}

}  // namespace vgpu::scheduler
