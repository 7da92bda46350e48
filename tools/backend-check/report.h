#pragma once
// The outcome of vgpu-backend-check: one line per check, a summary, or JSON for CI. While
// checks run, fd 1 points at a capture file, so anything a backend prints to stdout is
// caught and charged to the check that was running.

#include <cstdio>
#include <string>
#include <vector>

namespace vgpu::check {

enum class Outcome { kPass, kFail, kSkip };

struct CheckResult {
  std::string name;  ///< "discovery.stable_ids"
  Outcome outcome = Outcome::kPass;
  std::string detail;
};

class Report {
 public:
  /// Moves fd 1 to a capture file; our own output goes to the original stdout.
  Report();
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  void pass(std::string name, std::string detail = {});
  void fail(std::string name, std::string detail);
  void skip(std::string name, std::string detail);
  /// Records `ok` as a pass or a failure with `whyNot`.
  void expect(bool ok, std::string name, std::string detail, std::string whyNot);

  /// Adds the stdout check: a failure naming each check during which something was printed.
  void finishStdoutCheck();
  int failures() const;
  /// Prints the results (text or JSON) on the real stdout.
  void print(bool json, const std::string& backend, const std::string& library, const std::string& profile) const;

 private:
  void add(CheckResult result);
  /// Bytes written to the capture file since the last look, if any.
  std::string strayOutput();

  std::vector<CheckResult> results_;
  std::vector<std::string> strays_;
  int realStdout_ = -1;
  std::FILE* capture_ = nullptr;
  long seen_ = 0;
};

}  // namespace vgpu::check
