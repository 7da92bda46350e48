#include "discovery.h"

#include "cdi_hook/cgroup_path.h"

#include "processes.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <thread>

#include "mig_manager.h"
#include "mig_planner.h"
#include "smi_topo.h"
#include "smi_xml.h"
#include "topology.h"
#include "vgpu/sdk/standard_rules.h"
#include "vgpu/served_resource.h"

namespace vgpu::nvidia {
namespace {

std::optional<unsigned long long> parseXid(const std::string& s) {
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* migText(MigMode m) { return m == MigMode::kEnabled ? "enabled" : "disabled"; }

}  // namespace

Result<HealthCheckPolicy> HealthCheckPolicy::fromEnvironment(const char* disable, const char* enable) {
  HealthCheckPolicy p;
  for (const auto& item : sdk::splitList(disable ? disable : "")) {
    const std::string word = lower(item);
    if (word == "all" || word == "xids") {
      p.enabled = false;
    } else if (auto xid = parseXid(item)) {
      p.ignoredXids.insert(*xid);
    } else {
      return makeError("DP_DISABLE_HEALTHCHECKS: \"" + item + "\" is neither all, xids nor an Xid number");
    }
  }
  for (const auto& item : sdk::splitList(enable ? enable : "")) {
    if (lower(item) == "all") {
      p.ignoredXids.clear();
    } else if (auto xid = parseXid(item)) {
      p.ignoredXids.erase(*xid);
    } else {
      return makeError("DP_ENABLE_HEALTHCHECKS: \"" + item + "\" is neither all nor an Xid number");
    }
  }
  return p;
}

std::string sysfsPciName(const std::string& busId) {
  std::string id = lower(busId);
  const auto colon = id.find(':');
  if (colon == 8) id.erase(0, 4);  // NVML's 8-digit domain; sysfs uses 4
  return id;
}

Device toDevice(const GpuInfo& gpu, const DiscoverySettings& s, const std::string& discoveredBy) {
  Device d;
  d.id = gpu.uuid;
  d.index = gpu.index;
  d.backend = s.backend;
  d.model = gpu.name;
  d.memoryMiB = static_cast<std::uint64_t>(std::floor(static_cast<double>(gpu.memoryMiB) * s.memoryScaling));
  d.computeUnits = static_cast<std::uint32_t>(std::lround(100.0 * s.coreScaling));
  d.splitCount = s.splitCount;
  d.numaNode = gpu.numaNode;
  d.health = gpu.error.empty() ? Health::kHealthy : Health::kUnhealthy;
  d.attributes[attr::kDiscoveredBy] = discoveredBy;
  if (gpu.mig != MigMode::kUnknown) d.attributes[attr::kMigMode] = migText(gpu.mig);
  if (gpu.minor >= 0) d.attributes[attr::kMinor] = std::to_string(gpu.minor);
  if (!gpu.pciBusId.empty()) d.attributes[attr::kPciBusId] = gpu.pciBusId;
  if (!gpu.computeCapability.empty()) d.attributes[attr::kComputeCapability] = gpu.computeCapability;
  if (!gpu.error.empty()) d.attributes[attr::kHealthReason] = gpu.error;
  if (s.migStrategy == MigStrategy::kMixed) d.attributes[std::string(served_attr::kCountResource)] = s.countResource;
  if (gpu.migManaged && gpu.error.empty()) {
    d.attributes[attr::kMigManaged] = "true";
    d.attributes[attr::kMigProfiles] = encodeMigProfiles(gpu.migProfiles);
    std::vector<MigOccupant> occupants;
    const std::set<unsigned> ours = migStartsPlacedByScheduler(s.mig.stateDir, gpu.uuid);
    for (const auto& m : gpu.migDevices)
      if (!ours.contains(m.start)) occupants.push_back({m.profileId, m.start, m.size});
    d.attributes[attr::kMigInstances] = encodeMigOccupants(occupants);
    d.memoryMiB = gpu.memoryMiB;  // instances are hardware partitions: no memory oversubscription
    d.computeUnits = 100;
  }
  d.links = gpu.links;
  return d;
}

Device toMigDevice(const GpuInfo& gpu, const MigDevice& mig, const DiscoverySettings& s) {
  GpuInfo asGpu = gpu;
  asGpu.uuid = mig.uuid;
  asGpu.memoryMiB = mig.memoryMiB;
  asGpu.mig = MigMode::kUnknown;  // a MIG device is not itself in MIG mode
  asGpu.links.clear();            // NVLink is not usable from MIG devices
  Device d = toDevice(asGpu, s, "nvml");
  d.attributes[attr::kMigProfile] = mig.profile;
  d.attributes[attr::kMigParent] = gpu.uuid;
  d.attributes[attr::kMigPlacement] = std::to_string(mig.start) + ":" + std::to_string(mig.size);
  d.attributes[attr::kGpuInstanceId] = std::to_string(mig.gpuInstanceId);
  d.attributes[attr::kComputeInstanceId] = std::to_string(mig.computeInstanceId);
  setPartitionAttributes(migPartition(gpu.uuid, mig), d.attributes);
  if (s.migStrategy == MigStrategy::kMixed)
    d.attributes[std::string(served_attr::kCountResource)] = migResourceName(s.countResource, mig.profile);
  return d;
}

NvidiaDiscovery::NvidiaDiscovery(DiscoverySettings settings) : settings_(std::move(settings)) {}

NvidiaDiscovery::~NvidiaDiscovery() {
  if (events_ != nullptr && nvml_ && nvml_->fn().eventSetFree) nvml_->fn().eventSetFree(events_);
}

int NvidiaDiscovery::numaFromSysfs(const std::string& busId) const {
  if (busId.empty()) return -1;
  std::ifstream in(settings_.sysRoot + "/bus/pci/devices/" + sysfsPciName(busId) + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return -1;
  return node;
}

Result<std::vector<DeviceProcess>> NvidiaDiscovery::deviceProcesses() {
  const NvmlSession* session = nullptr;
  {
    std::lock_guard lock(mutex_);
    session = nvml_.get();
  }
  if (session == nullptr)
    return makeError("backend " + settings_.backend + " lists processes through NVML, which is not in use here" +
                     (nvmlWhy_.empty() ? std::string(" (no discovery yet)") : ": " + nvmlWhy_));
  return listDeviceProcesses(*session);
}

Result<std::optional<std::uint64_t>> NvidiaDiscovery::cgroupMemoryUsed(const std::string& procCgroup,
                                                                      const std::string& deviceId) {
  const NvmlSession* session = nullptr;
  {
    std::lock_guard lock(mutex_);
    session = nvml_.get();
  }
  // No NVML here, a driver before r615, or a process outside any container's cgroup: the
  // driver keeps no figure for it.
  if (session == nullptr || session->fn().deviceGetMemoryLimits == nullptr || session->fn().deviceGetHandleByUUID == nullptr)
    return std::optional<std::uint64_t>{};
  auto rel = hook::memoryCgroupFromProc(procCgroup);
  if (!rel.ok()) return std::optional<std::uint64_t>{};
  const NvmlFunctions& f = session->fn();
  nvml::Device h = nullptr;
  if (auto rc = f.deviceGetHandleByUUID(deviceId.c_str(), &h); rc != nvml::kSuccess)
    return makeError("GPU " + deviceId + ": " + session->describe("nvmlDeviceGetHandleByUUID", rc));
  // The name the hook set the limit under (vgpu-cdi-hook resolves the same way).
  const std::string nameSpace = settings_.sysRoot + "/fs/cgroup/" + *rel;
  nvmlGetMemoryLimits_v1_t limits{nameSpace.c_str(), 0, 0, 0};
  const auto rc = f.deviceGetMemoryLimits(h, &limits);
  if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorNotFound) return std::optional<std::uint64_t>{};  // e.g. MIG
  if (rc != nvml::kSuccess)
    return makeError("GPU " + deviceId + ", cgroup " + nameSpace + ": " + session->describe("nvmlDeviceGetMemoryLimits_v1", rc));
  // No limit set for the cgroup (cleared: soft 0, hard all ones): not one the hook limited.
  if (limits.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX) return std::optional<std::uint64_t>{};
  return std::optional<std::uint64_t>{limits.currentUsed};
}

Result<std::vector<GpuInfo>> NvidiaDiscovery::listWithNvml() {
  if (!nvml_) {
    auto session = NvmlSession::open(settings_.nvmlLibrary);
    if (!session.ok()) return std::move(session).error();
    std::lock_guard lock(mutex_);  // deviceProcesses() reads it from another thread
    nvml_ = std::move(session).value();
    if (settings_.health.enabled && nvml_->fn().eventSetCreate && nvml_->fn().eventSetWait) {
      if (nvml_->fn().eventSetCreate(&events_) != nvml::kSuccess) events_ = nullptr;
    }
  }
  const NvmlFunctions& f = nvml_->fn();
  unsigned count = 0;
  if (const auto rc = f.deviceGetCount(&count); rc != nvml::kSuccess)
    return makeError(nvml_->describe("nvmlDeviceGetCount_v2", rc));

  std::vector<GpuInfo> gpus;
  std::vector<LinkedGpu> linked;  // the GPUs that answered, for the link matrix
  std::vector<std::size_t> linkedAt;
  for (unsigned i = 0; i < count; ++i) {
    GpuInfo g;
    g.index = static_cast<int>(i);
    const std::string where = "GPU " + std::to_string(i) + ": ";
    nvml::Device h = nullptr;
    if (auto rc = f.deviceGetHandleByIndex(i, &h); rc != nvml::kSuccess) {
      g.error = where + nvml_->describe("nvmlDeviceGetHandleByIndex_v2", rc);
      gpus.push_back(std::move(g));
      continue;
    }
    char text[nvml::kUuidBufferSize] = {};
    if (auto rc = f.deviceGetUUID(h, text, sizeof text); rc != nvml::kSuccess) {
      g.error = where + nvml_->describe("nvmlDeviceGetUUID", rc);
      gpus.push_back(std::move(g));
      continue;
    }
    g.uuid = text;
    char name[nvml::kNameBufferSize] = {};
    if (auto rc = f.deviceGetName(h, name, sizeof name); rc != nvml::kSuccess)
      g.error = where + nvml_->describe("nvmlDeviceGetName", rc);
    g.name = name;
    nvml::Memory memory{};
    if (auto rc = f.deviceGetMemoryInfo(h, &memory); rc != nvml::kSuccess) {
      if (g.error.empty()) g.error = where + nvml_->describe("nvmlDeviceGetMemoryInfo", rc);
    } else {
      g.memoryMiB = memory.total >> 20;
    }
    unsigned value = 0;
    if (f.deviceGetIndex && f.deviceGetIndex(h, &value) == nvml::kSuccess) g.index = static_cast<int>(value);
    if (f.deviceGetMinorNumber && f.deviceGetMinorNumber(h, &value) == nvml::kSuccess)
      g.minor = static_cast<int>(value);
    nvml::PciInfo pci{};
    if (f.deviceGetPciInfo && f.deviceGetPciInfo(h, &pci) == nvml::kSuccess) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      g.pciBusId = pci.busId;
      if (g.error.empty()) {
        linked.push_back({h, g.uuid, pci.domain, pci.bus, pci.device});
        linkedAt.push_back(gpus.size());
      }
    }
    int major = 0, minor = 0;
    if (f.deviceGetCudaComputeCapability && f.deviceGetCudaComputeCapability(h, &major, &minor) == nvml::kSuccess)
      g.computeCapability = std::to_string(major) + "." + std::to_string(minor);
    unsigned current = 0, pending = 0;
    if (f.deviceGetMigMode) {
      const auto rc = f.deviceGetMigMode(h, &current, &pending);
      if (rc == nvml::kSuccess) g.mig = current == nvml::kMigEnable ? MigMode::kEnabled : MigMode::kDisabled;
      else if (rc == nvml::kErrorNotSupported) g.mig = MigMode::kDisabled;  // a GPU without MIG
    }
    const bool named = settings_.mig.managed.contains(g.uuid);
    if (g.error.empty() && (named || (settings_.mig.manageAll && g.mig == MigMode::kEnabled))) {
      // Dynamic MIG: the GPU is published whole, with what it reports for the planner.
      g.migManaged = true;
      if (g.mig != MigMode::kEnabled) {
        g.error = where + "options.migManaged names it, but its MIG mode is off (nvidia-smi -i " +
                  std::to_string(g.index) + " -mig 1)";
      } else {
        auto profiles = readMigProfiles(*nvml_, h);
        auto migs = profiles.ok() ? readMigDevices(*nvml_, h, *profiles) : std::move(profiles).error();
        if (!migs.ok()) g.error = where + "cannot read its MIG state: " + migs.error().message;
        else if (profiles->empty()) g.error = where + "options.migManaged names it, but it reports no MIG profiles";
        else {
          g.migProfiles = std::move(profiles).value();
          g.migDevices = std::move(migs).value();
        }
      }
    } else if (g.mig == MigMode::kEnabled && settings_.migStrategy != MigStrategy::kNone && g.error.empty()) {
      auto profiles = readMigProfiles(*nvml_, h);
      auto migs = profiles.ok() ? readMigDevices(*nvml_, h, *profiles) : std::move(profiles).error();
      if (migs.ok()) g.migDevices = std::move(migs).value();
      else g.error = where + "cannot list its MIG devices: " + migs.error().message;
    }
    // NVML knows NUMA only where GPUs are NUMA nodes themselves; sysfs knows it for PCIe GPUs.
    if (f.deviceGetNumaNodeId && f.deviceGetNumaNodeId(h, &value) == nvml::kSuccess)
      g.numaNode = static_cast<int>(value);
    if (g.error.empty() && settings_.health.enabled) {
      std::vector<std::string> failures;
      watchForXids(h, g.uuid, failures);
      if (!failures.empty()) g.error = where + failures.front();
    }
    gpus.push_back(std::move(g));
  }
  auto links = readNvmlLinks(f, linked);
  for (std::size_t k = 0; k < linked.size(); ++k) gpus[linkedAt[k]].links = std::move(links[k]);
  return gpus;
}

void NvidiaDiscovery::watchForXids(nvml::Device handle, const std::string& uuid, std::vector<std::string>& failures) {
  // The health wait reads handles_ while an event is being attributed.
  std::lock_guard lock(mutex_);
  if (handles_.contains(handle)) return;
  if (auto it = watchFailures_.find(uuid); it != watchFailures_.end()) {
    failures.push_back(it->second);
    return;
  }
  const NvmlFunctions& f = nvml_->fn();
  if (events_ == nullptr || !f.deviceRegisterEvents) return;
  unsigned long long mask = nvml::kEventXidCritical | nvml::kEventDoubleBitEcc | nvml::kEventSingleBitEcc;
  unsigned long long supported = 0;
  if (f.deviceGetSupportedEventTypes) {
    const auto rc = f.deviceGetSupportedEventTypes(handle, &supported);
    if (rc == nvml::kSuccess) {
      mask &= supported;
    } else if (rc != nvml::kErrorNotSupported) {
      watchFailures_[uuid] = nvml_->describe("nvmlDeviceGetSupportedEventTypes", rc);
      failures.push_back(watchFailures_[uuid]);
      return;
    }
  }
  const auto rc = f.deviceRegisterEvents(handle, mask, events_);
  if (rc == nvml::kSuccess) {
    handles_[handle] = uuid;
  } else if (rc != nvml::kErrorNotSupported) {
    // As NVIDIA's plugin: a GPU whose errors cannot be watched is not trusted.
    watchFailures_[uuid] = "cannot watch for Xid errors: " + nvml_->describe("nvmlDeviceRegisterEvents", rc);
    failures.push_back(watchFailures_[uuid]);
  }
}

Result<std::vector<GpuInfo>> NvidiaDiscovery::listWithNvidiaSmi() const {
  auto xml = runProgram(settings_.nvidiaSmiPath, {"-q", "-x"}, settings_.nvidiaSmiTimeout);
  if (!xml.ok()) return std::move(xml).error();
  return parseSmiXml(*xml);
}

void NvidiaDiscovery::linksFromNvidiaSmi(std::vector<GpuInfo>& gpus) const {
  auto text = runProgram(settings_.nvidiaSmiPath, {"topo", "-m"}, settings_.nvidiaSmiTimeout);
  if (!text.ok()) return;
  auto matrix = parseTopoMatrix(*text);
  if (!matrix.ok()) return;
  for (GpuInfo& g : gpus) {
    const auto row = static_cast<std::size_t>(g.index);
    if (g.uuid.empty() || !g.error.empty() || row >= matrix->size()) continue;
    for (const GpuInfo& peer : gpus) {
      const auto column = static_cast<std::size_t>(peer.index);
      if (&peer == &g || peer.uuid.empty() || column >= matrix->size() || !(*matrix)[row][column]) continue;
      const TopoCell cell = *(*matrix)[row][column];
      g.links.push_back({peer.uuid, cell.linkClass, cell.lanes, standardLinkRank(cell.linkClass, cell.lanes)});
    }
  }
}

Result<std::vector<Device>> NvidiaDiscovery::discover() {
  Result<std::vector<GpuInfo>> listed = makeError("no discovery source tried");
  std::string source;
  nvmlWhy_.clear();
  if (settings_.source != DiscoverySource::kNvidiaSmi) {
    listed = listWithNvml();
    source = "nvml";
    if (!listed.ok()) {
      nvmlWhy_ = listed.error().message;
      if (settings_.source == DiscoverySource::kNvml)
        return makeError("backend " + settings_.backend + ": " + nvmlWhy_ + " (backends." + settings_.backend +
                         ".options.discovery is nvml, so nvidia-smi is not tried)");
    }
  } else {
    nvmlWhy_ = "backends." + settings_.backend + ".options.discovery is nvidia-smi";
  }
  if (!listed.ok()) {
    listed = listWithNvidiaSmi();
    source = "nvidia-smi";
    if (!listed.ok()) {
      std::string message = "backend " + settings_.backend + " found no GPUs: ";
      if (settings_.source == DiscoverySource::kAuto) message += "NVML: " + nvmlWhy_ + "; fallback ";
      return makeError(message + "nvidia-smi (" + settings_.nvidiaSmiPath + "): " + listed.error().message);
    }
    linksFromNvidiaSmi(*listed);
  }

  if (auto alike = checkMigStrategy(*listed); !alike.ok()) return std::move(alike).error();
  std::lock_guard lock(mutex_);
  std::vector<Device> out;
  std::set<std::string> seen;
  for (GpuInfo& g : *listed) {
    if (g.numaNode < 0) g.numaNode = numaFromSysfs(g.pciBusId);
    if (g.uuid.empty()) {
      // Keep the identity a GPU had when it last answered, so the scheduler sees the same
      // device turn unhealthy rather than a stranger appear.
      for (const auto& [uuid, d] : known_) {
        auto pci = d.attributes.find(attr::kPciBusId);
        const bool samePci = !g.pciBusId.empty() && pci != d.attributes.end() && pci->second == g.pciBusId;
        if (samePci || (g.pciBusId.empty() && d.index == g.index)) g.uuid = uuid;
      }
      if (g.uuid.empty()) g.uuid = "unidentified-gpu-" + std::to_string(g.index);
    }
    if (!seen.insert(g.uuid).second) continue;
    if (servesMigDevices(g)) {
      for (const MigDevice& m : g.migDevices) {
        seen.insert(m.uuid);
        out.push_back(toMigDevice(g, m, settings_));
      }
      continue;
    }
    Device d = toDevice(g, settings_, source);
    if (auto sticky = stickyUnhealthy_.find(g.uuid); sticky != stickyUnhealthy_.end()) {
      d.health = Health::kUnhealthy;
      d.attributes[attr::kHealthReason] = sticky->second;
    }
    if (d.health == Health::kUnhealthy && d.attributes[attr::kHealthReason].empty())
      d.attributes[attr::kHealthReason] = "unhealthy";
    out.push_back(d);
  }
  for (auto& [uuid, d] : known_) {
    if (seen.contains(uuid)) continue;
    Device gone = d;
    gone.health = Health::kUnhealthy;
    gone.attributes[attr::kHealthReason] = "no longer reported by " + source;
    out.push_back(gone);
  }
  for (const auto& d : out) known_[d.id] = d;
  std::sort(out.begin(), out.end(), [](const Device& a, const Device& b) {
    return a.index != b.index ? a.index < b.index : a.id < b.id;
  });
  return out;
}

bool NvidiaDiscovery::servesMigDevices(const GpuInfo& g) const {
  return settings_.migStrategy != MigStrategy::kNone && g.mig == MigMode::kEnabled && g.error.empty() &&
         !g.migManaged;
}

Status NvidiaDiscovery::checkMigStrategy(const std::vector<GpuInfo>& gpus) const {
  if (settings_.migStrategy != MigStrategy::kSingle) return {};
  // As NVIDIA's plugin: `single` serves one kind of device as nvidia.com/gpu, so every GPU is
  // in MIG mode and every MIG device has the same profile.
  const std::string at = "backend " + settings_.backend + ": options.migStrategy is single, but ";
  std::string profile, first;
  for (const GpuInfo& g : gpus) {
    if (!g.error.empty() || g.migManaged) continue;
    if (g.mig != MigMode::kEnabled)
      return makeError(at + "GPU " + g.uuid + " is not in MIG mode (use mixed, or enable MIG on every GPU)");
    for (const MigDevice& m : g.migDevices) {
      if (profile.empty()) {
        profile = m.profile;
        first = m.uuid;
      } else if (m.profile != profile) {
        return makeError(at + "the MIG devices differ: " + first + " is " + profile + ", " + m.uuid + " is " +
                         m.profile + " (use mixed, or partition every GPU alike)");
      }
    }
  }
  return {};
}

void NvidiaDiscovery::markUnhealthy(const std::string& uuid, const std::string& reason, std::vector<HealthEvent>& out) {
  if (stickyUnhealthy_.contains(uuid)) return;
  stickyUnhealthy_[uuid] = reason;
  out.push_back({uuid, Health::kUnhealthy, reason});
}

Result<std::vector<HealthEvent>> NvidiaDiscovery::waitForHealthEvents(std::chrono::milliseconds timeout) {
  std::vector<HealthEvent> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!settings_.health.enabled || !nvml_ || events_ == nullptr) {
    std::this_thread::sleep_until(deadline);
    return out;
  }
  const NvmlFunctions& f = nvml_->fn();
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    // Once something was found, only drain what is already queued.
    const unsigned waitMs = out.empty() ? static_cast<unsigned>(std::max<long long>(0, left.count())) : 0;
    nvml::EventData event{};
    const auto rc = f.eventSetWait(events_, &event, waitMs);
    if (rc == nvml::kErrorTimeout) return out;
    if (rc != nvml::kSuccess) {
      const std::string reason = "waiting for NVML events failed: " + nvml_->describe("nvmlEventSetWait_v2", rc);
      {
        std::lock_guard lock(mutex_);
        for (const auto& [uuid, d] : known_) markUnhealthy(uuid, reason, out);
      }
      // A broken event set fails at once; do not spin.
      std::this_thread::sleep_until(deadline);
      return out;
    }
    if ((event.eventType & nvml::kEventXidCritical) == 0) continue;
    if (!settings_.health.critical(event.eventData)) continue;
    const std::string reason = "critical Xid " + std::to_string(event.eventData) + " reported by NVML";
    std::string uuid;
    {
      std::lock_guard lock(mutex_);
      if (auto it = handles_.find(event.device); it != handles_.end()) uuid = it->second;
    }
    if (uuid.empty() && event.device != nullptr) {
      // NVIDIA's plugin names the GPU by asking the event's handle for its UUID.
      char text[nvml::kUuidBufferSize] = {};
      if (f.deviceGetUUID(event.device, text, sizeof text) == nvml::kSuccess) uuid = text;
    }
    std::lock_guard lock(mutex_);
    if (uuid.empty() || !known_.contains(uuid)) {
      // An event NVML cannot attribute: every GPU is suspect.
      for (const auto& [id, d] : known_) markUnhealthy(id, reason, out);
    } else {
      markUnhealthy(uuid, reason, out);
    }
    if (std::chrono::steady_clock::now() >= deadline && !out.empty()) return out;
  }
}

}  // namespace vgpu::nvidia
