// What this node serves: each backend's discovery and rediscovery, the device inventory
// published on the Node, health events, readiness.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

Limiter* Agent::Impl::limiterOf(const std::string& backend) const {
  auto it = served.find(backend);
  if (it == served.end()) return nullptr;
  std::lock_guard lock(devMu);
  return it->second.serving ? it->second.backend->limiter() : nullptr;
}

bool Agent::Impl::isServing(const std::string& backend) const {
  auto it = served.find(backend);
  std::lock_guard lock(devMu);
  return it != served.end() && it->second.serving;
}

Status Agent::Impl::publishNode(bool remove) {
  k8s::MetadataPatch patch;
  {
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served) {
      if (remove) patch.annotations[keys::nodeDevices(name)] = std::nullopt;
      else if (st.serving) patch.annotations[keys::nodeDevices(name)] = encodeInventory(withForeign(name, st.devices));
    }
  }
  if (remove) patch.annotations[std::string(keys::kNodeHeartbeat)] = std::nullopt;
  else patch.annotations[std::string(keys::kNodeHeartbeat)] = formatTimestamp(std::chrono::system_clock::now());
  auto* c = remove ? allocClient.get() : client.get();
  auto r = c->patchMetadata(k8s::kNodes, "", options.nodeName, patch);
  if (!r.ok()) return makeError("publishing the devices of node " + options.nodeName + ": " + r.error().describe());
  std::lock_guard lock(bgMu);
  ++stats.nodePublishes;
  return {};
}

std::vector<Device> Agent::Impl::withForeign(const std::string& backend, std::vector<Device> devices) const {
  auto b = foreignMiB.find(backend);
  if (b == foreignMiB.end()) return devices;
  for (auto& d : devices)
    if (auto f = b->second.find(d.id); f != b->second.end()) d.foreignUsedMiB = f->second;
  return devices;
}

bool Agent::Impl::renewLease() {
  if (options.leaseNamespace.empty()) return false;
  const std::string name = nodeLeaseName(options.nodeName);
  std::string problem;
  if (name.empty()) {
    problem = "the node's name is too long for a Lease name";
  } else {
    const auto now = std::chrono::system_clock::now();
    const auto duration = std::chrono::duration_cast<std::chrono::seconds>(3 * options.heartbeatInterval);
    auto r = client->mergePatch(k8s::kLeases, options.leaseNamespace, name,
                                nodeLeaseObject(options.nodeName, options.leaseNamespace, now, duration, true));
    if (!r.ok() && r.error().isNotFound()) {
      auto created = client->create(k8s::kLeases, options.leaseNamespace,
                                    nodeLeaseObject(options.nodeName, options.leaseNamespace, now, duration));
      if (!created.ok() && !created.error().isConflict()) problem = created.error().describe();
    } else if (!r.ok()) {
      problem = r.error().describe();
    }
  }
  std::lock_guard lock(bgMu);
  if (problem.empty()) {
    if (!leaseProblem.empty()) logLine("info", "the node's Lease " + options.leaseNamespace + "/" + name + " is renewed again");
    leaseProblem.clear();
    ++stats.leaseRenewals;
    return true;
  }
  // An older chart's RBAC, a namespace that is gone: the annotation keeps the node alive.
  if (problem != leaseProblem)
    logLine("warning", "cannot renew the node's Lease in namespace " + options.leaseNamespace + " (" + problem +
                           "): the Node's vgpu.io/heartbeat annotation is rewritten instead");
  leaseProblem = problem;
  return false;
}

void Agent::Impl::removeLease() {
  const std::string name = nodeLeaseName(options.nodeName);
  if (options.leaseNamespace.empty() || name.empty()) return;
  if (auto s = allocClient->remove(k8s::kLeases, options.leaseNamespace, name); !s.ok() && !s.error().isNotFound())
    logLine("warning", "on shutdown: removing the node's Lease: " + s.error().describe());
}

void Agent::Impl::nodeLoop() {
  std::string lastError;
  std::unique_lock lock(bgMu);
  while (!stopping) {
    bgCv.wait_for(lock, nodeDirty ? std::chrono::milliseconds(0) : options.heartbeatInterval,
                  [&] { return stopping || nodeDirty; });
    if (stopping) return;
    const bool changed = nodeDirty;
    nodeDirty = false;
    lock.unlock();
    // An idle node writes only its Lease: the Node (watched by every scheduler and controller)
    // changes with its inventory alone. Without a Lease its annotation is the heartbeat.
    const bool leased = renewLease();
    Status s;
    if (changed || !leased) s = publishNode(false);
    lock.lock();
    if (!s.ok()) {
      if (s.error().message != lastError) logLine("error", s.error().message);
      lastError = s.error().message;
      nodeDirty = true;
      bgCv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
    } else {
      lastError.clear();
    }
  }
}

void Agent::Impl::markNodeDirty() {
  std::lock_guard lock(bgMu);
  nodeDirty = true;
  bgCv.notify_all();
}

void Agent::Impl::onHealthEvents(const std::string& name, const std::vector<HealthEvent>& events) {
  if (events.empty()) return;
  std::vector<Device> copy;
  {
    std::lock_guard lock(devMu);
    auto& st = served.at(name);
    for (const auto& e : events) {
      for (auto& d : st.devices)
        if (d.id == e.deviceId) d.health = e.health;
      logLine("info", "device " + e.deviceId + " of " + name + " is now " + toString(e.health) +
                          (e.reason.empty() ? "" : " (" + e.reason + ")"));
    }
    ++st.version;
    copy = st.devices;
  }
  devCv.notify_all();
  tracker.setDevices(name, copy);
  markNodeDirty();
}

void Agent::Impl::logServing() {
  std::lock_guard lock(devMu);
  for (const auto& [name, st] : served) {
    std::string resources;
    for (const auto& r : st.resources) resources += (resources.empty() ? "" : ", ") + r;
    if (st.serving)
      logLine("info", "backend " + name + " serves " + std::to_string(st.devices.size()) + " device(s) as " +
                          resources);
    else
      logLine("info", "backend " + name + " serves no devices: " + st.problem);
  }
}

Status Agent::Impl::startServing(const std::string& name) {
  std::vector<std::string> resources;
  {
    std::lock_guard lock(devMu);
    resources = served.at(name).resources;
  }
  for (const auto& resource : resources) {
    PluginServerOptions po;
    po.resource = resource;
    po.pluginDir = options.pluginDir;
    po.socketName = pluginSocketName(resource);
    auto server = std::make_unique<PluginServer>(po, *this);
    if (auto s = server->start(); !s.ok()) return s;
    std::lock_guard lock(pluginsMu);
    plugins[resource] = std::move(server);
  }
  Discovery* discovery = served.at(name).backend->discovery();
  served.at(name).health = std::make_unique<HealthFeed>(HealthFeed::Handlers{
      [discovery](std::chrono::milliseconds timeout) { return discovery->waitForHealthEvents(timeout); },
      [this, name](const std::vector<HealthEvent>& events) { onHealthEvents(name, events); },
      [name](const std::string& why) { logLine("warning", "health of " + name + ": " + why); }});
  return {};
}

void Agent::Impl::rediscover(const char* why) {
  std::lock_guard pass(rediscoverMu);
  bool changed = false;
  for (auto& [name, st] : served) {
    {
      std::lock_guard lock(devMu);
      if (st.serving) continue;  // the health loop follows what it serves
    }
    auto devices = st.backend->discovery()->discover();
    std::string problem;
    if (!devices.ok()) problem = devices.error().message;
    else if (devices->empty()) problem = "found no devices on this node";
    if (!problem.empty()) {
      std::lock_guard lock(devMu);
      if (problem != st.problem) logLine("info", "backend " + name + " (" + why + "): " + problem);
      st.problem = problem;
      continue;
    }
    for (auto& d : *devices) d.backend = name;
    std::vector<std::string> resources;
    for (const auto& r : st.backend->allocator().resources())
      if (r.advertised) resources.push_back(r.name);
    std::map<std::string, std::string> routes;
    {
      std::lock_guard lock(devMu);
      std::string conflict;
      for (const auto& r : resources)
        if (auto owner = resourceToBackend.find(r); owner != resourceToBackend.end() && owner->second != name)
          conflict = "resource " + r + " is already served by backend " + owner->second;
      if (!conflict.empty()) {
        st.problem = conflict;
        continue;
      }
      st.devices = *devices;
      st.resources = resources;
      st.serving = true;
      st.problem.clear();
      ++st.version;
      for (const auto& r : resources) resourceToBackend[r] = name;
      routes = resourceToBackend;
    }
    devCv.notify_all();
    tracker.setDevices(name, *devices);
    tracker.setResources(routes);
    bool running;
    {
      std::lock_guard lock(bgMu);
      running = started && !stopping;
    }
    if (!running) continue;  // start() serves what create() found
    logLine("info", "backend " + name + " (" + why + "): found " + std::to_string(devices->size()) +
                        " device(s); serving them now");
    if (auto s = startServing(name); !s.ok()) logLine("error", "backend " + name + ": " + s.error().message);
    changed = true;
  }
  if (changed) {
    markNodeDirty();
    logServing();
  }
}

void Agent::Impl::rediscoverLoop() {
  std::unique_lock lock(bgMu);
  while (!stopping) {
    const auto interval = options.rediscoverInterval.count() > 0 ? options.rediscoverInterval
                                                                 : std::chrono::milliseconds(std::chrono::hours(24));
    bgCv.wait_for(lock, interval, [&] { return stopping || rediscoverSoon; });
    if (stopping) return;
    const bool asked = rediscoverSoon;
    rediscoverSoon = false;
    if (!asked && options.rediscoverInterval.count() <= 0) continue;
    lock.unlock();
    rediscover(asked ? "asked to rediscover" : "periodic rediscovery");
    lock.lock();
  }
}

std::pair<bool, std::string> Agent::Impl::readiness() const {
  if (enabledBackends == 0) return {true, "no backend is enabled\n"};
  if (served.empty() && draBackends > 0 && draBackends == enabledBackends)
    return {true, "every enabled backend is served by vgpu-dra-plugin on this node (frontEnd: dra)\n"};
  bool anyServing = false;
  std::string why;
  {
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served) {
      anyServing = anyServing || st.serving;
      if (!st.serving) why += "backend " + name + " serves no devices: " + st.problem + "\n";
    }
  }
  for (const auto& w : warnings)
    if (w.rfind("backend skipped: ", 0) == 0) why += w + "\n";
  if (!anyServing) return {false, "no backend serves devices\n" + why};
  std::lock_guard lock(pluginsMu);
  for (const auto& [resource, plugin] : plugins)
    if (!plugin->registered()) return {false, "resource " + resource + " is not registered with the kubelet\n"};
  return {true, "ok\n" + why};
}

}  // namespace vgpu::deviceplugin
