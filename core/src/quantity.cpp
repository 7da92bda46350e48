// Kubernetes resource.Quantity parsing, exact: the number is kept as decimal digits and
// scaled with integer arithmetic, so "0.1" or "1.5Gi" never goes through a double.

#include "vgpu/quantity.h"

#include "text_codec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace vgpu {
namespace {

// Exponents beyond this cannot change the outcome (any non-zero digit overflows int64 or
// rounds up to the smallest unit), so clamping keeps the arithmetic small.
constexpr std::int64_t kExponentClamp = 1'000'000;

struct ParsedQuantity {
  bool negative = false;
  std::vector<std::uint8_t> digits;  // Most significant first, no leading zeros; empty = 0.
  std::int64_t exp10 = 0;            // value = digits * 10^exp10 * 2^exp2
  int exp2 = 0;
};

std::string quoted(std::string_view text) { return "quantity " + detail::quoteForMessage(text); }

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Suffix -> (power of ten, power of two). Case matters: "m" is milli, "M" is mega.
bool interpretSuffix(std::string_view suffix, std::int64_t& exp10, int& exp2) {
  struct Entry {
    std::string_view name;
    int exp10;
    int exp2;
  };
  static constexpr Entry kTable[] = {
      {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},
      {"M", 6, 0},   {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
      {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
      {"Ei", 0, 60},
  };
  for (const auto& e : kTable) {
    if (suffix == e.name) {
      exp10 = e.exp10;
      exp2 = e.exp2;
      return true;
    }
  }
  // Decimal exponent: e or E, an optional sign, at least one digit ("E" alone is exa).
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return false;
  std::size_t i = 1;
  bool negative = false;
  if (suffix[i] == '+' || suffix[i] == '-') {
    negative = suffix[i] == '-';
    ++i;
  }
  if (i == suffix.size()) return false;
  std::int64_t value = 0;
  for (; i < suffix.size(); ++i) {
    if (!isDigit(suffix[i])) return false;
    // Go parses the exponent as an int64 and rejects what does not fit; so do we.
    if (value > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return false;
    value = value * 10 + (suffix[i] - '0');
  }
  if (value > kExponentClamp) value = kExponentClamp;
  exp10 = negative ? -value : value;
  exp2 = 0;
  return true;
}

Result<ParsedQuantity> parse(std::string_view text) {
  if (text.empty()) return makeError("quantity is empty: expected a number such as 3, 1.5Gi or 500m");
  ParsedQuantity q;
  std::size_t i = 0;
  if (text[i] == '+' || text[i] == '-') {
    q.negative = text[i] == '-';
    ++i;
  }
  std::size_t intStart = i;
  while (i < text.size() && isDigit(text[i])) ++i;
  std::string_view intPart = text.substr(intStart, i - intStart);
  std::string_view fracPart;
  if (i < text.size() && text[i] == '.') {
    ++i;
    std::size_t fracStart = i;
    while (i < text.size() && isDigit(text[i])) ++i;
    fracPart = text.substr(fracStart, i - fracStart);
  }
  if (intPart.empty() && fracPart.empty()) {
    return makeError(quoted(text) + ": expected digits (digits, digits.digits, digits. or .digits)");
  }
  std::string_view suffix = text.substr(i);
  std::int64_t suffixExp10 = 0;
  if (!interpretSuffix(suffix, suffixExp10, q.exp2)) {
    return makeError(quoted(text) + ": unknown suffix " + detail::quoteForMessage(suffix) +
                     " (suffixes are case-sensitive: Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or "
                     "e/E followed by an integer exponent)");
  }
  for (char c : intPart) {
    if (q.digits.empty() && c == '0') continue;
    q.digits.push_back(static_cast<std::uint8_t>(c - '0'));
  }
  for (char c : fracPart) {
    if (q.digits.empty() && c == '0') continue;
    q.digits.push_back(static_cast<std::uint8_t>(c - '0'));
  }
  q.exp10 = suffixExp10 - static_cast<std::int64_t>(fracPart.size());
  return q;
}

// digits *= 2^exp2, in place (exp2 <= 60, so a 64-bit carry never overflows per step).
void multiplyByPowerOfTwo(std::vector<std::uint8_t>& digits, int exp2) {
  while (exp2 > 0) {
    int step = exp2 > 32 ? 32 : exp2;
    exp2 -= step;
    std::uint64_t factor = std::uint64_t{1} << step;
    std::uint64_t carry = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
      std::uint64_t v = *it * factor + carry;
      *it = static_cast<std::uint8_t>(v % 10);
      carry = v / 10;
    }
    std::vector<std::uint8_t> head;
    while (carry > 0) {
      head.insert(head.begin(), static_cast<std::uint8_t>(carry % 10));
      carry /= 10;
    }
    digits.insert(digits.begin(), head.begin(), head.end());
  }
}

// ceil(|value| * 10^extraExp10) as an int64 with the sign applied; rounding is away from
// zero, as Go's Quantity does on its int64 path ("500m" -> 1, "-500m" -> -1).
Result<std::int64_t> scaled(std::string_view text, ParsedQuantity q, std::int64_t extraExp10) {
  if (q.digits.empty()) return std::int64_t{0};
  multiplyByPowerOfTwo(q.digits, q.exp2);
  std::int64_t exp10 = q.exp10 + extraExp10;
  auto count = static_cast<std::int64_t>(q.digits.size());
  // Keep the digits left of the decimal point; any non-zero digit dropped means round up.
  std::int64_t kept = exp10 >= 0 ? count : count + exp10;
  bool roundUp = false;
  for (std::int64_t d = kept < 0 ? 0 : kept; d < count; ++d) {
    if (q.digits[static_cast<std::size_t>(d)] != 0) {
      roundUp = true;
      break;
    }
  }
  std::int64_t trailingZeros = exp10 > 0 ? exp10 : 0;
  // 20 or more digits is at least 10^19, beyond int64 whatever the digits are.
  if (kept + trailingZeros > 19) {
    return makeError(quoted(text) + ": value is too large (beyond 64-bit integer range)");
  }
  std::uint64_t magnitude = 0;  // fewer than 20 digits: below 10^19, within uint64
  for (std::int64_t d = 0; d < kept; ++d) magnitude = magnitude * 10 + q.digits[static_cast<std::size_t>(d)];
  for (std::int64_t z = 0; z < trailingZeros; ++z) magnitude *= 10;
  if (roundUp) magnitude += 1;
  const std::uint64_t limit =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + (q.negative ? 1 : 0);
  if (magnitude > limit) {
    return makeError(quoted(text) + ": value is too large (beyond 64-bit integer range)");
  }
  if (q.negative) {
    return magnitude == limit ? std::numeric_limits<std::int64_t>::min()
                              : -static_cast<std::int64_t>(magnitude);
  }
  return static_cast<std::int64_t>(magnitude);
}

}  // namespace

Result<std::int64_t> parseQuantityValue(std::string_view text) {
  auto q = parse(text);
  if (!q) return std::move(q).error();
  return scaled(text, std::move(q).value(), 0);
}

Result<std::int64_t> parseQuantityMilli(std::string_view text) {
  auto q = parse(text);
  if (!q) return std::move(q).error();
  return scaled(text, std::move(q).value(), 3);
}

Result<std::int64_t> parseQuantityInteger(std::string_view text) {
  // The apiserver's test for extended resources is MilliValue() % 1000 == 0; using the
  // same test keeps us agreeing with it on every quantity it admitted.
  auto milli = parseQuantityMilli(text);
  if (!milli) {
    // Beyond int64 in thousandths: then only an exactly whole value that fits is accepted.
    auto value = parseQuantityValue(text);
    if (!value) return value;
    auto q = parse(text).value();
    multiplyByPowerOfTwo(q.digits, q.exp2);
    auto count = static_cast<std::int64_t>(q.digits.size());
    std::int64_t firstFraction = q.exp10 < 0 ? count + q.exp10 : count;
    for (std::int64_t d = firstFraction < 0 ? 0 : firstFraction; d < count; ++d) {
      if (q.digits[static_cast<std::size_t>(d)] != 0) return makeError(quoted(text) + ": must be an integer");
    }
    return value;
  }
  if (milli.value() % 1000 != 0) return makeError(quoted(text) + ": must be an integer");
  return milli.value() / 1000;
}

}  // namespace vgpu
