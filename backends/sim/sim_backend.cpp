#include "sim_backend.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <thread>

#include "vgpu/host_files.h"

namespace vgpu::sim {
namespace {

const sdk::StandardResourceNames kDefaultNames{"vgpu.io/sim", "vgpu.io/sim-memory", "vgpu.io/sim-memory-percentage",
                                               "vgpu.io/sim-cores", "vgpu.io/sim-priority"};

/// Filter annotations live in the count resource's domain: nvidia.com/use-gputype when the
/// operator renames the count to nvidia.com/gpu, so a sim cluster reads like the real one.
sdk::ConstraintAnnotationKeys annotationKeysFor(const std::string& countResource) {
  const auto slash = countResource.find('/');
  const std::string domain = slash == std::string::npos ? "vgpu.io" : countResource.substr(0, slash);
  return {domain + "/use-gputype", domain + "/nouse-gputype", domain + "/use-gpuuuid", domain + "/nouse-gpuuuid",
          domain + "/numa-bind"};
}

std::string mark(const YAML::Node& node) {
  return node.Mark().is_null() ? std::string() : " (line " + std::to_string(node.Mark().line + 1) + ")";
}

template <class T>
Result<T> scalar(const YAML::Node& node, const std::string& where) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return makeError(where + mark(node) + ": expected a number");
  }
}

}  // namespace

Result<std::vector<Device>> loadDevicesFile(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return makeError("sim devices file " + path + ": " + e.what());
  }
  const YAML::Node list = root["devices"];
  if (!list || !list.IsSequence()) return makeError("sim devices file " + path + ": expected a `devices:` list");
  std::vector<Device> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string where = "sim devices file " + path + ": devices[" + std::to_string(i) + "]";
    if (!entry.IsMap()) return makeError(where + mark(entry) + ": expected a map");
    Device d;
    d.index = static_cast<int>(i);
    d.backend = "sim";
    for (const auto& kv : entry) {
      const std::string key = kv.first.as<std::string>();
      const std::string at = where + "." + key;
      if (key == "id") {
        d.id = kv.second.as<std::string>();
      } else if (key == "model") {
        d.model = kv.second.as<std::string>();
      } else if (key == "memoryMiB") {
        auto v = scalar<std::uint64_t>(kv.second, at);
        if (!v.ok()) return std::move(v).error();
        d.memoryMiB = *v;
      } else if (key == "computeUnits") {
        auto v = scalar<std::uint32_t>(kv.second, at);
        if (!v.ok()) return std::move(v).error();
        d.computeUnits = *v;
      } else if (key == "numa") {
        auto v = scalar<int>(kv.second, at);
        if (!v.ok()) return std::move(v).error();
        d.numaNode = *v;
      } else if (key == "health") {
        const std::string h = kv.second.as<std::string>();
        if (h == "healthy") d.health = Health::kHealthy;
        else if (h == "unhealthy") d.health = Health::kUnhealthy;
        else return makeError(at + mark(kv.second) + ": expected healthy or unhealthy, got \"" + h + "\"");
      } else {
        return makeError(at + mark(kv.first) + ": unknown key (expected id, model, memoryMiB, computeUnits, numa, health)");
      }
    }
    if (d.id.empty()) return makeError(where + mark(entry) + ": `id` is required");
    if (d.memoryMiB == 0) return makeError(where + mark(entry) + ": `memoryMiB` is required and must be > 0");
    if (!ids.insert(d.id).second) return makeError(where + ": duplicate device id " + d.id);
    if (d.health == Health::kUnknown) d.health = Health::kHealthy;
    out.push_back(std::move(d));
  }
  return out;
}

SimBackend::SimBackend(BackendParams params, sdk::StandardRequestRules rules, std::string devicesFile)
    : params_(std::move(params)), rules_(std::move(rules)), resources_(rules_.names.list()),
      devicesFile_(std::move(devicesFile)) {}

Result<std::unique_ptr<SimBackend>> SimBackend::create(const BackendParams& params) {
  std::string devicesFile;
  for (const auto& [key, value] : params.settings.options) {
    if (key == "devicesFile") {
      devicesFile = value;
    } else {
      return makeError("backends." + params.name + ".options." + key + ": unknown option (the sim backend knows devicesFile)");
    }
  }
  sdk::StandardRequestRules rules;
  rules.backend = params.name;
  rules.names = sdk::StandardResourceNames::resolve(kDefaultNames, params.resources);
  rules.annotations = annotationKeysFor(rules.names.count);
  rules = rules.withSettings(params.settings);
  return std::unique_ptr<SimBackend>(new SimBackend(params, std::move(rules), std::move(devicesFile)));
}

Result<std::optional<DeviceRequest>> SimBackend::parseRequest(const ContainerResources& container,
                                                              const Annotations& annotations) const {
  return sdk::parseStandardRequest(rules_, container, annotations);
}

void SimBackend::fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                     vgpu_fit_result& result) const {
  sdk::standardFit(request, device, usage, result);
}

Result<std::map<std::string, std::int64_t>> SimBackend::admissionDefaults(const ContainerResources& container,
                                                                          const Annotations& annotations) const {
  return sdk::standardAdmissionDefaults(rules_, container, annotations);
}

Result<std::vector<Device>> SimBackend::discover() {
  if (devicesFile_.empty())
    return makeError("backend " + params_.name + ": no devices file; set backends." + params_.name + ".options.devicesFile");
  auto devices = loadDevicesFile(devicesFile_);
  if (!devices.ok()) return devices;
  const auto& s = params_.settings;
  for (auto& d : *devices) {
    d.backend = params_.name;
    d.splitCount = s.splitCount.value_or(kDefaultSplitCount);
    d.memoryMiB = static_cast<std::uint64_t>(std::floor(static_cast<double>(d.memoryMiB) * s.memoryScaling.value_or(1.0)));
    d.computeUnits = static_cast<std::uint32_t>(std::lround(d.computeUnits * s.coreScaling.value_or(1.0)));
  }
  return devices;
}

Result<std::vector<HealthEvent>> SimBackend::waitForHealthEvents(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto devices = loadDevicesFile(devicesFile_);
    if (!devices.ok()) return std::move(devices).error();
    std::vector<HealthEvent> events;
    for (const auto& d : *devices) {
      auto [it, inserted] = lastHealth_.try_emplace(d.id, d.health);
      if (!inserted && it->second != d.health) {
        it->second = d.health;
        events.push_back({d.id, d.health, "devices file says " + std::string(toString(d.health))});
      }
    }
    if (!events.empty() || std::chrono::steady_clock::now() >= deadline) return events;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(50),
                                                                   deadline - std::chrono::steady_clock::now()));
  }
}

namespace {
constexpr const char* kVisibleEnv = "VGPU_SIM_VISIBLE_DEVICES";
constexpr const char* kMemoryLimitPrefix = "VGPU_SIM_MEMORY_LIMIT_";
constexpr const char* kCoreLimitEnv = "VGPU_SIM_CORE_LIMIT";
constexpr const char* kRegionFile = "region";  // in the host folder, /var/run/vgpu-sim/region inside
}  // namespace

std::vector<ProtectedEnv> SimBackend::protectedEnv() const {
  return {{kVisibleEnv, ProtectedEnv::Scope::kEveryContainer},
          {std::string(kMemoryLimitPrefix) + "*", ProtectedEnv::Scope::kBackendContainers},
          {kCoreLimitEnv, ProtectedEnv::Scope::kBackendContainers}};
}

Result<ContainerSpec> SimBackend::containerSpec(const ContainerGrant& grant) {
  if (grant.devices.empty()) return makeError("container " + grant.container.containerName + " was granted no sim devices");
  ContainerSpec spec;
  std::string ids;
  std::uint32_t cores = 0;
  for (size_t i = 0; i < grant.devices.size(); ++i) {
    const auto& d = grant.devices[i];
    ids += (i ? "," : "") + d.deviceId;
    spec.env[kMemoryLimitPrefix + std::to_string(i)] = std::to_string(d.memoryMiB) + "m";
    cores = std::max(cores, d.compute);
  }
  spec.env[kVisibleEnv] = ids;
  spec.env[kCoreLimitEnv] = std::to_string(cores);
  if (!grant.hostDir.empty()) {
    // The file a libvgpu.so-style limiter keeps its usage in, made by the backend (never by
    // path: the folder is mounted writable) and named to the agent, which reads it alone.
    auto dir = openOwnDir(grant.hostDir);
    if (!dir) return makeError("container " + grant.container.containerName + ": " + dir.error().message);
    auto region = createOwnFileAt(dir->get(), kRegionFile, 0666, grant.hostDir + "/" + kRegionFile);
    if (!region) return makeError("container " + grant.container.containerName + ": " + region.error().message);
    spec.region = RegionFile{kRegionFile, inodeOf(region->get())};
    spec.mounts.push_back({grant.hostDir, "/var/run/vgpu-sim", false});
  }
  std::lock_guard lock(mutex_);
  held_.insert(grant.container);
  return spec;
}

Status SimBackend::release(const ContainerRef& container) {
  std::lock_guard lock(mutex_);
  held_.erase(container);
  return {};
}

Status SimBackend::reconcile(const std::vector<ContainerRef>& live) {
  const std::set<ContainerRef> keep(live.begin(), live.end());
  std::lock_guard lock(mutex_);
  std::erase_if(held_, [&](const ContainerRef& c) { return !keep.contains(c); });
  return {};
}

std::set<ContainerRef> SimBackend::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

}  // namespace vgpu::sim
