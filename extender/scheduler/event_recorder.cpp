#include "event_recorder.h"

#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

#include "vgpu/codec/timestamp.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {

EventRecorder::EventRecorder(k8s::Client* client, std::string component, std::string host, std::function<void()> onDrop,
                             std::size_t capacity, std::size_t series)
    : client_(client), component_(std::move(component)), host_(std::move(host)), onDrop_(std::move(onDrop)),
      capacity_(capacity), maxSeries_(std::max<std::size_t>(series, 1)) {
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
  // The pod's uid keys the series (first, for forgetPod): a pod re-created under its name
  // starts its own.
  const std::string key = uid + "/" + ns + "/" + name + "/" + type + "/" + reason;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      if (onDrop_) onDrop_();
      return;
    }
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= maxSeries_) forgetOldest();
      it = series_.emplace(key, Series{}).first;
    }
    Series& s = it->second;
    if (!s.queued && queue_.size() >= capacity_) {
      if (onDrop_) onDrop_();
      return;
    }
    s.spec = std::move(e);
    ++s.unsent;
    s.lastUse = ++uses_;
    if (!s.queued) {
      s.queued = true;
      queue_.push_back(key);
    }
  }
  cv_.notify_one();
}

void EventRecorder::forgetPod(const std::string& uid) {
  if (uid.empty()) return;
  const std::string prefix = uid + "/";
  std::lock_guard lock(mu_);
  for (auto it = series_.lower_bound(prefix); it != series_.end() && it->first.starts_with(prefix);) {
    if (it->second.queued) {
      it->second.podGone = true;
      ++it;
    } else {
      it = series_.erase(it);
    }
  }
}

void EventRecorder::forgetOldest() {
  // Rare (only with more series than remembered): drop the older half of those not queued.
  std::vector<std::uint64_t> uses;
  for (const auto& [key, s] : series_)
    if (!s.queued) uses.push_back(s.lastUse);
  if (uses.empty()) return;
  auto middle = uses.begin() + static_cast<std::ptrdiff_t>(uses.size() / 2);
  std::nth_element(uses.begin(), middle, uses.end());
  const std::uint64_t cut = *middle;
  std::erase_if(series_, [cut](const auto& kv) { return !kv.second.queued && kv.second.lastUse <= cut; });
}

void EventRecorder::send(const std::string& key, Series s) {
  // An Event already on the apiserver: raise its count (a 404: it expired, make a new one).
  if (!s.eventName.empty()) {
    const std::uint64_t count = s.count + s.unsent;
    boost::json::object patch{{"count", count},
                              {"lastTimestamp", formatTimestamp(std::chrono::system_clock::now())},
                              {"message", s.spec.message}};
    auto r = client_->mergePatch(k8s::kEvents, s.spec.ns, s.eventName, patch);
    if (r.ok()) {
      std::lock_guard lock(mu_);
      if (auto it = series_.find(key); it != series_.end() && it->second.eventName == s.eventName) it->second.count = count;
      return;
    }
    if (!r.error().isNotFound()) {
      spdlog::debug("pod={}/{} event {} not recorded: {}", s.spec.ns, s.spec.name, s.spec.reason, r.error().describe());
      if (onDrop_) onDrop_();
      return;
    }
  }
  auto created = client_->createEvent(s.spec);
  if (!created.ok()) {
    spdlog::debug("pod={}/{} event {} not recorded: {}", s.spec.ns, s.spec.name, s.spec.reason,
                  created.error().describe());
    if (onDrop_) onDrop_();
    return;
  }
  const std::string name(k8s::name(*created));
  std::uint64_t count = 1;
  if (s.unsent > 1) {  // occurrences folded together before the first write
    boost::json::object patch{{"count", s.unsent}};
    if (client_->mergePatch(k8s::kEvents, s.spec.ns, name, patch).ok()) count = s.unsent;
  }
  std::lock_guard lock(mu_);
  if (auto it = series_.find(key); it != series_.end()) {
    it->second.eventName = name;
    it->second.count = count;
  }
}

void EventRecorder::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    const std::string key = std::move(queue_.front());
    queue_.pop_front();
    auto it = series_.find(key);
    if (it == series_.end()) continue;
    Series snapshot = it->second;
    if (snapshot.podGone) {
      series_.erase(it);  // sent once more, then forgotten: send() finds nothing to update
    } else {
      it->second.unsent = 0;
      it->second.queued = false;
    }
    sending_ = true;
    lock.unlock();
    send(key, std::move(snapshot));
    lock.lock();
    sending_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void EventRecorder::flush() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return (queue_.empty() && !sending_) || !thread_.joinable(); });
}

std::size_t EventRecorder::series() const {
  std::lock_guard lock(mu_);
  return series_.size();
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
