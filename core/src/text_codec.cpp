#include "text_codec.h"

namespace vgpu::detail {

std::string quoteForMessage(std::string_view text, std::size_t maxShown) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text.substr(0, maxShown)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  out += text.size() > maxShown ? "\"..." : "\"";
  return out;
}

}  // namespace vgpu::detail
