// The watchdog wired into the agent: each scan fed the handouts and their limiter rules,
// foreign memory published, violations counted and acted on (kill, eviction).

#include "agent_impl.h"

namespace vgpu::deviceplugin {

void Agent::Impl::watchdogLoop() {
  std::unique_lock lock(bgMu);
  while (!stopping) {
    bgCv.wait_for(lock, options.watchdog.interval, [&] { return stopping; });
    if (stopping) return;
    lock.unlock();
    watchdogPass();
    lock.lock();
  }
}

void Agent::Impl::watchdogPass() {
  std::lock_guard pass(watchdogMu);
  std::map<std::string, std::map<std::string, std::string>> idsOf;  // pod uid -> container name -> id
  PodContainerIds containerIds;
  for (auto& pod : tracker.pods()) {
    for (const auto& [name, id] : pod.containerIds) containerIds[pod.info.uid].insert(id);
    idsOf[pod.info.uid] = std::move(pod.containerIds);
  }
  std::vector<Slice> slices;
  std::set<std::string> live;  // handout ids
  for (const auto& h : handouts.all()) {
    std::string containerId;
    if (auto pod = idsOf.find(h.podUid); pod != idsOf.end())
      if (auto id = pod->second.find(h.container); id != pod->second.end()) containerId = id->second;
    // The compute rule the container's limiter obeys, from the limits file in its folder.
    const ComputeRule rule = computeRules.of(h.id, handouts.folder(h.id));
    live.insert(h.id);
    for (const auto& d : h.devices)
      slices.push_back(
          {h.podUid, h.podNamespace, h.podName, h.container, d.deviceId, d.memoryMiB, d.compute, containerId, rule});
  }
  computeRules.keepOnly(live);
  std::map<std::string, std::vector<std::string>> devicesOf;
  {
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served)
      if (st.serving)
        for (const auto& d : st.devices) devicesOf[name].push_back(d.id);
  }
  ScanResult r = watchdog->scan(slices, devicesOf, containerIds);
  for (const auto& n : r.notices) logLine("warning", n);
  for (const auto& v : r.confirmed) act(v);
  bool changed = false;
  {
    std::lock_guard lock(devMu);
    for (auto& [backend, devices] : r.foreignMiB) {
      auto& known = foreignMiB[backend];
      if (known != devices) {
        known = std::move(devices);
        changed = true;
      }
    }
  }
  // The scheduler rebuilds a node's inventory on every change: foreign memory that moves
  // is published at most every kForeignPublishEvery (a later scan publishes what waited).
  foreignPending = foreignPending || changed;
  const auto now = std::chrono::steady_clock::now();
  if (foreignPending && now - foreignPublished >= kForeignPublishEvery) {
    foreignPending = false;
    foreignPublished = now;
    markNodeDirty();
  }
  std::lock_guard lock(bgMu);
  ++stats.watchdogScans;
  stats.watchdogViolations += r.confirmed.size();
}

void Agent::Impl::act(const Violation& v) {
  auto mib = [](std::uint64_t bytes) { return std::to_string((bytes + 1048575) / 1048576) + " MiB"; };
  const WatchdogAction action = options.watchdog.action;
  const auto& o = options.watchdog;
  const std::string what =
      v.resource == WatchdogResource::kCompute
          ? "container " + v.container + " keeps " + v.backend + " device " + v.deviceId + " " +
                std::to_string(v.usedPercent) + "% busy on average over " + std::to_string(o.computeWindow.count()) +
                " ms, more than its compute share allows (" + std::to_string(v.allowedPercent) +
                "% with the watchdog's tolerance of " + std::to_string(o.computeTolerancePercent) + " points; a " +
                std::to_string(v.sharePercent) + "% share, " +
                (v.computePolicy == ComputePolicy::kForce
                     ? std::string("policy force)")
                     : std::string("policy default: applied while another tenant runs kernels there, as one did)"))
          : "container " + v.container + " holds " + mib(v.usedBytes) + " on " + v.backend + " device " +
                v.deviceId + ", more than its slice allows (" + mib(v.allowedBytes) +
                " with the watchdog's tolerance of " + std::to_string(o.toleranceMiB) + " MiB)";
  const Enforcement done = watchdog->enforce(v);
  const std::string& outcome = done.said;
  watchdogViolations.inc(
      {options.nodeName, v.podName, v.podNamespace, v.container, v.deviceId, toString(v.resource), toString(action)});
  // Killing did not bound the pod: the eviction it escalated to is counted as well.
  if (done.escalated)
    watchdogViolations.inc({options.nodeName, v.podName, v.podNamespace, v.container, v.deviceId,
                            toString(v.resource), toString(WatchdogAction::kEvictPod)});
  logLine("warning", "watchdog: pod " + v.podNamespace + "/" + v.podName + ": " + what + "; " + outcome);
  k8s::EventSpec ev{"Pod", v.podNamespace, v.podName, v.podUid, "v1", "Warning", "VgpuSliceExceeded",
                    what + "; " + outcome, kComponent, options.nodeName};
  enqueue([this, ev] { return client->createEvent(ev).ok(); });
}

void Agent::Impl::evict(const std::string& ns, const std::string& name) {
  enqueue([this, ns, name] {
    const std::string subresource = "pods/" + k8s::urlEncode(name) + "/eviction";
    const k8s::ResourceType eviction{"/api/v1", subresource, "Eviction", true};
    auto r = client->create(eviction, ns, boost::json::parse(evictionBody(ns, name)).as_object());
    if (!r.ok() && !r.error().isNotFound()) {
      logLine("warning", "watchdog: evicting pod " + ns + "/" + name + ": " + r.error().describe());
      return false;
    }
    return true;
  });
}

}  // namespace vgpu::deviceplugin
