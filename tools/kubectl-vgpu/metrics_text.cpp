// A reader of the Prometheus text format (0.0.4): `name{label="value",...} value [time]`,
// label values with \\, \" and \n escapes, NaN and +Inf/-Inf.
#include "metrics_text.h"

#include <cmath>
#include <cstdlib>

namespace vgpu::kubectl {

namespace {

Result<Sample> parseLine(std::string_view line) {
  Sample s;
  std::size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
  s.name = std::string(line.substr(0, i));
  if (s.name.empty()) return makeError("no metric name");
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const std::size_t eq = line.find('=', i);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"')
        return makeError("a label without =\"value\"");
      std::string key(line.substr(i, eq - i)), value;
      i = eq + 2;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
      }
      if (i >= line.size()) return makeError("an unterminated label value");
      ++i;  // the closing quote
      s.labels[std::move(key)] = std::move(value);
    }
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::string number(line.substr(i, line.find_first_of(" \t", i) - i));
  if (number == "NaN") s.value = std::nan("");
  else if (number == "+Inf") s.value = INFINITY;
  else if (number == "-Inf") s.value = -INFINITY;
  else {
    char* end = nullptr;
    s.value = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0') return makeError("the value \"" + number + "\" is not a number");
  }
  return s;
}

}  // namespace

Result<std::vector<Sample>> parseExposition(std::string_view text) {
  std::vector<Sample> out;
  std::size_t lineNo = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    auto sample = parseLine(line);
    if (!sample.ok()) return makeError("line " + std::to_string(lineNo) + ": " + sample.error().message);
    out.push_back(std::move(*sample));
  }
  return out;
}

}  // namespace vgpu::kubectl
