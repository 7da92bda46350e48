#pragma once
// Wakes up pods we refused when capacity frees where they could go (issue 27 item 7).
//
// A pod our filter refused everywhere waits in kube-scheduler's unschedulable pool until a
// cluster event moves it (any node or pod change, in 1.34 and 1.37: the pseudo-plugin
// "Extender" registers for all of them) or the 5-minute flush. kube-scheduler reacts to a pod
// deletion as fast as our cache does, so its retry can meet the old state and park the pod
// again, and in a quiet cluster nothing else moves it. So when our cache frees capacity on a
// node (a pod gone or finished, a reservation released, a new or healthy inventory, a fresh
// heartbeat) the pods we refused with that node among the candidates, and that fit there now
// (oldest first, as many as fit together), get an annotation update: an update of the pod
// itself moves it out of the unschedulable pool (docs/scheduler.md, "Retries"). Never a pod
// that is bound, being deleted, replaced, or another scheduler's; rate-limited.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cluster_cache.h"
#include "scheduler_metrics.h"
#include "vgpu/annotations.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/object.h"
#include "vgpu/placement.h"

namespace vgpu::scheduler {

/// The annotation a touch writes (keys::kPodCapacityFreed).
inline constexpr std::string_view kCapacityFreedAnnotation = keys::kPodCapacityFreed;

struct RequeuerOptions {
  std::string schedulerName = "vgpu-scheduler";
  double qps = 20;  ///< touches per second, sustained; <= 0 turns touching off
  int burst = 50;
  /// A pod is touched at most this often (several nodes freeing at once touch it once).
  std::chrono::milliseconds perPodInterval{2000};
  std::size_t maxTracked = 10000;  ///< refused pods remembered; the oldest refusals go first
  std::chrono::seconds heartbeatTimeout{90};  ///< a node is judged as filter judges it
};

/// The node-name keys of a refused pod's candidates (requeuer.cpp).
class NameKeySet;

class Requeuer {
 public:
  /// `podLookup` finds a pod in the informer's cache by "ns/name". All must outlive this.
  Requeuer(ClusterCache& cache, const PlacementEngine& engine, k8s::Client& client, SchedulerMetrics& metrics,
           std::function<k8s::ObjectPtr(const std::string&)> podLookup, RequeuerOptions options);
  ~Requeuer();  ///< stop()
  Requeuer(const Requeuer&) = delete;
  Requeuer& operator=(const Requeuer&) = delete;

  /// Filter refused `pod` on every candidate in `candidates`.
  void refused(const PodInfo& pod, std::shared_ptr<const PreparedPod> prepared,
               const std::vector<std::string_view>& candidates);
  /// The pod is placed, bound, gone or otherwise no longer waiting on our refusal.
  void forget(const std::string& uid);
  /// The cache freed capacity on `node` (ClusterCache::Options::onCapacityFreed). Cheap and
  /// safe under the cache's lock: the work is done on the requeuer's thread.
  void capacityFreed(const std::string& node);

  std::size_t tracked() const;
  void stop();

 private:
  struct Refused {
    std::string uid, ns, name;
    std::shared_ptr<const PreparedPod> pod;
    std::shared_ptr<const NameKeySet> candidates;
    std::uint64_t order = 0;  ///< when it was (last) refused
    std::chrono::steady_clock::time_point lastTouch{};
  };
  void run();
  void handle(const std::string& node);
  bool touch(const Refused& pod, const std::string& node);
  bool takeToken();

  ClusterCache& cache_;
  const PlacementEngine& engine_;
  k8s::Client& client_;
  SchedulerMetrics& metrics_;
  std::function<k8s::ObjectPtr(const std::string&)> podLookup_;
  RequeuerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Refused> refused_;  // by uid
  std::set<std::string> freed_;                       // nodes to look at
  // Candidate sets shared between pods, by an order-free signature of their names.
  std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<const NameKeySet>>> candidateSets_;
  std::uint64_t order_ = 0, touches_ = 0;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point refill_ = std::chrono::steady_clock::now();
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vgpu::scheduler
