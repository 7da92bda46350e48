#pragma once
// The watchdog's escalation from kill-process to evict-pod. A bypass that starts again after
// each SIGKILL (a restarting container, a loop in its entrypoint) holds its overage again
// within a scan or two: killing alone does not bound it. So each pod's kills are counted in a
// sliding window, and the kill that reaches the threshold within it asks for the pod's
// eviction (watchdog.h does the asking, once per pod).

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <string>

namespace vgpu::deviceplugin {

using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;

/// Not thread-safe: the watchdog's one scanning thread.
class KillEscalation {
 public:
  /// `after` kills of one pod within `window` escalate; `after` 0: never.
  KillEscalation(int after, std::chrono::seconds window, SteadyClock clock);

  /// Notes one kill (of one or more processes, for one violation) in pod `podUid`; returns
  /// how many of its kills fall within the window now, this one included.
  int recordKill(const std::string& podUid);
  /// Whether that many kills within the window call for the pod's eviction.
  bool due(int kills) const { return after_ > 0 && kills >= after_; }

  int after() const { return after_; }
  std::chrono::seconds window() const { return window_; }

 private:
  int after_;
  std::chrono::seconds window_;
  SteadyClock clock_;
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> kills_;  ///< pod uid -> within the window
};

}  // namespace vgpu::deviceplugin
