// The Ascend backend: HAMi's resource names and annotations, the chip/vNPU fit, DCMI
// discovery, and the limiter that creates one vNPU per shared grant.
#include "ascend_backend.h"

#include <algorithm>
#include <set>
#include <thread>

#include "vgpu/partition.h"
#include "vgpu/served_resource.h"
#include "vnpu_templates.h"

namespace vgpu::ascend {
namespace {

// HAMi's names for the 910B family; a node of another chip names its own (huawei.com/Ascend310P...).
const sdk::StandardResourceNames kDefaultNames{"huawei.com/Ascend910B", "huawei.com/Ascend910B-memory", "", "", ""};
const char* const kCommonNodes[] = {"davinci_manager", "devmm_svm", "hisi_hdc"};

/// HAMi's device filters for Ascend: hami.io/use-<commonWord>-uuid and hami.io/no-use-<commonWord>-uuid,
/// the common word being the count resource's name ("Ascend910B").
sdk::ConstraintAnnotationKeys annotationKeys(const std::string& countResource) {
  const auto slash = countResource.find('/');
  const std::string word = slash == std::string::npos ? countResource : countResource.substr(slash + 1);
  return {"", "", "hami.io/use-" + word + "-uuid", "hami.io/no-use-" + word + "-uuid", ""};
}

Health healthOf(unsigned int dcmiHealth) { return dcmiHealth == 0 ? Health::kHealthy : Health::kUnhealthy; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

}  // namespace

AscendBackend::AscendBackend(BackendParams params, std::vector<ChipFamily> families, AscendOptions options)
    : params_(std::move(params)), families_(std::move(families)), options_(std::move(options)) {
  for (const auto& f : families_)
    for (auto& r : f.rules.names.list()) resources_.push_back(std::move(r));
}

Result<std::unique_ptr<AscendBackend>> AscendBackend::create(const BackendParams& params) {
  const std::string section = "backends." + params.name;
  AscendOptions options;
  for (const auto& [key, value] : params.settings.options) {
    const std::string at = section + ".options." + key;
    if (key == "libraryPath") {
      if (value.empty()) return makeError(at + ": must name the libdcmi.so to load");
      options.libraryPaths = {value};
    } else if (key == "devRoot" || key == "stateDir") {
      if (value.empty() || value[0] != '/') return makeError(at + ": must be an absolute folder, got \"" + value + "\"");
      (key == "devRoot" ? options.devRoot : options.stateDir) = value;
    } else if (key == "families") {
      options.families = sdk::splitList(value);
      for (const auto& f : options.families)
        if (f.rfind("Ascend", 0) != 0 || f.size() == 6 || f.find_first_of("/ \t") != std::string::npos)
          return makeError(at + ": \"" + f + "\" is not a chip family as HAMi names them (Ascend910B3, Ascend310P...)");
      if (options.families.empty()) return makeError(at + ": names no family (e.g. \"Ascend910B3,Ascend310P\")");
    } else if (key == "vnpu") {
      if (value != "true" && value != "false") return makeError(at + ": must be \"true\" or \"false\", got \"" + value + "\"");
      options.vnpu = value == "true";
    } else {
      return makeError(at + ": unknown option (the ascend backend knows libraryPath, devRoot, stateDir, vnpu, families)");
    }
  }
  // A vNPU's memory and AI cores are hardware slices: the driver cannot hand out more.
  if (params.settings.memoryScaling && *params.settings.memoryScaling != 1.0)
    return makeError(section + ".memoryScaling: vNPU memory is a fixed slice of the chip enforced by the hardware; "
                               "it cannot be scaled (use 1)");
  if (params.settings.coreScaling && *params.settings.coreScaling != 1.0)
    return makeError(section + ".coreScaling: vNPU AI cores are fixed slices of the chip enforced by the hardware; "
                               "they cannot be scaled (use 1)");
  if (params.settings.splitCount && *params.settings.splitCount == 0)
    return makeError(section + ".splitCount: must be at least 1");
  auto rulesFor = [&](const sdk::StandardResourceNames& names) {
    sdk::StandardRequestRules rules;
    rules.backend = params.name;
    rules.names = names;
    rules.annotations = annotationKeys(names.count);
    return rules.withSettings(params.settings);
  };
  std::vector<ChipFamily> families;
  if (options.families.empty()) {
    families.push_back({"", rulesFor(sdk::StandardResourceNames::resolve(kDefaultNames, params.resources))});
  } else {
    if (params.resources.count || params.resources.memory || params.resources.cores)
      return makeError(section + ": set resources or options.families, not both (each family has HAMi's names)");
    for (const auto& f : options.families)
      families.push_back({f, rulesFor({"huawei.com/" + f, "huawei.com/" + f + "-memory", "", "", ""})});
  }
  return std::unique_ptr<AscendBackend>(new AscendBackend(params, std::move(families), std::move(options)));
}

Result<const ChipFamily*> AscendBackend::familyOf(const ContainerResources& container) const {
  const ChipFamily* found = nullptr;
  for (const auto& f : families_)
    for (const auto& r : f.rules.names.list())
      if (container.limits.count(r.name)) {
        if (found && found != &f)
          return makeError("container \"" + container.name + "\" asks for " + found->rules.names.count + " and " +
                           f.rules.names.count + ": one container gets chips of one family");
        found = &f;
      }
  return found;
}

const ChipFamily* AscendBackend::familyFor(const std::string& model) const {
  const ChipFamily* best = nullptr;
  for (const auto& f : families_)
    if (model.rfind(f.model, 0) == 0 && (!best || f.model.size() > best->model.size())) best = &f;
  return best;
}

Result<std::optional<DeviceRequest>> AscendBackend::parseRequest(const ContainerResources& container,
                                                                 const Annotations& annotations) const {
  auto family = familyOf(container);
  if (!family) return family.error();
  if (!*family) return std::optional<DeviceRequest>{};
  auto parsed = sdk::parseStandardRequest((*family)->rules, container, annotations);
  // A family's names ask for its chips only (as HAMi's per-family resources do).
  if (parsed.ok() && parsed->has_value() && !(*family)->model.empty())
    (*parsed)->constraints.includeModels.push_back((*family)->model);
  return parsed;
}

void AscendBackend::fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                        vgpu_fit_result& result) const {
  fitChip(request, device, usage, nullptr, result, nullptr, nullptr);
}

std::optional<std::uint32_t> AscendBackend::splitCountFor(const std::string& model) const {
  const ChipProfile* profile = options_.vnpu ? profileFor(model) : nullptr;
  std::uint32_t n = profile ? maxVnpus(*profile) : 1;
  if (params_.settings.splitCount) n = std::min(n, *params_.settings.splitCount);
  return n;
}

bool AscendBackend::placesGrants(const vgpu_device& device) const {
  return device.split_count > 1 && profileFor(device.model ? device.model : "") != nullptr;
}

void AscendBackend::fitPlaced(const vgpu_device_request& request, const vgpu_device& device,
                              const vgpu_device_usage& usage, vgpu_placement& placement,
                              vgpu_fit_result& result) const {
  std::vector<std::string_view> placed;
  for (size_t i = 0; i < placement.placed.count; ++i)
    if (placement.placed.items[i] && *placement.placed.items[i]) placed.emplace_back(placement.placed.items[i]);
  std::string token, why;
  fitChip(request, device, usage, &placed, result, &token, placement.why ? &why : nullptr);
  auto put = [](const std::string& s, char* buf, size_t cap) {
    if (!buf || cap == 0) return;
    const size_t n = std::min(s.size(), cap - 1);
    s.copy(buf, n);
    buf[n] = '\0';
  };
  if (result.fits) put(token, placement.token, placement.token_capacity);
  else put(why, placement.why, placement.why_capacity);
}

std::string AscendBackend::explain(const vgpu_fit_result& result) const { return explainReason(result); }

Result<std::map<std::string, std::int64_t>> AscendBackend::admissionDefaults(const ContainerResources& container,
                                                                            const Annotations& annotations) const {
  auto family = familyOf(container);
  if (!family) return family.error();
  if (!*family) return std::map<std::string, std::int64_t>{};
  return sdk::standardAdmissionDefaults((*family)->rules, container, annotations);
}

std::vector<ProtectedEnv> AscendBackend::protectedEnv() const {
  // Ascend's container runtime hands every id in ASCEND_VISIBLE_DEVICES to any container.
  return {{kVisibleDevicesEnv, ProtectedEnv::Scope::kEveryContainer},
          {kRuntimeOptionsEnv, ProtectedEnv::Scope::kEveryContainer}};
}

Result<DcmiLibrary*> AscendBackend::library() {
  if (!library_) {
    auto lib = DcmiLibrary::open(options_.libraryPaths);
    if (!lib) return std::move(lib).error();
    library_ = std::move(*lib);
  }
  return library_.get();
}

Result<std::vector<ChipInfo>> AscendBackend::chips() {
  auto lib = library();
  if (!lib) return lib.error();
  auto listed = (*lib)->chips();
  if (listed) lastChips_ = *listed;
  return listed;
}

Device AscendBackend::toDevice(const ChipInfo& chip) const {
  Device d;
  d.id = chip.id;
  d.index = chip.logicId;
  d.backend = params_.name;
  d.model = "Ascend" + chip.chipName;
  d.memoryMiB = chip.memoryMiB;
  d.computeUnits = 100;
  d.health = healthOf(chip.health);
  d.attributes[kAiCoresAttribute] = std::to_string(chip.aiCores);
  d.attributes[kMemoryEnforcementAttribute] = "driver";
  if (!options_.families.empty())
    if (const ChipFamily* f = familyFor(d.model)) d.attributes[std::string(served_attr::kCountResource)] = f->rules.names.count;
  const ChipProfile* profile = options_.vnpu ? profileFor(chip.chipName) : nullptr;
  d.splitCount = *splitCountFor(chip.chipName);
  if (profile && d.splitCount > 1) {
    std::vector<std::string> names;
    for (const auto& t : profile->templates) names.push_back(t.name);
    d.attributes[kTemplatesAttribute] = join(names);
  }
  return d;
}

Result<std::vector<Device>> AscendBackend::discover() {
  std::lock_guard lock(mutex_);
  auto listed = chips();
  if (!listed) return listed.error();
  std::vector<Device> out;
  for (const auto& chip : *listed) {
    // With families, a chip of none of them is not this backend's to serve.
    if (!options_.families.empty() && !familyFor("Ascend" + chip.chipName)) continue;
    out.push_back(toDevice(chip));
    lastHealth_[chip.id] = out.back().health;
  }
  return out;
}

Result<std::vector<HealthEvent>> AscendBackend::waitForHealthEvents(std::chrono::milliseconds timeout) {
  // DCMI has no health wait that returns early: poll once per call, after the timeout.
  std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(5000)));
  std::lock_guard lock(mutex_);
  std::vector<HealthEvent> events;
  if (lastHealth_.empty()) return events;
  auto listed = chips();
  if (!listed) return listed.error();
  std::set<std::string> seen;
  for (const auto& chip : *listed) {
    auto it = lastHealth_.find(chip.id);
    if (it == lastHealth_.end()) continue;  // new chips reach the agent through discover
    seen.insert(chip.id);
    const Health h = healthOf(chip.health);
    if (h != it->second) {
      events.push_back({chip.id, h, h == Health::kHealthy ? "DCMI reports the chip healthy"
                                                          : "DCMI health " + std::to_string(chip.health) + " (alarm)"});
      it->second = h;
    }
  }
  for (auto& [id, h] : lastHealth_)
    if (!seen.count(id) && h != Health::kUnhealthy) {
      events.push_back({id, Health::kUnhealthy, "DCMI no longer lists the chip"});
      h = Health::kUnhealthy;
    }
  return events;
}

Result<DeviceNode> AscendBackend::nodeAt(const std::string& name) const {
  const auto host = options_.devRoot / name;
  std::error_code ec;
  if (!std::filesystem::exists(host, ec))
    return makeError(host.string() + " does not exist (is the Ascend driver loaded?)");
  return DeviceNode{host.string(), "/dev/" + name, "rw"};
}

Result<ContainerSpec> AscendBackend::containerSpec(const ContainerGrant& grant) {
  std::lock_guard lock(mutex_);
  auto held = loadHeld(statePath());
  if (!held) return held.error();
  std::vector<HeldChip> mine, made;
  for (const auto& g : grant.devices) {
    auto chip = std::find_if(lastChips_.begin(), lastChips_.end(), [&](const ChipInfo& c) { return c.id == g.deviceId; });
    if (chip == lastChips_.end()) {
      if (auto listed = chips(); !listed) return listed.error();
      chip = std::find_if(lastChips_.begin(), lastChips_.end(), [&](const ChipInfo& c) { return c.id == g.deviceId; });
      if (chip == lastChips_.end()) return makeError("NPU " + g.deviceId + " is not on this node (DCMI does not list it)");
    }
    // The scheduler's token says which template; a grant without one is planned here alike.
    const ChipProfile* profile = options_.vnpu ? profileFor(chip->chipName) : nullptr;
    std::string token = g.placement;
    if (token.empty()) {
      std::optional<VnpuTemplate> t;
      if (profile && g.compute < 100 && g.memoryMiB < chip->memoryMiB) t = templateFor(*profile, g.memoryMiB, g.compute);
      token = t ? t->name : kWholeToken;
    }
    if (token != kWholeToken && (!profile || !templateNamed(*profile, token)))
      return makeError("grant on " + g.deviceId + " names vNPU template \"" + token + "\", which Ascend" + chip->chipName +
                       (options_.vnpu ? " does not have" : " cannot use: vNPUs are off (options.vnpu)"));
    HeldChip h{grant.container.holder, grant.container.containerName, g.deviceId, chip->card, chip->device, token, 0};
    auto same = [&](const HeldChip& x) {
      return x.holder == h.holder && x.container == h.container && x.deviceId == h.deviceId && x.templateName == token;
    };
    if (auto it = std::find_if(held->begin(), held->end(), same); it != held->end()) {
      mine.push_back(*it);  // the agent asks again after a restart: the same vNPU
      continue;
    }
    if (token != kWholeToken) {
      auto vdev = library_->createVnpu(chip->card, chip->device, token);
      if (!vdev) {
        std::vector<HeldChip> keep = *held;
        (void)undo(made, keep);
        return makeError("container " + grant.podNamespace + "/" + grant.podName + "/" + grant.container.containerName +
                         ": " + vdev.error().message);
      }
      h.vdevId = *vdev;
      made.push_back(h);
    }
    mine.push_back(h);
  }
  const bool anyVnpu = std::any_of(mine.begin(), mine.end(), [](const HeldChip& h) { return h.templateName != kWholeToken; });
  if (anyVnpu && mine.size() > 1) {
    std::vector<HeldChip> keep = *held;
    (void)undo(made, keep);
    return makeError("a container gets one vNPU or whole chips: Ascend's runtime reads ASCEND_VISIBLE_DEVICES as vNPU "
                     "ids or as chip ids, not both");
  }
  ContainerSpec spec;
  std::vector<std::string> ids;
  std::vector<Partition> partitions;
  auto fail = [&](const Error& e) -> Result<ContainerSpec> {
    std::vector<HeldChip> keep = *held;
    (void)undo(made, keep);
    return e;
  };
  for (const auto& h : mine) {
    const auto chip = std::find_if(lastChips_.begin(), lastChips_.end(), [&](const ChipInfo& c) { return c.id == h.deviceId; });
    const bool vnpu = h.templateName != kWholeToken;
    const unsigned id = vnpu ? h.vdevId : static_cast<unsigned>(chip->phyId);
    auto node = nodeAt((vnpu ? "vdavinci" : "davinci") + std::to_string(id));
    if (!node) return fail(node.error());
    spec.devices.push_back(*node);
    ids.push_back(std::to_string(id));
    if (vnpu) partitions.push_back({"vNPU-" + std::to_string(id), h.deviceId, "vnpu", h.templateName, "", std::to_string(id), ""});
  }
  for (const char* name : kCommonNodes) {
    auto node = nodeAt(name);
    if (node) spec.devices.push_back(*node);
    else if (std::string(name) == "davinci_manager") return fail(node.error());
  }
  spec.env[kVisibleDevicesEnv] = join(ids);
  if (anyVnpu) spec.env[kRuntimeOptionsEnv] = "VIRTUAL";
  if (!partitions.empty()) spec.podAnnotations[madePartitionsKey(grant.containerIndex)] = encodePartitions(partitions);
  if (!made.empty()) {
    held->insert(held->end(), made.begin(), made.end());
    if (auto saved = saveHeld(statePath(), *held); !saved) return fail(saved.error());
  }
  // Whole chips are recorded too, so that usage lists them; they need no undoing.
  bool wholeAdded = false;
  for (const auto& h : mine)
    if (h.templateName == kWholeToken && std::find(held->begin(), held->end(), h) == held->end())
      held->push_back(h), wholeAdded = true;
  if (wholeAdded)
    if (auto saved = saveHeld(statePath(), *held); !saved) return fail(saved.error());
  return spec;
}

Status AscendBackend::undo(const std::vector<HeldChip>& doomed, std::vector<HeldChip>& held) {
  Status first;
  for (const auto& h : doomed) {
    if (h.templateName != kWholeToken && library_) {
      auto destroyed = library_->destroyVnpu(h.card, h.device, h.vdevId);
      if (!destroyed) {
        if (first.ok()) first = destroyed;
        continue;  // kept: release or reconcile tries again
      }
    }
    held.erase(std::remove(held.begin(), held.end(), h), held.end());
  }
  return first;
}

Status AscendBackend::release(const ContainerRef& container) {
  std::lock_guard lock(mutex_);
  auto held = loadHeld(statePath());
  if (!held) return held.error();
  std::vector<HeldChip> doomed;
  for (const auto& h : *held)
    if (h.holder == container.holder && h.container == container.containerName) doomed.push_back(h);
  if (doomed.empty()) return {};
  if (auto lib = library(); !lib) return lib.error();
  Status undone = undo(doomed, *held);
  if (auto saved = saveHeld(statePath(), *held); !saved) return saved;
  return undone;
}

Status AscendBackend::reconcile(const std::vector<ContainerRef>& live) {
  std::lock_guard lock(mutex_);
  auto held = loadHeld(statePath());
  if (!held) return held.error();
  const std::set<ContainerRef> alive(live.begin(), live.end());
  std::vector<HeldChip> doomed;
  for (const auto& h : *held)
    if (!alive.count(ContainerRef{h.holder, h.container})) doomed.push_back(h);
  if (doomed.empty()) return {};
  if (auto lib = library(); !lib) return lib.error();
  Status undone = undo(doomed, *held);
  if (auto saved = saveHeld(statePath(), *held); !saved) return saved;
  return undone;
}

Result<std::vector<ContainerUsage>> AscendBackend::containerUsage() {
  std::lock_guard lock(mutex_);
  auto held = loadHeld(statePath());
  if (!held) return held.error();
  std::vector<ContainerUsage> out;
  for (const auto& h : *held) {
    const auto chip = std::find_if(lastChips_.begin(), lastChips_.end(), [&](const ChipInfo& c) { return c.id == h.deviceId; });
    if (chip == lastChips_.end()) continue;
    const ChipProfile* profile = profileFor(chip->chipName);
    auto t = profile ? templateNamed(*profile, h.templateName) : std::nullopt;
    ContainerUsage u;
    u.container = {h.holder, h.container};
    u.deviceId = h.deviceId;
    u.deviceIndex = 0;
    u.memoryLimitBytes = (t ? t->memoryMiB : chip->memoryMiB) << 20;
    u.computeLimitPercent = t ? t->aiCores * 100 / profile->aiCores : 100;
    out.push_back(std::move(u));
  }
  return out;
}

Result<std::vector<DeviceProcess>> AscendBackend::deviceProcesses() {
  std::lock_guard lock(mutex_);
  if (!library_) return makeError("libdcmi.so is not loaded yet (discovery has not run)");
  std::vector<DeviceProcess> out;
  for (const auto& chip : lastChips_) {
    auto procs = library_->processes(chip.card, chip.device);
    if (!procs) return procs.error();
    for (const auto& p : *procs) out.push_back({p.pid, chip.id, chip.logicId, p.memoryBytes, std::nullopt});
  }
  return out;
}

}  // namespace vgpu::ascend
