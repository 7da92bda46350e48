#include "vgpu/codec/base64.h"

#include <array>
#include <cstdint>

namespace vgpu {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> decodeTable() {
  std::array<std::int8_t, 256> t{};
  t.fill(-1);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i)
    t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  return t;
}
constexpr auto kDecode = decodeTable();

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t at) { return static_cast<unsigned>(static_cast<unsigned char>(data[at])); };
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const std::size_t left = data.size() - i; left > 0) {
    const unsigned v = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  unsigned bits = 0;
  int pending = 0;          // bits collected but not yet written
  std::size_t symbols = 0;  // alphabet characters and padding, whitespace aside
  int padding = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    const char c = text[at];
    if (isSpace(c)) continue;
    ++symbols;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = kDecode[static_cast<unsigned char>(c)];
    if (v < 0 || padding > 0)
      return makeError("not base64: " + std::string(padding > 0 ? "data after the padding" : "unexpected character") +
                       " '" + std::string(1, c) + "' at position " + std::to_string(at));
    bits = (bits << 6) | static_cast<unsigned>(v);
    pending += 6;
    if (pending >= 8) {
      pending -= 8;
      out.push_back(static_cast<char>((bits >> pending) & 0xff));
    }
  }
  if (symbols % 4 != 0 || padding > 2)
    return makeError("not base64: " + std::to_string(symbols) + " characters, not padded to a multiple of 4");
  return out;
}

}  // namespace vgpu
