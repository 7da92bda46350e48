#include "service.h"

#include <malloc.h>

#include <spdlog/spdlog.h>

#include "hami_metrics.h"
#include "scheduler_metrics.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/node_lease.h"
#include "vgpu/k8s/trim.h"
#include "webhook.h"

namespace vgpu::scheduler {

void tuneAllocator() {
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

struct SchedulerService::Impl {
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  std::unique_ptr<HamiSchedulerMetrics> hami;  // --hami-metrics
  std::unique_ptr<ClusterCache> cache;
  std::unique_ptr<Nominations> nominations;  // room held for preemptors
  std::unique_ptr<k8s::Informer> nodeInformer, podInformer, quotaInformer;
  std::unique_ptr<k8s::Informer> leaseInformer;  ///< null without a lease namespace
  std::unique_ptr<EventRecorder> events;
  std::unique_ptr<PlacementEngine> engine;  // the requeuer's
  std::unique_ptr<Requeuer> requeuer;
  std::unique_ptr<Extender> extender;
  std::unique_ptr<Webhook> webhook;
  std::unique_ptr<http::Server> server, extenderServer;
  std::chrono::seconds heartbeatTimeout{90};

  bool ready() const {
    return nodeInformer->hasSynced() && podInformer->hasSynced() && quotaInformer->hasSynced() &&
           (!leaseInformer || leaseInformer->hasSynced());
  }

  void collect() {
    const CacheStats s = cache->stats();
    metrics.podsHolding.set(static_cast<double>(s.pods));
    metrics.podsInFlight.set(static_cast<double>(s.inFlight));
    for (auto* g : {&metrics.deviceMemory, &metrics.deviceMemoryCapacity, &metrics.deviceCompute, &metrics.deviceShares})
      g->clear();
    std::map<std::string, double> states{{"ready", 0}, {"stale", 0}, {"no-devices", 0}};
    const auto now = std::chrono::system_clock::now();
    cache->forEachNode([&](const NodeEntry& node) {
      if (!node.state.unavailable.empty()) ++states["no-devices"];
      else if (!nodeUsable(node, now, heartbeatTimeout)) ++states["stale"];
      else ++states["ready"];
      const auto& entries = node.state.inventory->entries();
      for (size_t i = 0; i < entries.size(); ++i) {
        const Device& d = entries[i].device();
        const DeviceUsage& u = node.state.usage[i];
        const metrics::LabelValues labels{node.state.name, d.id, d.backend};
        metrics.deviceMemory.set(labels, static_cast<double>(u.memoryMiB) * 1048576.0);
        metrics.deviceMemoryCapacity.set(labels, static_cast<double>(d.memoryMiB) * 1048576.0);
        metrics.deviceCompute.set(labels, d.computeUnits ? 100.0 * u.compute / d.computeUnits : 0.0);
        metrics.deviceShares.set(labels, u.shares);
      }
    });
    for (const auto& [state, n] : states) metrics.nodes.set({state}, n);
    metrics.namespaceAllocated.clear();
    metrics.namespaceQuotaHard.clear();
    const QuotaResources& resources = cache->quotaResources();
    cache->forEachNamespace([&](const std::string& ns, const ClusterCache::NamespaceQuota& q) {
      for (const auto& [resource, amount] : q.used)
        metrics.namespaceAllocated.set({ns, resource}, static_cast<double>(resources.inUnits(resource, amount)));
      for (const auto& limit : q.limits)
        metrics.namespaceQuotaHard.set({ns, limit.quota, limit.key}, static_cast<double>(limit.hard));
    });
    if (hami) hami->collect(*cache);
  }
};

SchedulerService::SchedulerService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SchedulerService::~SchedulerService() { stop(); }

Result<std::unique_ptr<SchedulerService>> SchedulerService::start(const DeviceConfig& config, const BackendSet& backends,
                                                                  k8s::Client& client, ServiceOptions options) {
  auto impl = std::make_unique<Impl>();
  Impl* s = impl.get();
  s->heartbeatTimeout = config.scheduler.heartbeatTimeout;
  ClusterCache::Options cacheOptions;
  cacheOptions.scheduler = config.scheduler;
  cacheOptions.inFlightExpiry = options.inFlightExpiry;
  cacheOptions.onCapacityFreed = [s](const std::string& node) {
    if (s->requeuer) s->requeuer->capacityFreed(node);
  };
  cacheOptions.onHamiIgnored = [s](const std::string& ns, const std::string& name, const std::string& uid,
                                   const std::string& why) {
    if (s->events)
      s->events->podEvent(ns, name, uid, "Warning", "HamiAnnotationsIgnored",
                          "vgpu-scheduler counts this pod on every device it could use: it " + why);
  };
  s->cache = std::make_unique<ClusterCache>(backends, cacheOptions);

  k8s::InformerOptions nodeOptions;
  nodeOptions.backoffMin = options.informerBackoffMin;
  // Only what the cache, requeuer and binder read is kept (vgpu/k8s/trim.h): whole objects
  // would be ~1 GB at 50,000 pods.
  nodeOptions.transform = k8s::trimNode;
  ClusterCache* cache = s->cache.get();
  s->nominations = std::make_unique<Nominations>(backends);
  Nominations* nominations = s->nominations.get();
  s->nodeInformer = std::make_unique<k8s::Informer>(
      client, k8s::kNodes, nodeOptions,
      k8s::InformerHandlers{[cache](const k8s::ObjectPtr& n) { cache->upsertNode(*n); },
                            [cache](const k8s::ObjectPtr&, const k8s::ObjectPtr& n) { cache->upsertNode(*n); },
                            [cache](const k8s::ObjectPtr& n) { cache->removeNode(k8s::name(*n)); }});
  // The pod informer's cache answers the requeuer's lookups, so the requeuer is made after
  // it; the cache's hook reaches it through `s`.
  // Finished pods hold nothing: the selector turns Succeeded/Failed into deletes at once.
  k8s::InformerOptions podOptions;
  podOptions.fieldSelector = "status.phase!=Succeeded,status.phase!=Failed";
  podOptions.backoffMin = options.informerBackoffMin;
  podOptions.transform = k8s::trimPod;
  // A bound pod's devices are in the cache (PodRecord); the store keeps who it is and
  // where, for the relist's diff. Lookups (bind, requeuer) want pods still to be placed;
  // a bound one is read from the apiserver (bind) or forgotten (requeuer).
  podOptions.retain = [](const k8s::ObjectPtr& p) {
    return k8s::nodeName(*p).empty() ? p : std::make_shared<const boost::json::object>(k8s::podStub(*p));
  };
  // The list's objects, now stubs, were freed together: a block below what the cache
  // allocated since, which the trim threshold (tuneAllocator) would keep from the system.
  podOptions.onListed = [] { malloc_trim(0); };
  s->podInformer = std::make_unique<k8s::Informer>(
      client, k8s::kPods, podOptions,
      k8s::InformerHandlers{[cache, nominations](const k8s::ObjectPtr& p) {
                              cache->upsertPod(*p);
                              nominations->upsertPod(*p);
                            },
                            [cache, s, nominations](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) {
                              cache->upsertPod(*p);
                              nominations->upsertPod(*p);
                              if (s->requeuer && !k8s::nodeName(*p).empty()) s->requeuer->forget(std::string(k8s::uid(*p)));
                            },
                            [cache, s, nominations](const k8s::ObjectPtr& p) {
                              cache->removePod(*p);
                              nominations->removePod(*p);
                              const std::string uid(k8s::uid(*p));
                              if (s->requeuer) s->requeuer->forget(uid);
                              if (s->events) s->events->forgetPod(uid);  // else kept up to its cap
                            }});
  // ResourceQuotas on device memory and compute (namespace_quota.h): few and small objects.
  k8s::InformerOptions quotaOptions;
  quotaOptions.backoffMin = options.informerBackoffMin;
  s->quotaInformer = std::make_unique<k8s::Informer>(
      client, k8s::kResourceQuotas, quotaOptions,
      k8s::InformerHandlers{[cache](const k8s::ObjectPtr& q) { cache->upsertQuota(*q); },
                            [cache](const k8s::ObjectPtr&, const k8s::ObjectPtr& q) { cache->upsertQuota(*q); },
                            [cache](const k8s::ObjectPtr& q) { cache->removeQuota(*q); }});
  // The node agents' Leases: an idle node is kept alive by its Lease, not by Node writes.
  if (!options.leaseNamespace.empty()) {
    k8s::InformerOptions leaseOptions;
    leaseOptions.ns = options.leaseNamespace;
    leaseOptions.labelSelector = std::string(kNodeLeaseLabel) + "=true";
    leaseOptions.backoffMin = options.informerBackoffMin;
    auto renewed = [cache](const k8s::ObjectPtr& l) {
      if (auto r = parseNodeLease(*l)) cache->renewNode(r->node, r->renewed);
    };
    s->leaseInformer = std::make_unique<k8s::Informer>(
        client, k8s::kLeases, leaseOptions,
        k8s::InformerHandlers{renewed, [renewed](const k8s::ObjectPtr&, const k8s::ObjectPtr& l) { renewed(l); },
                              [cache](const k8s::ObjectPtr& l) {
                                if (auto r = parseNodeLease(*l)) cache->forgetLease(r->node);
                              }});
  }
  s->events = std::make_unique<EventRecorder>(options.eventClient ? options.eventClient : &client, "vgpu-scheduler",
                                              options.instance,
                                              [s] { s->metrics.eventsDropped.inc(); });
  k8s::Informer* pods = s->podInformer.get();
  RequeuerOptions requeueOptions = options.requeue;
  requeueOptions.schedulerName = options.schedulerName;
  requeueOptions.heartbeatTimeout = config.scheduler.heartbeatTimeout;
  s->engine = std::make_unique<PlacementEngine>(config.scheduler);
  // The store's bound pods are stubs (podOptions.retain): to its readers they are absent.
  auto unboundPod = [pods](const std::string& key) -> k8s::ObjectPtr {
    k8s::ObjectPtr p = pods->get(key);
    return p && k8s::nodeName(*p).empty() ? p : nullptr;
  };
  s->requeuer = std::make_unique<Requeuer>(*s->cache, *s->engine, client, s->metrics, unboundPod, requeueOptions);
  ExtenderOptions extenderOptions = options.extender;
  extenderOptions.schedulerName = options.schedulerName;
  extenderOptions.requeuer = s->requeuer.get();
  extenderOptions.nominations = nominations;
  s->extender = std::make_unique<Extender>(backends, config.scheduler, *s->cache, client, *s->events, s->metrics,
                                           unboundPod, extenderOptions,
                                           [s] { return s->ready(); });
  WebhookOptions webhookOptions = options.webhook;
  webhookOptions.schedulerName = options.schedulerName;
  s->webhook = std::make_unique<Webhook>(backends, std::move(webhookOptions), s->metrics,
                                         [cache](const std::string& ns) { return cache->namespaceQuota(ns).limits; });
  if (options.hamiMetrics) s->hami = std::make_unique<HamiSchedulerMetrics>(s->registry);
  s->registry.addCollector([s] { s->collect(); });

  // Two listeners: whoever reaches /bind can bind pods, so the verbs are not where the
  // apiserver's webhook calls (and the whole cluster network can connect).
  http::Router verbs;
  Extender* ext = s->extender.get();
  Webhook* hook = s->webhook.get();
  verbs.post("/filter", [ext](const http::Request& r) { return ext->filter(r); });
  verbs.post("/prioritize", [ext](const http::Request& r) { return ext->prioritize(r); });
  // Bind waits on the apiserver (a Binding, a GET when the cache lags) and on confusable
  // pods: on the server's blocking workers, so a hung apiserver never stalls /filter.
  // Filter and prioritize read the cache only (their events and requeues are sent from
  // background threads), as do the webhook, /metrics and the probes.
  verbs.postBlocking("/bind", [ext](const http::Request& r) { return ext->bind(r); });
  verbs.post("/preempt", [ext](const http::Request& r) { return ext->preempt(r); });
  verbs.get("/healthz", [](const http::Request&) { return http::Response::text("ok\n"); });
  http::Router router;
  router.post("/webhook", [hook](const http::Request& r) { return hook->review(r); });
  router.get("/healthz", [](const http::Request&) { return http::Response::text("ok\n"); });
  router.get("/readyz", [s](const http::Request&) {
    return s->ready() ? http::Response::text("ok\n") : http::Response::text("node and pod caches not synced yet\n", 503);
  });
  router.get("/metrics", [s](const http::Request&) {
    http::Response r = http::Response::text(s->registry.render());
    r.contentType = metrics::Registry::kContentType;
    return r;
  });

  s->nodeInformer->start();
  s->podInformer->start();
  s->quotaInformer->start();
  if (s->leaseInformer) s->leaseInformer->start();
  auto stopAll = [s] {
    s->nodeInformer->stop();
    s->podInformer->stop();
    s->quotaInformer->stop();
    if (s->leaseInformer) s->leaseInformer->stop();
    s->requeuer->stop();
    s->events->stop();
  };
  auto extenderServer = http::Server::start(options.extenderHttp, std::move(verbs));
  if (!extenderServer.ok()) {
    stopAll();
    return makeError("extender verbs: " + extenderServer.error().message);
  }
  auto server = http::Server::start(options.http, std::move(router));
  if (!server.ok()) {
    stopAll();
    return std::move(server).error();
  }
  s->extenderServer = std::move(extenderServer).value();
  s->server = std::move(server).value();
  spdlog::info("vgpu-scheduler extender verbs on {}{}", s->extenderServer->url(),
               options.extenderHttp.clientCaFile.empty() ? "" : " (client certificates required)");
  spdlog::info("vgpu-scheduler serving on {} (scheduler name {})", s->server->url(), options.schedulerName);
  return std::unique_ptr<SchedulerService>(new SchedulerService(std::move(impl)));
}

void SchedulerService::stop() {
  if (!impl_) return;
  if (impl_->extenderServer) impl_->extenderServer->stop();
  if (impl_->server) impl_->server->stop();
  impl_->nodeInformer->stop();
  impl_->podInformer->stop();
  impl_->quotaInformer->stop();
  if (impl_->leaseInformer) impl_->leaseInformer->stop();
  impl_->requeuer->stop();
  impl_->events->stop();
}

bool SchedulerService::ready() const { return impl_->ready(); }

bool SchedulerService::waitForSync(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!impl_->nodeInformer->waitForSync(timeout)) return false;
  auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
                    std::chrono::milliseconds(0));
  };
  return impl_->podInformer->waitForSync(left()) && impl_->quotaInformer->waitForSync(left()) &&
         (!impl_->leaseInformer || impl_->leaseInformer->waitForSync(left()));
}

std::uint16_t SchedulerService::port() const { return impl_->server->port(); }
std::string SchedulerService::url() const { return impl_->server->url(); }
std::uint16_t SchedulerService::extenderPort() const { return impl_->extenderServer->port(); }
std::string SchedulerService::extenderUrl() const { return impl_->extenderServer->url(); }
ClusterCache& SchedulerService::cache() { return *impl_->cache; }
metrics::Registry& SchedulerService::registry() { return impl_->registry; }
EventRecorder& SchedulerService::events() { return *impl_->events; }
Requeuer& SchedulerService::requeuer() { return *impl_->requeuer; }

}  // namespace vgpu::scheduler
