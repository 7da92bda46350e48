// Agent's lifecycle over Agent::Impl (agent_impl.h): create (config, backends, API clients),
// start and stop (the watch, threads, plugins, HTTP server), and its public calls.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

std::string pluginSocketName(const std::string& resource) {
  std::string name = "vgpu-";
  for (char c : resource) name += (c == '/' ? '-' : c);
  return name + ".sock";
}


Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { stop(); }

Result<std::unique_ptr<Agent>> Agent::create(AgentOptions options) {
  if (options.nodeName.empty()) return makeError("no node name (NODE_NAME or --node-name)");
  auto config = loadDeviceConfig(options.configPath);
  if (!config.ok()) return config.error();
  auto impl = std::make_unique<Impl>(std::move(options));
  auto& o = impl->options;
  const fs::path dir = o.backendDir.empty() ? defaultBackendDir() : fs::path(o.backendDir);
  impl->enabledBackends = config->enabledBackends().size();
  auto loaded = loadEnabledBackends(*config, dir, o.nodeName);
  for (const auto& f : loaded.failures) impl->warnings.push_back("backend skipped: " + f.message);
  impl->backends = std::move(loaded.backends);
  if (impl->backends.empty() && impl->enabledBackends > 0)
    return makeError("no backend could be loaded from " + dir.string() + " (enabled in " + o.configPath + ")" +
                     (impl->warnings.empty() ? "" : ": " + impl->warnings.front()));
  if (impl->enabledBackends == 0) logLine("warning", "no backend is enabled in " + o.configPath + "; serving nothing");
  for (const auto& b : impl->backends.all()) {
    // The DRA front end (vgpu-dra-plugin) serves this backend's devices on this node.
    if (config->settingsFor(b->name(), o.nodeName).frontEnd == FrontEnd::kDra) {
      logLine("info", "backend " + b->name() + " is in DRA mode on this node (frontEnd: dra); vgpu-dra-plugin serves it");
      ++impl->draBackends;
      continue;
    }
    if (!b->discovery()) {
      impl->warnings.push_back("backend " + b->name() + " has no discovery on the node side; skipped");
      continue;
    }
    Impl::BackendState st;
    st.backend = b.get();
    st.problem = "not discovered yet";
    impl->served.emplace(b->name(), std::move(st));
  }
  if (o.watchdog.interval.count() > 0) {
    std::vector<ProcessSource> sources;
    for (const auto& [name, st] : impl->served) sources.push_back({name, st.backend->processReporter(), st.backend->cgroupMemoryReporter()});
    Impl* im = impl.get();
    impl->watchdog = std::make_unique<Watchdog>(
        o.watchdog, std::move(sources), o.watchdogKiller ? o.watchdogKiller : ProcessKiller(killProcess),
        [im](const std::string& ns, const std::string& name) { im->evict(ns, name); });
  }
  // A backend whose driver or devices are missing now waits for a rediscovery (periodic,
  // or on SIGHUP) instead of being dropped.
  impl->rediscover("start");
  {
    std::lock_guard lock(impl->devMu);
    for (const auto& [name, st] : impl->served)
      if (!st.serving)
        impl->warnings.push_back(st.problem.rfind("found no devices", 0) == 0
                                     ? "backend " + name + " found no devices on this node; rediscovered later"
                                     : "backend " + name + " serves nothing for now: " + st.problem);
  }
  for (const auto& w : impl->warnings) logLine("warning", w);

  k8s::ClientConfig api = o.apiConfig;
  if (api.server.empty()) {
    auto loadedApi = k8s::loadDefaultConfig(o.kubeconfig);
    if (!loadedApi.ok()) return makeError("Kubernetes API: " + loadedApi.error().message);
    api = std::move(loadedApi).value();
  }
  auto client = k8s::Client::create(api);
  if (!client.ok()) return makeError("Kubernetes API client: " + client.error().message);
  impl->client = std::move(client).value();
  k8s::ClientOptions bounded;
  bounded.requestTimeout = o.apiTimeout;
  bounded.maxRetries = o.apiRetries;
  bounded.backoffBase = std::chrono::milliseconds(100);
  bounded.backoffMax = std::chrono::milliseconds(500);
  auto allocClient = k8s::Client::create(api, bounded);
  if (!allocClient.ok()) return makeError("Kubernetes API client: " + allocClient.error().message);
  impl->allocClient = std::move(allocClient).value();
  // One attempt per write, long enough for an apiserver slowed by a burst; the writers retry
  // with their own backoff, and stop() waits for at most one attempt.
  k8s::ClientOptions writes;
  writes.requestTimeout = std::max<std::chrono::milliseconds>(o.apiTimeout, std::chrono::seconds(10));
  writes.maxRetries = 0;
  auto writeClient = k8s::Client::create(api, writes);
  if (!writeClient.ok()) return makeError("Kubernetes API client: " + writeClient.error().message);
  impl->writeClient = std::move(writeClient).value();
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Status Agent::start() {
  auto& im = *impl_;
  std::error_code ec;
  fs::create_directories(fs::path(im.options.stateDir) / "containers", ec);
  if (ec) return makeError("cannot create the state folder " + im.options.stateDir + ": " + ec.message());
  // Handouts from before a restart: kept while the kubelet reports their devices held.
  auto replayed = im.handouts.load();
  if (!replayed.ok()) return replayed.error();
  for (const auto& problem : *replayed)
    logLine("warning", "a handout journal entry cannot be used (its folder will be removed): " + problem);

  k8s::InformerOptions io;
  io.fieldSelector = "spec.nodeName=" + im.options.nodeName;
  io.transform = k8s::trimPod;  // what onPod reads, no more
  k8s::InformerHandlers handlers;
  handlers.onAdd = [&im](const k8s::ObjectPtr& o) { im.onPod(*o); };
  handlers.onUpdate = [&im](const k8s::ObjectPtr&, const k8s::ObjectPtr& o) { im.onPod(*o); };
  handlers.onDelete = [&im](const k8s::ObjectPtr& o) { im.onPodDeleted(*o); };
  im.informer = std::make_unique<k8s::Informer>(*im.client, k8s::kPods, io, handlers);
  im.informer->start();

  {
    std::lock_guard lock(im.bgMu);
    im.started = true;
  }
  im.recorderThread = std::thread([&im] { im.recorderLoop(); });
  for (int i = 0; i < 4; ++i) im.writers.emplace_back([&im] { im.writerLoop(); });
  im.nodeThread = std::thread([&im] { im.nodeLoop(); });
  im.maintThread = std::thread([&im] { im.maintLoop(); });

  if (!im.options.metricsAddress.empty()) {
    if (im.options.hamiMetrics) im.hami = std::make_unique<HamiNodeMetrics>(im.registry);
    im.registry.addCollector([&im] { im.collect(); });
    auto server = node::startMetricsEndpoint(im.options.metricsAddress, "--metrics-address", im.registry,
                                             [&im] { return im.readiness(); });
    if (!server.ok()) return server.error();
    im.httpServer = std::move(server).value();
  }

  {
    // Rediscovery may make a backend serve from here on; it starts its plugins itself then.
    std::lock_guard pass(im.rediscoverMu);
    for (const auto& [name, st] : im.served)
      if (im.isServing(name))
        if (auto s = im.startServing(name); !s.ok()) return s;
  }
  im.rediscoverThread = std::thread([&im] { im.rediscoverLoop(); });
  if (im.watchdog) im.watchdogThread = std::thread([&im] { im.watchdogLoop(); });
  im.logServing();
  return {};
}

void Agent::stop() {
  auto& im = *impl_;
  {
    std::lock_guard lock(im.bgMu);
    if (im.stopping) return;
    im.stopping = true;
  }
  im.bgCv.notify_all();
  im.devCv.notify_all();
  if (im.rediscoverThread.joinable()) im.rediscoverThread.join();
  if (im.watchdogThread.joinable()) im.watchdogThread.join();
  { std::lock_guard pass(im.rediscoverMu); }  // a rediscoverNow() in progress: no plugin starts after this
  {
    std::lock_guard lock(im.pluginsMu);
    for (auto& [resource, p] : im.plugins) p->stop();
  }
  if (im.httpServer) im.httpServer->stop(std::chrono::milliseconds(500));
  for (auto* t : {&im.nodeThread, &im.maintThread, &im.recorderThread})
    if (t->joinable()) t->join();
  // What Allocate answered is written before the agent goes, if the apiserver lets it soon;
  // else the next agent's PodResources pass writes it.
  if (!im.flushWrites(std::chrono::seconds(2))) logLine("warning", "on shutdown: some pods' outcomes were not written yet");
  {
    std::lock_guard lock(im.writeMu);
    im.writersStop = true;
    im.writeQueue.clear();
  }
  im.writeCv.notify_all();
  for (auto& t : im.writers)
    if (t.joinable()) t.join();
  for (auto& [name, st] : im.served)
    if (st.health) st.health->stop();
  if (im.informer) im.informer->stop();
  bool started;
  {
    std::lock_guard lock(im.bgMu);
    started = im.started;
  }
  if (started) {
    if (auto s = im.publishNode(true); !s.ok()) logLine("warning", "on shutdown: " + s.error().message);
    im.removeLease();
  }
}

std::vector<std::string> Agent::resources() const {
  std::vector<std::string> out;
  std::lock_guard lock(impl_->devMu);
  for (const auto& [r, b] : impl_->resourceToBackend) out.push_back(r);
  return out;
}

bool Agent::watchdogScanNow() {
  if (!impl_->watchdog) return false;
  impl_->watchdogPass();
  return true;
}
void Agent::rediscoverNow() { impl_->rediscover("asked to rediscover"); }

void Agent::requestRediscovery() {
  std::lock_guard lock(impl_->bgMu);
  impl_->rediscoverSoon = true;
  impl_->bgCv.notify_all();
}

bool Agent::ready() const { return impl_->readiness().first; }

std::map<std::string, std::size_t> Agent::servedDevices() const {
  std::map<std::string, std::size_t> out;
  std::lock_guard lock(impl_->devMu);
  for (const auto& [name, st] : impl_->served) out[name] = st.serving ? st.devices.size() : 0;
  return out;
}

std::vector<std::string> Agent::warnings() const { return impl_->warnings; }
std::string Agent::metricsUrl() const { return impl_->httpServer ? impl_->httpServer->url() : ""; }
std::string Agent::renderMetrics() {
  if (!impl_->httpServer) impl_->collect();
  return impl_->registry.render();
}
void Agent::maintainNow() {
  impl_->maintain(/*withCleanup=*/true);
  impl_->flushWrites(std::chrono::seconds(10));
}
bool Agent::flushWrites(std::chrono::milliseconds timeout) { return impl_->flushWrites(timeout); }
bool Agent::podsSynced() const { return impl_->informer && impl_->informer->hasSynced(); }
PodTracker& Agent::tracker() { return impl_->tracker; }
AgentStats Agent::stats() const {
  std::lock_guard lock(impl_->bgMu);
  return impl_->stats;
}
bool Agent::registered() const {
  std::lock_guard lock(impl_->pluginsMu);
  for (const auto& [resource, p] : impl_->plugins)
    if (!p->registered()) return false;
  return !impl_->plugins.empty();
}

}  // namespace vgpu::deviceplugin
