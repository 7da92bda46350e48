#pragma once
// Runs vgpu-backend-check as a vendor or CI would, and reads its --json answer.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace vgpu::conformance {

struct CheckRun {
  int exitCode = -1;
  std::string output;
  boost::json::object doc;

  /// "PASS", "FAIL" or "SKIP" of one check; "" when it did not run.
  std::string status(const std::string& check) const {
    if (const auto* checks = doc.if_contains("checks"))
      for (const auto& c : checks->as_array())
        if (c.at("name").as_string() == check) return std::string(c.at("status").as_string());
    return "";
  }
  std::string detail(const std::string& check) const {
    if (const auto* checks = doc.if_contains("checks"))
      for (const auto& c : checks->as_array())
        if (c.at("name").as_string() == check) return std::string(c.at("detail").as_string());
    return "";
  }
  /// Every failed check with its detail, for a test's failure message.
  std::string failures() const {
    std::string out;
    if (const auto* checks = doc.if_contains("checks"))
      for (const auto& c : checks->as_array())
        if (c.at("status").as_string() == "FAIL")
          out += std::string(c.at("name").as_string()) + ": " + std::string(c.at("detail").as_string()) + "\n";
    return out.empty() ? output : out;
  }
};

inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The vgpu-backend-check binary to run: the ordinary build, or the one ctest names in
/// VGPU_BACKEND_CHECK_UNDER_TEST (the AddressSanitizer build, whose leak report makes the
/// exit status non-zero).
inline std::string checkBinary() {
  const char* under_test = std::getenv("VGPU_BACKEND_CHECK_UNDER_TEST");
  return under_test != nullptr && *under_test != '\0' ? under_test : VGPU_BACKEND_CHECK;
}

/// Runs the check with `args` (besides --json); stderr goes to the test's log.
inline CheckRun runCheck(const std::vector<std::string>& args) {
  std::string command = quoted(checkBinary()) + " --json";
  for (const auto& a : args) command += " " + quoted(a);
  CheckRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  boost::system::error_code ec;
  auto value = boost::json::parse(run.output, ec);
  if (!ec && value.is_object()) run.doc = value.as_object();
  return run;
}

/// A device-config.yaml with one enabled backend section and its options.
inline std::filesystem::path writeConfig(const std::filesystem::path& dir, const std::string& backend,
                                         const std::map<std::string, std::string>& options,
                                         const std::string& extra = "") {
  const auto path = dir / "device-config.yaml";
  std::ofstream out(path);
  out << "version: 1\nbackends:\n  " << backend << ":\n    enabled: true\n" << extra << "    options:\n";
  for (const auto& [k, v] : options) out << "      " << k << ": \"" << v << "\"\n";
  return path;
}

}  // namespace vgpu::conformance
