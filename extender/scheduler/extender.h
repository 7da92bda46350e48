#pragma once
// The kube-scheduler extender verbs (k8s-protocols.md section 2): filter and prioritize
// evaluate candidate nodes against the cache with the placement engine; bind re-checks,
// reserves slots and binds with the assignment annotations in the Binding itself.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "cluster_cache.h"
#include "filter_memo.h"
#include "gzip.h"
#include "nominations.h"
#include "requeuer.h"
#include "event_recorder.h"
#include "scheduler_metrics.h"
#include "vgpu/http/server.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/object.h"
#include "vgpu/placement.h"

namespace vgpu::scheduler {

struct ExtenderOptions {
  /// How long a bind waits for a confusable pod on the same node to leave flight before it
  /// fails (the scheduler retries). Below the extender's 5 s HTTP timeout.
  std::chrono::milliseconds bindHoldTimeout{3000};
  /// The only spec.schedulerName /bind binds: pods of other schedulers are refused.
  std::string schedulerName = "vgpu-scheduler";
  /// Told which pods filter refused everywhere and which it placed; null = none (not owned).
  Requeuer* requeuer = nullptr;
  /// Room held for nominated preemptors (nominations.h), counted by filter and bind; null = none.
  const Nominations* nominations = nullptr;
  /// How many request shapes filter keeps its verdicts for (filter_memo.h); 0 = none, every
  /// node judged afresh on every request.
  std::size_t filterMemoShapes = 16;
};

class Extender {
 public:
  /// `podLookup` finds a pod in the informer cache by "ns/name" (null = absent); the client
  /// is used for pods the cache has not seen yet and for the Binding. All must outlive this.
  /// `ready` says whether the cache holds the whole cluster (the first list of nodes and of
  /// pods applied); until then filter and bind refuse and prioritize scores nothing, since
  /// an empty cache would hand out devices that pods already hold. Null = always ready.
  Extender(const BackendSet& backends, const SchedulerConfig& config, ClusterCache& cache, k8s::Client& client,
           EventRecorder& events, SchedulerMetrics& metrics, std::function<k8s::ObjectPtr(const std::string&)> podLookup,
           ExtenderOptions options = {}, std::function<bool()> ready = {});

  /// The words filter and bind answer with before the cache is ready.
  static constexpr std::string_view kNotReady =
      "vgpu-scheduler is not ready: its node and pod caches are still being loaded from the apiserver, and "
      "placing pods from an incomplete cache could give out devices other pods hold; kube-scheduler will try "
      "this pod again";

  http::Response filter(const http::Request& request);
  http::Response prioritize(const http::Request& request);
  http::Response bind(const http::Request& request);
  /// preemptVerb: per candidate node, the fewest pods of lower priority whose eviction lets
  /// the pod fit on concrete devices (chooseVictims), from every such pod on the node (not
  /// only kube-scheduler's proposal, which counts extended resources per node); nodes where
  /// no set helps are left out. Always answers NodeNameToMetaVictims.
  http::Response preempt(const http::Request& request);

  /// The category filter gives a node whose room is held for a nominated pod of higher priority.
  /// The category filter gives a node where the pod fits but its namespace's ResourceQuota
  /// on device memory or compute would be exceeded (the numbers go to the pod's event).
  static constexpr std::string_view kQuotaCategory =
      "vgpu: the namespace's ResourceQuota on device memory or compute would be exceeded";
  static constexpr std::string_view kHeldCategory =
      "vgpu: room held for a pod of higher priority nominated to this node (preemption)";

 private:
  const BackendSet& backends_;
  PlacementEngine engine_;
  ClusterCache& cache_;
  k8s::Client& client_;
  EventRecorder& events_;
  SchedulerMetrics& metrics_;
  std::function<k8s::ObjectPtr(const std::string&)> podLookup_;
  ExtenderOptions options_;
  std::chrono::seconds heartbeatTimeout_;
  std::function<bool()> ready_;
  FilterMemo memo_;
  GzipCache packer_;  ///< filter's large answers, packed
  bool isReady() const { return !ready_ || ready_(); }
  /// The nominees holding room against `pod`, by node (empty without nominations).
  HeldRoom heldAgainst(const PodInfo& pod) const {
    return options_.nominations && options_.nominations->size() ? options_.nominations->heldAgainst(pod.priority, pod.uid)
                                                                : HeldRoom{};
  }
};

}  // namespace vgpu::scheduler
