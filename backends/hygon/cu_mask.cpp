#include "cu_mask.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace vgpu::hygon {

CuMask CuMask::firstN(std::uint32_t n) {
  n = std::min(n, kMaxComputeUnits);
  CuMask m;
  m.low = n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
  if (n > 64) m.high = n >= 128 ? ~std::uint64_t{0} : (std::uint64_t{1} << (n - 64)) - 1;
  return m;
}

std::string toHex(std::uint64_t bits) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(bits));
  return buf;
}

Result<std::uint64_t> parseHex(const std::string& text) {
  std::string_view t = text;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t.remove_prefix(2);
  if (t.empty() || t.size() > 16) return makeError("\"" + text + "\" is not a 64-bit hex mask");
  std::uint64_t v = 0;
  for (char c : t) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return makeError("\"" + text + "\" is not a 64-bit hex mask");
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

std::optional<CuMask> allocateComputeUnits(const CuMask& used, std::uint32_t total, std::uint32_t want) {
  total = std::min(total, kMaxComputeUnits);
  if (want == 0 || want > total) return std::nullopt;
  // Best fit over the free runs.
  std::uint32_t bestStart = 0, bestLen = 0;
  for (std::uint32_t cu = 0; cu < total;) {
    if (used.test(cu)) {
      ++cu;
      continue;
    }
    std::uint32_t end = cu;
    while (end < total && !used.test(end)) ++end;
    const std::uint32_t len = end - cu;
    if (len >= want && (bestLen == 0 || len < bestLen)) {
      bestStart = cu;
      bestLen = len;
    }
    cu = end;
  }
  CuMask out;
  if (bestLen != 0) {
    for (std::uint32_t cu = bestStart; cu < bestStart + want; ++cu) out.set(cu);
    return out;
  }
  std::uint32_t got = 0;
  for (std::uint32_t cu = 0; cu < total && got < want; ++cu) {
    if (!used.test(cu)) {
      out.set(cu);
      ++got;
    }
  }
  if (got < want) return std::nullopt;
  return out;
}

}  // namespace vgpu::hygon
