#include "event_recorder.h"

#include <spdlog/spdlog.h>

namespace vgpu::scheduler {

EventRecorder::EventRecorder(k8s::Client* client, std::string component, std::string host, std::function<void()> onDrop,
                             std::size_t capacity)
    : client_(client), component_(std::move(component)), host_(std::move(host)), onDrop_(std::move(onDrop)),
      capacity_(capacity) {
  if (client_) thread_ = std::thread([this] { run(); });
}

EventRecorder::~EventRecorder() { stop(); }

void EventRecorder::podEvent(const std::string& ns, const std::string& name, const std::string& uid,
                             const std::string& type, const std::string& reason, const std::string& message) {
  if (!client_) return;
  k8s::EventSpec e;
  e.kind = "Pod";
  e.ns = ns;
  e.name = name;
  e.uid = uid;
  e.type = type;
  e.reason = reason;
  // The apiserver refuses event messages over 1 KiB (events.k8s.io note limit); keep ours short.
  e.message = message.size() > 1000 ? message.substr(0, 997) + "..." : message;
  e.component = component_;
  e.host = host_;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= capacity_) {
      if (onDrop_) onDrop_();
      return;
    }
    queue_.push_back(std::move(e));
  }
  cv_.notify_one();
}

void EventRecorder::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    k8s::EventSpec e = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    auto r = client_->createEvent(e);
    if (!r.ok()) {
      spdlog::debug("pod={}/{} event {} not recorded: {}", e.ns, e.name, e.reason, r.error().describe());
      if (onDrop_) onDrop_();
    }
    lock.lock();
    sending_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void EventRecorder::flush() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return (queue_.empty() && !sending_) || !thread_.joinable(); });
}

void EventRecorder::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  idle_.notify_all();
}

}  // namespace vgpu::scheduler
