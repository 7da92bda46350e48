#include "vgpu/fakes/fake_kubelet.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "vgpu/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "vgpu/proto/podresources_v1.grpc.pb.h"

namespace vgpu::fakes {
namespace fs = std::filesystem;
namespace {

constexpr const char* kKubeletSocket = "kubelet.sock";

bool isExtendedResourceName(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  const std::string domain = name.substr(0, slash);
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) return false;
  return !name.starts_with("requests.");
}

std::chrono::system_clock::time_point deadlineIn(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

}  // namespace

struct FakeKubelet::Impl {
  struct Plugin {
    PluginRegistration reg;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    grpc::ClientContext streamContext;
    std::thread reader;
  };

  FakeKubeletOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::shared_ptr<Plugin>> plugins;  // resource -> newest registration
  std::map<std::string, std::vector<KubeletDevice>> devices;
  std::map<std::string, std::size_t> lists;
  std::vector<PluginRegistration> registrations;
  // uid -> container -> resource -> ids (init containers' included): the checkpoint
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>> allocated;
  // uid -> container -> resource -> the plugin's answer, kept with the devices
  std::map<std::string, std::map<std::string, std::map<std::string, ContainerAllocation>>> answers;
  std::map<std::string, KubeletPod> active;  // uid -> admitted pod
  bool podResourcesAnswering = true;
  std::mutex admitMu;

  std::unique_ptr<grpc::Service> registrationService;
  std::unique_ptr<grpc::Service> podResourcesService;
  std::unique_ptr<grpc::Server> registrationServer;
  std::unique_ptr<grpc::Server> podResourcesServer;
  bool stopped = false;

  std::string kubeletSocketPath() const { return (fs::path(options.devicePluginDir) / kKubeletSocket).string(); }

  grpc::Status onRegister(const v1beta1::RegisterRequest& req);
  void readStream(std::shared_ptr<Plugin> plugin);
  Status startServers();
  void stopServers();
  void dropPlugins();
  void fillPodResources(const std::string& uid, v1::PodResources& out) const;
};

namespace {

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(FakeKubelet::Impl& impl) : impl_(impl) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req, v1beta1::Empty*) override {
    return impl_.onRegister(*req);
  }

 private:
  FakeKubelet::Impl& impl_;
};

class PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesService(FakeKubelet::Impl& impl) : impl_(impl) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    std::lock_guard lock(impl_.mu);
    if (!impl_.podResourcesAnswering) return {grpc::StatusCode::UNAVAILABLE, "PodResources is not answering (test)"};
    for (const auto& [uid, pod] : impl_.active) impl_.fillPodResources(uid, *resp->add_pod_resources());
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* req,
                   v1::GetPodResourcesResponse* resp) override {
    std::lock_guard lock(impl_.mu);
    if (!impl_.podResourcesAnswering) return {grpc::StatusCode::UNAVAILABLE, "PodResources is not answering (test)"};
    for (const auto& [uid, pod] : impl_.active)
      if (pod.ns == req->pod_namespace() && pod.name == req->pod_name()) {
        impl_.fillPodResources(uid, *resp->mutable_pod_resources());
        return grpc::Status::OK;
      }
    return {grpc::StatusCode::NOT_FOUND, "pod " + req->pod_namespace() + "/" + req->pod_name() + " not found"};
  }
  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* resp) override {
    std::lock_guard lock(impl_.mu);
    for (const auto& [resource, devs] : impl_.devices) {
      auto* cd = resp->add_devices();
      cd->set_resource_name(resource);
      for (const auto& d : devs)
        if (d.healthy) cd->add_device_ids(d.id);
    }
    return grpc::Status::OK;
  }

 private:
  FakeKubelet::Impl& impl_;
};

}  // namespace

void FakeKubelet::Impl::fillPodResources(const std::string& uid, v1::PodResources& out) const {
  auto pod = active.find(uid);
  if (pod == active.end()) return;
  out.set_namespace_(pod->second.ns);
  out.set_name(pod->second.name);
  auto held = allocated.find(uid);
  // As the kubelet's server: sidecars and app containers, never the other init containers.
  for (const auto& container : pod->second.containers) {
    if (container.init && !container.restartAlways) continue;
    auto* c = out.add_containers();
    c->set_name(container.name);
    if (held == allocated.end()) continue;
    auto resources = held->second.find(container.name);
    if (resources == held->second.end()) continue;
    for (const auto& [resource, ids] : resources->second) {
      auto* d = c->add_devices();
      d->set_resource_name(resource);
      for (const auto& id : ids) d->add_device_ids(id);
    }
  }
}

grpc::Status FakeKubelet::Impl::onRegister(const v1beta1::RegisterRequest& req) {
  if (req.version() != "v1beta1")
    return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported device plugin API version " + req.version()};
  if (!isExtendedResourceName(req.resource_name()))
    return {grpc::StatusCode::INVALID_ARGUMENT, "invalid extended resource name " + req.resource_name()};
  auto plugin = std::make_shared<Plugin>();
  plugin->reg.resource = req.resource_name();
  plugin->reg.endpoint = req.endpoint();
  const std::string path = (fs::path(options.devicePluginDir) / req.endpoint()).string();
  grpc::ChannelArguments args;
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "localhost");
  plugin->channel = grpc::CreateCustomChannel("unix://" + path, grpc::InsecureChannelCredentials(), args);
  if (!plugin->channel->WaitForConnected(deadlineIn(std::chrono::seconds(10))))
    return {grpc::StatusCode::UNAVAILABLE, "cannot dial the plugin at " + path};
  plugin->stub = v1beta1::DevicePlugin::NewStub(plugin->channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadlineIn(std::chrono::seconds(10)));
  v1beta1::DevicePluginOptions opts;
  if (auto s = plugin->stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &opts); !s.ok())
    return {grpc::StatusCode::UNAVAILABLE, "GetDevicePluginOptions on " + path + ": " + s.error_message()};
  plugin->reg.preStartRequired = opts.pre_start_required();
  plugin->reg.preferredAllocationAvailable = opts.get_preferred_allocation_available();

  std::shared_ptr<Plugin> old;
  {
    std::lock_guard lock(mu);
    if (stopped) return {grpc::StatusCode::UNAVAILABLE, "kubelet stopping"};
    old = plugins[req.resource_name()];
    plugins[req.resource_name()] = plugin;
    registrations.push_back(plugin->reg);
    plugin->reader = std::thread([this, plugin] { readStream(plugin); });
  }
  if (old) {
    old->streamContext.TryCancel();
    if (old->reader.joinable()) old->reader.join();
  }
  cv.notify_all();
  return grpc::Status::OK;
}

void FakeKubelet::Impl::readStream(std::shared_ptr<Plugin> plugin) {
  auto reader = plugin->stub->ListAndWatch(&plugin->streamContext, v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  while (reader->Read(&resp)) {
    std::vector<KubeletDevice> list;
    for (const auto& d : resp.devices()) {
      KubeletDevice kd{d.id(), d.health() == "Healthy", {}};
      for (const auto& n : d.topology().nodes()) kd.numaNodes.push_back(n.id());
      list.push_back(std::move(kd));
    }
    std::lock_guard lock(mu);
    if (plugins[plugin->reg.resource] != plugin) break;
    devices[plugin->reg.resource] = std::move(list);
    ++lists[plugin->reg.resource];
    cv.notify_all();
  }
  reader->Finish();
  // The kubelet marks a resource's devices unhealthy when its stream ends.
  std::lock_guard lock(mu);
  auto it = plugins.find(plugin->reg.resource);
  if (it != plugins.end() && it->second == plugin)
    for (auto& d : devices[plugin->reg.resource]) d.healthy = false;
  cv.notify_all();
}

Status FakeKubelet::Impl::startServers() {
  std::error_code ec;
  fs::create_directories(options.devicePluginDir, ec);
  fs::remove(kubeletSocketPath(), ec);
  registrationService = std::make_unique<RegistrationService>(*this);
  grpc::ServerBuilder rb;
  rb.AddListeningPort("unix://" + kubeletSocketPath(), grpc::InsecureServerCredentials());
  rb.RegisterService(registrationService.get());
  registrationServer = rb.BuildAndStart();
  if (!registrationServer) return makeError("fake kubelet: cannot serve on " + kubeletSocketPath());
  if (!options.podResourcesSocket.empty()) {
    fs::create_directories(fs::path(options.podResourcesSocket).parent_path(), ec);
    fs::remove(options.podResourcesSocket, ec);
    podResourcesService = std::make_unique<PodResourcesService>(*this);
    grpc::ServerBuilder pb;
    pb.AddListeningPort("unix://" + options.podResourcesSocket, grpc::InsecureServerCredentials());
    pb.RegisterService(podResourcesService.get());
    podResourcesServer = pb.BuildAndStart();
    if (!podResourcesServer) return makeError("fake kubelet: cannot serve on " + options.podResourcesSocket);
  }
  return {};
}

void FakeKubelet::Impl::stopServers() {
  if (registrationServer) registrationServer->Shutdown(deadlineIn(std::chrono::milliseconds(200)));
  if (podResourcesServer) podResourcesServer->Shutdown(deadlineIn(std::chrono::milliseconds(200)));
  registrationServer.reset();
  podResourcesServer.reset();
}

void FakeKubelet::Impl::dropPlugins() {
  std::map<std::string, std::shared_ptr<Plugin>> old;
  {
    std::lock_guard lock(mu);
    old.swap(plugins);
  }
  for (auto& [r, p] : old) p->streamContext.TryCancel();
  for (auto& [r, p] : old)
    if (p->reader.joinable()) p->reader.join();
  std::lock_guard lock(mu);
  for (auto& [r, list] : devices)
    for (auto& d : list) d.healthy = false;
}

FakeKubelet::FakeKubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeKubelet::~FakeKubelet() { stop(); }

Result<std::unique_ptr<FakeKubelet>> FakeKubelet::start(FakeKubeletOptions options) {
  if (options.devicePluginDir.empty()) return makeError("fake kubelet: no device plugin directory");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (auto s = impl->startServers(); !s.ok()) return s.error();
  return std::unique_ptr<FakeKubelet>(new FakeKubelet(std::move(impl)));
}

void FakeKubelet::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->stopServers();
  impl_->dropPlugins();
}

bool FakeKubelet::waitForDevices(const std::string& resource, std::chrono::milliseconds timeout,
                                 const std::function<bool(const std::vector<KubeletDevice>&)>& pred) {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] {
    if (!impl_->plugins.contains(resource) || !impl_->lists[resource]) return false;
    return !pred || pred(impl_->devices[resource]);
  });
}

std::vector<KubeletDevice> FakeKubelet::devices(const std::string& resource) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->devices.find(resource);
  return it == impl_->devices.end() ? std::vector<KubeletDevice>{} : it->second;
}

std::vector<PluginRegistration> FakeKubelet::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registrations;
}

std::size_t FakeKubelet::listsReceived(const std::string& resource) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->lists.find(resource);
  return it == impl_->lists.end() ? 0 : it->second;
}

AdmitResult FakeKubelet::admit(const KubeletPod& given) {
  std::lock_guard admitLock(impl_->admitMu);
  // The kubelet's order: init containers first, each group in the order given.
  KubeletPod pod = given;
  std::stable_partition(pod.containers.begin(), pod.containers.end(), [](const auto& c) { return c.init; });
  AdmitResult result;
  auto reject = [&](std::string why) {
    std::lock_guard lock(impl_->mu);
    impl_->allocated.erase(pod.uid);
    impl_->answers.erase(pod.uid);
    impl_->active.erase(pod.uid);
    result.admitted = false;
    result.error = std::move(why);
    result.allocations.clear();
    return result;
  };
  {
    // A pod admitted in parts (a test stopping between containers) keeps the containers
    // of the earlier parts.
    std::lock_guard lock(impl_->mu);
    auto [it, added] = impl_->active.emplace(pod.uid, pod);
    if (!added)
      for (const auto& c : pod.containers)
        if (std::none_of(it->second.containers.begin(), it->second.containers.end(),
                         [&](const KubeletContainer& k) { return k.name == c.name; }))
          it->second.containers.push_back(c);
  }
  // devicesToReuse: what the pod's init containers got, for the containers after them.
  std::map<std::string, std::set<std::string>> reusable;
  for (const auto& container : pod.containers) {
    for (const auto& [resource, count] : container.limits) {
      if (count <= 0) continue;
      std::shared_ptr<Impl::Plugin> plugin;
      std::vector<std::string> available;
      std::optional<ContainerAllocation> recorded;
      {
        std::lock_guard lock(impl_->mu);
        auto it = impl_->plugins.find(resource);
        // Extended resources no plugin advertises are dropped before the fit check.
        if (it == impl_->plugins.end()) continue;
        plugin = it->second;
        if (auto a = impl_->answers.find(pod.uid); a != impl_->answers.end())
          if (auto c = a->second.find(container.name); c != a->second.end())
            if (auto r = c->second.find(resource); r != c->second.end()) recorded = r->second;
        std::set<std::string> used;
        for (const auto& [uid, cs] : impl_->allocated)
          for (const auto& [c, rs] : cs)
            if (auto r = rs.find(resource); r != rs.end()) used.insert(r->second.begin(), r->second.end());
        for (const auto& d : impl_->devices[resource])
          if (d.healthy && !used.contains(d.id)) available.push_back(d.id);
      }
      std::vector<std::string> ids;
      if (recorded) {
        // Recorded already (the checkpoint): no Allocate, the recorded answer is used.
        recorded->allocateCalled = false;
        recorded->allocateTime = {};
        ids = recorded->deviceIds;
        result.allocations.push_back(*recorded);
      } else {
        std::sort(available.begin(), available.end());
        const auto needed = static_cast<std::size_t>(count);
        for (const auto& id : reusable[resource])
          if (ids.size() < needed) ids.push_back(id);
        const std::vector<std::string> reused = ids;
        if (ids.size() < needed) {
          const std::size_t more = needed - ids.size();
          if (available.size() < more)
            return reject("Allocate failed due to requested number of devices unavailable for " + resource +
                          ". Requested: " + std::to_string(more) + ", Available: " + std::to_string(available.size()));
          if (available.size() == more && reused.empty()) {
            ids = available;
          } else {
            if (plugin->reg.preferredAllocationAvailable && !impl_->options.ignorePreferred) {
              v1beta1::PreferredAllocationRequest preq;
              auto* cr = preq.add_container_requests();
              for (const auto& id : reused) cr->add_available_deviceids(id);
              for (const auto& id : available) cr->add_available_deviceids(id);
              for (const auto& id : reused) cr->add_must_include_deviceids(id);
              cr->set_allocation_size(static_cast<std::int32_t>(count));
              v1beta1::PreferredAllocationResponse presp;
              grpc::ClientContext ctx;
              ctx.set_deadline(deadlineIn(std::chrono::seconds(10)));
              // Only a hint: kept where it names available devices, the gap filled in order.
              if (plugin->stub->GetPreferredAllocation(&ctx, preq, &presp).ok() && presp.container_responses_size() > 0)
                for (const auto& id : presp.container_responses(0).deviceids())
                  if (ids.size() < needed && std::binary_search(available.begin(), available.end(), id) &&
                      std::find(ids.begin(), ids.end(), id) == ids.end())
                    ids.push_back(id);
            }
            for (const auto& id : available) {
              if (ids.size() == needed) break;
              if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
            }
          }
        }
        v1beta1::AllocateRequest areq;
        auto* car = areq.add_container_requests();
        for (const auto& id : ids) car->add_devices_ids(id);
        v1beta1::AllocateResponse aresp;
        grpc::ClientContext actx;
        const auto t0 = std::chrono::steady_clock::now();
        const grpc::Status allocated = plugin->stub->Allocate(&actx, areq, &aresp);
        const auto took =
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
        if (!allocated.ok()) return reject("Allocate failed due to " + allocated.error_message() + ", which is unexpected");
        if (aresp.container_responses_size() < 1) return reject("Allocate returned no container response");
        const auto& r = aresp.container_responses(0);
        ContainerAllocation alloc;
        alloc.container = container.name;
        alloc.resource = resource;
        alloc.deviceIds = ids;
        alloc.allocateCalled = true;
        alloc.allocateTime = took;
        for (const auto& [k, v] : r.envs()) alloc.response.env[k] = v;
        for (const auto& [k, v] : r.annotations()) alloc.response.annotations[k] = v;
        for (const auto& d : r.cdi_devices()) alloc.cdiDevices.push_back(d.name());
        for (const auto& m : r.mounts())
          alloc.response.mounts.push_back({m.host_path(), m.container_path(), m.read_only()});
        for (const auto& d : r.devices())
          alloc.response.devices.push_back({d.host_path(), d.container_path(), d.permissions()});
        {
          std::lock_guard lock(impl_->mu);
          impl_->allocated[pod.uid][container.name][resource] = ids;
          impl_->answers[pod.uid][container.name][resource] = alloc;
        }
        result.allocations.push_back(std::move(alloc));
      }
      if (plugin->reg.preStartRequired) {
        v1beta1::PreStartContainerRequest sreq;
        for (const auto& id : ids) sreq.add_devices_ids(id);
        v1beta1::PreStartContainerResponse sresp;
        grpc::ClientContext sctx;
        sctx.set_deadline(deadlineIn(std::chrono::seconds(30)));
        if (auto s = plugin->stub->PreStartContainer(&sctx, sreq, &sresp); !s.ok())
          return reject("PreStartContainer failed: " + s.error_message());
      }
      // An init container's devices go to the containers after it; a sidecar keeps its own,
      // and so does an app container (taken out of what the next ones may reuse).
      if (container.init && !container.restartAlways) reusable[resource].insert(ids.begin(), ids.end());
      else
        for (const auto& id : ids) reusable[resource].erase(id);
    }
  }
  result.admitted = true;
  return result;
}

void FakeKubelet::setPodResourcesAnswering(bool on) {
  std::lock_guard lock(impl_->mu);
  impl_->podResourcesAnswering = on;
}

void FakeKubelet::removePod(const std::string& uid) {
  std::lock_guard lock(impl_->mu);
  impl_->allocated.erase(uid);
  impl_->answers.erase(uid);
  impl_->active.erase(uid);
}

std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>>
FakeKubelet::allocations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->allocated;
}

Status FakeKubelet::restart(bool checkpointLost) {
  impl_->stopServers();
  impl_->dropPlugins();
  if (checkpointLost) {
    // The pods are still the kubelet's (from the apiserver); what they hold is forgotten.
    std::lock_guard lock(impl_->mu);
    impl_->allocated.clear();
    impl_->answers.clear();
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(impl_->options.devicePluginDir, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) fs::remove(entry.path(), ec);
  }
  return impl_->startServers();
}

}  // namespace vgpu::fakes
