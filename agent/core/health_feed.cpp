// The health feed (health_feed.h): the thread that waits for a backend's health events and
// hands them to a front end.

#include "health_feed.h"

namespace vgpu::deviceplugin {

HealthFeed::HealthFeed(Handlers handlers) : handlers_(std::move(handlers)) {
  thread_ = std::thread([this] { loop(); });
}

HealthFeed::~HealthFeed() { stop(); }

void HealthFeed::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void HealthFeed::loop() {
  std::string lastError;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto events = handlers_.wait(kWait);
    if (!events.ok()) {
      if (events.error().message != lastError && handlers_.onError) handlers_.onError(events.error().message);
      lastError = events.error().message;
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, kBackOff, [this] { return stopping_; });
      continue;
    }
    lastError.clear();
    if (handlers_.onEvents) handlers_.onEvents(*events);
  }
}

}  // namespace vgpu::deviceplugin
