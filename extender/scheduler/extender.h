#pragma once
// The kube-scheduler extender verbs (k8s-protocols.md section 2): filter and prioritize
// evaluate candidate nodes against the cache with the placement engine; bind re-checks,
// reserves slots and binds with the assignment annotations in the Binding itself.

#include <chrono>
#include <functional>
#include <string>

#include "cluster_cache.h"
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
};

class Extender {
 public:
  /// `podLookup` finds a pod in the informer cache by "ns/name" (null = absent); the client
  /// is used for pods the cache has not seen yet and for the Binding. All must outlive this.
  Extender(const BackendSet& backends, const SchedulerConfig& config, ClusterCache& cache, k8s::Client& client,
           EventRecorder& events, SchedulerMetrics& metrics, std::function<k8s::ObjectPtr(const std::string&)> podLookup,
           ExtenderOptions options = {});

  http::Response filter(const http::Request& request);
  http::Response prioritize(const http::Request& request);
  http::Response bind(const http::Request& request);

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
};

}  // namespace vgpu::scheduler
