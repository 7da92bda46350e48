// The agent's /metrics: its metric families registered once (the constructor) and each scrape's
// values from devices, handouts, partitions (MIG), backends' usage and libvgpu.so's regions.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

Agent::Impl::Impl(AgentOptions o)
    : options(std::move(o)),
      tracker(options.nodeName),
      // The node's handout journal, shared with vgpu-dra-plugin; containers.journal is the
      // device plugin's own from before it, migrated at the first start.
      handouts(fs::path(options.stateDir) / "containers", fs::path(options.stateDir) / "handouts.journal",
               FolderBound{.mode = options.regionTmpfs,
                           .unbounded = [this](const std::string& folder, const std::string& why) {
                             folderUnbounded(folder, why);
                           }},
               fs::path(options.stateDir) / "containers.journal"),
      deviceGauges(registry),
      devMemAllocated(registry.gauge("vgpu_device_memory_allocated_bytes",
                                     "Device memory granted to containers this agent allocated.",
                                     {"backend", "device_id", "device_index", "model"})),
      devComputeAllocated(registry.gauge("vgpu_device_compute_allocated_units",
                                         "Compute granted to containers this agent allocated.",
                                         {"backend", "device_id", "device_index", "model"})),
      ctrMemUsed(registry.gauge("vgpu_container_memory_used_bytes",
                                "Device memory a container's processes hold (libvgpu.so shared region).",
                                {"namespace", "pod", "container", "device_uuid", "device_index"})),
      ctrMemLimit(registry.gauge("vgpu_container_memory_limit_bytes", "A container's device memory limit.",
                                 {"namespace", "pod", "container", "device_uuid", "device_index"})),
      ctrComputeLimit(registry.gauge("vgpu_container_compute_limit_percent",
                                     "A container's compute share of the device (0 = not limited).",
                                     {"namespace", "pod", "container", "device_uuid", "device_index"})),
      ctrBusy(registry.gauge("vgpu_container_compute_busy_seconds",
                             "Kernel time a container used on the device since its region was created.",
                             {"namespace", "pod", "container", "device_uuid", "device_index"})),
      ctrUnenforced(registry.gauge("vgpu_container_limit_unenforced",
                                   "1 when a container's limit is set but libvgpu.so cannot enforce it with this "
                                   "driver (it says so on the container's stderr at start).",
                                   {"namespace", "pod", "container", "device_uuid", "device_index", "limit"})),
      ctrProcs(registry.gauge("vgpu_container_processes", "Processes of the container attached to libvgpu.so.",
                              {"namespace", "pod", "container"})),
      ctrUtilization(registry.gauge("vgpu_container_compute_utilization_percent",
                                    "How busy the container keeps the device, as the vendor library reports it "
                                    "for the container's partition or whole device.",
                                    {"namespace", "pod", "container", "device_uuid", "device_index"})),
      backendDevices(registry.gauge("vgpu_backend_devices",
                                    "Devices the backend serves on this node (0: its driver or devices are missing).",
                                    {"backend"})),
      allocateTotal(registry.counter("vgpu_allocate_total", "Allocate calls answered, by resource and result.",
                                     {"resource", "result"})),
      allocateSeconds(registry.histogram("vgpu_allocate_duration_seconds", "Time to answer one Allocate call.",
                                         metrics::Histogram::latencyBuckets(), {"resource"})),
      pluginRegistered(registry.gauge(
          "vgpu_plugin_registered", "1 when the resource's plugin is registered with the kubelet.", {"resource"})),
      watchdogViolations(registry.counter(
          "vgpu_watchdog_violations_total",
          "Pods the watchdog found holding more device memory than their slices (plus the tolerance) in two "
          "scans in a row (resource memory), or busier than their compute share (plus the tolerance) on "
          "average over its window (resource compute), by the action it took.",
          {"node", "pod", "namespace", "container", "device", "resource", "action"})),
      hamiContainers(registry.gauge("vgpu_hami_container_memory_bytes",
                                    "Device memory HAMi's scheduler gave a container on this node (a pod placed "
                                    "before the switch to vgpu, limited by HAMi-core; the agent leaves it alone).",
                                    {"namespace", "pod", "container", "device_uuid"})),
      devForeignMemory(registry.gauge("vgpu_device_foreign_memory_bytes",
                                      "Device memory held by processes in no container vgpu gave the device to "
                                      "(host processes, other pods), as the watchdog last saw it.",
                                      {"backend", "device_id", "device_index", "model"})),
      devPartition(registry.gauge("vgpu_device_partition_info",
                                  "1 for each partition of a device on this node (an NVIDIA MIG device): one "
                                  "discovery serves as a device (mode static) or one a backend made for a "
                                  "container at Allocate (mode dynamic).",
                                  {"backend", "device_id", "parent_id", "kind", "profile", "placement",
                                   "instance_id", "sub_instance_id", "mode"})),
      foldersUnbounded(registry.counter("vgpu_container_folders_unbounded_total",
                                        "Container folders left on the host's disk instead of a size-limited tmpfs "
                                        "(--region-tmpfs=best-effort; the agent's log says why once).")) {}

void Agent::Impl::folderUnbounded(const std::string& folder, const std::string& why) {
  foldersUnbounded.inc();
  std::string reason = why;
  for (auto at = reason.find(folder); at != std::string::npos; at = reason.find(folder, at + 1))
    reason.replace(at, folder.size(), "<folder>");
  {
    std::lock_guard lock(unboundedMu);
    if (!saidUnbounded.insert(reason).second) return;
  }
  logLine("warning", why + "; containers' folders stay on the host's disk, where a tenant can grow its region file "
                           "until the disk is full (each such folder is counted in "
                           "vgpu_container_folders_unbounded_total)");
}

void Agent::Impl::collect() {
  deviceGauges.clear();
  for (auto* g : {&devMemAllocated, &devComputeAllocated,
                  &ctrMemUsed, &ctrMemLimit, &ctrComputeLimit, &ctrBusy, &ctrUnenforced, &ctrProcs, &ctrUtilization,
                  &backendDevices, &devForeignMemory, &hamiContainers, &devPartition})
    g->clear();
  for (const auto& h : tracker.hamiContainers())
    hamiContainers.set({h.podNamespace, h.pod, h.container, h.deviceId}, static_cast<double>(h.memoryMiB) * 1048576.0);
  const auto usage = tracker.usageByDevice();
  {
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served) backendDevices.set({name}, st.serving ? st.devices.size() : 0);
    for (const auto& [name, st] : served)
      for (const auto& d : st.devices) {
        deviceGauges.set(name, d);
        const auto l = deviceLabels(name, d);
        auto u = usage.find(d.id);
        devMemAllocated.set(l, u == usage.end() ? 0.0 : static_cast<double>(u->second.first) * 1048576.0);
        devComputeAllocated.set(l, u == usage.end() ? 0.0 : static_cast<double>(u->second.second));
        if (auto b = foreignMiB.find(name); b != foreignMiB.end())
          if (auto f = b->second.find(d.id); f != b->second.end())
            devForeignMemory.set(l, static_cast<double>(f->second) * 1048576.0);
      }
  }
  {
    std::lock_guard lock(pluginsMu);
    for (const auto& [resource, plugin] : plugins) pluginRegistered.set({resource}, plugin->registered() ? 1 : 0);
  }
  if (hami) hami->begin();
  collectPartitions();
  collectRegions();
  collectBackendUsage();
  if (hami) hami->end();
}

void Agent::Impl::collectPartitions() {
  std::map<std::string, std::vector<std::pair<Partition, const char*>>> byBackend;
  for (const auto& h : handouts.all())
    for (const auto& [key, value] : h.podAnnotations) {
      if (!isMadePartitionsKey(key)) continue;
      auto made = decodePartitions(value);
      if (!made.ok()) {
        std::lock_guard lock(bgMu);  // said once per container, not at every scrape
        if (unreadablePartitions.insert(h.id).second)
          logLine("warning", "backend " + h.backend + " reported partitions the agent cannot read (" + key +
                                 " of " + h.id + "), left out of vgpu_device_partition_info: " + made.error().message);
        continue;
      }
      for (auto& p : *made) byBackend[h.backend].emplace_back(std::move(p), "dynamic");
    }
  std::lock_guard lock(devMu);
  for (const auto& [name, st] : served)
    for (const auto& d : st.devices)
      if (auto p = partitionOf(d)) byBackend[name].emplace_back(std::move(*p), "static");
  for (const auto& [name, partitions] : byBackend) {
    auto st = served.find(name);
    for (const auto& [p, mode] : partitions) {
      devPartition.set({name, p.id, p.parent, p.kind, p.profile, p.placement, p.instanceId, p.subInstanceId, mode}, 1);
      if (hami) hami->partition(options.nodeName, p, st == served.end() ? 0 : parentIndex(st->second.devices, p));
    }
  }
}

int Agent::Impl::parentIndex(const std::vector<Device>& devices, const Partition& p) {
  int own = 0;
  for (const auto& d : devices) {
    if (d.id == p.parent) return d.index;
    if (d.id == p.id) own = d.index;
  }
  return own;
}

void Agent::Impl::collectBackendUsage() {
  std::map<ContainerRef, Handout> byRef;
  for (const auto& h : handouts.all()) byRef.emplace(h.backendRef(), h);
  std::string problems;
  for (const auto& [name, st] : served) {
    if (!isServing(name)) continue;
    UsageReporter* reporter = st.backend->usageReporter();
    if (!reporter) continue;
    auto usage = reporter->containerUsage();
    if (!usage.ok()) {
      problems += (problems.empty() ? "" : "; ") + name + ": " + usage.error().message;
      continue;
    }
    for (const auto& u : *usage) {
      auto h = byRef.find(u.container);
      if (h == byRef.end()) continue;  // made by an earlier agent and not yet reconciled
      const metrics::LabelValues l{h->second.podNamespace, h->second.podName, h->second.container, u.deviceId,
                                   std::to_string(u.deviceIndex)};
      ctrMemLimit.set(l, static_cast<double>(u.memoryLimitBytes));
      ctrComputeLimit.set(l, u.computeLimitPercent);
      if (u.memoryUsedBytes) ctrMemUsed.set(l, static_cast<double>(*u.memoryUsedBytes));
      if (u.utilizationPercent) ctrUtilization.set(l, *u.utilizationPercent);
      if (hami) {
        hami->memoryLimit(l, static_cast<double>(u.memoryLimitBytes));
        if (u.memoryUsedBytes) hami->memory(l, static_cast<double>(*u.memoryUsedBytes));
        if (u.utilizationPercent) hami->utilization(l, *u.utilizationPercent);
      }
    }
  }
  std::lock_guard lock(bgMu);
  if (problems != lastUsageProblem && !problems.empty())
    logLine("warning", "per-container usage cannot be read: " + problems);
  lastUsageProblem = problems;
}

void Agent::Impl::collectRegions() {
  exportRegions(regionSources(handouts), {ctrMemUsed, ctrMemLimit, ctrComputeLimit, ctrBusy, ctrUnenforced, ctrProcs}, hami.get());
}

}  // namespace vgpu::deviceplugin
