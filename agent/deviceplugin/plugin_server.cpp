// One kubelet device plugin (v1beta1) per resource (plugin_server.h): the gRPC service on its
// socket, registration with the kubelet and re-registration after a kubelet restart.

#include "plugin_server.h"

#include "cdi_spec.h"

#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "vgpu/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;
namespace {

constexpr const char* kApiVersion = "v1beta1";

std::chrono::system_clock::time_point deadlineIn(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

/// What tells one kubelet.sock apart from the next one (a kubelet restart makes a new file).
struct FileIdentity {
  bool exists = false;
  ino_t inode = 0;
  std::int64_t ctimeNs = 0;
  bool operator==(const FileIdentity&) const = default;
};

FileIdentity identityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(std::string resource, PluginHandler& handler) : resource_(std::move(resource)), handler_(handler) {}

  void stopping() { stopping_ = true; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::uint64_t version = 0;
    while (!stopping_ && !ctx->IsCancelled()) {
      v1beta1::ListAndWatchResponse resp;
      for (const auto& d : handler_.devices(resource_, version)) {
        auto* out = resp.add_devices();
        out->set_id(d.id);
        out->set_health(d.healthy ? "Healthy" : "Unhealthy");
        if (d.numaNode >= 0) out->mutable_topology()->add_nodes()->set_id(d.numaNode);
      }
      if (!writer->Write(resp)) return grpc::Status::OK;
      // Full list on every change; wake regularly to notice cancellation and shutdown.
      while (!stopping_ && !ctx->IsCancelled() &&
             !handler_.waitForDevices(resource_, version, std::chrono::milliseconds(200))) {
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    for (const auto& cr : req->container_requests()) {
      std::vector<std::string> available(cr.available_deviceids().begin(), cr.available_deviceids().end());
      std::vector<std::string> must(cr.must_include_deviceids().begin(), cr.must_include_deviceids().end());
      auto* resp = out->add_container_responses();
      const auto size = cr.allocation_size() > 0 ? static_cast<std::size_t>(cr.allocation_size()) : 0;
      for (const auto& id : handler_.preferred(resource_, available, must, size)) resp->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    for (const auto& cr : req->container_requests()) {
      std::vector<std::string> ids(cr.devices_ids().begin(), cr.devices_ids().end());
      auto result = handler_.allocate(resource_, ids);
      if (auto* err = std::get_if<RpcError>(&result))
        return {static_cast<grpc::StatusCode>(err->code), err->message};
      const auto& spec = std::get<ContainerSpec>(result);
      auto* resp = out->add_container_responses();
      for (const auto& [k, v] : spec.env) (*resp->mutable_envs())[k] = v;
      for (const auto& [k, v] : spec.annotations) (*resp->mutable_annotations())[k] = v;
      // The container's own CDI spec (a backend's OCI hooks): as a CDI device too, which
      // kubelets with DevicePluginCDIDevices (GA in 1.31) pass to the runtime.
      if (auto cdi = spec.annotations.find(node::kContainerCdiAnnotation); cdi != spec.annotations.end())
        resp->add_cdi_devices()->set_name(cdi->second);
      for (const auto& m : spec.mounts) {
        auto* mount = resp->add_mounts();
        mount->set_container_path(m.containerPath);
        mount->set_host_path(m.hostPath);
        mount->set_read_only(m.readOnly);
      }
      for (const auto& d : spec.devices) {
        auto* dev = resp->add_devices();
        dev->set_container_path(d.containerPath);
        dev->set_host_path(d.hostPath);
        dev->set_permissions(d.permissions);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  std::string resource_;
  PluginHandler& handler_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

struct PluginServer::Impl {
  PluginServerOptions options;
  PluginHandler& handler;
  std::atomic<bool>& registered;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  PluginServerStats stats;
  std::thread thread;

  Impl(PluginServerOptions o, PluginHandler& h, std::atomic<bool>& r) : options(std::move(o)), handler(h), registered(r) {}

  std::string socketPath() const { return (fs::path(options.pluginDir) / options.socketName).string(); }
  std::string kubeletPath() const { return (fs::path(options.pluginDir) / options.kubeletSocket).string(); }

  Status serve() {
    std::error_code ec;
    fs::remove(socketPath(), ec);
    service = std::make_unique<DevicePluginService>(options.resource, handler);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socketPath(), grpc::InsecureServerCredentials());
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    if (!server)
      return makeError("device plugin for " + options.resource + ": cannot serve on " + socketPath() +
                       " (is the directory writable and mounted from the host?)");
    return {};
  }

  void shutdown() {
    if (service) service->stopping();
    if (server) server->Shutdown(deadlineIn(std::chrono::milliseconds(500)));
    server.reset();
    service.reset();
    std::error_code ec;
    fs::remove(socketPath(), ec);
  }

  Status registerOnce() {
    auto channel = grpc::CreateChannel("unix://" + kubeletPath(), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest req;
    req.set_version(kApiVersion);
    req.set_endpoint(options.socketName);
    req.set_resource_name(options.resource);
    req.mutable_options()->set_pre_start_required(false);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadlineIn(std::chrono::seconds(15)));
    v1beta1::Empty empty;
    auto s = stub->Register(&ctx, req, &empty);
    if (!s.ok())
      return makeError("registering " + options.resource + " with the kubelet at " + kubeletPath() + ": " +
                       s.error_message());
    return {};
  }

  /// Registers (retrying) and re-serves + re-registers whenever the kubelet restarts.
  void run() {
    FileIdentity kubelet;
    for (;;) {
      {
        std::unique_lock lock(mu);
        const auto wait = registered ? options.watchInterval : options.retryInterval;
        if (cv.wait_for(lock, registered ? wait : std::chrono::milliseconds(0), [&] { return stopping; })) return;
      }
      if (!registered) {
        const FileIdentity now = identityOf(kubeletPath());
        if (now.exists) {
          if (auto s = registerOnce(); s.ok()) {
            kubelet = now;
            registered = true;
            std::lock_guard lock(mu);
            ++stats.registrations;
            stats.lastError.clear();
            continue;
          } else {
            std::lock_guard lock(mu);
            stats.lastError = s.error().message;
          }
        }
        std::unique_lock lock(mu);
        if (cv.wait_for(lock, options.retryInterval, [&] { return stopping; })) return;
        continue;
      }
      const FileIdentity now = identityOf(kubeletPath());
      const bool ourSocketGone = !identityOf(socketPath()).exists;
      if ((now.exists && !(now == kubelet)) || ourSocketGone) {
        // The kubelet restarted: it deleted our socket and forgot us. Serve anew, register again.
        registered = false;
        {
          std::lock_guard lock(mu);
          ++stats.restarts;
          if (stopping) return;
        }
        shutdown();
        if (auto s = serve(); !s.ok()) {
          std::lock_guard lock(mu);
          stats.lastError = s.error().message;
        }
      }
    }
  }
};

PluginServer::PluginServer(PluginServerOptions options, PluginHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler, registered_)) {}

PluginServer::~PluginServer() { stop(); }

Status PluginServer::start() {
  if (auto s = impl_->serve(); !s.ok()) return s;
  impl_->thread = std::thread([this] { impl_->run(); });
  return {};
}

void PluginServer::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->shutdown();
  registered_ = false;
}

PluginServerStats PluginServer::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

std::string PluginServer::socketPath() const { return impl_->socketPath(); }

}  // namespace vgpu::deviceplugin
