#include "vgpu/fakes/fake_dra_kubelet.h"

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "vgpu/proto/dra_health_v1.grpc.pb.h"
#include "vgpu/proto/dra_health_v1alpha1.grpc.pb.h"
#include "vgpu/proto/dra_v1.grpc.pb.h"
#include "vgpu/proto/dra_v1beta1.grpc.pb.h"
#include "vgpu/proto/pluginregistration_v1.grpc.pb.h"

namespace vgpu::fakes {
namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

namespace {

std::chrono::system_clock::time_point in(std::chrono::milliseconds d) { return std::chrono::system_clock::now() + d; }

/// A Prepare or Unprepare request naming `claims` (both versions, both calls: same fields).
template <class Req>
Req requestFor(const std::vector<DraClaim>& claims) {
  Req req;
  for (const auto& c : claims) {
    auto* pc = req.add_claims();
    pc->set_namespace_(c.ns);
    pc->set_uid(c.uid);
    pc->set_name(c.name);
  }
  return req;
}

template <class Stub, class Req, class Resp>
Result<std::map<std::string, DraClaimAnswer>> callPrepare(const std::shared_ptr<grpc::Channel>& ch,
                                                         const std::vector<DraClaim>& claims) {
  auto stub = Stub::NewStub(ch);
  const Req req = requestFor<Req>(claims);
  Resp resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(in(std::chrono::seconds(45)));  // the kubelet's per-call timeout
  auto st = stub->NodePrepareResources(&ctx, req, &resp);
  if (!st.ok()) return makeError("NodePrepareResources: gRPC " + std::to_string(st.error_code()) + ": " + st.error_message());
  std::map<std::string, DraClaimAnswer> out;
  for (const auto& c : claims) {
    auto it = resp.claims().find(c.uid);
    if (it == resp.claims().end()) return makeError("NodePrepareResources: no answer for claim " + c.uid);
    DraClaimAnswer a;
    a.error = it->second.error();
    for (const auto& d : it->second.devices()) {
      DraPreparedDevice pd;
      pd.requestNames.assign(d.request_names().begin(), d.request_names().end());
      pd.pool = d.pool_name();
      pd.device = d.device_name();
      pd.cdiDeviceIds.assign(d.cdi_device_ids().begin(), d.cdi_device_ids().end());
      if constexpr (requires { d.has_share_id(); })
        if (d.has_share_id()) pd.shareId = d.share_id();
      a.devices.push_back(std::move(pd));
    }
    out[c.uid] = std::move(a);
  }
  return out;
}

template <class Stub, class Req, class Resp>
Result<std::map<std::string, std::string>> callUnprepare(const std::shared_ptr<grpc::Channel>& ch,
                                                         const std::vector<DraClaim>& claims) {
  auto stub = Stub::NewStub(ch);
  const Req req = requestFor<Req>(claims);
  Resp resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(in(std::chrono::seconds(45)));
  auto st = stub->NodeUnprepareResources(&ctx, req, &resp);
  if (!st.ok())
    return makeError("NodeUnprepareResources: gRPC " + std::to_string(st.error_code()) + ": " + st.error_message());
  std::map<std::string, std::string> out;
  for (const auto& c : claims) {
    auto it = resp.claims().find(c.uid);
    if (it == resp.claims().end()) return makeError("NodeUnprepareResources: no answer for claim " + c.uid);
    out[c.uid] = it->second.error();
  }
  return out;
}

/// What the kubelet's cache keeps of one device's last report.
struct CachedHealth {
  DraDeviceHealth reported;
  std::chrono::steady_clock::time_point received;
};

const char* healthWord(int status) {
  switch (status) {
    case 1: return "Healthy";
    case 2: return "Unhealthy";
    default: return "Unknown";
  }
}

/// One plugin's health watch: a thread opening NodeWatchResources again `retry` after each end.
struct HealthWatcher {
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  grpc::ClientContext* open = nullptr;  // the stream being read, to cancel at stop
  DraHealthWatch state;
  std::map<std::string, CachedHealth> devices;  // "<pool>/<device>"
  std::thread thread;

  ~HealthWatcher() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mu);
      stopping = true;
      if (open) open->TryCancel();
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  template <class Service, class Request, class Response>
  void run(const std::string& endpoint, std::chrono::milliseconds retry, bool giveUpOnUnimplemented) {
    auto ch = grpc::CreateChannel("unix://" + endpoint, grpc::InsecureChannelCredentials());
    auto stub = Service::NewStub(ch);
    for (;;) {
      grpc::ClientContext ctx;
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        open = &ctx;
        ++state.streamsOpened;
        state.lastEnd.clear();
      }
      auto reader = stub->NodeWatchResources(&ctx, Request());
      Response resp;
      while (reader->Read(&resp)) {
        const auto now = std::chrono::steady_clock::now();
        std::lock_guard lock(mu);
        ++state.reports;
        for (const auto& d : resp.devices()) {
          auto& c = devices[d.device().pool_name() + "/" + d.device().device_name()];
          c.reported = {healthWord(static_cast<int>(d.health())), d.message(), d.last_updated_time(),
                        d.health_check_timeout_seconds()};
          c.received = now;  // the kubelet times a device out from when it heard of it
        }
      }
      const grpc::Status st = reader->Finish();
      std::unique_lock lock(mu);
      open = nullptr;
      state.lastEnd = std::to_string(st.error_code()) + ": " + st.error_message();
      if (giveUpOnUnimplemented && st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        state.gaveUp = true;
        return;
      }
      cv.wait_for(lock, retry, [this] { return stopping; });
    }
  }

  /// As the kubelet's cache reads it. Call with mu held.
  DraDeviceHealth read(const std::string& key) const {
    auto it = devices.find(key);
    if (it == devices.end()) return {};
    const auto timeout = it->second.reported.timeoutSeconds > 0 ? std::chrono::seconds(it->second.reported.timeoutSeconds)
                                                                : std::chrono::seconds(30);
    if (std::chrono::steady_clock::now() - it->second.received > timeout) return {};
    return it->second.reported;
  }
};

}  // namespace

struct FakeDraKubelet::Impl {
  FakeDraKubeletOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::set<std::string> seenSockets;
  std::map<std::string, DraPluginRecord> plugins;
  std::map<std::string, std::unique_ptr<HealthWatcher>> health;  // by driver
  std::thread watcher;

  void watchLoop() {
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      scan();
      lock.lock();
      cv.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping; });
    }
  }

  void scan() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(options.registrationDir, ec)) {
      const std::string path = e.path().string();
      if (e.path().extension() != ".sock") continue;
      {
        std::lock_guard lock(mu);
        if (seenSockets.count(path)) continue;
      }
      if (auto rec = registerPlugin(path)) {
        std::lock_guard lock(mu);
        seenSockets.insert(path);
        plugins[rec->driver] = *rec;
        if (rec->accepted && !rec->healthVersion.empty()) health[rec->driver] = watchHealth(*rec);
        cv.notify_all();
      }
    }
  }

  /// The plugin watcher's handshake; nullopt when the socket does not answer (yet).
  std::optional<DraPluginRecord> registerPlugin(const std::string& socket) {
    auto ch = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
    auto stub = pluginregistration::Registration::NewStub(ch);
    pluginregistration::PluginInfo info;
    grpc::ClientContext ctx;
    ctx.set_deadline(in(std::chrono::seconds(1)));
    if (!stub->GetInfo(&ctx, pluginregistration::InfoRequest(), &info).ok()) return std::nullopt;
    DraPluginRecord rec;
    rec.driver = info.name();
    rec.endpoint = info.endpoint();
    rec.supportedVersions.assign(info.supported_versions().begin(), info.supported_versions().end());
    if (info.type() != "DRAPlugin") {
      rec.error = "plugin type " + info.type() + " is not DRAPlugin";
    } else if (rec.driver.empty()) {
      rec.error = "no driver name";
    } else {
      for (const auto& v : options.versions)
        if (std::find(rec.supportedVersions.begin(), rec.supportedVersions.end(), v) != rec.supportedVersions.end()) {
          rec.version = v;
          break;
        }
      if (rec.version.empty()) rec.error = "none of the plugin's versions is supported by this kubelet";
      rec.healthVersion = chooseHealth(rec.supportedVersions);
    }
    rec.accepted = rec.error.empty();
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(rec.accepted);
    status.set_error(rec.error);
    pluginregistration::RegistrationStatusResponse ignored;
    grpc::ClientContext nctx;
    nctx.set_deadline(in(std::chrono::seconds(1)));
    (void)stub->NotifyRegistrationStatus(&nctx, status, &ignored);
    return rec;
  }

  /// 1.37: the first health version the plugin advertises; 1.34: v1alpha1 on every plugin.
  std::string chooseHealth(const std::vector<std::string>& advertised) const {
    if (options.healthVersions.empty()) return "";
    if (!options.healthNeedsAdvertisement) return options.healthVersions.front();
    for (const auto& v : options.healthVersions)
      if (std::find(advertised.begin(), advertised.end(), v) != advertised.end()) return v;
    return "";
  }

  std::unique_ptr<HealthWatcher> watchHealth(const DraPluginRecord& rec) {
    auto w = std::make_unique<HealthWatcher>();
    auto* hw = w.get();
    const auto retry = options.healthRetry;
    const bool giveUp = options.healthNeedsAdvertisement;
    if (rec.healthVersion == "v1.DRAResourceHealth")
      w->thread = std::thread([hw, ep = rec.endpoint, retry, giveUp] {
        hw->run<::v1::DRAResourceHealth, ::v1::NodeWatchResourcesRequest, ::v1::NodeWatchResourcesResponse>(ep, retry,
                                                                                                          giveUp);
      });
    else
      w->thread = std::thread([hw, ep = rec.endpoint, retry, giveUp] {
        hw->run<::v1alpha1::DRAResourceHealth, ::v1alpha1::NodeWatchResourcesRequest,
                ::v1alpha1::NodeWatchResourcesResponse>(ep, retry, giveUp);
      });
    return w;
  }

  /// Stops every health watch (outside mu: a watch may be waiting for its stream).
  void stopHealth() {
    std::map<std::string, std::unique_ptr<HealthWatcher>> gone;
    {
      std::lock_guard lock(mu);
      gone.swap(health);
    }
    for (auto& [d, w] : gone) w->stop();
  }

  Result<DraPluginRecord> accepted(const std::string& driver) const {
    std::lock_guard lock(mu);
    auto it = plugins.find(driver);
    if (it == plugins.end() || !it->second.accepted) return makeError("DRA driver " + driver + " is not registered");
    return it->second;
  }
};

FakeDraKubelet::FakeDraKubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeDraKubelet::~FakeDraKubelet() { stop(); }

Result<std::unique_ptr<FakeDraKubelet>> FakeDraKubelet::start(FakeDraKubeletOptions options) {
  std::error_code ec;
  fs::create_directories(options.registrationDir, ec);
  if (ec) return makeError("cannot create " + options.registrationDir + ": " + ec.message());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  auto* im = impl.get();
  impl->watcher = std::thread([im] { im->watchLoop(); });
  return std::unique_ptr<FakeDraKubelet>(new FakeDraKubelet(std::move(impl)));
}

std::optional<DraPluginRecord> FakeDraKubelet::waitForPlugin(const std::string& driver, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait_for(lock, timeout, [&] { return impl_->plugins.count(driver) > 0; });
  auto it = impl_->plugins.find(driver);
  if (it == impl_->plugins.end()) return std::nullopt;
  return it->second;
}

std::optional<DraPluginRecord> FakeDraKubelet::plugin(const std::string& driver) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->plugins.find(driver);
  if (it == impl_->plugins.end()) return std::nullopt;
  return it->second;
}

Result<std::map<std::string, DraClaimAnswer>> FakeDraKubelet::prepare(const std::string& driver,
                                                                      const std::vector<DraClaim>& claims) {
  auto p = impl_->accepted(driver);
  if (!p.ok()) return p.error();
  auto ch = grpc::CreateChannel("unix://" + p->endpoint, grpc::InsecureChannelCredentials());
  if (p->version == "v1.DRAPlugin")
    return callPrepare<drav1::DRAPlugin, drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse>(ch,
                                                                                                               claims);
  return callPrepare<drav1beta1::DRAPlugin, drav1beta1::NodePrepareResourcesRequest,
                     drav1beta1::NodePrepareResourcesResponse>(ch, claims);
}

Result<std::map<std::string, std::string>> FakeDraKubelet::unprepare(const std::string& driver,
                                                                    const std::vector<DraClaim>& claims) {
  auto p = impl_->accepted(driver);
  if (!p.ok()) return p.error();
  auto ch = grpc::CreateChannel("unix://" + p->endpoint, grpc::InsecureChannelCredentials());
  if (p->version == "v1.DRAPlugin")
    return callUnprepare<drav1::DRAPlugin, drav1::NodeUnprepareResourcesRequest, drav1::NodeUnprepareResourcesResponse>(
        ch, claims);
  return callUnprepare<drav1beta1::DRAPlugin, drav1beta1::NodeUnprepareResourcesRequest,
                       drav1beta1::NodeUnprepareResourcesResponse>(ch, claims);
}

DraDeviceHealth FakeDraKubelet::deviceHealth(const std::string& driver, const std::string& pool,
                                             const std::string& device) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->health.find(driver);
  if (it == impl_->health.end()) return {};
  std::lock_guard wl(it->second->mu);
  return it->second->read(pool + "/" + device);
}

DraDeviceHealth FakeDraKubelet::waitForHealth(const std::string& driver, const std::string& pool,
                                              const std::string& device, const std::string& health,
                                              std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto h = deviceHealth(driver, pool, device);
    if (h.health == health || std::chrono::steady_clock::now() >= deadline) return h;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

DraHealthWatch FakeDraKubelet::healthWatch(const std::string& driver) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->health.find(driver);
  if (it == impl_->health.end()) return {};
  std::lock_guard wl(it->second->mu);
  return it->second->state;
}

void FakeDraKubelet::restart() {
  impl_->stopHealth();
  std::lock_guard lock(impl_->mu);
  impl_->plugins.clear();
  impl_->seenSockets.clear();
}

void FakeDraKubelet::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  impl_->stopHealth();
}

}  // namespace vgpu::fakes
