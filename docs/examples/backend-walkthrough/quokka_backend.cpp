// The walk-through backend of docs/writing-a-backend.md: Quokka NPUs, shared between
// containers by a memory limit the Quokka runtime enforces from an environment variable.
#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "quokka_api.h"
#include "vgpu/sdk/backend_adapter.h"
#include "vgpu/sdk/standard_rules.h"

namespace quokka {

// Step 1: options, resource names and the standard request rules.
class QuokkaBackend {
 public:
  static vgpu::Result<std::unique_ptr<QuokkaBackend>> create(const vgpu::BackendParams& params) {
    std::string library = "libquokka.so.1", devRoot = "/dev";
    for (const auto& [key, value] : params.settings.options) {
      if (key == "libraryPath") library = value;
      else if (key == "devRoot") devRoot = value;
      else return vgpu::makeError("backends." + params.name + ".options." + key +
                                  ": unknown option (the quokka backend knows libraryPath, devRoot)");
    }
    // The standard rules read neither scaling setting: a backend applies them or refuses them.
    if (params.settings.memoryScaling.value_or(1.0) != 1.0 || params.settings.coreScaling.value_or(1.0) != 1.0)
      return vgpu::makeError("backends." + params.name + ": memoryScaling and coreScaling must be 1 (the quokka "
                             "runtime's memory limit is a hard one and its cores are not time-shared)");
    vgpu::sdk::StandardRequestRules rules;
    rules.backend = params.name;
    rules.names = vgpu::sdk::StandardResourceNames::resolve(
        {"quokka.example/npu", "quokka.example/npu-memory", "", "quokka.example/npu-cores", ""}, params.resources);
    rules = rules.withSettings(params.settings);
    return std::unique_ptr<QuokkaBackend>(new QuokkaBackend(params, std::move(rules), library, devRoot));
  }
  ~QuokkaBackend() {
    if (handle_) dlclose(handle_);
  }

  // Step 2: the allocator, on the scheduler: vgpu's standard rules do it all.
  const std::vector<vgpu::ResourceName>& resources() const { return resources_; }
  vgpu::Result<std::optional<vgpu::DeviceRequest>> parseRequest(const vgpu::ContainerResources& container,
                                                                const vgpu::Annotations& annotations) const {
    return vgpu::sdk::parseStandardRequest(rules_, container, annotations);
  }
  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const {
    vgpu::sdk::standardFit(request, device, usage, result);
  }

  // Step 3: discovery, on the node. The library is opened here, not in create, so a
  // driver installed after the agent started is found on the next try.
  vgpu::Result<std::vector<vgpu::Device>> discover() {
    std::lock_guard lock(mutex_);
    if (auto opened = open(); !opened.ok()) return opened.error();
    int count = 0;
    if (const int rc = count_(&count); rc != 0)
      return vgpu::makeError("quokka: quokka_device_count failed (" + std::to_string(rc) + ")");
    std::vector<vgpu::Device> devices;
    for (int i = 0; i < count; ++i) {
      quokka_device_info info{};
      if (const int rc = info_(i, &info); rc != 0)
        return vgpu::makeError("quokka: quokka_device_info_get(" + std::to_string(i) + ") failed (" + std::to_string(rc) + ")");
      vgpu::Device d;
      d.id = info.uuid;
      d.index = i;
      d.backend = params_.name;
      d.model = info.model;
      d.memoryMiB = info.memory_mib;
      d.splitCount = params_.settings.splitCount.value_or(4);
      d.numaNode = info.numa_node;
      d.health = info.healthy ? vgpu::Health::kHealthy : vgpu::Health::kUnhealthy;
      devices.push_back(std::move(d));
    }
    return devices;
  }

  // Health changes since the last look. A real driver would block on its event API.
  vgpu::Result<std::vector<vgpu::HealthEvent>> waitForHealthEvents(std::chrono::milliseconds) {
    auto now = discover();
    if (!now.ok()) return now.error();
    std::lock_guard lock(mutex_);
    std::vector<vgpu::HealthEvent> events;
    for (const auto& d : *now)
      if (d.health != vgpu::Health::kHealthy) events.push_back({d.id, d.health, "quokka: the device stopped answering"});
    return events;
  }

  // Step 4: the limiter, on the node: the device node and the runtime's memory limit.
  vgpu::Result<vgpu::ContainerSpec> containerSpec(const vgpu::ContainerGrant& grant) {
    vgpu::ContainerSpec spec;
    std::string visible;
    for (const auto& d : grant.devices) {
      spec.devices.push_back({devRoot_ + "/quokka" + std::to_string(d.deviceIndex),
                              "/dev/quokka" + std::to_string(d.deviceIndex), "rw"});
      visible += (visible.empty() ? "" : ",") + d.deviceId;
      spec.env["QUOKKA_MEMORY_LIMIT_MIB_" + std::to_string(d.deviceIndex)] = std::to_string(d.memoryMiB);
    }
    spec.env["QUOKKA_VISIBLE_DEVICES"] = visible;
    return spec;
  }
  // Nothing is held per container: the limit lives in the container's environment.
  vgpu::Status release(const vgpu::ContainerRef&) { return {}; }
  vgpu::Status reconcile(const std::vector<vgpu::ContainerRef>&) { return {}; }

  // Step 5: what a pod may not set itself (the admission webhook refuses it).
  std::vector<vgpu::ProtectedEnv> protectedEnv() const {
    return {{"QUOKKA_VISIBLE_DEVICES", vgpu::ProtectedEnv::Scope::kEveryContainer},
            {"QUOKKA_MEMORY_LIMIT_MIB_*", vgpu::ProtectedEnv::Scope::kBackendContainers}};
  }

 private:
  QuokkaBackend(vgpu::BackendParams params, vgpu::sdk::StandardRequestRules rules, std::string library,
                std::string devRoot)
      : params_(std::move(params)), rules_(std::move(rules)), resources_(rules_.names.list()),
        library_(std::move(library)), devRoot_(std::move(devRoot)) {}

  vgpu::Status open() {
    if (handle_) return {};
    handle_ = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      return vgpu::makeError("quokka: cannot load " + library_ + " (" + (why ? why : "?") +
                             "); is the Quokka driver installed, or is options.libraryPath wrong?");
    }
    count_ = reinterpret_cast<quokka_device_count_fn>(dlsym(handle_, "quokka_device_count"));
    info_ = reinterpret_cast<quokka_device_info_fn>(dlsym(handle_, "quokka_device_info_get"));
    if (!count_ || !info_) {
      dlclose(handle_);
      handle_ = nullptr;
      return vgpu::makeError("quokka: " + library_ + " lacks quokka_device_count or quokka_device_info_get");
    }
    return {};
  }

  vgpu::BackendParams params_;
  vgpu::sdk::StandardRequestRules rules_;
  std::vector<vgpu::ResourceName> resources_;
  std::string library_, devRoot_;
  std::mutex mutex_;
  void* handle_ = nullptr;
  quokka_device_count_fn count_ = nullptr;
  quokka_device_info_fn info_ = nullptr;
};

}  // namespace quokka

// Step 6: the one exported symbol.
VGPU_DEFINE_BACKEND(quokka::QuokkaBackend, "quokka", "Quokka NPUs (the docs' walk-through)")
