// vgpu-dra-plugin's lifecycle (dra_agent.h): backends in DRA mode loaded, one DRA driver each
// (slices, kubelet server, health), metrics and shutdown.

#include "dra_agent.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "claim_preparer.h"
#include "daemon_support.h"
#include "device_health.h"
#include "device_metrics.h"
#include "health_feed.h"
#include "kubelet_server.h"
#include "slice_publisher.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/http/server.h"
#include "vgpu/k8s/client.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::dra {
namespace fs = std::filesystem;

namespace {

void logLine(const char* level, const std::string& text) {
  std::fprintf(stderr, "vgpu-dra-plugin %s: %s\n", level, text.c_str());
}

}  // namespace

/// One backend served as one DRA driver.
struct Driver {
  Backend* backend = nullptr;
  std::string name;
  std::unique_ptr<ClaimPreparer> preparer;
  std::unique_ptr<SlicePublisher> publisher;
  std::unique_ptr<KubeletServer> server;
  HealthBoard health;
  /// Discovery is not thread-safe: the health thread's waits and the publish passes take turns.
  std::mutex discoveryMu;
  std::unique_ptr<deviceplugin::HealthFeed> healthFeed;  ///< once started
  // Publish passes only (Impl::passMu):
  std::map<std::string, std::string> unhealthySince;  ///< DRA device name -> RFC 3339, the taint's timeAdded
  std::optional<bool> taintsKept;                     ///< unknown until a taint was written
  // Under Impl::mu:
  DriverStatus status;
  std::map<std::string, std::string> healthReasons;  ///< device id -> the last health event's reason
};

struct DraAgent::Impl {
  DraAgentOptions options;
  BackendSet backends;
  std::unique_ptr<k8s::Client> client;
  std::vector<std::unique_ptr<Driver>> drivers;
  std::string nodeUid;
  metrics::Registry registry;
  std::unique_ptr<http::Server> httpServer;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool started = false;
  std::thread resyncThread;
  std::mutex passMu;  // one publish pass at a time

  metrics::Gauge* mKept = nullptr;
  metrics::Gauge* mDevices = nullptr;
  metrics::Gauge* mGeneration = nullptr;
  metrics::Gauge* mPrepared = nullptr;
  metrics::Gauge* mRegistered = nullptr;
  metrics::Gauge* mTaintsKept = nullptr;
  metrics::Gauge* mUnhealthy = nullptr;
  // The families the device-plugin front end serves too (agent/core): devices, claims' regions.
  std::unique_ptr<deviceplugin::DeviceGauges> deviceGauges;
  std::unique_ptr<deviceplugin::ClaimRegionFamilies> claimRegions;

  explicit Impl(DraAgentOptions o) : options(std::move(o)) {
    mKept = &registry.gauge("vgpu_dra_sharing_kept",
                            "1 when the apiserver kept allowMultipleAllocations and the request policies of the "
                            "driver's devices, 0 when it dropped them (DRAConsumableCapacity off: devices exclusive)",
                            {"driver"});
    mDevices = &registry.gauge("vgpu_dra_published_devices", "Devices in the driver's ResourceSlice pool", {"driver"});
    mGeneration = &registry.gauge("vgpu_dra_pool_generation", "Generation of the driver's ResourceSlice pool", {"driver"});
    mPrepared = &registry.gauge("vgpu_dra_prepared_claims", "ResourceClaims prepared on this node", {"driver"});
    mRegistered = &registry.gauge("vgpu_dra_registered", "1 when the kubelet accepted the driver's registration",
                                  {"driver"});
    mTaintsKept = &registry.gauge("vgpu_dra_device_taints_kept",
                                  "1 when the apiserver kept the NoSchedule taints of unhealthy devices (or none was "
                                  "written yet), 0 when it dropped them (DRADeviceTaints off): they are withdrawn instead",
                                  {"driver"});
    mUnhealthy = &registry.gauge("vgpu_dra_unhealthy_devices", "The driver's devices that discovery reports unhealthy",
                                 {"driver"});
    deviceGauges = std::make_unique<deviceplugin::DeviceGauges>(registry);
    claimRegions = std::make_unique<deviceplugin::ClaimRegionFamilies>(registry);
    registry.addCollector([this] { collect(); });
  }

  void collect() {
    deviceGauges->clear();
    claimRegions->clear();
    std::vector<const Driver*> serving;
    {
      std::lock_guard lock(mu);
      for (const auto& d : drivers) serving.push_back(d.get());
    }
    // The region files are read outside `mu`: a scrape's I/O never holds up the drivers.
    for (const Driver* d : serving) {
      for (const auto& device : d->preparer->devices()) deviceGauges->set(d->backend->name(), device);
      deviceplugin::exportRegions(d->preparer->regionSources(), claimRegions->gauges(), nullptr);
    }
    for (const auto& s : statusNow()) {
      mKept->set({s.driver}, s.sharingKept ? 1 : 0);
      mDevices->set({s.driver}, static_cast<double>(s.publishedDevices));
      mGeneration->set({s.driver}, static_cast<double>(s.generation));
      mPrepared->set({s.driver}, static_cast<double>(s.preparedClaims));
      mRegistered->set({s.driver}, s.registered ? 1 : 0);
      mTaintsKept->set({s.driver}, s.taintsKept ? 1 : 0);
      mUnhealthy->set({s.driver}, static_cast<double>(s.unhealthyDevices));
    }
  }

  std::vector<DriverStatus> statusNow() const {
    std::vector<DriverStatus> out;
    std::lock_guard lock(mu);
    for (const auto& d : drivers) {
      DriverStatus s = d->status;
      s.preparedClaims = d->preparer->preparedClaims();
      s.registered = d->server && d->server->registered();
      out.push_back(std::move(s));
    }
    return out;
  }

  /// Discovers the backend's devices, hands them to the preparer and the health stream and
  /// publishes them. An unhealthy device carries a NoSchedule taint (kube-scheduler places no
  /// new claim there; claims allocated before stay visible) where the apiserver keeps taints,
  /// and is withdrawn from the pool where it drops them; the preparer keeps knowing it for
  /// claims allocated before.
  void publish(Driver& d) {
    Result<std::vector<Device>> found = [&] {
      std::lock_guard lock(d.discoveryMu);
      return d.backend->discovery()->discover();
    }();
    if (!found.ok()) {
      setError(d, "discovery: " + found.error().message);
      reportUnknown(d, "the driver cannot discover its devices: " + found.error().message);
      return;
    }
    std::vector<DraDevice> all;
    std::vector<DeviceHealthReport> health;
    std::size_t unhealthy = 0;
    for (const auto& dev : *found) {
      auto dd = draDevice(d.backend->allocator(), dev);
      if (!dd.ok()) {
        setError(d, dd.error().message);
        continue;
      }
      if (dev.health == Health::kUnhealthy) {
        ++unhealthy;
        auto since = d.unhealthySince.try_emplace(dd->name, k8s::rfc3339Now()).first->second;
        dd->taints.push_back(unhealthyTaint(options.driverDomain, std::move(since)));
      } else {
        d.unhealthySince.erase(dd->name);
      }
      health.push_back({options.nodeName, dd->name, dev.health, healthMessage(d, dev)});
      all.push_back(std::move(dd).value());
    }
    d.preparer->setDevices(all);
    d.health.set(std::move(health), unixNow());

    auto out = d.publisher->publish(offered(all, d.taintsKept != false));
    if (out.ok() && out->written && !out->droppedTaints.empty()) {
      d.taintsKept = false;
      warnNode("DRADeviceTaintsDropped",
               "the apiserver dropped the taints of driver " + d.name + "'s unhealthy devices (" + join(out->droppedTaints) +
                   "): they are withdrawn from the pool instead. Enable the DRADeviceTaints feature gate on "
                   "kube-apiserver and kube-scheduler (beta, on by default from 1.36) to keep them visible.");
      out = d.publisher->publish(offered(all, false));
    } else if (out.ok() && out->written && unhealthy > 0 && d.taintsKept != false) {
      d.taintsKept = true;
    }
    if (!out.ok()) {
      setError(d, out.error().message);
      return;
    }
    bool warnNow = false;
    std::size_t inPool = 0;
    for (const auto& dd : all) inPool += (dd.taints.empty() || d.taintsKept != false) ? 1 : 0;
    {
      std::lock_guard lock(mu);
      d.status.lastError.clear();
      d.status.generation = out->generation;
      d.status.publishedDevices = inPool;
      d.status.unhealthyDevices = unhealthy;
      d.status.taintsKept = d.taintsKept != false;
      if (out->written) {
        const bool kept = out->dropped.empty();
        warnNow = !kept && d.status.sharingKept;
        d.status.sharingKept = kept;
        d.status.dropped = out->dropped;
      }
    }
    if (out->written)
      logLine("info", d.name + ": published " + std::to_string(inPool) + " devices (" + std::to_string(unhealthy) +
                          " unhealthy) in " + std::to_string(out->slices) + " ResourceSlice(s), pool generation " +
                          std::to_string(out->generation));
    if (warnNow)
      warnNode("DRASharingDropped", "the apiserver dropped the sharing fields of driver " + d.name + " (" +
                                        join(out->dropped) +
                                        "): its devices are exclusive, one claim each. Enable the DRAConsumableCapacity "
                                        "feature gate on kube-apiserver, kube-scheduler and kubelet (beta, on by "
                                        "default from 1.36).");
  }

  /// The devices the pool offers: all of them, or (taints not kept) the untainted ones.
  static std::vector<DraDevice> offered(const std::vector<DraDevice>& all, bool withTainted) {
    if (withTainted) return all;
    std::vector<DraDevice> out;
    std::copy_if(all.begin(), all.end(), std::back_inserter(out), [](const DraDevice& dd) { return dd.taints.empty(); });
    return out;
  }

  std::string healthMessage(const Driver& d, const Device& dev) const {
    if (dev.health == Health::kHealthy) return "";
    std::lock_guard lock(mu);
    auto it = d.healthReasons.find(dev.id);
    if (it != d.healthReasons.end()) return it->second;
    return dev.health == Health::kUnhealthy ? "the backend reports the device unhealthy" : "";
  }

  /// Discovery failed: the health of every device last reported is unknown now.
  void reportUnknown(Driver& d, const std::string& why) {
    auto snap = d.health.snapshot();
    for (auto& r : snap.devices) {
      r.health = Health::kUnknown;
      r.message = why;
    }
    d.health.set(std::move(snap.devices), unixNow());
  }

  static std::string join(const std::vector<std::string>& items) {
    std::string list;
    for (const auto& x : items) list += (list.empty() ? "" : "; ") + x;
    return list;
  }

  void warnNode(const std::string& reason, const std::string& msg) {
    logLine("warning", msg);
    k8s::EventSpec ev;
    ev.kind = "Node";
    ev.ns = "default";
    ev.name = options.nodeName;
    ev.uid = nodeUid;
    ev.type = "Warning";
    ev.reason = reason;
    ev.message = msg;
    ev.component = "vgpu-dra-plugin";
    ev.host = options.nodeName;
    if (auto e = client->createEvent(ev); !e.ok())
      logLine("warning", "cannot post the node event: " + e.error().describe());
  }

  /// Follows the backend's health events: each change is published (slices and health
  /// stream) at once; a quiet wait advances the health stream's check time.
  /// A batch from `d`'s health feed: the check time, the reasons, and the pool published again.
  void onHealthEvents(Driver& d, const std::vector<HealthEvent>& events) {
    if (events.empty()) {
      d.health.touch(unixNow());
      return;
    }
    {
      std::lock_guard lock(mu);
      for (const auto& e : events) {
        logLine("info", d.name + ": device " + e.deviceId + " is now " + toString(e.health) +
                            (e.reason.empty() ? "" : " (" + e.reason + ")"));
        if (e.health == Health::kHealthy || e.reason.empty()) d.healthReasons.erase(e.deviceId);
        else d.healthReasons[e.deviceId] = e.reason;
      }
    }
    std::lock_guard pass(passMu);
    publish(d);
  }

  void setError(Driver& d, const std::string& msg) {
    logLine("error", d.name + ": " + msg);
    std::lock_guard lock(mu);
    d.status.lastError = msg;
  }

  void resyncAll() {
    std::lock_guard pass(passMu);
    for (auto& d : drivers) publish(*d);
  }

  void resyncLoop() {
    std::unique_lock lock(mu);
    while (!stopping) {
      cv.wait_for(lock, options.resyncInterval, [this] { return stopping; });
      if (stopping) break;
      lock.unlock();
      resyncAll();
      lock.lock();
    }
  }
};

DraAgent::DraAgent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DraAgent::~DraAgent() { stop(); }

Result<std::unique_ptr<DraAgent>> DraAgent::create(DraAgentOptions options) {
  if (options.nodeName.empty()) return makeError("no node name (NODE_NAME or --node-name)");
  auto config = loadDeviceConfig(options.configPath);
  if (!config.ok()) return config.error();
  auto impl = std::make_unique<Impl>(std::move(options));
  auto& o = impl->options;
  const fs::path dir = o.backendDir.empty() ? defaultBackendDir() : fs::path(o.backendDir);
  auto loaded = loadEnabledBackends(*config, dir, o.nodeName);
  for (const auto& f : loaded.failures) logLine("warning", "backend skipped: " + f.message);
  impl->backends = std::move(loaded.backends);

  k8s::ClientConfig api = o.apiConfig;
  if (api.server.empty()) {
    auto fromFile = k8s::loadDefaultConfig(o.kubeconfig);
    if (!fromFile.ok()) return makeError("Kubernetes API: " + fromFile.error().message);
    api = std::move(fromFile).value();
  }
  k8s::ClientOptions co;
  co.requestTimeout = std::chrono::seconds(10);  // within the kubelet's 45 s per call
  co.maxRetries = 2;
  auto client = k8s::Client::create(api, co);
  if (!client.ok()) return makeError("Kubernetes API client: " + client.error().message);
  impl->client = std::move(client).value();

  for (const auto& b : impl->backends.all()) {
    if (config->settingsFor(b->name(), o.nodeName).frontEnd != FrontEnd::kDra) continue;
    if (!b->discovery() || !b->limiter())
      return makeError("backend " + b->name() + " has no discovery or limiter on the node side, so it cannot be a DRA "
                       "driver");
    auto d = std::make_unique<Driver>();
    d->backend = b.get();
    d->name = b->name() + "." + o.driverDomain;
    d->status.driver = d->name;
    PreparerOptions po;
    po.driver = d->name;
    po.nodeName = o.nodeName;
    po.stateDir = fs::path(o.stateDir) / "dra" / d->name;
    po.journal = fs::path(o.stateDir) / "handouts.journal";
    po.cdiDir = o.cdiDir;
    po.bound.mode = o.regionTmpfs;
    po.bound.privilegedValue = "dra.privileged";
    po.bound.unbounded = [](const std::string& folder, const std::string& why) {
      logLine("warning", "claim folder " + folder + " is not size-limited: " + why);
    };
    d->preparer = std::make_unique<ClaimPreparer>(std::move(po), *b, *impl->client);
    impl->drivers.push_back(std::move(d));
  }
  if (impl->drivers.empty())
    return makeError("no backend is in DRA mode on node " + o.nodeName + " (set frontEnd: dra in " + o.configPath +
                     ", for the backend or in the node's override)");
  return std::unique_ptr<DraAgent>(new DraAgent(std::move(impl)));
}

Status DraAgent::start() {
  auto& im = *impl_;
  if (auto node = im.client->get(k8s::kNodes, "", im.options.nodeName); node.ok())
    im.nodeUid = std::string(k8s::uid(*node));
  else
    logLine("warning", "cannot read Node " + im.options.nodeName + " (slices get no owner): " + node.error().describe());
  for (auto& d : im.drivers) {
    SliceParams sp;
    sp.driver = d->name;
    sp.nodeName = im.options.nodeName;
    sp.nodeUid = im.nodeUid;
    sp.generation = 0;
    d->publisher = std::make_unique<SlicePublisher>(*im.client, sp);
    // Claims prepared before a restart are answered again before the kubelet can ask.
    auto restored = d->preparer->restore();
    if (!restored.ok()) return makeError(d->name + ": " + restored.error().message);
    for (const auto& problem : *restored) logLine("warning", "a handout journal line cannot be used: " + problem);
  }
  im.resyncAll();
  for (auto& d : im.drivers) {
    KubeletServerOptions ko;
    ko.driver = d->name;
    ko.registrationDir = im.options.registrationDir;
    ko.pluginDir = im.options.pluginDir;
    ko.healthResend = im.options.healthResend;
    auto server = KubeletServer::start(ko, *d->preparer, d->health);
    if (!server.ok()) return std::move(server).error().prefix(d->name);
    std::lock_guard lock(im.mu);
    d->server = std::move(server).value();
  }
  if (!im.options.metricsAddress.empty()) {
    auto server = node::startMetricsEndpoint(im.options.metricsAddress, "--metrics-address", im.registry, [&im] {
      for (const auto& s : im.statusNow())
        if (!s.registered) return std::pair<bool, std::string>{false, s.driver + " is not registered with the kubelet\n"};
      return std::pair<bool, std::string>{true, "ok\n"};
    });
    if (!server.ok()) return server.error();
    im.httpServer = std::move(server).value();
  }
  {
    std::lock_guard lock(im.mu);
    im.started = true;
  }
  im.resyncThread = std::thread([&im] { im.resyncLoop(); });
  for (auto& d : im.drivers) {
    Driver* drv = d.get();
    d->healthFeed = std::make_unique<deviceplugin::HealthFeed>(deviceplugin::HealthFeed::Handlers{
        [drv](std::chrono::milliseconds timeout) {
          std::lock_guard lock(drv->discoveryMu);
          return drv->backend->discovery()->waitForHealthEvents(timeout);
        },
        [&im, drv](const std::vector<HealthEvent>& events) { im.onHealthEvents(*drv, events); },
        [drv](const std::string& why) { logLine("warning", drv->name + ": health: " + why); }});
  }
  return {};
}

void DraAgent::stop() {
  auto& im = *impl_;
  {
    std::lock_guard lock(im.mu);
    if (im.stopping) return;
    im.stopping = true;
  }
  im.cv.notify_all();
  if (im.resyncThread.joinable()) im.resyncThread.join();
  for (auto& d : im.drivers)
    if (d->healthFeed) d->healthFeed->stop();
  if (im.httpServer) im.httpServer->stop(std::chrono::milliseconds(500));
  for (auto& d : im.drivers) {
    if (d->server) d->server->stop();
    if (im.options.withdrawOnStop && d->publisher)
      if (auto s = d->publisher->withdraw(); !s.ok()) logLine("warning", d->name + ": " + s.error().message);
  }
}

void DraAgent::resyncNow() { impl_->resyncAll(); }
std::vector<DriverStatus> DraAgent::status() const { return impl_->statusNow(); }
std::vector<std::string> DraAgent::drivers() const {
  std::vector<std::string> out;
  for (const auto& d : impl_->drivers) out.push_back(d->name);
  return out;
}
std::string DraAgent::metricsUrl() const { return impl_->httpServer ? impl_->httpServer->url() : ""; }
std::string DraAgent::renderMetrics() { return impl_->registry.render(); }

}  // namespace vgpu::dra
