#pragma once
// Pod events (placements and refusals) sent from a background thread, so a slow apiserver
// never delays filter or bind. A bounded queue: when full, events are dropped and counted.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "vgpu/k8s/client.h"

namespace vgpu::scheduler {

class EventRecorder {
 public:
  /// `client` null: events are only logged (tests of the handlers alone). `onDrop` counts
  /// events lost.
  EventRecorder(k8s::Client* client, std::string component, std::string host, std::function<void()> onDrop = {},
                std::size_t capacity = 10000);
  ~EventRecorder();  ///< stop()
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  /// About a pod; `type` Normal or Warning.
  void podEvent(const std::string& ns, const std::string& name, const std::string& uid, const std::string& type,
                const std::string& reason, const std::string& message);
  /// Sends what is queued, then ends the thread. Safe to call twice.
  void stop();
  /// Blocks until the queue is empty (tests).
  void flush();

 private:
  void run();
  k8s::Client* client_;
  std::string component_, host_;
  std::function<void()> onDrop_;
  std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<k8s::EventSpec> queue_;
  bool stopping_ = false, sending_ = false;
  std::thread thread_;
};

}  // namespace vgpu::scheduler
