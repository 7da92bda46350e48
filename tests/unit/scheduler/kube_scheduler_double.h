#pragma once
// kube-scheduler's scheduling queue as it treats pods our extender refuses, for measuring how
// long a refused pod waits. What it models, read from kube-scheduler 1.34 and 1.37
// (pkg/scheduler/schedule_one.go findNodesThatFitPod, framework/runtime/framework.go,
// backend/queue/scheduling_queue.go, framework/events.go, eventhandlers.go):
//  - a pod the extender refused on every node goes to the unschedulable pool with the
//    pseudo-plugin "Extender" as its rejector, which is registered for every cluster event
//    (Pod/All, Node/All, ...) with the default hint, Queue;
//  - an update of the pod itself (a new resourceVersion, e.g. an annotation) is such an event
//    (UnschedulablePod/Update in 1.34, TargetPod/Update in 1.37): the pod moves to the
//    backoff queue, or to the active queue when its backoff is over;
//  - with cluster events on, so does any assigned pod's update or deletion;
//  - backoff: 1 s doubling per attempt up to 10 s, from the last attempt; with
//    SchedulerPopFromBackoffQ (beta, on since 1.33) a backing-off pod is popped when the
//    active queue is empty;
//  - the unschedulable pool is flushed after 5 minutes.
// One scheduling attempt at a time: filter over every node, prioritize, bind the best.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "../http/test_http_client.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"

namespace vgpu::testing {

class KubeSchedulerDouble {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string apiUrl;
    std::uint16_t extenderPort = 0;
    std::vector<std::string> nodes;
    std::string schedulerName = "vgpu-scheduler";
    bool popFromBackoffQ = true;
    bool requeueOnClusterEvents = true;  ///< assigned pods' updates and deletions move refused pods
    std::chrono::milliseconds initialBackoff{1000}, maxBackoff{10000}, flushAfter{300000};
  };

  explicit KubeSchedulerDouble(Options options) : options_(std::move(options)), extender_(options_.extenderPort) {
    k8s::ClientConfig config;
    config.server = options_.apiUrl;
    client_ = std::move(k8s::Client::create(config, {})).value();
    informer_ = std::make_unique<k8s::Informer>(
        *client_, k8s::kPods, k8s::InformerOptions{},
        k8s::InformerHandlers{[this](const k8s::ObjectPtr& p) { onPod(nullptr, p); },
                              [this](const k8s::ObjectPtr& o, const k8s::ObjectPtr& p) { onPod(o, p); },
                              [this](const k8s::ObjectPtr& p) { onDelete(p); }});
    informer_->start();
    informer_->waitForSync(std::chrono::seconds(10));
    loop_ = std::thread([this] { run(); });
  }
  ~KubeSchedulerDouble() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    loop_.join();
    informer_->stop();
  }

  /// One attempt for `name` now, whatever queue it is in (kube-scheduler popping it after an
  /// event moved it).
  void retryNow(const std::string& name) {
    std::unique_lock lock(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end() || it->second.bound) return;
    it->second.queue = Queue::kInFlight;
    lock.unlock();
    attempt(name);
  }
  std::optional<Clock::time_point> boundAt(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end() || !it->second.bound) return std::nullopt;
    return it->second.boundAt;
  }
  int attempts(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = pods_.find(name);
    return it == pods_.end() ? 0 : it->second.attempts;
  }
  bool unschedulable(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = pods_.find(name);
    return it != pods_.end() && it->second.queue == Queue::kUnschedulable;
  }

 private:
  enum class Queue { kActive, kBackoff, kUnschedulable, kInFlight, kDone };
  struct Pod {
    k8s::ObjectPtr object;
    Queue queue = Queue::kActive;
    int attempts = 0;
    Clock::time_point lastAttempt{}, parkedAt{};
    bool bound = false;
    Clock::time_point boundAt{};
  };

  Clock::duration backoff(const Pod& p) const {
    auto d = options_.initialBackoff;
    for (int i = 1; i < p.attempts && d < options_.maxBackoff; ++i) d *= 2;
    return std::min(d, options_.maxBackoff);
  }
  /// The move an event makes (queueAfterBackoff): backoff queue, or active once it is over.
  void requeueLocked(Pod& p) {
    if (p.queue != Queue::kUnschedulable) return;
    p.queue = Clock::now() < p.lastAttempt + backoff(p) ? Queue::kBackoff : Queue::kActive;
    cv_.notify_all();
  }
  bool ours(const boost::json::object& pod) const {
    const auto* n = k8s::findPath(pod, {"spec", "schedulerName"});
    return n && n->is_string() && n->as_string() == options_.schedulerName;
  }
  void onPod(const k8s::ObjectPtr& old, const k8s::ObjectPtr& pod) {
    std::lock_guard lock(mu_);
    const std::string name(k8s::name(*pod));
    if (!k8s::nodeName(*pod).empty()) {
      // An assigned pod's update (its binding too): a cluster event for refused pods.
      if (auto it = pods_.find(name); it != pods_.end() && !it->second.bound && ours(*pod)) {
        it->second.queue = Queue::kDone;
      }
      if (old && options_.requeueOnClusterEvents)
        for (auto& [n, p] : pods_) requeueLocked(p);
      return;
    }
    if (!ours(*pod)) return;
    auto [it, added] = pods_.try_emplace(name);
    it->second.object = pod;
    if (added) {
      cv_.notify_all();
      return;
    }
    // The pod's own update, with a new resourceVersion.
    if (old && k8s::resourceVersion(*old) != k8s::resourceVersion(*pod)) requeueLocked(it->second);
  }
  void onDelete(const k8s::ObjectPtr& pod) {
    std::lock_guard lock(mu_);
    if (!k8s::nodeName(*pod).empty() && options_.requeueOnClusterEvents)
      for (auto& [n, p] : pods_) requeueLocked(p);
    pods_.erase(std::string(k8s::name(*pod)));
  }

  void run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      const auto now = Clock::now();
      std::string next;
      Clock::time_point wake = now + std::chrono::milliseconds(50);
      for (auto& [name, p] : pods_) {
        if (p.queue == Queue::kBackoff && now >= p.lastAttempt + backoff(p)) p.queue = Queue::kActive;
        if (p.queue == Queue::kUnschedulable && now >= p.parkedAt + options_.flushAfter) requeueLocked(p);
        if (p.queue == Queue::kActive && next.empty()) next = name;
      }
      if (next.empty() && options_.popFromBackoffQ)
        for (auto& [name, p] : pods_)
          if (p.queue == Queue::kBackoff) {
            next = name;
            break;
          }
      if (next.empty()) {
        cv_.wait_until(lock, wake);
        continue;
      }
      pods_[next].queue = Queue::kInFlight;
      lock.unlock();
      attempt(next);
      lock.lock();
    }
  }

  static boost::json::object parsed(const std::string& body) {
    boost::system::error_code ec;
    auto v = boost::json::parse(body, ec);
    return !ec && v.is_object() ? v.as_object() : boost::json::object{};
  }

  void attempt(const std::string& name) {
    std::lock_guard one(attemptMu_);  // one scheduling cycle at a time
    k8s::ObjectPtr pod;
    {
      std::lock_guard lock(mu_);
      auto it = pods_.find(name);
      if (it == pods_.end()) return;
      pod = it->second.object;
    }
    boost::json::array nodes;
    for (const auto& n : options_.nodes) nodes.emplace_back(n);
    const std::string args = boost::json::serialize(
        boost::json::object{{"Pod", *pod}, {"Nodes", nullptr}, {"NodeNames", nodes}});
    const auto filtered = parsed(extender_.post("/filter", args).body);
    std::vector<std::string> fitting;
    if (const auto* names = filtered.if_contains("NodeNames"); names && names->is_array())
      for (const auto& n : names->as_array()) fitting.emplace_back(n.as_string());
    bool bound = false, error = filtered.empty() || !filtered.at("Error").as_string().empty();
    if (!fitting.empty()) {
      std::string best = fitting.front();
      if (fitting.size() > 1) {
        std::int64_t top = -1;
        auto scores = boost::json::parse(extender_.post("/prioritize", args).body);
        for (const auto& s : scores.as_array())
          if (std::find(fitting.begin(), fitting.end(), s.at("Host").as_string()) != fitting.end() &&
              s.at("Score").to_number<std::int64_t>() > top) {
            top = s.at("Score").to_number<std::int64_t>();
            best = std::string(s.at("Host").as_string());
          }
      }
      const std::string binding = boost::json::serialize(boost::json::object{
          {"PodName", name}, {"PodNamespace", k8s::namespaceOf(*pod)}, {"PodUID", k8s::uid(*pod)}, {"Node", best}});
      const auto answer = parsed(extender_.post("/bind", binding).body);
      bound = !answer.empty() && answer.at("Error").as_string().empty();
      error = !bound;
    }
    std::lock_guard lock(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return;
    Pod& p = it->second;
    ++p.attempts;
    p.lastAttempt = Clock::now();
    if (bound) {
      p.bound = true;
      p.boundAt = p.lastAttempt;
      p.queue = Queue::kDone;
    } else if (error) {
      p.queue = Queue::kBackoff;  // an error, not a refusal: retried after backoff
    } else {
      p.queue = Queue::kUnschedulable;  // refused everywhere by the extender
      p.parkedAt = p.lastAttempt;
    }
  }

  Options options_;
  TestHttpClient extender_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> informer_;
  mutable std::mutex mu_;
  std::mutex attemptMu_;
  std::condition_variable cv_;
  std::map<std::string, Pod> pods_;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace vgpu::testing
