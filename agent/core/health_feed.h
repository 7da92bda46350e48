#pragma once
// One backend's device health as both front ends follow it: a thread that waits on the
// backend's discovery for health events and hands each batch to the front end.
//
// The device plugin turns a batch into a new ListAndWatch list, the DRA front end into its
// ResourceSlices and DRAResourceHealth stream; the waiting, the back-off after a failed
// check (1 s, a message logged once while it repeats) and stopping are the same, and live here.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/discovery.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

class HealthFeed {
 public:
  struct Handlers {
    /// Waits up to the given time for the backend's health events (Discovery::waitForHealthEvents;
    /// the front end takes whatever lock its discovery calls need).
    std::function<Result<std::vector<HealthEvent>>(std::chrono::milliseconds)> wait;
    /// A batch of events; empty: the backend checked and nothing changed.
    std::function<void(const std::vector<HealthEvent>&)> onEvents;
    /// A failed check, once per message while the same one repeats (the front end logs it).
    std::function<void(const std::string&)> onError;
  };

  /// How long one wait for events lasts, and the pause after a failed one.
  static constexpr std::chrono::milliseconds kWait{300};
  static constexpr std::chrono::milliseconds kBackOff{1000};

  /// Starts following.
  explicit HealthFeed(Handlers handlers);
  ~HealthFeed();  ///< stop()
  HealthFeed(const HealthFeed&) = delete;
  HealthFeed& operator=(const HealthFeed&) = delete;

  /// Returns once the thread is gone (at most one wait or one batch later); safe to call twice.
  void stop();

 private:
  void loop();

  Handlers handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vgpu::deviceplugin
