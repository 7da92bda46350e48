// The AMD backend: options, HAMi's resource names, the whole-GPU and partition fit, AMD SMI
// discovery and health, and the container spec (/dev/kfd, the render node, the heap size).
#include "amd_backend.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "kfd_topology.h"
#include "vgpu/sdk/backend_adapter.h"

namespace vgpu::amd {
namespace {

// HAMi's names for AMD GPUs (amd.com/gpu is also AMD's own device plugin's).
const sdk::StandardResourceNames kDefaultNames{"amd.com/gpu", "amd.com/gpumem", "", "amd.com/gpucores", ""};
// HAMi's AMD device filters: model substrings and device ids, comma-separated.
const sdk::ConstraintAnnotationKeys kAnnotations{"amd.com/use-gputype", "amd.com/nouse-gputype", "amd.com/use-gpu-uuid",
                                                "amd.com/nouse-gpu-uuid", ""};

const Processor* partOf(const PhysicalGpu& gpu, std::uint32_t partition) {
  for (const auto& p : gpu.parts)
    if (p.partitionId == partition) return &p;
  return nullptr;
}

}  // namespace

AmdBackend::AmdBackend(BackendParams params, sdk::StandardRequestRules rules, AmdOptions options)
    : params_(std::move(params)), rules_(std::move(rules)), options_(std::move(options)), resources_(rules_.names.list()) {}

Result<std::unique_ptr<AmdBackend>> AmdBackend::create(const BackendParams& params) {
  const std::string section = "backends." + params.name;
  AmdOptions options;
  for (const auto& [key, value] : params.settings.options) {
    const std::string at = section + ".options." + key;
    if (key == "libraryPath") {
      if (value.empty()) return makeError(at + ": must name the libamd_smi.so to load");
      options.libraryPaths = {value};
    } else if (key == "devRoot" || key == "sysfsRoot") {
      if (value.empty() || value[0] != '/') return makeError(at + ": must be an absolute folder, got \"" + value + "\"");
      (key == "devRoot" ? options.devRoot : options.sysfsRoot) = value;
    } else {
      return makeError(at + ": unknown option (the amd backend knows libraryPath, devRoot, sysfsRoot)");
    }
  }
  for (const auto& [name, v] : {std::pair{"memoryScaling", params.settings.memoryScaling},
                                std::pair{"coreScaling", params.settings.coreScaling}})
    if (v && !(*v > 0 && std::isfinite(*v))) return makeError(section + "." + name + ": must be a number above 0");
  if (params.settings.splitCount && *params.settings.splitCount == 0)
    return makeError(section + ".splitCount: must be at least 1");
  sdk::StandardRequestRules rules;
  rules.backend = params.name;
  rules.names = sdk::StandardResourceNames::resolve(kDefaultNames, params.resources);
  rules.annotations = kAnnotations;
  rules = rules.withSettings(params.settings);
  return std::unique_ptr<AmdBackend>(new AmdBackend(params, std::move(rules), std::move(options)));
}

void AmdBackend::fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                     vgpu_fit_result& result) const {
  if (isPartitionedDevice(device)) return fitPartition(request, device, usage, nullptr, result, nullptr, nullptr);
  sdk::standardFit(request, device, usage, result);
}

void AmdBackend::fitPlaced(const vgpu_device_request& request, const vgpu_device& device,
                           const vgpu_device_usage& usage, vgpu_placement& placement, vgpu_fit_result& result) const {
  std::vector<std::string_view> placed;
  for (size_t i = 0; i < placement.placed.count; ++i)
    if (placement.placed.items[i] && *placement.placed.items[i]) placed.emplace_back(placement.placed.items[i]);
  std::string token, why;
  fitPartition(request, device, usage, &placed, result, &token, placement.why ? &why : nullptr);
  if (result.fits) sdk::writeText(placement.token, placement.token_capacity, token);
  else sdk::writeText(placement.why, placement.why_capacity, why);
}

Result<AmdSmiLibrary*> AmdBackend::library() {
  if (!library_) {
    auto lib = AmdSmiLibrary::open(options_.libraryPaths);
    if (!lib) return std::move(lib).error();
    library_ = std::move(*lib);
  }
  return library_.get();
}

Result<std::vector<PhysicalGpu>> AmdBackend::gpus() {
  auto lib = library();
  if (!lib) return lib.error();
  auto listed = (*lib)->processors();
  if (!listed) return listed.error();
  lastGpus_ = groupPhysical(*listed);
  return lastGpus_;
}

Device AmdBackend::toDevice(const PhysicalGpu& gpu, int index) const {
  Device d;
  d.id = gpu.first().uuid;
  d.index = index;
  d.backend = params_.name;
  d.model = gpu.first().market.empty() ? "AMD GPU" : gpu.first().market;
  d.memoryMiB = gpu.memoryMiB();
  d.numaNode = gpu.first().numaNode;
  d.health = Health::kHealthy;
  if (!gpu.first().computePartition.empty()) d.attributes[kComputePartitionAttribute] = gpu.first().computePartition;
  if (!gpu.first().memoryPartition.empty()) d.attributes[kMemoryPartitionAttribute] = gpu.first().memoryPartition;
  if (gpu.partitioned()) {
    // Hardware slices: one grant per partition, their sizes as the GPU has them (no scaling).
    d.attributes[kComputePartitionAttribute] = gpu.partitionMode();
    d.attributes[kPartitionsAttribute] = std::to_string(gpu.parts.size());
    d.splitCount = static_cast<std::uint32_t>(gpu.parts.size());
    return d;
  }
  d.splitCount = params_.settings.splitCount.value_or(kDefaultSplitCount);
  d.memoryMiB = static_cast<std::uint64_t>(static_cast<double>(d.memoryMiB) * params_.settings.memoryScaling.value_or(1.0));
  d.computeUnits = static_cast<std::uint32_t>(100.0 * params_.settings.coreScaling.value_or(1.0));
  return d;
}

Result<std::vector<Device>> AmdBackend::discover() {
  std::lock_guard lock(mutex_);
  auto listed = gpus();
  if (!listed) return listed.error();
  std::vector<Device> out;
  for (size_t i = 0; i < listed->size(); ++i) {
    out.push_back(toDevice((*listed)[i], static_cast<int>(i)));
    lastHealth_[out.back().id] = out.back().health;
  }
  return out;
}

Result<std::vector<HealthEvent>> AmdBackend::waitForHealthEvents(std::chrono::milliseconds timeout) {
  // AMD SMI has no health wait that returns early: list again once per call, after the timeout.
  std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(5000)));
  std::lock_guard lock(mutex_);
  std::vector<HealthEvent> events;
  if (lastHealth_.empty()) return events;
  auto listed = gpus();
  if (!listed) return listed.error();
  std::set<std::string> seen;
  for (const auto& g : *listed) seen.insert(g.first().uuid);
  for (auto& [id, h] : lastHealth_) {
    const Health now = seen.count(id) ? Health::kHealthy : Health::kUnhealthy;
    if (now == h) continue;
    events.push_back({id, now, now == Health::kHealthy ? "AMD SMI lists the GPU again" : "AMD SMI no longer lists the GPU"});
    h = now;
  }
  return events;
}

Result<DeviceNode> AmdBackend::nodeAt(const std::string& name) const {
  const auto host = options_.devRoot / name;
  std::error_code ec;
  if (!std::filesystem::exists(host, ec)) return makeError(host.string() + " does not exist (is the amdgpu driver loaded?)");
  return DeviceNode{host.string(), "/dev/" + name, "rw"};
}

Result<ContainerSpec> AmdBackend::containerSpec(const ContainerGrant& grant) {
  std::lock_guard lock(mutex_);
  const std::string who = "container " + grant.podNamespace + "/" + grant.podName + "/" + grant.container.containerName;
  auto kfd = nodeAt("kfd");
  if (!kfd) return makeError(who + ": " + kfd.error().message);
  ContainerSpec spec;
  spec.devices.push_back(*kfd);
  std::optional<std::uint32_t> heapPercent;
  std::vector<std::string> notes;
  for (const auto& g : grant.devices) {
    auto find = [&] {
      return std::find_if(lastGpus_.begin(), lastGpus_.end(), [&](const PhysicalGpu& x) { return x.first().uuid == g.deviceId; });
    };
    auto gpu = find();
    if (gpu == lastGpus_.end()) {
      if (auto listed = gpus(); !listed) return makeError(who + ": " + listed.error().message);
      gpu = find();
      if (gpu == lastGpus_.end()) return makeError(who + ": GPU " + g.deviceId + " is not on this node (AMD SMI does not list it)");
    }
    const Processor* part = &gpu->first();
    if (gpu->partitioned()) {
      auto p = partitionFor(grant.container, *gpu, g.placement, notes);
      if (!p) return makeError(who + ": " + p.error().message);
      part = partOf(*gpu, *p);
      if (!part) return makeError(who + ": " + g.deviceId + " has no partition " + std::to_string(*p) + " in " +
                                  gpu->partitionMode() + " mode now (was its mode changed since the pod was placed?)");
    } else if (!g.placement.empty()) {
      return makeError(who + ": the grant names partition \"" + g.placement + "\" of " + g.deviceId +
                       ", which is not partitioned now (was its mode changed since the pod was placed?)");
    } else if (const std::uint64_t real = gpu->memoryMiB(); g.memoryMiB < real && real > 0) {
      // A share of a whole GPU: the runtime's heap is the grant's part of the real memory.
      const auto percent = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, g.memoryMiB * 100 / real));
      heapPercent = std::min(heapPercent.value_or(100), percent);
    }
    // AMD SMI of ROCm 6.4+ names the render node; older ones leave it to the KFD topology.
    auto minor = part->renderMinor;
    if (!minor && part->kfdNode) minor = kfdRenderMinor(options_.sysfsRoot, *part->kfdNode);
    if (!minor)
      return makeError(who + ": no render node for " + part->uuid + ": AMD SMI has no enumeration info (ROCm 6.4+) " +
                       "and " + (options_.sysfsRoot / "class/kfd/kfd/topology/nodes").string() +
                       (part->kfdNode ? "/" + std::to_string(*part->kfdNode) : std::string()) + " gives no drm_render_minor");
    auto render = nodeAt("dri/renderD" + std::to_string(*minor));
    if (!render) return makeError(who + ": " + render.error().message);
    spec.devices.push_back(*render);
    // The card node is for display and some tools; the ROCm runtime needs only the render node.
    if (part->cardMinor)
      if (auto card = nodeAt("dri/card" + std::to_string(*part->cardMinor))) spec.devices.push_back(*card);
  }
  if (heapPercent) spec.env[kHeapSizeEnv] = std::to_string(*heapPercent);
  for (const auto& n : notes) spec.notices.push_back({"AmdPartitionChosenOnNode", n});
  return spec;
}

Result<std::uint32_t> AmdBackend::partitionFor(const ContainerRef& container, const PhysicalGpu& gpu,
                                               const std::string& token, std::vector<std::string>& notes) {
  const std::string& id = gpu.first().uuid;
  const auto key = std::make_pair(container, id);
  if (!token.empty()) {
    const auto p = partitionOfToken(token);
    if (!p) return makeError("the grant on " + id + " names \"" + token + "\", not a partition (<mode>@<n>)");
    return given_[key] = *p;
  }
  if (auto it = given_.find(key); it != given_.end()) return it->second;
  std::set<std::uint32_t> held;
  for (const auto& [k, p] : given_)
    if (k.second == id) held.insert(p);
  for (const auto& part : gpu.parts)
    if (!held.count(part.partitionId)) {
      notes.push_back("the grant on " + id + " named no " + gpu.partitionMode() + " partition; the node gave partition " +
                      std::to_string(part.partitionId) + ", which no other container holds");
      return given_[key] = part.partitionId;
    }
  return makeError("the grant on " + id + " names no partition and all " + std::to_string(gpu.parts.size()) + " " +
                   gpu.partitionMode() + " partitions are held");
}

Status AmdBackend::release(const ContainerRef& container) {
  std::lock_guard lock(mutex_);
  std::erase_if(given_, [&](const auto& e) { return e.first.first == container; });
  return {};
}

Status AmdBackend::reconcile(const std::vector<ContainerRef>& live) {
  std::lock_guard lock(mutex_);
  const std::set<ContainerRef> alive(live.begin(), live.end());
  std::erase_if(given_, [&](const auto& e) { return !alive.count(e.first.first); });
  return {};
}

Result<std::vector<DeviceProcess>> AmdBackend::deviceProcesses() {
  std::lock_guard lock(mutex_);
  if (!library_) return makeError("libamd_smi.so is not loaded yet (discovery has not run)");
  auto byProcessor = library_->processes();
  if (!byProcessor) return byProcessor.error();
  std::vector<DeviceProcess> out;
  for (size_t i = 0; i < lastGpus_.size(); ++i)
    for (const auto& part : lastGpus_[i].parts) {
      const auto it = byProcessor->find(part.uuid);
      if (it == byProcessor->end()) return makeError("libamd_smi no longer lists GPU " + part.uuid);
      for (const auto& p : it->second)
        out.push_back({p.pid, lastGpus_[i].first().uuid, static_cast<int>(i), p.vramBytes, std::nullopt});
    }
  return out;
}

}  // namespace vgpu::amd
