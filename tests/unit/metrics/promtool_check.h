#pragma once
// Runs `promtool check metrics` on exposition text; shared by the metrics and scheduler tests.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace vgpu::testing {

struct PromtoolResult {
  int exitCode = -1;
  std::string output;  ///< what promtool printed (its complaints)
};

inline PromtoolResult promtoolCheck(const std::string& promtool, const std::string& text) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const auto input = dir / ("vgpu-promtool-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".prom");
  std::ofstream(input) << text;
  PromtoolResult r;
  const std::string cmd = promtool + " check metrics < " + input.string() + " 2>&1";
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
    int status = ::pclose(p);
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::filesystem::remove(input);
  return r;
}

/// What `promtool check metrics` says about `text` (empty = clean, or promtool left out by
/// VGPU_WITHOUT_PROMTOOL: the test target defines VGPU_PROMTOOL when it is there).
inline std::string promtoolProblems(const std::string& text) {
#ifdef VGPU_PROMTOOL
  const auto check = promtoolCheck(VGPU_PROMTOOL, text);
  return check.exitCode == 0 ? "" : (check.output.empty() ? "promtool failed" : check.output);
#else
  (void)text;
  return "";
#endif
}

}  // namespace vgpu::testing
