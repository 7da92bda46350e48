#pragma once
// Time as a dependency: backoff, rate limiting and token re-reading ask this clock, so a
// test can run hours of retries in microseconds and check exactly how long was waited.

#include <chrono>
#include <memory>

namespace vgpu::k8s {

/// Monotonic time and sleeping. Implementations must be thread-safe.
class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint now() = 0;
  /// Blocks the calling thread for `d` (a fake clock advances its time instead).
  virtual void sleepFor(Duration d) = 0;
};

/// The real steady clock; shared, never null.
std::shared_ptr<Clock> systemClock();

}  // namespace vgpu::k8s
