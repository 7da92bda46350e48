#pragma once
// vgpu-scheduler assembled: the cluster cache fed by node and pod informers; the extender
// verbs (filter, prioritize, bind) on their own listener, by default on loopback next to
// kube-scheduler, since /bind binds pods; the webhook, /metrics, /healthz and /readyz on the
// other (HTTPS for the apiserver).

#include <chrono>
#include <memory>
#include <string>

#include "cluster_cache.h"
#include "event_recorder.h"
#include "extender.h"
#include "requeuer.h"
#include "webhook.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/http/server.h"
#include "vgpu/k8s/client.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::scheduler {

struct ServiceOptions {
  std::string schedulerName = "vgpu-scheduler";
  std::string instance = "vgpu-scheduler";  ///< events' reporting instance (the pod's name)
  ExtenderOptions extender;
  /// Waking refused pods when capacity frees (schedulerName and heartbeatTimeout are set
  /// from the service's own).
  RequeuerOptions requeue;
  /// The admission webhook's security settings (its schedulerName is set from the service's).
  WebhookOptions webhook;
  http::ServerOptions http;          ///< /webhook, /metrics, /healthz, /readyz
  /// /filter, /prioritize, /bind, /healthz (default 127.0.0.1, any port); /bind runs on its
  /// blockingThreads, the others on its threads.
  http::ServerOptions extenderHttp;
  std::chrono::seconds inFlightExpiry{300};
  /// Events' own client (and so their own rate limit); null = the main client. Must outlive
  /// the service.
  k8s::Client* eventClient = nullptr;
  /// Informers: where to start over after a failed list or watch.
  std::chrono::milliseconds informerBackoffMin{200};
  /// Also export HAMi's metric names and labels (hami_gpu_*, hami_vgpu_*; docs/metrics.md).
  bool hamiMetrics = false;
  /// Where the node agents' Leases are (vgpu/k8s/node_lease.h; the chart's namespace); empty =
  /// only the Nodes' vgpu.io/heartbeat annotations say whether an agent is alive.
  std::string leaseNamespace;
};

/// Process-wide malloc settings for the request pattern (filter bodies and answers of tens
/// to hundreds of KiB each): keep freed memory instead of returning it to the kernel after
/// every request, which otherwise costs page faults on the next one. Call once at start-up.
void tuneAllocator();

class SchedulerService {
 public:
  /// Starts the informers and the server. `backends` and `client` must outlive the service.
  /// Errors: the server cannot listen (address, port, TLS files).
  static Result<std::unique_ptr<SchedulerService>> start(const DeviceConfig& config, const BackendSet& backends,
                                                         k8s::Client& client, ServiceOptions options);
  ~SchedulerService();  ///< stop()
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  /// Stops serving (requests in flight finish), then the informers and the event sender.
  void stop();
  /// Node and pod caches have synced: /readyz answers 200.
  bool ready() const;
  bool waitForSync(std::chrono::milliseconds timeout) const;

  /// The webhook's listener (/webhook, /metrics, /healthz, /readyz).
  std::uint16_t port() const;
  std::string url() const;
  /// The extender verbs' listener.
  std::uint16_t extenderPort() const;
  std::string extenderUrl() const;
  ClusterCache& cache();
  metrics::Registry& registry();
  EventRecorder& events();
  Requeuer& requeuer();

 private:
  struct Impl;
  explicit SchedulerService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::scheduler
