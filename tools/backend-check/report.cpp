#include "report.h"

#include <unistd.h>

#include <boost/json.hpp>
#include <iostream>

namespace vgpu::check {
namespace {

const char* label(Outcome o) { return o == Outcome::kPass ? "PASS" : o == Outcome::kFail ? "FAIL" : "SKIP"; }

void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Report::Report() {
  std::fflush(stdout);
  realStdout_ = ::dup(1);
  capture_ = std::tmpfile();
  if (capture_ != nullptr) ::dup2(::fileno(capture_), 1);
}

Report::~Report() {
  std::fflush(stdout);
  if (realStdout_ >= 0) {
    ::dup2(realStdout_, 1);
    ::close(realStdout_);
  }
  if (capture_ != nullptr) std::fclose(capture_);
}

std::string Report::strayOutput() {
  std::fflush(stdout);
  std::cout.flush();
  if (capture_ == nullptr) return {};
  const long end = ::lseek(::fileno(capture_), 0, SEEK_END);
  if (end <= seen_) return {};
  std::string text(static_cast<size_t>(end - seen_), '\0');
  const ssize_t n = ::pread(::fileno(capture_), text.data(), text.size(), seen_);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  seen_ = end;
  return text;
}

void Report::add(CheckResult result) {
  if (std::string stray = strayOutput(); !stray.empty()) {
    if (stray.size() > 80) stray = stray.substr(0, 80) + "...";
    strays_.push_back(result.name + " (" + stray + ")");
  }
  results_.push_back(std::move(result));
}

void Report::pass(std::string name, std::string detail) { add({std::move(name), Outcome::kPass, std::move(detail)}); }
void Report::fail(std::string name, std::string detail) { add({std::move(name), Outcome::kFail, std::move(detail)}); }
void Report::skip(std::string name, std::string detail) { add({std::move(name), Outcome::kSkip, std::move(detail)}); }

void Report::expect(bool ok, std::string name, std::string detail, std::string whyNot) {
  if (ok) pass(std::move(name), std::move(detail));
  else fail(std::move(name), std::move(whyNot));
}

void Report::finishStdoutCheck() {
  if (std::string stray = strayOutput(); !stray.empty()) strays_.push_back("after the last check (" + stray + ")");
  if (strays_.empty()) {
    results_.push_back({"stdout.clean", Outcome::kPass, "the backend wrote nothing to stdout"});
    return;
  }
  std::string where;
  for (const auto& s : strays_) where += (where.empty() ? "" : "; ") + s;
  results_.push_back({"stdout.clean", Outcome::kFail,
                      "the backend wrote to stdout (the node agent's and the scheduler's output, "
                      "log to stderr instead) during: " + where});
}

int Report::failures() const {
  int n = 0;
  for (const auto& r : results_) n += r.outcome == Outcome::kFail;
  return n;
}

void Report::print(bool json, const std::string& backend, const std::string& library,
                   const std::string& profile) const {
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& r : results_)
    (r.outcome == Outcome::kPass ? passed : r.outcome == Outcome::kFail ? failed : skipped)++;
  std::string out;
  if (json) {
    boost::json::array checks;
    for (const auto& r : results_)
      checks.push_back({{"name", r.name}, {"status", label(r.outcome)}, {"detail", r.detail}});
    boost::json::object doc{{"backend", backend},
                            {"library", library},
                            {"profile", profile},
                            {"checks", std::move(checks)},
                            {"summary", {{"passed", passed}, {"failed", failed}, {"skipped", skipped}}}};
    out = boost::json::serialize(doc) + "\n";
  } else {
    for (const auto& r : results_)
      out += std::string(label(r.outcome)) + "  " + r.name + (r.detail.empty() ? "" : ": " + r.detail) + "\n";
    out += "backend " + backend + " (" + library + "), profile " + profile + ": " + std::to_string(passed) +
           " passed, " + std::to_string(failed) + " failed, " + std::to_string(skipped) + " skipped\n";
  }
  writeAll(realStdout_ >= 0 ? realStdout_ : 1, out);
}

}  // namespace vgpu::check
