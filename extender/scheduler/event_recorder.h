#pragma once
// Pod events (placements and refusals) sent from a background thread, so a slow apiserver
// never delays filter or bind. One Event per pod and reason, with a count, as the kubelet
// keeps them: a pod refused at every retry has one FilteringFailed whose count, last time
// and message move, not hundreds. Repeats that arrive while their Event is still queued are
// folded into it (one write for many); a bounded queue drops (and counts) the rest. A
// deleted pod's series are forgotten (what is still queued is sent first).

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "vgpu/k8s/client.h"

namespace vgpu::scheduler {

class EventRecorder {
 public:
  /// `client` null: events are only logged (tests of the handlers alone). `onDrop` counts
  /// events lost. `capacity`: pod-and-reason series waiting to be written; `series`: how
  /// many series are remembered (the oldest are forgotten first; a forgotten one starts a
  /// new Event).
  EventRecorder(k8s::Client* client, std::string component, std::string host, std::function<void()> onDrop = {},
                std::size_t capacity = 10000, std::size_t series = 20000);
  ~EventRecorder();  ///< stop()
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  /// About a pod; `type` Normal or Warning. Repeats of (pod uid, reason) raise the count of
  /// one Event and give it the latest message.
  void podEvent(const std::string& ns, const std::string& name, const std::string& uid, const std::string& type,
                const std::string& reason, const std::string& message);
  /// The pod with `uid` is gone: its series are forgotten (one still queued once it is sent).
  void forgetPod(const std::string& uid);
  /// Sends what is queued, then ends the thread. Safe to call twice.
  void stop();
  /// Blocks until the queue is empty (tests).
  void flush();
  /// How many pod-and-reason series are remembered.
  std::size_t series() const;

 private:
  struct Series {
    k8s::EventSpec spec;     ///< the latest occurrence
    std::uint64_t unsent = 0;  ///< occurrences not yet counted on the apiserver
    bool queued = false;
    std::string eventName;   ///< the Event on the apiserver; empty until created
    std::uint64_t count = 0;   ///< its count there
    std::uint64_t lastUse = 0;  ///< for forgetting the oldest
    bool podGone = false;       ///< forgetPod() while queued: forgotten once taken to be sent
  };
  void run();
  void send(const std::string& key, Series snapshot);
  void forgetOldest();  // requires mu_

  k8s::Client* client_;
  std::string component_, host_;
  std::function<void()> onDrop_;
  std::size_t capacity_, maxSeries_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::string> queue_;  // keys of series with unsent occurrences
  // By uid/ns/name/type/reason: ordered, so that a pod's series are found by its uid.
  std::map<std::string, Series, std::less<>> series_;
  std::uint64_t uses_ = 0;
  bool stopping_ = false, sending_ = false;
  std::thread thread_;
};

}  // namespace vgpu::scheduler
