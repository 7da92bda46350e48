#include "vgpu/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace vgpu {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

struct ValueCase {
  const char* text;
  std::int64_t value;  // Quantity.Value(): rounded up (away from zero)
  std::int64_t milli;  // Quantity.MilliValue()
  const char* why;
};

class QuantityValid : public ::testing::TestWithParam<ValueCase> {};

TEST_P(QuantityValid, ParsesValueAndMilli) {
  const ValueCase& c = GetParam();
  auto value = parseQuantityValue(c.text);
  ASSERT_TRUE(value.ok()) << c.text << " (" << c.why << "): " << value.error().message;
  EXPECT_EQ(*value, c.value) << c.text << " (" << c.why << ")";
  auto milli = parseQuantityMilli(c.text);
  ASSERT_TRUE(milli.ok()) << c.text << " (" << c.why << "): " << milli.error().message;
  EXPECT_EQ(*milli, c.milli) << c.text << " (" << c.why << ")";
}

INSTANTIATE_TEST_SUITE_P(
    QuantityTable, QuantityValid,
    ::testing::Values(
        ValueCase{"0", 0, 0, "zero"}, ValueCase{"3000", 3000, 3000000, "plain integer"},
        ValueCase{"+5", 5, 5000, "explicit plus"}, ValueCase{"-5", -5, -5000, "negative"},
        ValueCase{"-0", 0, 0, "negative zero"}, ValueCase{"007", 7, 7000, "leading zeros"},
        ValueCase{"1.5", 2, 1500, "digits.digits rounds up"},
        ValueCase{"5.", 5, 5000, "digits. form"}, ValueCase{".5", 1, 500, ".digits form"},
        ValueCase{"0.0", 0, 0, "zero with fraction"}, ValueCase{"-.5", -1, -500, "negative .digits"},
        ValueCase{"500m", 1, 500, "milli rounds up to 1"}, ValueCase{"-500m", -1, -500, "away from zero"},
        ValueCase{"1000m", 1, 1000, "exact milli"}, ValueCase{"1001m", 2, 1001, "just over one"},
        ValueCase{"1u", 1, 1, "micro rounds up in both"}, ValueCase{"1n", 1, 1, "nano"},
        ValueCase{"1500000n", 1, 2, "nano to milli rounds up"},
        ValueCase{"0.0001", 1, 1, "tiny rounds up"}, ValueCase{"1k", 1000, 1000000, "kilo is lower case"},
        ValueCase{"100M", 100000000, 100000000000, "M is mega"},
        ValueCase{"1G", 1000000000, 1000000000000, "giga"},
        ValueCase{"1T", 1000000000000, 1000000000000000, "tera"},
        ValueCase{"1P", 1000000000000000, 1000000000000000000, "peta"},
        ValueCase{"1Ki", 1024, 1024000, "kibi"}, ValueCase{"1Mi", 1048576, 1048576000, "mebi"},
        ValueCase{"3Gi", 3221225472, 3221225472000, "gibi"},
        ValueCase{"1.5Gi", 1610612736, 1610612736000, "fractional binary"},
        ValueCase{"1536Mi", 1610612736, 1610612736000, "same in mebi"},
        ValueCase{"0.5Ki", 512, 512000, "half a kibi"}, ValueCase{"0.001Ki", 2, 1024, "1.024 rounds up"},
        ValueCase{"1Ti", 1099511627776, 1099511627776000, "tebi"},
        ValueCase{"1Pi", 1125899906842624, 1125899906842624000, "pebi"},
        ValueCase{"1e3", 1000, 1000000, "exponent"}, ValueCase{"1E3", 1000, 1000000, "capital exponent"},
        ValueCase{"1e+3", 1000, 1000000, "signed exponent"}, ValueCase{"2E-3", 1, 2, "negative exponent"},
        ValueCase{"1.5e3", 1500, 1500000, "fraction and exponent"},
        ValueCase{"12e-1", 2, 1200, "exponent leaves a fraction"}, ValueCase{"1e0", 1, 1000, "zero exponent"},
        ValueCase{"1e-9999999999", 1, 1, "vanishing but non-zero rounds up"},
        ValueCase{"0e99999", 0, 0, "zero times anything"},
        ValueCase{"100000000000000000000e-20", 1, 1000, "many digits scaled back down"},
        ValueCase{"9223372036854775807m", 9223372036854776, kMax, "int64 max in milli"},
        ValueCase{"-9223372036854775808m", -9223372036854776, kMin, "int64 min in milli"}),
    [](const auto& info) { return std::to_string(info.index); });

// Where the value fits but its thousandths do not, each function answers for itself.
TEST(QuantityLimits, MilliOverflowIsAnErrorWhileValueFits) {
  EXPECT_TRUE(parseQuantityValue("9223372036854775807").ok());
  EXPECT_FALSE(parseQuantityMilli("9223372036854775807").ok());
  EXPECT_FALSE(parseQuantityMilli("-9223372036854775808").ok());
  auto min = parseQuantityValue("-9223372036854775808");
  ASSERT_TRUE(min.ok());
  EXPECT_EQ(*min, kMin);
}

TEST(QuantityLimits, ValuesBeyondInt64AreErrorsNeverWrapped) {
  for (const char* text : {"9223372036854775808", "-9223372036854775809", "8Ei", "10E", "1e19",
                           "99999999999999999999", "1e99999", "1e9999999999999999", "16Ei",
                           "9223372036854775807.1"}) {
    auto v = parseQuantityValue(text);
    ASSERT_FALSE(v.ok()) << text << " gave " << *v;
    EXPECT_NE(v.error().message.find("too large"), std::string::npos) << v.error().message;
  }
  auto e = parseQuantityValue("7Ei");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, std::int64_t{7} << 60);
  auto exa = parseQuantityValue("9E");
  ASSERT_TRUE(exa.ok());
  EXPECT_EQ(*exa, 9000000000000000000);
}

TEST(QuantityRandom, WholeNumbersWithEverySuffixMatchPlainArithmetic) {
  struct Suffix {
    const char* text;
    std::int64_t multiplier;
  };
  const Suffix suffixes[] = {{"", 1},
                             {"k", 1000},
                             {"M", 1000000},
                             {"G", 1000000000},
                             {"T", 1000000000000},
                             {"P", 1000000000000000},
                             {"E", 1000000000000000000},
                             {"Ki", std::int64_t{1} << 10},
                             {"Mi", std::int64_t{1} << 20},
                             {"Gi", std::int64_t{1} << 30},
                             {"Ti", std::int64_t{1} << 40},
                             {"Pi", std::int64_t{1} << 50},
                             {"Ei", std::int64_t{1} << 60},
                             {"e0", 1},
                             {"e6", 1000000},
                             {"E15", 1000000000000000}};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000; ++i) {
    // Magnitudes from 1 digit to 19, so both sides of the int64 limit are exercised.
    std::int64_t n = static_cast<std::int64_t>(rng() >> (1 + rng() % 63));
    bool negative = rng() % 4 == 0;
    for (const Suffix& s : suffixes) {
      std::string text = (negative ? "-" : "") + std::to_string(n) + s.text;
      std::int64_t expected = 0;
      // Signed, so that -8Ei (exactly int64 min) fits while 8Ei does not.
      bool overflows = __builtin_mul_overflow(negative ? -n : n, s.multiplier, &expected);
      auto v = parseQuantityValue(text);
      if (overflows) {
        EXPECT_FALSE(v.ok()) << text;
      } else {
        ASSERT_TRUE(v.ok()) << text << ": " << v.error().message;
        EXPECT_EQ(*v, expected) << text;
      }
    }
    // Sub-unit suffixes: the value rounds up, away from zero.
    for (auto [suffix, divisor] : {std::pair{"m", 1000}, std::pair{"u", 1000000}, std::pair{"n", 1000000000}}) {
      std::string text = std::to_string(n) + suffix;
      auto v = parseQuantityValue(text);
      ASSERT_TRUE(v.ok()) << text;
      EXPECT_EQ(*v, n / divisor + (n % divisor != 0 ? 1 : 0)) << text;
    }
  }
}

struct BadCase {
  const char* text;
  const char* messagePart;
};

class QuantityInvalid : public ::testing::TestWithParam<BadCase> {};

TEST_P(QuantityInvalid, IsRejectedWithAClearMessage) {
  const BadCase& c = GetParam();
  auto value = parseQuantityValue(c.text);
  ASSERT_FALSE(value.ok()) << "'" << c.text << "' parsed as " << *value;
  EXPECT_NE(value.error().message.find(c.messagePart), std::string::npos)
      << "'" << c.text << "': " << value.error().message;
  EXPECT_FALSE(parseQuantityMilli(c.text).ok()) << c.text;
  EXPECT_FALSE(parseQuantityInteger(c.text).ok()) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    QuantityTable, QuantityInvalid,
    ::testing::Values(BadCase{"", "empty"}, BadCase{"K", "expected digits"}, BadCase{"1K", "unknown suffix \"K\""},
                      BadCase{"1KB", "unknown suffix"}, BadCase{"1kb", "unknown suffix"},
                      BadCase{"1ki", "unknown suffix"}, BadCase{"1gi", "unknown suffix"},
                      BadCase{"1MI", "unknown suffix"}, BadCase{"1Ki3", "unknown suffix"},
                      BadCase{"-", "expected digits"}, BadCase{"+", "expected digits"},
                      BadCase{".", "expected digits"}, BadCase{"Gi", "expected digits"},
                      BadCase{"--1", "expected digits"}, BadCase{"+-1", "expected digits"},
                      BadCase{" 1", "expected digits"}, BadCase{"1 ", "unknown suffix"},
                      BadCase{"1 Gi", "unknown suffix"}, BadCase{"1.2.3", "unknown suffix"},
                      BadCase{"1e", "unknown suffix"}, BadCase{"1e+", "unknown suffix"},
                      BadCase{"1e1.5", "unknown suffix"}, BadCase{"1e3m", "unknown suffix"},
                      BadCase{"1mm", "unknown suffix"}, BadCase{"0x10", "unknown suffix"},
                      BadCase{"1,5", "unknown suffix"}, BadCase{"1\n", "unknown suffix \"\\x0a\""},
                      BadCase{"1e99999999999999999999", "unknown suffix"}, BadCase{"Infinity", "expected digits"},
                      BadCase{"NaN", "expected digits"}),
    [](const auto& info) { return std::to_string(info.index); });

TEST(QuantityInvalid, MessageNamesTheText) {
  auto v = parseQuantityValue("12KB");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("\"12KB\""), std::string::npos) << v.error().message;
  EXPECT_NE(v.error().message.find("case-sensitive"), std::string::npos) << v.error().message;
}

TEST(QuantityInvalid, HugeGarbageIsShortenedInTheMessage) {
  std::string text(100000, 'x');
  auto v = parseQuantityValue(text);
  ASSERT_FALSE(v.ok());
  EXPECT_LT(v.error().message.size(), 400u);
}

TEST(QuantityInteger, AcceptsWholeNumbersInAnySpelling) {
  struct Case {
    const char* text;
    std::int64_t value;
  };
  for (const Case& c : {Case{"2", 2}, Case{"2000m", 2}, Case{"1k", 1000}, Case{"1Gi", 1073741824},
                        Case{"1e3", 1000}, Case{"0.5Ki", 512}, Case{"-3", -3}, Case{"0", 0},
                        Case{"9223372036854775807", kMax}, Case{"9223372036854775807.000", kMax}}) {
    auto v = parseQuantityInteger(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.error().message;
    EXPECT_EQ(*v, c.value) << c.text;
  }
}

TEST(QuantityInteger, RefusesFractionsLikeTheApiserver) {
  for (const char* text : {"1.5", "500m", "1001m", "0.001Ki", "1n", "12e-1", "9223372036854775806.5"}) {
    auto v = parseQuantityInteger(text);
    ASSERT_FALSE(v.ok()) << text << " gave " << *v;
    EXPECT_NE(v.error().message.find("must be an integer"), std::string::npos) << v.error().message;
  }
}

TEST(QuantityInteger, FollowsTheApiserverMilliTestBelowAThousandth) {
  // The apiserver checks MilliValue() % 1000 == 0, and MilliValue rounds up: a fraction
  // closer than a thousandth to the next integer passes there, so it passes here too.
  auto v = parseQuantityInteger("1.9999");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(*v, 2);
}

}  // namespace
}  // namespace vgpu
