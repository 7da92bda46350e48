#pragma once
// A lock for a few dozen instructions of bookkeeping on every allocation or launch: one
// atomic exchange when free, yielding while held. Never held across a sleep or a wait
// that can be long; a forked child re-initialises it (reset()).

#include <sched.h>

#include <atomic>

namespace vgpu {

class SpinLock {
 public:
  void lock() {
    if (__builtin_expect(held_.exchange(true, std::memory_order_acquire), 0)) contended();
  }
  void unlock() { held_.store(false, std::memory_order_release); }
  /// After fork: the thread that held it does not exist in the child.
  void reset() { held_.store(false, std::memory_order_relaxed); }

 private:
  // Out of line, so that the uncontended path costs its callers no saved registers.
  __attribute__((noinline, cold)) void contended() {
    do {
      while (held_.load(std::memory_order_relaxed)) sched_yield();
    } while (held_.exchange(true, std::memory_order_acquire));
  }

  std::atomic<bool> held_{false};
};

/// Scoped holder.
class SpinGuard {
 public:
  explicit SpinGuard(SpinLock& l) : l_(l) { l_.lock(); }
  ~SpinGuard() { l_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock& l_;
};

}  // namespace vgpu
