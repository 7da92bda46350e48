#include "vgpu/codec/timestamp.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

namespace vgpu {
namespace {

using namespace std::chrono;

system_clock::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return sys_days{year{y} / month{mo} / day{d}} + hours{h} + minutes{mi} + seconds{s};
}

TEST(CodecTimestamp, FormatsUtcWithSecondPrecision) {
  EXPECT_EQ(formatTimestamp(at(2026, 12, 2, 8, 29, 23)), "2026-12-02T08:29:23Z");
  EXPECT_EQ(formatTimestamp(system_clock::time_point{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(formatTimestamp(at(2024, 2, 29, 23, 59, 59)), "2024-02-29T23:59:59Z");
}

TEST(CodecTimestamp, FormattingDropsSubsecondsTowardThePast) {
  EXPECT_EQ(formatTimestamp(at(2026, 1, 1, 0, 0, 0) + milliseconds{999}), "2026-01-01T00:00:00Z");
  EXPECT_EQ(formatTimestamp(system_clock::time_point{} - milliseconds{1}), "1969-12-31T23:59:59Z");
}

TEST(CodecTimestamp, ParsesZuluOffsetsAndFractions) {
  struct Case {
    const char* text;
    system_clock::time_point expected;
  };
  const auto base = at(2026, 12, 2, 8, 29, 23);
  for (const Case& c : {Case{"2026-12-02T08:29:23Z", base}, Case{"2026-12-02t08:29:23z", base},
                        Case{"2026-12-02T10:29:23+02:00", base}, Case{"2026-12-02T03:59:23-04:30", base},
                        Case{"2026-12-02T08:29:23+00:00", base}, Case{"2026-12-02T08:29:23-00:00", base},
                        Case{"2026-12-03T00:29:23+16:00", base},
                        Case{"2026-12-02T08:29:23.5Z", base + milliseconds{500}},
                        Case{"2026-12-02T08:29:23.123456789Z", base + nanoseconds{123456789}},
                        Case{"2026-12-02T08:29:23.1234567891234Z", base + nanoseconds{123456789}},
                        Case{"1970-01-01T00:00:00Z", system_clock::time_point{}},
                        Case{"2000-02-29T12:00:00Z", at(2000, 2, 29, 12, 0, 0)},
                        Case{"1969-12-31T23:59:59Z", system_clock::time_point{} - seconds{1}}}) {
    auto t = parseTimestamp(c.text);
    ASSERT_TRUE(t.ok()) << c.text << ": " << t.error().message;
    EXPECT_EQ(*t, c.expected) << c.text << " parsed as " << formatTimestamp(*t);
  }
}

TEST(CodecTimestamp, RejectsMalformedTextNamingIt) {
  for (const char* text :
       {"", "2026-12-02", "2026-12-02T08:29:23", "2026-12-02 08:29:23Z", "2026-12-02T08:29Z",
        "2026-13-02T08:29:23Z", "2026-00-02T08:29:23Z", "2026-02-30T08:29:23Z", "2025-02-29T08:29:23Z",
        "1900-02-29T00:00:00Z", "2026-12-32T08:29:23Z", "2026-12-02T24:00:00Z", "2026-12-02T23:60:00Z",
        "2026-12-02T23:59:60Z", "2026-12-02T08:29:23.Z", "2026-12-02T08:29:23+2:00", "2026-12-02T08:29:23+02",
        "2026-12-02T08:29:23+0200", "2026-12-02T08:29:23+24:00", "2026-12-02T08:29:23+02:60",
        "2026-12-02T08:29:23ZZ", "2026-12-02T08:29:23Z ", " 2026-12-02T08:29:23Z", "20261202T082923Z",
        "2026-1-02T08:29:23Z", "+2026-12-02T08:29:23Z", "2026-12-02T08:29:23UTC", "garbage",
        "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"}) {
    auto t = parseTimestamp(text);
    ASSERT_FALSE(t.ok()) << "'" << text << "' parsed as " << formatTimestamp(*t);
    EXPECT_NE(t.error().message.find("RFC 3339"), std::string::npos) << t.error().message;
  }
}

TEST(CodecTimestamp, RandomTimesRoundTrip) {
  std::mt19937_64 rng(20261202);
  // Within the nanosecond clock's range (about 1678 to 2262).
  std::uniform_int_distribution<std::int64_t> secs(-9'000'000'000, 9'000'000'000);
  for (int i = 0; i < 2000; ++i) {
    system_clock::time_point t{duration_cast<system_clock::duration>(seconds{secs(rng)})};
    std::string text = formatTimestamp(t);
    auto back = parseTimestamp(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.error().message;
    EXPECT_EQ(*back, t) << text;
  }
}

}  // namespace
}  // namespace vgpu
