#include "nvidia_backend.h"

#include "vgpu/limiter_contract.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace vgpu::nvidia {
namespace {

constexpr const char* kKnownOptions =
    "discovery, nvmlLibrary, nvidiaSmiPath, nvidiaSmiTimeout, hostSysRoot, memoryEnforcement, libvgpuPath, "
    "libvgpuContainerPath, ldPreloadPath, corePolicy, logLevel, allowOptOut, cdiKind, cdiHookPath, driverSoftLimit, "
    "activityBoardPath, "
    "contextOverheadMiB, migStrategy, migProfiles, migManaged, migAllowedProfiles, migStateDir";

std::optional<std::chrono::milliseconds> parseDuration(std::string_view text) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data() || v > 3600000) return std::nullopt;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  if (unit == "ms") return std::chrono::milliseconds(v);
  if (unit == "s") return std::chrono::milliseconds(v * 1000);
  return std::nullopt;
}

}  // namespace

Result<NvidiaOptions> parseOptions(const BackendParams& params, const char* disableHealthChecks,
                                   const char* enableHealthChecks) {
  NvidiaOptions o;
  const std::string name = params.name.empty() ? "nvidia" : params.name;
  const std::string section = "backends." + name;
  o.discovery.backend = o.limiter.backend = name;
  const auto& s = params.settings;
  if (s.memoryScaling && !(*s.memoryScaling > 0))
    return makeError(section + ".memoryScaling must be greater than 0");
  if (s.coreScaling && !(*s.coreScaling > 0)) return makeError(section + ".coreScaling must be greater than 0");
  if (s.splitCount && *s.splitCount == 0) return makeError(section + ".splitCount must be at least 1");
  o.discovery.splitCount = s.splitCount.value_or(10);
  o.discovery.memoryScaling = o.limiter.memoryScaling = s.memoryScaling.value_or(1.0);
  o.discovery.coreScaling = s.coreScaling.value_or(1.0);

  for (const auto& [key, value] : s.options) {
    const std::string at = section + ".options." + key;
    auto bad = [&](const std::string& expected) {
      return makeError(at + ": expected " + expected + ", got \"" + value + "\"");
    };
    if (key == "discovery") {
      if (value == "auto") o.discovery.source = DiscoverySource::kAuto;
      else if (value == "nvml") o.discovery.source = DiscoverySource::kNvml;
      else if (value == "nvidia-smi") o.discovery.source = DiscoverySource::kNvidiaSmi;
      else return bad("auto, nvml or nvidia-smi");
    } else if (key == "nvmlLibrary" || key == "nvidiaSmiPath" || key == "hostSysRoot" || key == "libvgpuPath" ||
               key == "libvgpuContainerPath" || key == "ldPreloadPath" || key == "activityBoardPath" ||
               key == "cdiHookPath") {
      if (value.empty()) return bad("a path");
      const bool mustBeAbsolute = key != "nvmlLibrary" && key != "nvidiaSmiPath";
      if (mustBeAbsolute && value.front() != '/') return bad("an absolute path");
      if (key == "nvmlLibrary") o.discovery.nvmlLibrary = value;
      if (key == "nvmlLibrary" && value.front() == '/') o.limiter.hookNvmlLibrary = value;
      else if (key == "nvidiaSmiPath") o.discovery.nvidiaSmiPath = value;
      else if (key == "hostSysRoot") o.discovery.sysRoot = value;
      else if (key == "libvgpuPath") o.limiter.libvgpuHostPath = value;
      else if (key == "libvgpuContainerPath") o.limiter.libvgpuContainerPath = value;
      else if (key == "activityBoardPath") o.limiter.activityBoardHostPath = value;
      else if (key == "cdiHookPath") o.limiter.cdiHookPath = value;
      else o.limiter.ldPreloadHostPath = value;
    } else if (key == "nvidiaSmiTimeout") {
      auto d = parseDuration(value);
      if (!d || d->count() == 0) return bad("a duration such as 10s or 500ms (at most 3600s)");
      o.discovery.nvidiaSmiTimeout = *d;
    } else if (key == "memoryEnforcement") {
      if (value == "libvgpu") o.limiter.memory = MemoryEnforcement::kLibvgpu;
      else if (value == "driver") o.limiter.memory = MemoryEnforcement::kDriver;
      else if (value == "auto") o.limiter.memory = MemoryEnforcement::kAuto;
      else return bad("libvgpu, driver or auto");
    } else if (key == "driverSoftLimit") {
      if (value != "none" && value != "hard") return bad("none or hard");
      o.limiter.driverSoftLimit = value;
    } else if (key == "corePolicy") {
      if (value != "default" && value != "force" && value != "disable") return bad("default, force or disable");
      o.limiter.corePolicy = value == "default" ? "" : value;
    } else if (key == "contextOverheadMiB") {
      std::uint64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size() || v == 0 || v > 65536)
        return bad("a whole number of MiB, 1 to 65536");
      o.limiter.contextOverheadMiB = v;
    } else if (key == "logLevel") {
      if (value.size() != 1 || value[0] < '0' || value[0] > '4') return bad("0 (none) to 4 (debug)");
      o.limiter.logLevel = value;
    } else if (key == "cdiKind") {
      // vendor.com/class, as the CDI spec names devices
      const auto slash = value.find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == value.size() ||
          value.find_first_of("=, \t") != std::string::npos || value.find('/', slash + 1) != std::string::npos)
        return bad("a CDI kind such as k8s.device-plugin.nvidia.com/gpu");
      o.limiter.cdiKind = value;
    } else if (key == "migStrategy") {
      if (value == "none") o.mig.strategy = MigStrategy::kNone;
      else if (value == "single") o.mig.strategy = MigStrategy::kSingle;
      else if (value == "mixed") o.mig.strategy = MigStrategy::kMixed;
      else return bad("none, single or mixed");
    } else if (key == "migProfiles") {
      o.mig.profiles = sdk::splitList(value);
      for (const auto& p : o.mig.profiles)
        if (p.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz.+") != std::string::npos || p.empty())
          return bad("MIG profile names such as 1g.5gb,2g.10gb,3g.20gb");
      if (o.mig.profiles.empty()) return bad("MIG profile names such as 1g.5gb,2g.10gb,3g.20gb");
    } else if (key == "migManaged") {
      auto items = sdk::splitList(value);
      if (items.empty()) return bad("all, or GPU UUIDs (GPU-...)");
      for (const auto& item : items) {
        if (item == "all") o.mig.manageAll = true;
        else if (item.starts_with("GPU-")) o.mig.managed.insert(item);
        else return bad("all, or GPU UUIDs (GPU-...)");
      }
    } else if (key == "migAllowedProfiles") {
      o.mig.allowed = sdk::splitList(value);
      if (o.mig.allowed.empty()) return bad("MIG profile names such as 1g.10gb,3g.40gb");
    } else if (key == "migStateDir") {
      if (value.empty() || value.front() != '/') return bad("an absolute path");
      o.mig.stateDir = value;
    } else if (key == "allowOptOut") {
      if (value != "true" && value != "false") return bad("true or false");
      o.limiter.allowOptOut = value == "true";
    } else {
      return makeError(at + ": unknown option (the nvidia backend knows " + kKnownOptions + ")");
    }
  }
  if (o.limiter.memory == MemoryEnforcement::kDriver && o.limiter.cdiKind.empty() && o.limiter.cdiHookPath.empty())
    return makeError(section + ".options.memoryEnforcement is driver, which needs " + section +
                     ".options.cdiHookPath (vgpu-cdi-hook on the host) or " + section +
                     ".options.cdiKind: the driver's memory cap reaches a container only through a CDI hook, "
                     "vgpu-cdi-hook or that of a kind whose spec carries it (e.g. k8s.device-plugin.nvidia.com/gpu); "
                     "without one nothing would enforce the memory limit");
  if (o.mig.strategy == MigStrategy::kMixed && o.mig.profiles.empty())
    return makeError(section + ".options.migStrategy is mixed, which needs " + section +
                     ".options.migProfiles: the MIG profiles to serve, each as the resource nvidia.com/mig-<profile> "
                     "(e.g. 1g.5gb,2g.10gb,3g.20gb); the scheduler has no GPU to ask");
  if (o.mig.strategy != MigStrategy::kMixed && !o.mig.profiles.empty())
    return makeError(section + ".options.migProfiles names the resources of migStrategy mixed, but migStrategy is " +
                     (o.mig.strategy == MigStrategy::kSingle ? "single" : "none"));
  o.discovery.migStrategy = o.mig.strategy;
  o.discovery.countResource = sdk::StandardResourceNames::resolve(defaultResourceNames(), params.resources).count;
  o.discovery.mig = o.mig;
  auto health = HealthCheckPolicy::fromEnvironment(disableHealthChecks, enableHealthChecks);
  if (!health.ok()) return std::move(health).error().prefix("backend " + name);
  o.discovery.health = *health;
  return o;
}

NvidiaBackend::NvidiaBackend(const BackendParams& params, NvidiaOptions options)
    : options_(std::move(options)), allocator_(params, options_.mig) {
  discovery_ = std::make_unique<NvidiaDiscovery>(options_.discovery);
  limiter_ = std::make_unique<NvidiaLimiter>(options_.limiter, [this] { return kernelMemoryCap(); });
}

Result<std::unique_ptr<NvidiaBackend>> NvidiaBackend::create(const BackendParams& params) {
  auto options = parseOptions(params, std::getenv("DP_DISABLE_HEALTHCHECKS"), std::getenv("DP_ENABLE_HEALTHCHECKS"));
  if (!options.ok()) return std::move(options).error();
  // Nothing is probed here: the scheduler creates the backend too, on machines without GPUs.
  return std::unique_ptr<NvidiaBackend>(new NvidiaBackend(params, std::move(options).value()));
}

Result<std::map<std::string, std::int64_t>> NvidiaBackend::admissionDefaults(const ContainerResources& container,
                                                                             const Annotations& annotations) const {
  if (auto it = annotations.find(kOptOutAnnotation);
      it != annotations.end() && !options_.limiter.allowOptOut && optOutNames(it->second, container.name))
    return makeError("container \"" + container.name + "\" asks (pod annotation " + std::string(kOptOutAnnotation) +
                     ") to run without libvgpu.so, which would lift its GPU memory and compute limits; backends." +
                     options_.limiter.backend + ".options.allowOptOut is false: the operator must allow opting out");
  return allocator_.admissionDefaults(container, annotations);
}

std::vector<ProtectedEnv> NvidiaBackend::protectedEnv() const {
  using Scope = ProtectedEnv::Scope;
  auto prefix = [](const char* name) { return std::string(name) + "*"; };
  return {
      // The toolkit's runtime hook mounts the GPUs this names into any container that sets it.
      {kVisibleDevicesEnv, Scope::kEveryContainer},
      {kDriverMemoryRequestEnv, Scope::kBackendContainers},
      {kDriverMemoryLimitEnv, Scope::kBackendContainers},
      // A library of the tenant's own, loaded before libvgpu.so, could take the CUDA calls first.
      {"LD_PRELOAD", Scope::kBackendContainers},
      // vgpu/limiter_contract.h: the limits file wins over these where it is mounted, but
      // HAMi-core, which may run in our place, reads only the environment.
      {prefix(VGPU_ENV_MEMORY_LIMIT), Scope::kBackendContainers},  // also ..._LIMIT_<i>
      {prefix(VGPU_ENV_SM_LIMIT), Scope::kBackendContainers},
      {VGPU_ENV_SHARED_REGION, Scope::kBackendContainers},
      {VGPU_ENV_OVERSUBSCRIBE, Scope::kBackendContainers},
      {VGPU_ENV_TASK_PRIORITY, Scope::kBackendContainers},
      {VGPU_ENV_CORE_POLICY, Scope::kBackendContainers},
      {VGPU_ENV_ACTIVITY_BOARD, Scope::kBackendContainers},
      {VGPU_ENV_LIMITS_FILE, Scope::kBackendContainers},
      // HAMi-core's own switches (reference/hami-core.md): turn the limiter off, or send its
      // CUDA lookups to another library.
      {"CUDA_DISABLE_CONTROL", Scope::kBackendContainers},
      {"CUDA_REDIRECT", Scope::kBackendContainers},
  };
}

Result<ContainerSpec> NvidiaBackend::containerSpec(const ContainerGrant& grant) {
  if (!options_.mig.dynamic()) return limiter_->containerSpec(grant);
  ContainerGrant mine = grant;
  bool created = false;
  std::vector<std::string> replans;  // where the node did not create at the scheduler's placement, why
  std::vector<Partition> made;
  for (auto& d : mine.devices) {
    if (!managed(d.deviceId)) continue;
    auto manager = migManager();
    if (!manager.ok()) return std::move(manager).error();
    std::string replanned;
    auto mig = (*manager)->acquire(grant.container.holder, d.deviceId, d.memoryMiB, d.placement, &replanned);
    if (!mig.ok()) {
      if (created) (void)(*manager)->release(grant.container.holder);
      return std::move(mig).error().prefix("container \"" + grant.container.containerName + "\" of pod " +
                                           grant.podNamespace + "/" + grant.podName);
    }
    created = true;
    if (!replanned.empty()) replans.push_back("GPU " + d.deviceId + ": " + replanned);
    made.push_back(migPartition(d.deviceId, *mig));
    d.deviceId = mig->uuid;  // the container's GPU is the new MIG device
    d.memoryMiB = std::min(d.memoryMiB, mig->memoryMiB);
    d.compute = 100;         // the instance's compute is its own
  }
  auto spec = limiter_->containerSpec(mine);
  if (!spec.ok() && created) (void)migManager().value()->release(grant.container.holder);
  if (spec.ok())
    for (const auto& why : replans) spec->notices.push_back({"MigPlacementChanged", why});
  // The node agent exports an info series per instance from it (vgpu/partition.h).
  if (spec.ok() && !made.empty()) spec->podAnnotations[madePartitionsKey(grant.containerIndex)] = encodePartitions(made);
  return spec;
}

Status NvidiaBackend::release(const ContainerRef& container) {
  Status limiter = limiter_->release(container);
  if (options_.mig.dynamic()) {
    auto manager = migManager();
    if (!manager.ok()) return std::move(manager).error();
    if (auto s = (*manager)->release(container.holder); !s.ok()) return s;
  }
  return limiter;
}

Status NvidiaBackend::reconcile(const std::vector<ContainerRef>& live) {
  Status limiter = limiter_->reconcile(live);
  if (options_.mig.dynamic()) {
    auto manager = migManager();
    if (!manager.ok()) return std::move(manager).error();
    std::set<std::string> holders;
    for (const auto& c : live) holders.insert(c.holder);
    if (auto s = (*manager)->reconcile(holders); !s.ok()) return s;
  }
  return limiter;
}

bool NvidiaBackend::managed(const std::string& deviceId) {
  if (!options_.mig.manages(deviceId)) return false;
  std::lock_guard lock(migMutex_);
  auto it = managedSeen_.find(deviceId);
  return it != managedSeen_.end() && it->second;
}

Result<MigManager*> NvidiaBackend::migManager() {
  std::lock_guard lock(migMutex_);
  if (migManager_) return migManager_.get();
  const NvmlSession* session = discovery_->nvml();
  if (session == nullptr)
    return makeError("backend " + options_.limiter.backend + " creates MIG instances through NVML, which is not in use" +
                     (discovery_->nvmlUnavailableReason().empty() ? std::string(" (no discovery yet)")
                                                                 : ": " + discovery_->nvmlUnavailableReason()));
  migManager_ = std::make_unique<MigManager>(*session, options_.mig.stateDir, options_.mig.allowed);
  return migManager_.get();
}

Status NvidiaBackend::kernelMemoryCap() {
  std::lock_guard lock(capMutex_);
  if (kernelCap_) return *kernelCap_;
  kernelCap_ = probeKernelMemoryCap();
  return *kernelCap_;
}

Status NvidiaBackend::probeKernelMemoryCap() {
  bool hasSymbol = false;
  if (const NvmlSession* session = discovery_->nvml()) {
    hasSymbol = session->fn().deviceSetMemoryLimits != nullptr;
  } else {
    auto probe = NvmlSession::open(options_.discovery.nvmlLibrary);
    if (!probe.ok()) return makeError("cannot ask the driver: " + probe.error().message);
    hasSymbol = (*probe)->fn().deviceSetMemoryLimits != nullptr;
  }
  // vgpu-cdi-hook finds v1 and v2 cgroups; the toolkit's hook needs v2.
  const std::string& hook = options_.limiter.cdiHookPath;
  if (auto s = kernelMemoryCapSupport(hasSymbol, options_.discovery.sysRoot, hook.empty()); !s.ok() || hook.empty())
    return s;
  // A hook the runtime cannot run fails every container's start, auto or not: where it is
  // missing the driver's cap is not used (the chart installs it beside libvgpu.so).
  if (::access(hook.c_str(), X_OK) != 0)
    return makeError("vgpu-cdi-hook is not an executable file at backends." + options_.limiter.backend +
                     ".options.cdiHookPath " + hook + ": " + std::strerror(errno));
  return {};
}

Result<std::vector<Device>> NvidiaBackend::discover() {
  auto devices = discovery_->discover();
  if (devices.ok() && options_.mig.dynamic()) {
    std::lock_guard lock(migMutex_);
    for (const auto& d : *devices) managedSeen_[d.id] = d.attributes.contains(attr::kMigManaged);
  }
  if (!devices.ok()) return devices;
  auto preloadEverywhere = [&](std::vector<Device>& all) {
    for (auto& d : all) d.attributes[attr::kMemoryEnforcement] = "preload";
  };
  if (options_.limiter.memory == MemoryEnforcement::kLibvgpu) {
    preloadEverywhere(*devices);
    return devices;
  }
  // Publish whether the driver cap asked for in the config works here, so it shows in the
  // node's inventory rather than only when a container fails to start.
  // Without a hook nothing applies the driver's cap: auto leaves memory to libvgpu.so.
  const bool hooked = !options_.limiter.cdiKind.empty() || !options_.limiter.cdiHookPath.empty();
  const Status cap = kernelMemoryCap();
  const std::string value = !hooked  ? "unused: no cdiKind or cdiHookPath, libvgpu.so enforces memory"
                            : cap.ok() ? "supported"
                                       : "unsupported: " + cap.error().message;
  for (auto& d : *devices) {
    d.attributes[attr::kKernelMemoryLimit] = value;
    // The driver takes no per-cgroup limit on a MIG device: libvgpu.so holds it there.
    const bool mig = d.id.rfind("MIG-", 0) == 0;
    d.attributes[attr::kMemoryEnforcement] = hooked && cap.ok() && !mig ? "driver" : "preload";
  }
  if (!loggedEnforcement_.exchange(true)) {
    std::fprintf(stderr, "vgpu nvidia backend %s: memory enforcement %s\n", options_.limiter.backend.c_str(),
                 hooked && cap.ok() ? (options_.limiter.cdiHookPath.empty()
                                           ? "driver (the NVIDIA container toolkit's CDI hook), libvgpu.so on MIG devices"
                                           : "driver (vgpu-cdi-hook sets a per-cgroup limit) and libvgpu.so; libvgpu.so "
                                             "alone on MIG devices")
                                    : ("libvgpu.so (" + value + ")").c_str());
  }
  return devices;
}

}  // namespace vgpu::nvidia
