// Counts each pod's kills over the window and says when killing turns into evicting
// (watchdog_escalation.h).

#include "watchdog_escalation.h"

namespace vgpu::deviceplugin {

KillEscalation::KillEscalation(int after, std::chrono::seconds window, SteadyClock clock)
    : after_(after), window_(window), clock_(clock ? std::move(clock) : SteadyClock(std::chrono::steady_clock::now)) {}

int KillEscalation::recordKill(const std::string& podUid) {
  const auto now = clock_();
  // Pods whose kills all left the window are forgotten, so pods that are gone do not pile up.
  for (auto it = kills_.begin(); it != kills_.end();) {
    auto& times = it->second;
    while (!times.empty() && now - times.front() >= window_) times.pop_front();
    it = times.empty() ? kills_.erase(it) : std::next(it);
  }
  auto& times = kills_[podUid];
  times.push_back(now);
  return static_cast<int>(times.size());
}

}  // namespace vgpu::deviceplugin
