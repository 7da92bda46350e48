#include "vgpu/backend_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <mutex>

#include "vgpu/c_views.h"

namespace vgpu {
namespace {

std::string versionText(uint32_t v) {
  return std::to_string(VGPU_ABI_MAJOR_OF(v)) + "." + std::to_string(VGPU_ABI_MINOR_OF(v));
}

/// An error buffer on the stack for one backend call.
class ErrorText {
 public:
  vgpu_error_buf* buf() {
    text_[0] = '\0';
    buf_ = {text_.data(), text_.size()};
    return &buf_;
  }
  std::string str(const char* fallback) const { return text_[0] ? std::string(text_.data()) : fallback; }

 private:
  std::array<char, 1024> text_{};
  vgpu_error_buf buf_{};
};

struct DlCloser {
  void operator()(void* handle) const {
    if (handle) dlclose(handle);
  }
};
using LibraryHandle = std::unique_ptr<void, DlCloser>;

/// A backend living in a shared library, seen through the C++ interfaces.
class LoadedBackend final : public Backend, public Allocator, public Discovery, public Limiter, public UsageReporter,
                           public ProcessReporter, public CgroupMemoryReporter {
 public:
  LoadedBackend(LibraryHandle library, const vgpu_backend_table& table, vgpu_backend* instance, std::string name)
      : library_(std::move(library)), table_(table), instance_(instance), name_(std::move(name)) {
    table_.resources(instance_, [](void* ctx, const vgpu_resource* r) {
      static_cast<std::vector<ResourceName>*>(ctx)->push_back(
          {r->name ? r->name : "", static_cast<vgpu_resource_role>(r->role), r->advertised != 0});
    }, &resources_);
    if (has(&vgpu_backend_table::protected_env))
      table_.protected_env(instance_, [](void* ctx, const char* pattern, uint32_t scope) {
        if (pattern == nullptr || *pattern == '\0') return;
        static_cast<std::vector<ProtectedEnv>*>(ctx)->push_back(
            {pattern, scope == VGPU_ENV_SCOPE_EVERY_CONTAINER ? ProtectedEnv::Scope::kEveryContainer
                                                              : ProtectedEnv::Scope::kBackendContainers});
      }, &protectedEnv_);
    if (has(&vgpu_backend_table::fit_reads)) {
      const uint32_t reads = table_.fit_reads(instance_);
      // A field this core does not know may be one fit reads: judge every device then.
      fitReads_ = (reads & ~VGPU_FIT_READS_ALL) != 0 ? VGPU_FIT_READS_ALL : reads;
    }
  }
  ~LoadedBackend() override {
    table_.destroy(instance_);
  }

  // Backend
  const std::string& name() const override { return name_; }
  const Allocator& allocator() const override { return *this; }
  Discovery* discovery() override { return has(&vgpu_backend_table::discover) && table_.wait_health ? this : nullptr; }
  Limiter* limiter() override {
    return has(&vgpu_backend_table::container_spec) && table_.release && table_.reconcile ? this : nullptr;
  }
  UsageReporter* usageReporter() override { return has(&vgpu_backend_table::container_usage) ? this : nullptr; }
  ProcessReporter* processReporter() override { return has(&vgpu_backend_table::device_processes) ? this : nullptr; }
  CgroupMemoryReporter* cgroupMemoryReporter() override {
    return has(&vgpu_backend_table::cgroup_memory_used) ? this : nullptr;
  }

  // Allocator
  const std::vector<ResourceName>& resources() const override { return resources_; }
  const std::vector<ProtectedEnv>& protectedEnv() const override { return protectedEnv_; }
  std::uint32_t fitReads() const override { return fitReads_; }
  std::optional<std::uint32_t> splitCountFor(const std::string& model) const override {
    if (!has(&vgpu_backend_table::split_count)) return std::nullopt;
    const uint32_t n = table_.split_count(instance_, model.c_str());
    return n == 0 ? std::nullopt : std::optional<std::uint32_t>(n);
  }

  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                    const Annotations& annotations) const override {
    ContainerInput input(container);
    AnnotationList list(annotations);
    std::optional<DeviceRequest> out;
    struct Ctx { std::optional<DeviceRequest>* out; const std::string* backend; } ctx{&out, &name_};
    ErrorText err;
    const vgpu_status s = table_.parse_request(instance_, &input.c, &list.c, [](void* p, const vgpu_device_request* r) {
      auto* c = static_cast<Ctx*>(p);
      *c->out = requestFromC(*r, *c->backend);
    }, &ctx, err.buf());
    if (s != VGPU_OK) return makeError(err.str("request refused"));
    return out;
  }

  void fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
           vgpu_fit_result& result) const override {
    table_.fit(instance_, &request, &device, &usage, &result);
  }

  bool placesGrants(const vgpu_device& device) const override {
    // Both slots or neither (backend_abi.h); a backend with only one places nothing.
    return has(&vgpu_backend_table::places) && table_.fit_placed && table_.places(instance_, &device) != 0;
  }

  void fitPlaced(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                 vgpu_placement& placement, vgpu_fit_result& result) const override {
    table_.fit_placed(instance_, &request, &device, &usage, &placement, &result);
  }

  std::string explain(const vgpu_fit_result& result) const override {
    if (result.reason < VGPU_REASON_BACKEND || !has(&vgpu_backend_table::explain)) {
      std::string text = explainCoreReason(result);
      return text.empty() ? "refused by backend " + name_ + " (reason " + std::to_string(result.reason) + ")" : text;
    }
    std::array<char, 512> buf{};
    table_.explain(instance_, &result, buf.data(), buf.size());
    return buf[0] ? std::string(buf.data()) : "refused by backend " + name_ + " (reason " + std::to_string(result.reason) + ")";
  }

  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& container,
                                                                const Annotations& annotations) const override {
    std::map<std::string, std::int64_t> out;
    if (!has(&vgpu_backend_table::admission_defaults)) return out;
    ContainerInput input(container);
    AnnotationList list(annotations);
    ErrorText err;
    const vgpu_status s = table_.admission_defaults(instance_, &input.c, &list.c, [](void* p, const char* k, int64_t v) {
      (*static_cast<std::map<std::string, std::int64_t>*>(p))[k ? k : ""] = v;
    }, &out, err.buf());
    if (s != VGPU_OK) return makeError(err.str("admission defaults refused"));
    return out;
  }

  // Discovery
  Result<std::vector<Device>> discover() override {
    std::vector<Device> out;
    struct Ctx { std::vector<Device>* out; const std::string* backend; } ctx{&out, &name_};
    ErrorText err;
    const vgpu_status s = table_.discover(instance_, [](void* p, const vgpu_device* d) {
      auto* c = static_cast<Ctx*>(p);
      c->out->push_back(deviceFromC(*d, *c->backend));
    }, &ctx, err.buf());
    if (s != VGPU_OK) return makeError(err.str("discovery failed"));
    return out;
  }

  Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout) override {
    std::vector<HealthEvent> out;
    ErrorText err;
    const vgpu_status s = table_.wait_health(instance_, static_cast<uint32_t>(timeout.count()),
        [](void* p, const char* id, uint32_t health, const char* reason) {
          static_cast<std::vector<HealthEvent>*>(p)->push_back(
              {id ? id : "", health == VGPU_HEALTHY ? Health::kHealthy
                             : health == VGPU_UNHEALTHY ? Health::kUnhealthy : Health::kUnknown,
               reason ? reason : ""});
        }, &out, err.buf());
    if (s != VGPU_OK) return makeError(err.str("health check failed"));
    return out;
  }

  // Limiter
  Result<ContainerSpec> containerSpec(const ContainerGrant& grant) override {
    std::vector<vgpu_grant> devices;
    for (const auto& d : grant.devices)
      devices.push_back(
          {d.deviceId.c_str(), d.deviceIndex, d.memoryMiB, d.compute, d.slot, d.priority, d.placement.c_str()});
    AnnotationList annotations(grant.podAnnotations);
    vgpu_container_grant c{};
    c.struct_size = sizeof(c);
    c.holder = grant.container.holder.c_str();
    c.pod_namespace = grant.podNamespace.c_str();
    c.pod_name = grant.podName.c_str();
    c.container_name = grant.container.containerName.c_str();
    c.container_index = grant.containerIndex;
    c.devices = devices.data();
    c.device_count = devices.size();
    c.host_dir = grant.hostDir.c_str();
    c.pod_annotations = annotations.c;
    c.grant_size = sizeof(vgpu_grant);
    c.pod_uid = grant.podUid.c_str();
    ContainerSpec spec;
    vgpu_spec_sink sink{};
    sink.ctx = &spec;
    sink.env = [](void* p, const char* k, const char* v) { static_cast<ContainerSpec*>(p)->env[k] = v; };
    sink.mount = [](void* p, const char* h, const char* c, uint32_t ro) {
      static_cast<ContainerSpec*>(p)->mounts.push_back({h, c, ro != 0});
    };
    sink.device = [](void* p, const char* h, const char* c, const char* perms) {
      static_cast<ContainerSpec*>(p)->devices.push_back({h, c, perms ? perms : "rw"});
    };
    sink.annotation = [](void* p, const char* k, const char* v) { static_cast<ContainerSpec*>(p)->annotations[k] = v; };
    sink.pod_annotation = [](void* p, const char* k, const char* v) {
      static_cast<ContainerSpec*>(p)->podAnnotations[k] = v;
    };
    sink.notice = [](void* p, const char* reason, const char* message) {
      static_cast<ContainerSpec*>(p)->notices.push_back({reason ? reason : "", message ? message : ""});
    };
    sink.region = [](void* p, const char* path, uint64_t inode) {
      static_cast<ContainerSpec*>(p)->region = RegionFile{path ? path : "", inode};
    };
    sink.hook = [](void* p, const char* name, const char* path, const char* const* args, size_t argCount,
                   const char* const* env, size_t envCount) {
      OciHook h{name ? name : "", path ? path : "", {}, {}};
      for (size_t i = 0; i < argCount; ++i) h.args.emplace_back(args[i] ? args[i] : "");
      for (size_t i = 0; i < envCount; ++i) h.env.emplace_back(env[i] ? env[i] : "");
      static_cast<ContainerSpec*>(p)->hooks.push_back(std::move(h));
    };
    ErrorText err;
    if (table_.container_spec(instance_, &c, &sink, err.buf()) != VGPU_OK) return makeError(err.str("container spec refused"));
    return spec;
  }

  Status release(const ContainerRef& container) override {
    const vgpu_container_ref ref{container.holder.c_str(), container.containerName.c_str()};
    ErrorText err;
    if (table_.release(instance_, &ref, err.buf()) != VGPU_OK) return makeError(err.str("release failed"));
    return {};
  }

  Status reconcile(const std::vector<ContainerRef>& live) override {
    std::vector<vgpu_container_ref> refs;
    for (const auto& r : live) refs.push_back({r.holder.c_str(), r.containerName.c_str()});
    ErrorText err;
    if (table_.reconcile(instance_, refs.data(), refs.size(), err.buf()) != VGPU_OK)
      return makeError(err.str("reconcile failed"));
    return {};
  }

  // UsageReporter
  Result<std::vector<ContainerUsage>> containerUsage() override {
    std::vector<ContainerUsage> out;
    ErrorText err;
    const vgpu_status s = table_.container_usage(instance_, [](void* p, const vgpu_container_usage* u) {
      // A newer backend's record may be longer; an older one cannot be shorter than 1.1's.
      if (u == nullptr || u->struct_size < sizeof(vgpu_container_usage)) return;
      ContainerUsage c;
      c.container = {u->holder ? u->holder : "", u->container_name ? u->container_name : ""};
      c.deviceId = u->device_id ? u->device_id : "";
      c.deviceIndex = u->device_index;
      c.memoryLimitBytes = u->memory_limit_bytes;
      if (u->memory_used_bytes >= 0) c.memoryUsedBytes = static_cast<std::uint64_t>(u->memory_used_bytes);
      c.computeLimitPercent = u->compute_limit_percent;
      if (u->utilization_percent >= 0) c.utilizationPercent = static_cast<std::uint32_t>(u->utilization_percent);
      static_cast<std::vector<ContainerUsage>*>(p)->push_back(std::move(c));
    }, &out, err.buf());
    if (s != VGPU_OK) return makeError(err.str("usage query failed"));
    return out;
  }

  // ProcessReporter
  Result<std::vector<DeviceProcess>> deviceProcesses() override {
    std::vector<DeviceProcess> out;
    ErrorText err;
    const vgpu_status s = table_.device_processes(instance_, [](void* p, const vgpu_device_process* d) {
      if (d == nullptr || d->struct_size < sizeof(vgpu_device_process)) return;
      DeviceProcess c;
      c.pid = d->pid;
      c.deviceId = d->device_id ? d->device_id : "";
      c.deviceIndex = d->device_index;
      if (d->memory_used_bytes >= 0) c.memoryUsedBytes = static_cast<std::uint64_t>(d->memory_used_bytes);
      if (d->utilization_percent >= 0) c.utilizationPercent = static_cast<std::uint32_t>(d->utilization_percent);
      static_cast<std::vector<DeviceProcess>*>(p)->push_back(std::move(c));
    }, &out, err.buf());
    if (s != VGPU_OK) return makeError(err.str("process query failed"));
    return out;
  }

  // CgroupMemoryReporter
  Result<std::optional<std::uint64_t>> cgroupMemoryUsed(const std::string& procCgroup,
                                                       const std::string& deviceId) override {
    std::uint64_t used = 0;
    int known = 0;
    ErrorText err;
    const vgpu_status s =
        table_.cgroup_memory_used(instance_, procCgroup.c_str(), deviceId.c_str(), &used, &known, err.buf());
    if (s != VGPU_OK) return makeError(err.str("cgroup memory query failed"));
    if (known == 0) return std::optional<std::uint64_t>{};
    return std::optional<std::uint64_t>{used};
  }

 private:
  /// Whether the backend filled an optional slot. Slots past the backend's table size stay
  /// null: the loader zeroes the table before the entry function fills its prefix.
  template <class F>
  bool has(F vgpu_backend_table::*slot) const {
    return table_.*slot != nullptr;
  }

  struct ContainerInput {
    explicit ContainerInput(const ContainerResources& r) {
      for (const auto& [k, v] : r.limits) limits.push_back({k.c_str(), v});
      c.struct_size = sizeof(c);
      c.name = r.name.c_str();
      c.init = r.init ? 1 : 0;
      c.limits = limits.data();
      c.limit_count = limits.size();
    }
    std::vector<vgpu_resource_amount> limits;
    vgpu_container_input c{};
  };
  struct AnnotationList {
    explicit AnnotationList(const Annotations& a) {
      for (const auto& [k, v] : a) items.push_back({k.c_str(), v.c_str()});
      c = {items.data(), items.size()};
    }
    std::vector<vgpu_kv> items;
    vgpu_kv_list c{};
  };

  LibraryHandle library_;  // declared first: closed last, after destroy()
  vgpu_backend_table table_;
  vgpu_backend* instance_;
  std::string name_;
  std::vector<ResourceName> resources_;
  std::vector<ProtectedEnv> protectedEnv_;
  std::uint32_t fitReads_ = VGPU_FIT_READS_ALL;
};

constexpr size_t kRequiredTableSize = offsetof(vgpu_backend_table, fit) + sizeof(vgpu_backend_table::fit);

}  // namespace

Status BackendSet::add(std::unique_ptr<Backend> backend) {
  if (find(backend->name()))
    return makeError("backend \"" + backend->name() + "\" is already loaded; each backend may be loaded once");
  for (const auto& r : backend->allocator().resources()) {
    if (const Backend* owner = ownerOf(r.name))
      return makeError("backend \"" + backend->name() + "\" claims resource " + r.name + ", which backend \"" +
                       owner->name() + "\" already owns; rename it in one of their `resources` sections");
  }
  backends_.push_back(std::move(backend));
  return {};
}

Backend* BackendSet::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

Backend* BackendSet::ownerOf(std::string_view resource) const {
  for (const auto& b : backends_)
    for (const auto& r : b->allocator().resources())
      if (r.name == resource) return b.get();
  return nullptr;
}

std::filesystem::path backendLibraryPath(const std::filesystem::path& dir, std::string_view name) {
  return dir / ("libvgpu-backend-" + std::string(name) + ".so");
}

std::filesystem::path defaultBackendDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "/usr/local/lib/vgpu/backends";
  return (exe.parent_path() / ".." / "lib" / "vgpu" / "backends").lexically_normal();
}

Result<std::unique_ptr<Backend>> loadBackend(const std::filesystem::path& library, const BackendParams& params) {
  const std::string where = "backend \"" + params.name + "\" (" + library.string() + ")";
  std::error_code ec;
  if (!std::filesystem::exists(library, ec))
    return makeError(where + ": no such file; is the backend installed in this directory, or is --backend-dir wrong?");

  LibraryHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* why = dlerror();
    return makeError(where + ": cannot be loaded: " + (why ? why : "unknown dlopen error"));
  }
  auto entry = reinterpret_cast<vgpu_backend_entry_fn>(dlsym(handle.get(), VGPU_BACKEND_ENTRY_NAME));
  if (entry == nullptr)
    return makeError(where + ": does not export " VGPU_BACKEND_ENTRY_NAME "; it is not a vgpu backend");

  vgpu_backend_table table{};
  table.struct_size = sizeof(table);
  if (entry(VGPU_BACKEND_ABI_VERSION, &table) != 0)
    return makeError(where + ": refuses to work with this vgpu (backend ABI " + versionText(VGPU_BACKEND_ABI_VERSION) +
                     "); install a backend built for it");
  if (VGPU_ABI_MAJOR_OF(table.abi_version) != VGPU_BACKEND_ABI_MAJOR)
    return makeError(where + ": built for backend ABI " + versionText(table.abi_version) + ", this vgpu speaks " +
                     versionText(VGPU_BACKEND_ABI_VERSION) + "; the major versions must match");
  if (table.struct_size < kRequiredTableSize || table.struct_size > sizeof(table))
    return makeError(where + ": its function table has an impossible size (" + std::to_string(table.struct_size) + ")");
  const std::pair<const char*, const void*> required[] = {
      {"create", reinterpret_cast<const void*>(table.create)},
      {"destroy", reinterpret_cast<const void*>(table.destroy)},
      {"resources", reinterpret_cast<const void*>(table.resources)},
      {"parse_request", reinterpret_cast<const void*>(table.parse_request)},
      {"fit", reinterpret_cast<const void*>(table.fit)}};
  for (const auto& [slot, pointer] : required)
    if (pointer == nullptr) return makeError(where + ": does not provide the required function \"" + std::string(slot) + "\"");
  const std::string tableName = table.name ? table.name : "";
  if (tableName != params.name)
    return makeError(where + ": the library says it is backend \"" + tableName + "\", not \"" + params.name + "\"");

  const BackendConfigView config(params);
  vgpu_backend* instance = nullptr;
  ErrorText err;
  if (table.create(&config.c(), &instance, err.buf()) != VGPU_OK || instance == nullptr)
    return makeError(where + ": " + err.str("failed to start"));
  return std::unique_ptr<Backend>(new LoadedBackend(std::move(handle), table, instance, params.name));
}

BackendParams backendParams(const DeviceConfig& config, const BackendConfig& section, const std::string& nodeName) {
  BackendParams p;
  p.name = section.name;
  p.nodeName = nodeName;
  p.resources = section.resources;
  p.settings = config.settingsFor(section.name, nodeName);
  return p;
}

BackendLoadOutcome loadEnabledBackends(const DeviceConfig& config, const std::filesystem::path& dir,
                                       const std::string& nodeName) {
  return loadEnabledBackends(config, std::vector<std::filesystem::path>{dir}, nodeName);
}

BackendLoadOutcome loadEnabledBackends(const DeviceConfig& config, const std::vector<std::filesystem::path>& dirs,
                                       const std::string& nodeName) {
  BackendLoadOutcome out;
  for (const BackendConfig* section : config.enabledBackends()) {
    std::filesystem::path library;
    for (const auto& dir : dirs) {
      std::error_code ec;
      if (std::filesystem::exists(backendLibraryPath(dir, section->name), ec)) {
        library = backendLibraryPath(dir, section->name);
        break;
      }
    }
    if (library.empty() && !dirs.empty()) library = backendLibraryPath(dirs.front(), section->name);
    auto loaded = loadBackend(library, backendParams(config, *section, nodeName));
    if (!loaded.ok() && dirs.size() > 1 && !std::filesystem::exists(library)) {
      std::string others;
      for (size_t i = 1; i < dirs.size(); ++i) others += (i == 1 ? "" : ", ") + dirs[i].string();
      loaded = makeError(loaded.error().message + " (nor in " + others + ")");
    }
    if (!loaded.ok()) {
      out.failures.push_back(std::move(loaded).error());
      continue;
    }
    if (auto added = out.backends.add(std::move(loaded).value()); !added.ok()) out.failures.push_back(added.error());
  }
  return out;
}

}  // namespace vgpu
