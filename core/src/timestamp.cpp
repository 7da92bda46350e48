// RFC 3339 (section 5.6 "date-time") with the calendar arithmetic of C++20 <chrono>.

#include "vgpu/codec/timestamp.h"

#include <cstdint>
#include <cstdio>

#include "text_codec.h"

namespace vgpu {
namespace {

using std::chrono::system_clock;

Error badTimestamp(std::string_view text, const std::string& why) {
  return makeError("timestamp " + detail::quoteForMessage(text) + ": " + why +
                   " (expected RFC 3339, e.g. 2026-12-02T08:29:23Z)");
}

// Exactly `width` digits at `pos`; false if any is not a digit or the text is too short.
bool readDigits(std::string_view text, std::size_t pos, std::size_t width, int& out) {
  if (pos + width > text.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + width; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

bool expect(std::string_view text, std::size_t pos, char c) { return pos < text.size() && text[pos] == c; }

}  // namespace

std::string formatTimestamp(system_clock::time_point time) {
  // Whole seconds toward the past, so a time never formats as later than it was.
  auto secs = std::chrono::floor<std::chrono::seconds>(time);
  auto days = std::chrono::floor<std::chrono::days>(secs);
  std::chrono::year_month_day ymd{days};
  std::chrono::hh_mm_ss hms{secs - days};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u" "T%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

Result<system_clock::time_point> parseTimestamp(std::string_view text) {
  if (text.empty()) return badTimestamp(text, "empty");
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!readDigits(text, 0, 4, year) || !expect(text, 4, '-') || !readDigits(text, 5, 2, month) ||
      !expect(text, 7, '-') || !readDigits(text, 8, 2, day)) {
    return badTimestamp(text, "the date is not YYYY-MM-DD");
  }
  if (!(expect(text, 10, 'T') || expect(text, 10, 't'))) {
    return badTimestamp(text, "expected 'T' between date and time");
  }
  if (!readDigits(text, 11, 2, hour) || !expect(text, 13, ':') || !readDigits(text, 14, 2, minute) ||
      !expect(text, 16, ':') || !readDigits(text, 17, 2, second)) {
    return badTimestamp(text, "the time is not hh:mm:ss");
  }
  std::chrono::year_month_day ymd{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                                  std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return badTimestamp(text, "no such date");
  // A leap second (:60) cannot be represented by system_clock; Kubernetes never writes one.
  if (hour > 23 || minute > 59 || second > 59) return badTimestamp(text, "no such time of day");

  std::size_t pos = 19;
  std::chrono::nanoseconds fraction{0};
  if (expect(text, pos, '.')) {
    ++pos;
    std::size_t start = pos;
    std::int64_t nanos = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      // Digits past nanoseconds are below the clock's resolution and are dropped.
      if (pos - start < 9) nanos = nanos * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos == start) return badTimestamp(text, "expected digits after '.'");
    for (std::size_t n = pos - start; n < 9; ++n) nanos *= 10;
    fraction = std::chrono::nanoseconds{nanos};
  }

  int offsetSeconds = 0;
  if (expect(text, pos, 'Z') || expect(text, pos, 'z')) {
    ++pos;
  } else if (expect(text, pos, '+') || expect(text, pos, '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    int offHour = 0, offMinute = 0;
    if (!readDigits(text, pos + 1, 2, offHour) || !expect(text, pos + 3, ':') ||
        !readDigits(text, pos + 4, 2, offMinute)) {
      return badTimestamp(text, "the offset is not +hh:mm or -hh:mm");
    }
    if (offHour > 23 || offMinute > 59) return badTimestamp(text, "the offset is out of range");
    offsetSeconds = sign * (offHour * 3600 + offMinute * 60);
    pos += 6;
  } else {
    return badTimestamp(text, "missing the time zone ('Z' or an offset such as +02:00)");
  }
  if (pos != text.size()) return badTimestamp(text, "unexpected text after the time zone");

  // Local time minus its offset is UTC. Seconds since the epoch fit easily in int64 for
  // years 0000-9999; the clock's own range is checked before converting.
  std::int64_t secs = std::chrono::sys_days{ymd}.time_since_epoch().count() * std::int64_t{86400} +
                      hour * 3600 + minute * 60 + second - offsetSeconds;
  using Duration = system_clock::duration;
  const auto maxSecs = std::chrono::floor<std::chrono::seconds>(Duration::max()).count();
  const auto minSecs = std::chrono::ceil<std::chrono::seconds>(Duration::min()).count();
  if (secs >= maxSecs || secs <= minSecs) {
    return badTimestamp(text, "outside the range the system clock can represent");
  }
  return system_clock::time_point{std::chrono::duration_cast<Duration>(std::chrono::seconds{secs}) +
                                  std::chrono::duration_cast<Duration>(fraction)};
}

}  // namespace vgpu
