#pragma once
// The scheduler's Prometheus families, registered once and shared by the handlers.

#include "vgpu/metrics/registry.h"

namespace vgpu::scheduler {

struct SchedulerMetrics {
  explicit SchedulerMetrics(metrics::Registry& r)
      : registry(r),
        filterDuration(r.histogram("vgpu_scheduler_filter_duration_seconds",
                                   "Time to answer a filter request, from the request body to the serialized answer.",
                                   metrics::Histogram::latencyBuckets())),
        prioritizeDuration(r.histogram("vgpu_scheduler_prioritize_duration_seconds", "Time to answer a prioritize request.",
                                       metrics::Histogram::latencyBuckets())),
        bindDuration(r.histogram("vgpu_scheduler_bind_duration_seconds",
                                 "Time to answer a bind request, apiserver round trip included, by result.",
                                 metrics::Histogram::latencyBuckets(), {"result"})),
        webhookDuration(r.histogram("vgpu_scheduler_webhook_duration_seconds", "Time to answer an admission review.",
                                    metrics::Histogram::latencyBuckets())),
        podsPlaced(r.counter("vgpu_scheduler_pods_placed_total", "Pods bound with a device assignment.")),
        podsRefused(r.counter("vgpu_scheduler_pods_refused_total",
                              "Filter or bind requests that placed nothing, by reason.", {"reason"})),
        webhookReviews(r.counter("vgpu_scheduler_webhook_reviews_total", "Admission reviews answered, by outcome.",
                                 {"outcome"})),
        podsRequeued(r.counter("vgpu_scheduler_pods_requeued_total",
                               "Refused pods woken up (annotation update) because capacity freed where they fit, by result.",
                               {"result"})),
        eventsDropped(r.counter("vgpu_scheduler_events_dropped_total",
                                "Pod events not sent because the queue was full or the apiserver refused them.")),
        nodes(r.gauge("vgpu_scheduler_nodes", "Nodes in the cache, by state.", {"state"})),
        podsHolding(r.gauge("vgpu_scheduler_pods_holding_devices", "Pods whose assignment is counted.")),
        podsInFlight(r.gauge("vgpu_scheduler_pods_in_flight", "Pods bound and waiting for the node agent's Allocate.")),
        deviceMemory(r.gauge("vgpu_device_memory_allocated_bytes", "Device memory given to pods.",
                             {"node", "device", "backend"})),
        deviceMemoryCapacity(r.gauge("vgpu_device_memory_capacity_bytes", "Device memory that can be given to pods.",
                                     {"node", "device", "backend"})),
        deviceCompute(r.gauge("vgpu_device_compute_allocated_percent", "Compute given to pods, percent of the device.",
                              {"node", "device", "backend"})),
        deviceShares(r.gauge("vgpu_device_shares_allocated", "Containers sharing the device.",
                             {"node", "device", "backend"})),
        namespaceAllocated(r.gauge("vgpu_namespace_allocated",
                                   "Device memory or compute the namespace's pods hold, in the resource's unit (what its "
                                   "ResourceQuotas count).",
                                   {"namespace", "resource"})),
        namespaceQuotaHard(r.gauge("vgpu_namespace_quota_hard",
                                   "A ResourceQuota's limit on device memory or compute, in the resource's unit.",
                                   {"namespace", "quota", "resource"})) {}

  metrics::Registry& registry;
  metrics::Histogram& filterDuration;
  metrics::Histogram& prioritizeDuration;
  metrics::Histogram& bindDuration;
  metrics::Histogram& webhookDuration;
  metrics::Counter& podsPlaced;
  metrics::Counter& podsRefused;
  metrics::Counter& webhookReviews;
  metrics::Counter& podsRequeued;
  metrics::Counter& eventsDropped;
  metrics::Gauge& nodes;
  metrics::Gauge& podsHolding;
  metrics::Gauge& podsInFlight;
  metrics::Gauge& deviceMemory;
  metrics::Gauge& deviceMemoryCapacity;
  metrics::Gauge& deviceCompute;
  metrics::Gauge& deviceShares;
  metrics::Gauge& namespaceAllocated;
  metrics::Gauge& namespaceQuotaHard;
};

}  // namespace vgpu::scheduler
