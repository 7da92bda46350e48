// The kubelet-facing gRPC of one DRA driver (kubelet_server.h): plugin registration and the
// DRAPlugin service (v1 and v1beta1) translated into calls on the claim preparer.

#include "kubelet_server.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "vgpu/proto/dra_health_v1.grpc.pb.h"
#include "vgpu/proto/dra_health_v1alpha1.grpc.pb.h"
#include "vgpu/proto/dra_v1.grpc.pb.h"
#include "vgpu/proto/dra_v1beta1.grpc.pb.h"
#include "vgpu/proto/pluginregistration_v1.grpc.pb.h"

namespace vgpu::dra {
namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

std::string registrationSocket(const KubeletServerOptions& o) {
  return (fs::path(o.registrationDir) / (o.driver + "-reg.sock")).string();
}
std::string draSocket(const KubeletServerOptions& o) { return (fs::path(o.pluginDir) / o.driver / "dra.sock").string(); }

namespace {

ClaimRef refOf(const auto& c) { return {c.namespace_(), c.uid(), c.name()}; }

/// The generated types of one API version.
#define VGPU_DRA_API(ns)                                                      \
  struct {                                                                     \
    using Service = ns::DRAPlugin::Service;                                    \
    using NodePrepareResourcesRequest = ns::NodePrepareResourcesRequest;       \
    using NodePrepareResourcesResponse = ns::NodePrepareResourcesResponse;     \
    using NodeUnprepareResourcesRequest = ns::NodeUnprepareResourcesRequest;   \
    using NodeUnprepareResourcesResponse = ns::NodeUnprepareResourcesResponse; \
  }
using ApiV1 = VGPU_DRA_API(drav1);
using ApiV1beta1 = VGPU_DRA_API(drav1beta1);
#undef VGPU_DRA_API

/// Both API versions have the same messages; v1 adds share_id.
template <class Api, bool kHasShareId>
class DraService final : public Api::Service {
 public:
  explicit DraService(ClaimPreparer& preparer) : preparer_(preparer) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const typename Api::NodePrepareResourcesRequest* req,
                                    typename Api::NodePrepareResourcesResponse* resp) override {
    for (const auto& c : req->claims()) {
      auto& out = (*resp->mutable_claims())[c.uid()];
      if (c.uid().empty() || c.name().empty() || c.namespace_().empty()) {
        out.set_error("the claim's namespace, uid and name are all required");
        continue;
      }
      const PrepareResult r = preparer_.prepare(refOf(c));
      if (!r.error.empty()) {
        std::fprintf(stderr, "vgpu-dra-plugin: prepare %s/%s: %s\n", c.namespace_().c_str(), c.name().c_str(),
                     r.error.c_str());
        out.set_error(r.error);
        continue;
      }
      for (const auto& d : r.devices) {
        auto* dev = out.add_devices();
        for (const auto& n : d.requestNames) dev->add_request_names(n);
        dev->set_pool_name(d.pool);
        dev->set_device_name(d.device);
        for (const auto& id : d.cdiDeviceIds) dev->add_cdi_device_ids(id);
        if constexpr (kHasShareId)
          if (!d.shareId.empty()) dev->set_share_id(d.shareId);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const typename Api::NodeUnprepareResourcesRequest* req,
                                      typename Api::NodeUnprepareResourcesResponse* resp) override {
    for (const auto& c : req->claims()) {
      auto& out = (*resp->mutable_claims())[c.uid()];
      const std::string err = preparer_.unprepare(refOf(c));
      if (!err.empty()) {
        std::fprintf(stderr, "vgpu-dra-plugin: unprepare %s/%s: %s\n", c.namespace_().c_str(), c.name().c_str(),
                     err.c_str());
        out.set_error(err);
      }
    }
    return grpc::Status::OK;
  }

 private:
  ClaimPreparer& preparer_;
};

/// NodeWatchResources of one health API version (v1 and v1alpha1 have the same messages):
/// the board's whole list at once, again at every change and at least every `resend`, so
/// an idle driver's devices never time out to Unknown in the kubelet. Ends when the kubelet
/// goes away or the server stops; the kubelet opens a new stream 5 s later.
template <class Service, class Request, class Response>
class HealthService final : public Service {
 public:
  HealthService(const HealthBoard& board, std::chrono::milliseconds resend, const std::atomic<bool>& stopping)
      : board_(board), resend_(resend), stopping_(stopping) {}

  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const Request*, grpc::ServerWriter<Response>* out) override {
    const std::int64_t timeoutSeconds = std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(3 * resend_ + std::chrono::milliseconds(999)).count());
    std::uint64_t sent = 0;
    std::optional<std::chrono::steady_clock::time_point> lastSent;
    while (!ctx->IsCancelled() && !stopping_) {
      const bool due = !lastSent || std::chrono::steady_clock::now() - *lastSent >= resend_;
      if (due || board_.waitNewer(sent, std::chrono::milliseconds(100))) {
        const auto snap = board_.snapshot();
        Response resp;
        for (const auto& d : snap.devices) {
          auto* dh = resp.add_devices();
          dh->mutable_device()->set_pool_name(d.pool);
          dh->mutable_device()->set_device_name(d.device);
          dh->set_health(healthOf(d.health));
          dh->set_last_updated_time(snap.checkedAt);
          dh->set_health_check_timeout_seconds(timeoutSeconds);
          if (!d.message.empty()) dh->set_message(d.message);
        }
        if (!out->Write(resp)) break;  // the kubelet went away
        sent = snap.version;
        lastSent = std::chrono::steady_clock::now();
      }
    }
    return grpc::Status::OK;
  }

 private:
  static auto healthOf(Health h) {
    using Enum = decltype(std::declval<Response&>().devices(0).health());
    switch (h) {
      case Health::kHealthy: return static_cast<Enum>(1);    // HEALTHY
      case Health::kUnhealthy: return static_cast<Enum>(2);  // UNHEALTHY
      case Health::kUnknown: break;
    }
    return static_cast<Enum>(0);  // UNKNOWN
  }

  const HealthBoard& board_;
  std::chrono::milliseconds resend_;
  const std::atomic<bool>& stopping_;
};

namespace healthv1 = ::v1;
namespace healthv1alpha1 = ::v1alpha1;
using HealthV1 = HealthService<healthv1::DRAResourceHealth::Service, healthv1::NodeWatchResourcesRequest,
                               healthv1::NodeWatchResourcesResponse>;
using HealthV1alpha1 = HealthService<healthv1alpha1::DRAResourceHealth::Service, healthv1alpha1::NodeWatchResourcesRequest,
                                     healthv1alpha1::NodeWatchResourcesResponse>;

class RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(std::string driver, std::string endpoint) : driver_(std::move(driver)), endpoint_(std::move(endpoint)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(driver_);
    info->set_endpoint(endpoint_);
    for (const char* v : kSupportedVersions) info->add_supported_versions(v);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const pluginregistration::RegistrationStatus* st,
                                        pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard lock(mu_);
    registered_ = st->plugin_registered();
    error_ = st->error();
    if (registered_) std::fprintf(stderr, "vgpu-dra-plugin: %s registered with the kubelet\n", driver_.c_str());
    else std::fprintf(stderr, "vgpu-dra-plugin: the kubelet refused %s: %s\n", driver_.c_str(), error_.c_str());
    return grpc::Status::OK;
  }

  bool registered() const {
    std::lock_guard lock(mu_);
    return registered_;
  }
  std::string error() const {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::string driver_;
  std::string endpoint_;
  mutable std::mutex mu_;
  bool registered_ = false;
  std::string error_;
};

Result<std::unique_ptr<grpc::Server>> listen(const std::string& socket, std::vector<grpc::Service*> services) {
  std::error_code ec;
  fs::create_directories(fs::path(socket).parent_path(), ec);
  if (ec) return makeError("cannot create the folder of " + socket + ": " + ec.message());
  fs::remove(socket, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  for (auto* s : services) builder.RegisterService(s);
  auto server = builder.BuildAndStart();
  if (!server) return makeError("cannot listen on " + socket + " (path too long, or no permission?)");
  return server;
}

}  // namespace

struct KubeletServer::Impl {
  KubeletServerOptions options;
  std::unique_ptr<DraService<ApiV1, true>> v1;
  std::unique_ptr<DraService<ApiV1beta1, false>> v1beta1;
  std::atomic<bool> stopping{false};
  std::unique_ptr<HealthV1> healthV1;
  std::unique_ptr<HealthV1alpha1> healthV1alpha1;
  std::unique_ptr<RegistrationService> registration;
  std::unique_ptr<grpc::Server> draServer;
  std::unique_ptr<grpc::Server> regServer;
  std::once_flag stopped;
};

KubeletServer::KubeletServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeletServer::~KubeletServer() { stop(); }

Result<std::unique_ptr<KubeletServer>> KubeletServer::start(KubeletServerOptions options, ClaimPreparer& preparer,
                                                            const HealthBoard& health) {
  auto im = std::make_unique<Impl>();
  im->options = std::move(options);
  im->v1 = std::make_unique<DraService<ApiV1, true>>(preparer);
  im->v1beta1 = std::make_unique<DraService<ApiV1beta1, false>>(preparer);
  im->healthV1 = std::make_unique<HealthV1>(health, im->options.healthResend, im->stopping);
  im->healthV1alpha1 = std::make_unique<HealthV1alpha1>(health, im->options.healthResend, im->stopping);
  im->registration = std::make_unique<RegistrationService>(im->options.driver, draSocket(im->options));
  // The DRA service first: the kubelet connects to it as soon as it reads GetInfo.
  auto dra = listen(draSocket(im->options),
                    {im->v1.get(), im->v1beta1.get(), im->healthV1.get(), im->healthV1alpha1.get()});
  if (!dra.ok()) return dra.error();
  im->draServer = std::move(dra).value();
  auto reg = listen(registrationSocket(im->options), {im->registration.get()});
  if (!reg.ok()) {
    im->draServer->Shutdown();
    return reg.error();
  }
  im->regServer = std::move(reg).value();
  return std::unique_ptr<KubeletServer>(new KubeletServer(std::move(im)));
}

void KubeletServer::stop() {
  std::call_once(impl_->stopped, [this] {
    impl_->stopping = true;  // open health streams end within their 100 ms wait
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
    // Registration first, so the kubelet stops using the driver before its endpoint goes.
    impl_->regServer->Shutdown(deadline);
    impl_->draServer->Shutdown(deadline);
    std::error_code ec;
    fs::remove(registrationSocket(impl_->options), ec);
    fs::remove(draSocket(impl_->options), ec);
  });
}

bool KubeletServer::registered() const { return impl_->registration->registered(); }
std::string KubeletServer::registrationError() const { return impl_->registration->error(); }

}  // namespace vgpu::dra
