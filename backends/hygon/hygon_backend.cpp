#include "hygon_backend.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "device_table.h"
#include "vgpu/allocator.h"

namespace vgpu::hygon {
namespace fs = std::filesystem;
namespace {

const sdk::StandardResourceNames kDefaultNames{"hygon.com/dcunum", "hygon.com/dcumem", "", "hygon.com/dcucores", ""};

const sdk::ConstraintAnnotationKeys kAnnotationKeys{"hygon.com/use-dcutype", "hygon.com/nouse-dcutype",
                                                    "hygon.com/use-gpuuuid", "hygon.com/nouse-gpuuuid",
                                                    "hygon.com/numa-bind"};

constexpr const char* kContainerConfDir = "/etc/vdev/docker";
constexpr const char* kConfName = "vdev0.conf";
constexpr std::chrono::milliseconds kHealthPoll{1000};

std::vector<std::string> splitPathList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string pciBusIdOf(std::uint64_t bdfid) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>((bdfid >> 32) & 0xffffffffu),
                static_cast<unsigned>((bdfid >> 8) & 0xffu), static_cast<unsigned>((bdfid >> 3) & 0x1fu),
                static_cast<unsigned>(bdfid & 0x7u));
  return buf;
}

std::string trimmed(const char* text) {
  std::string s(text);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

Status writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) return makeError(path.string() + ": cannot be written");
  return {};
}

}  // namespace

// ---- options ----

Result<HygonOptions> HygonOptions::parse(const std::string& backend, const std::map<std::string, std::string>& options) {
  HygonOptions o;
  for (const auto& [key, value] : options) {
    const std::string at = "backends." + backend + ".options." + key;
    auto nonEmpty = [&]() -> Status {
      if (value.empty()) return makeError(at + ": must not be empty");
      return {};
    };
    if (key == "driverDir") {
      o.driverDirs = splitPathList(value);
      if (o.driverDirs.empty()) return makeError(at + ": expected one or more folders separated by ':'");
    } else if (key == "sysfsRoot") {
      if (auto s = nonEmpty(); !s.ok()) return s.error();
      o.sysfsRoot = value;
    } else if (key == "devRoot") {
      if (auto s = nonEmpty(); !s.ok()) return s.error();
      o.devRoot = value;
    } else if (key == "stateDir") {
      if (auto s = nonEmpty(); !s.ok()) return s.error();
      o.stateDir = value;
    } else if (key == "vdevCopyDir") {
      o.vdevCopyDir = value;
    } else if (key == "containerConfDir") {
      if (value.empty() || value[0] != '/' || fs::path(value).relative_path().empty())
        return makeError(at + ": must be an absolute folder other than /, got \"" + value + "\"");
      o.containerConfDir = value;
    } else if (key == "hyhalDir") {
      o.hyhalDir = value;
    } else if (key == "driverMountDir") {
      o.driverMountDir = value;
    } else if (key == "enforcement") {
      if (value == "vdev-file") o.enforcement = Enforcement::kVdevFile;
      else if (value == "hydmi") o.enforcement = Enforcement::kHydmi;
      else if (value == "none") o.enforcement = Enforcement::kNone;
      else return makeError(at + ": expected vdev-file, hydmi or none, got \"" + value + "\"");
    } else {
      return makeError(at +
                       ": unknown option (the hygon backend knows driverDir, sysfsRoot, devRoot, enforcement, "
                       "stateDir, vdevCopyDir, containerConfDir, hyhalDir, driverMountDir)");
    }
  }
  if (o.enforcement == Enforcement::kHydmi && o.vdevCopyDir.empty())
    return makeError("backends." + backend +
                     ".options.vdevCopyDir: must name hydmi's folder (/etc/vdev) with enforcement hydmi: the "
                     "container's file is made from the vdev<id>.conf hydmi writes there");
  return o;
}

// ---- compute units ----

std::uint32_t computeUnitsFor(std::uint32_t percent, std::uint32_t total) {
  if (total == 0) return 0;
  if (percent >= 100) return total;
  const std::uint32_t cus = (percent * total + 99) / 100;
  return std::clamp<std::uint32_t>(cus, 1, total);
}

std::uint32_t percentFor(std::uint32_t cus, std::uint32_t total) {
  if (total == 0 || cus >= total) return 100;
  return (cus * 100 + total - 1) / total;
}

std::uint32_t grantedComputeUnits(std::uint32_t percent, std::uint32_t total) {
  if (total == 0) return 0;
  if (percent >= 100) return total;
  return std::clamp<std::uint32_t>(percent * total / 100, 1, total);
}

std::uint32_t deviceComputeUnits(const vgpu_device& device) {
  for (size_t i = 0; i < device.attributes.count; ++i) {
    const vgpu_kv& kv = device.attributes.items[i];
    if (kv.key == nullptr || kv.value == nullptr || std::string_view(kv.key) != "cuCount") continue;
    const std::string_view v(kv.value);
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && end == v.data() + v.size() && n <= kMaxComputeUnits) return n;
  }
  return device.model ? computeUnitsForModel(device.model) : 0;
}

std::string VdevConfig::render() const {
  std::string s = "PciBusId: " + pciBusId + "\n";
  s += "cu_mask: " + toHex(mask.low) + "\ncu_mask: " + toHex(mask.high) + "\n";
  s += "cu_count: " + std::to_string(cuCount) + "\n";
  s += "mem: " + std::to_string(memoryMiB) + " MiB\n";
  s += "device_id: " + std::to_string(deviceId) + "\n";
  s += "vdev_id: " + std::to_string(vdevId) + "\n";
  s += "pipe_id: " + std::to_string(pipeId) + "\n";
  s += "enable: 1\n";
  return s;
}

Result<VdevConfig> VdevConfig::parse(const std::string& text) {
  VdevConfig c;
  int masks = 0;
  std::set<std::string> seen;
  size_t start = 0;
  int lineNo = 0;
  auto number = [](const std::string& v, std::uint64_t& out) {
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && end == v.data() + v.size();
  };
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = trimmed(text.substr(start, end - start).c_str());
    start = end + 1;
    ++lineNo;
    if (line.empty()) continue;
    const auto colon = line.find(':');
    const std::string where = "line " + std::to_string(lineNo) + " (\"" + line + "\")";
    if (colon == std::string::npos) return makeError(where + ": expected `key: value`");
    const std::string key = trimmed(line.substr(0, colon).c_str());
    const std::string value = trimmed(line.substr(colon + 1).c_str());
    std::uint64_t n = 0;
    if (key == "PciBusId") {
      c.pciBusId = value;
    } else if (key == "cu_mask") {
      auto bits = parseHex(value);
      if (!bits.ok() || masks >= 2) return makeError(where + ": expected two cu_mask lines of 0x<hex>");
      (masks++ == 0 ? c.mask.low : c.mask.high) = *bits;
    } else if (key == "cu_count" && number(value, n) && n <= kMaxComputeUnits) {
      c.cuCount = static_cast<std::uint32_t>(n);
    } else if (key == "mem" && value.size() > 4 && value.substr(value.size() - 4) == " MiB" &&
               number(value.substr(0, value.size() - 4), n)) {
      c.memoryMiB = n;
    } else if ((key == "device_id" || key == "vdev_id" || key == "pipe_id") && number(value, n) && n < 100000) {
      (key == "device_id" ? c.deviceId : key == "vdev_id" ? c.vdevId : c.pipeId) = static_cast<int>(n);
    } else if (key == "enable") {
      if (value != "1") return makeError(where + ": the vDCU is not enabled");
    } else if (key == "cu_count" || key == "mem" || key == "device_id" || key == "vdev_id" || key == "pipe_id") {
      return makeError(where + ": bad value");
    } else {
      continue;  // keys a newer driver may add
    }
    seen.insert(key);
  }
  for (const char* key : {"PciBusId", "cu_mask", "cu_count", "mem", "vdev_id", "pipe_id"})
    if (!seen.contains(key)) return makeError(std::string("no ") + key + " line");
  if (masks != 2) return makeError("expected two cu_mask lines, found " + std::to_string(masks));
  return c;
}

// ---- creation and the allocator ----

HygonBackend::HygonBackend(BackendParams params, HygonOptions options, sdk::StandardRequestRules rules)
    : params_(std::move(params)), options_(std::move(options)), rules_(std::move(rules)),
      resources_(rules_.names.list()) {}

Result<std::unique_ptr<HygonBackend>> HygonBackend::create(const BackendParams& params) {
  auto options = HygonOptions::parse(params.name, params.settings.options);
  if (!options.ok()) return std::move(options).error();
  const auto& s = params.settings;
  const std::string at = "backends." + params.name + ".";
  // CUs are partitioned without overlap and vDCU memory is a hard cap: neither can be
  // oversubscribed, so scaling above 1 would promise what the driver cannot give.
  if (s.coreScaling && *s.coreScaling != 1.0)
    return makeError(at + "coreScaling: must be 1 for Hygon DCUs (compute units are partitioned, not time-shared)");
  if (s.memoryScaling && (*s.memoryScaling <= 0.0 || *s.memoryScaling > 1.0))
    return makeError(at + "memoryScaling: must be in (0, 1] for Hygon DCUs (vDCU memory is a hard limit)");
  if (s.splitCount && (*s.splitCount < 1 || *s.splitCount > static_cast<std::uint32_t>(kMaxPipeIds)))
    return makeError(at + "splitCount: must be between 1 and " + std::to_string(kMaxPipeIds) +
                     " (the driver's pipe ids per DCU)");
  sdk::StandardRequestRules rules;
  rules.backend = params.name;
  rules.names = sdk::StandardResourceNames::resolve(kDefaultNames, params.resources);
  rules.annotations = kAnnotationKeys;
  rules.maxPriority = 0;
  // A slice without hygon.com/dcucores gets the whole DCU's compute, as HAMi gives it;
  // backends.<name>.defaultCores changes that.
  rules.defaultCores = 100;
  rules = rules.withSettings(s);
  if (rules.memoryUnitMiB == 0) return makeError(at + "memoryUnitMiB: must be at least 1");
  return std::unique_ptr<HygonBackend>(new HygonBackend(params, std::move(*options), std::move(rules)));
}

Result<std::optional<DeviceRequest>> HygonBackend::parseRequest(const ContainerResources& container,
                                                                const Annotations& annotations) const {
  auto parsed = sdk::parseStandardRequest(rules_, container, annotations);
  if (!parsed.ok() || !parsed->has_value()) return parsed;
  const DeviceRequest& r = **parsed;
  const bool whole = r.memoryMiB == 0 && (r.memoryPercent == 0 || r.memoryPercent == 100) && r.computePercent >= 100;
  // hyhal reads one configuration file per container (vdev0.conf): one vDCU at most.
  if (r.count > 1 && !whole)
    return makeError("container \"" + container.name + "\": " + rules_.names.count + " of " + std::to_string(r.count) +
                     " with a slice of memory or compute: a container gets at most one virtual DCU; ask for one "
                     "DCU, or for whole DCUs (no " + rules_.names.memory + ", " + rules_.names.cores + " 100)");
  return parsed;
}

void HygonBackend::fit(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                       vgpu_fit_result& result) const {
  const std::uint32_t total = deviceComputeUnits(device);
  vgpu_device_request q = request;
  std::uint32_t cus = 0;
  if (request.compute_percent < 100) {
    if (total == 0) {
      // Still report the ordinary reasons first (health, filters), they are more useful.
      sdk::standardFit(request, device, usage, result);
      if (result.fits || result.reason == VGPU_REASON_INSUFFICIENT_COMPUTE || result.reason == VGPU_REASON_EXCLUSIVE_CONFLICT) {
        result = vgpu_fit_result{};
        result.reason = kReasonUnknownComputeUnits;
      }
      return;
    }
    cus = computeUnitsFor(request.compute_percent, total);
    q.compute_percent = percentFor(cus, total);
  }
  sdk::standardFit(q, device, usage, result);
  if (!result.fits && result.reason == VGPU_REASON_INSUFFICIENT_COMPUTE && request.compute_percent < 100) {
    const std::uint32_t freePercent = device.compute_units > usage.compute ? device.compute_units - usage.compute : 0;
    result.reason = kReasonComputeUnits;
    result.needed = cus;
    result.available = std::min<std::uint64_t>(total, std::uint64_t{freePercent} * total / 100);
  }
}

std::string HygonBackend::explain(const vgpu_fit_result& r) const {
  switch (r.reason) {
    case kReasonComputeUnits:
      return "needs " + std::to_string(r.needed) +
             " whole compute units (the compute percent rounded up to whole CUs of this DCU) but the DCU has only " +
             std::to_string(r.available) + " free";
    case kReasonUnknownComputeUnits:
      return "the DCU's compute-unit count is unknown (model not in the table, no cuCount attribute), so only "
             "whole DCUs can be given";
    default: return explainCoreReason(r);
  }
}

Result<std::map<std::string, std::int64_t>> HygonBackend::admissionDefaults(const ContainerResources& container,
                                                                            const Annotations& annotations) const {
  if (auto parsed = parseRequest(container, annotations); !parsed.ok()) return std::move(parsed).error();
  return sdk::standardAdmissionDefaults(rules_, container, annotations);
}

// ---- discovery ----

Status HygonBackend::openLibraries() {
  if (!rsmi_) {
    auto r = RocmSmi::open(options_.driverDirs);
    if (!r.ok()) return std::move(r).error().prefix("backend " + params_.name);
    rsmi_ = std::move(*r);
  }
  if (!hydmi_) {
    auto h = Hydmi::open(options_.driverDirs);
    if (h.ok()) {
      hydmi_ = std::move(*h);
    } else if (options_.enforcement == Enforcement::kHydmi) {
      return std::move(h).error().prefix("backend " + params_.name + " (enforcement hydmi needs libhydmi.so)");
    }
  }
  return {};
}

Result<std::vector<HygonBackend::Dcu>> HygonBackend::probe() {
  if (auto s = openLibraries(); !s.ok()) return s.error();
  uint32_t count = 0;
  if (const auto st = rsmi_->numMonitorDevices(&count); st != RSMI_STATUS_SUCCESS)
    return makeError("backend " + params_.name + ": " + RocmSmi::describe("rsmi_num_monitor_devices", -1, st));
  int hydmiCount = -1;
  std::string hydmiProblem;
  if (hydmi_) {
    if (const auto st = hydmi_->getDeviceCount(&hydmiCount); st != DMI_STATUS_SUCCESS) {
      hydmiProblem = hydmi_->describe("dmiGetDeviceCount", 0, st);
      hydmiCount = -1;
    }
  }
  std::error_code ec;
  const bool kfd = fs::exists(options_.devRoot / "kfd", ec);
  const auto& settings = params_.settings;
  std::vector<Dcu> out;
  for (uint32_t i = 0; i < count; ++i) {
    Dcu dcu;
    Device& d = dcu.device;
    d.index = static_cast<int>(i);
    d.backend = params_.name;
    d.splitCount = settings.splitCount.value_or(kDefaultSplitCount);
    d.computeUnits = 100;
    std::vector<std::string> problems;
    const int idx = static_cast<int>(i);

    char text[256] = {};
    std::string serial;
    if (rsmi_->devSerialNumberGet(i, text, sizeof text) == RSMI_STATUS_SUCCESS) serial = trimmed(text);
    uint64_t bdfid = 0;
    const bool havePci = rsmi_->devPciIdGet(i, &bdfid) == RSMI_STATUS_SUCCESS;
    if (havePci) dcu.pciBusId = pciBusIdOf(bdfid);
    if (serial.empty()) {
      uint64_t unique = 0;
      if (rsmi_->devUniqueIdGet(i, &unique) == RSMI_STATUS_SUCCESS && unique != 0) {
        char hex[24];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(unique));
        serial = hex;
      } else if (havePci) {
        serial = dcu.pciBusId;
      } else {
        serial = "index-" + std::to_string(i);
        problems.push_back("no serial number, unique id or PCI address");
      }
    }
    d.id = "DCU-" + serial;

    std::string model;
    uint16_t pciDevice = 0;
    if (rsmi_->devIdGet(i, &pciDevice) == RSMI_STATUS_SUCCESS) {
      if (auto m = modelForPciDeviceId(pciDevice)) model = *m;
      d.attributes["pciDeviceId"] = [&] {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%04x", pciDevice);
        return std::string(hex);
      }();
    }
    if (model.empty()) {
      std::fill(std::begin(text), std::end(text), '\0');
      if (rsmi_->devNameGet(i, text, sizeof text) == RSMI_STATUS_SUCCESS) model = trimmed(text);
    }
    d.model = dcuType(model.empty() ? "unknown" : model);

    uint64_t vram = 0;
    if (const auto st = rsmi_->devMemoryTotalGet(i, RSMI_MEM_TYPE_VRAM, &vram); st != RSMI_STATUS_SUCCESS)
      problems.push_back(RocmSmi::describe("rsmi_dev_memory_total_get", idx, st));
    else if (vram == 0)
      problems.push_back("reports no VRAM");
    d.memoryMiB = static_cast<std::uint64_t>(
        std::floor(static_cast<double>(vram / (1024 * 1024)) * settings.memoryScaling.value_or(1.0)));

    uint32_t numa = 0;
    d.numaNode = rsmi_->topoGetNumaNodeNumber(i, &numa) == RSMI_STATUS_SUCCESS && numa < 0xffff ? static_cast<int>(numa) : -1;

    uint32_t busy = 0;
    if (const auto st = rsmi_->devBusyPercentGet(i, &busy); st != RSMI_STATUS_SUCCESS)
      problems.push_back(RocmSmi::describe("rsmi_dev_busy_percent_get", idx, st));

    int renderMinor = -1;
    uint32_t minor = 0;
    if (rsmi_->devDrmRenderMinorGet(i, &minor) == RSMI_STATUS_SUCCESS) renderMinor = static_cast<int>(minor);
    if (auto nodes = findDrmNodes(options_.sysfsRoot, options_.devRoot, renderMinor, idx); nodes.ok()) {
      dcu.nodes = *nodes;
      d.attributes["cardNode"] = nodes->card;
      d.attributes["renderNode"] = nodes->render;
    } else {
      problems.push_back(nodes.error().message);
    }
    if (!kfd) problems.push_back((options_.devRoot / "kfd").string() + " does not exist (is the DCU driver loaded?)");

    if (hydmi_ && hydmiCount >= 0 && idx < hydmiCount) {
      dmiDeviceInfo info{};
      if (const auto st = hydmi_->getDeviceInfo(idx, &info); st == DMI_STATUS_SUCCESS && info.compute_unit_count > 0) {
        dcu.cuCount = static_cast<std::uint32_t>(info.compute_unit_count);
      } else if (options_.enforcement == Enforcement::kHydmi) {
        problems.push_back(st == DMI_STATUS_SUCCESS ? "hydmi reports no compute units"
                                                    : hydmi_->describe("dmiGetDeviceInfo", idx, st));
      }
    } else if (options_.enforcement == Enforcement::kHydmi) {
      problems.push_back(!hydmiProblem.empty() ? hydmiProblem
                                               : "hydmi does not list this device (it reports " +
                                                     std::to_string(hydmiCount) + ")");
    }
    if (dcu.cuCount == 0) dcu.cuCount = computeUnitsForModel(d.model);
    dcu.cuCount = std::min(dcu.cuCount, kMaxComputeUnits);
    if (dcu.cuCount != 0) d.attributes["cuCount"] = std::to_string(dcu.cuCount);
    if (!dcu.pciBusId.empty()) d.attributes["pciBusId"] = dcu.pciBusId;
    if (!serial.empty()) d.attributes["serial"] = serial;

    d.health = problems.empty() ? Health::kHealthy : Health::kUnhealthy;
    for (const auto& p : problems) dcu.problem += (dcu.problem.empty() ? "" : "; ") + p;
    if (!dcu.problem.empty()) d.attributes["unhealthyReason"] = dcu.problem;
    out.push_back(std::move(dcu));
  }
  std::set<std::string> ids;
  for (const auto& dcu : out)
    if (!ids.insert(dcu.device.id).second)
      return makeError("backend " + params_.name + ": two DCUs report the id " + dcu.device.id +
                       " (duplicate serial numbers from ROCm-SMI)");
  return out;
}

Result<std::vector<Device>> HygonBackend::discover() {
  std::lock_guard lock(mutex_);
  auto probed = probe();
  if (!probed.ok()) return std::move(probed).error();
  dcus_ = std::move(*probed);
  lastProbe_ = std::chrono::steady_clock::now();
  std::vector<Device> out;
  for (const auto& dcu : dcus_) {
    lastHealth_[dcu.device.id] = {dcu.device.health, dcu.problem};
    out.push_back(dcu.device);
  }
  return out;
}

Result<std::vector<HealthEvent>> HygonBackend::waitForHealthEvents(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    Clock::time_point next;
    {
      std::lock_guard lock(mutex_);
      next = lastProbe_ + kHealthPoll;
    }
    // The agent calls this in a tight loop: probe the libraries at most once per interval.
    if (next > Clock::now()) {
      std::this_thread::sleep_until(std::min(next, deadline));
      if (next > deadline) return std::vector<HealthEvent>{};
    }
    std::vector<HealthEvent> events;
    {
      std::lock_guard lock(mutex_);
      auto probed = probe();
      lastProbe_ = Clock::now();
      if (!probed.ok()) return std::move(probed).error();
      dcus_ = std::move(*probed);
      for (const auto& dcu : dcus_) {
        const Health h = dcu.device.health;
        auto [it, inserted] = lastHealth_.try_emplace(dcu.device.id, h, dcu.problem);
        if (!inserted && it->second.first != h) {
          events.push_back({dcu.device.id, h, h == Health::kHealthy ? "recovered" : dcu.problem});
          it->second = {h, dcu.problem};
        }
      }
      // A DCU that vanished from ROCm-SMI is lost until it comes back.
      for (auto& [id, last] : lastHealth_) {
        const bool present =
            std::any_of(dcus_.begin(), dcus_.end(), [&](const Dcu& d) { return d.device.id == id; });
        if (!present && last.first != Health::kUnhealthy) {
          last = {Health::kUnhealthy, "no longer listed by ROCm-SMI"};
          events.push_back({id, Health::kUnhealthy, last.second});
        }
      }
    }
    if (!events.empty() || Clock::now() >= deadline) return events;
  }
}

// ---- limiter ----

fs::path HygonBackend::confRoot() const {
  return options_.containerConfDir.empty() ? options_.stateDir / "dcu" : options_.containerConfDir;
}

Status HygonBackend::checkConfDirs(const std::vector<Holding>& holdings) const {
  // Release deletes these folders: only our own per-pod folders (or the older layout's).
  for (size_t i = 0; i < holdings.size(); ++i) {
    const fs::path dir = holdings[i].confDir;
    if (dir.empty() || dir.parent_path() == confRoot() || dir.filename() == kLegacyConfDirName) continue;
    return makeError("state file " + stateFilePath(options_.stateDir).string() + ": holdings[" + std::to_string(i) +
                     "].confDir: \"" + dir.string() + "\" is not a folder of this backend (" + confRoot().string() +
                     "); move the file aside to start afresh");
  }
  return {};
}

Status HygonBackend::loadState() {
  if (stateLoaded_) return {};
  auto loaded = loadHoldings(stateFilePath(options_.stateDir));
  if (!loaded.ok()) return std::move(loaded).error().prefix("backend " + params_.name);
  if (auto s = checkConfDirs(*loaded); !s.ok()) return makeError("backend " + params_.name + ": " + s.error().message);
  holdings_ = std::move(*loaded);
  stateLoaded_ = true;
  return {};
}

Result<std::vector<Holding>> HygonBackend::holdings() {
  std::lock_guard lock(mutex_);
  if (auto s = loadState(); !s.ok()) return s.error();
  return holdings_;
}

Result<const HygonBackend::Dcu*> HygonBackend::dcuFor(const DeviceGrant& grant) {
  auto find = [&]() -> const Dcu* {
    for (const auto& d : dcus_)
      if (d.device.id == grant.deviceId) return &d;
    return nullptr;
  };
  if (const Dcu* d = find(); d && d->device.health == Health::kHealthy) return d;
  auto probed = probe();  // the agent may not have discovered since the DCU changed
  if (!probed.ok()) return std::move(probed).error();
  dcus_ = std::move(*probed);
  const Dcu* d = find();
  if (!d) return makeError("DCU " + grant.deviceId + " is not on this node (ROCm-SMI does not list it)");
  if (d->device.health != Health::kHealthy) return makeError("DCU " + grant.deviceId + " is unhealthy: " + d->problem);
  return d;
}

Result<std::map<int, int>> HygonBackend::hydmiVdevs() {
  int perDevice = 0, devices = 0;
  if (const auto st = hydmi_->getMaxVDeviceCount(&perDevice); st != DMI_STATUS_SUCCESS)
    return makeError(hydmi_->describe("dmiGetMaxVDeviceCount", 0, st));
  if (hydmi_->getDeviceCount(&devices) != DMI_STATUS_SUCCESS) devices = 1;
  const int limit = std::clamp(perDevice * std::max(devices, 1), kMaxVdevIds, 4096);
  std::map<int, int> out;
  for (int vid = 0; vid < limit; ++vid) {
    dmiDeviceInfo info{};
    const auto st = hydmi_->getVDeviceInfo(vid, &info);
    if (st == DMI_STATUS_SUCCESS) {
      out[vid] = info.device_id;
    } else if (st == DMI_STATUS_OPEN_MKFD_FAILED || st == DMI_STATUS_MKFD_NOT_OPENED ||
               st == DMI_STATUS_NOT_INITIALIZED) {
      return makeError(hydmi_->describe("dmiGetVDeviceInfo", vid, st));  // hydmi itself fails, not "no such vDCU"
    }
  }
  return out;
}

Result<std::vector<int>> HygonBackend::hydmiVdevIds(int device) {
  auto all = hydmiVdevs();
  if (!all.ok()) return std::move(all).error();
  std::vector<int> ids;
  for (const auto& [vid, dev] : *all)
    if (dev == device) ids.push_back(vid);
  return ids;
}

namespace {

/// A piece of a folder name: only [A-Za-z0-9.-], so `_` separates the fields.
std::string namePart(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '-';
  return out.empty() ? "-" : out;
}

/// `<podUID>_<container>_<devIdx>_<pipeId>_<vdevId>_<mask1>_<mask2>`, the per-container
/// folder layout of HAMi's dcu-vgpu-device-plugin, so Hygon's tooling finds the same names.
std::string confDirName(const Holding& h) {
  return namePart(h.podUid.empty() ? h.container.holder : h.podUid) + "_" + namePart(h.container.containerName) + "_" +
         std::to_string(h.deviceIndex) + "_" + std::to_string(h.pipeId) + "_" + std::to_string(h.vdevId) + "_" +
         toHex(h.mask.low) + "_" + toHex(h.mask.high);
}

/// The pod UID of a folder confDirName made, or nullopt for a name that is not ours.
std::optional<std::string> podOfConfDir(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = name.find('_', start)) != std::string::npos; start = end + 1)
    parts.push_back(name.substr(start, end - start));
  parts.push_back(name.substr(start));
  if (parts.size() != 7 || parts[0].empty() || parts[5].rfind("0x", 0) != 0 || parts[6].rfind("0x", 0) != 0)
    return std::nullopt;
  for (int i : {2, 3, 4})
    if (parts[static_cast<size_t>(i)].empty() ||
        !std::all_of(parts[static_cast<size_t>(i)].begin(), parts[static_cast<size_t>(i)].end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      return std::nullopt;
  return parts[0];
}

}  // namespace

Result<Holding> HygonBackend::createVdev(const ContainerGrant& grant, const DeviceGrant& g, const Dcu& dcu,
                                         std::uint32_t cus, std::vector<std::function<void()>>& undo) {
  const int devIndex = dcu.device.index;
  Holding h;
  h.container = grant.container;
  h.podUid = grant.podUid;
  h.deviceId = dcu.device.id;
  h.deviceIndex = devIndex;
  h.memoryMiB = g.memoryMiB;

  CuMask used;
  std::uint64_t usedMemory = 0;
  std::set<int> vdevIds, pipeIds;
  for (const auto& o : holdings_) {
    if (o.vdevId >= 0) vdevIds.insert(o.vdevId);  // node-wide, whichever mode made it
    if (o.deviceId != h.deviceId) continue;
    used |= o.mask;
    usedMemory += o.memoryMiB;
    if (o.pipeId >= 0) pipeIds.insert(o.pipeId);
  }
  auto mask = allocateComputeUnits(used, dcu.cuCount, cus);
  if (!mask)
    return makeError("DCU " + h.deviceId + " has " + std::to_string(dcu.cuCount - std::min(dcu.cuCount, used.count())) +
                     " free compute units, the container needs " + std::to_string(cus) +
                     " (the node's holdings disagree with the scheduler; check for containers the agent lost track of)");
  h.mask = *mask;
  const std::uint64_t rawMemory = dcu.device.memoryMiB;
  if (usedMemory + g.memoryMiB > rawMemory)
    return makeError("DCU " + h.deviceId + " has " + std::to_string(rawMemory - std::min(rawMemory, usedMemory)) +
                     " MiB not given to other vDCUs, the container needs " + std::to_string(g.memoryMiB) + " MiB");

  if (options_.enforcement == Enforcement::kNone) return h;

  VdevConfig conf;
  conf.pciBusId = dcu.pciBusId;
  conf.cuCount = cus;
  conf.memoryMiB = g.memoryMiB;
  std::error_code ec;
  const fs::path hostVdevDir = options_.vdevCopyDir;
  if (options_.enforcement == Enforcement::kVdevFile) {
    // vDCU ids are the node's: skip those hydmi lists (made by hy-smi or another tool) and
    // any vdev<id>.conf on the host that is not ours, so no file of someone else's is touched.
    if (hydmi_)
      if (auto listed = hydmiVdevs(); listed.ok())
        for (const auto& [vid, dev] : *listed) vdevIds.insert(vid);
    int vid = 0;
    while (vid < kMaxVdevIds &&
           (vdevIds.contains(vid) ||
            (!hostVdevDir.empty() && fs::exists(hostVdevDir / ("vdev" + std::to_string(vid) + ".conf"), ec))))
      ++vid;
    if (vid == kMaxVdevIds) return makeError("all " + std::to_string(kMaxVdevIds) + " vDCU ids of this node are in use");
    int pipe = 0;
    while (pipe < kMaxPipeIds && pipeIds.contains(pipe)) ++pipe;
    if (pipe == kMaxPipeIds)
      return makeError("all " + std::to_string(kMaxPipeIds) + " pipe ids of DCU " + h.deviceId + " are in use");
    h.vdevId = vid;
    h.pipeId = pipe;
  } else {
    auto before = hydmiVdevIds(devIndex);
    if (!before.ok()) return std::move(before).error();
    int cuArg = static_cast<int>(cus);
    int memArg = static_cast<int>(std::min<std::uint64_t>(g.memoryMiB, 0x7fffffff));
    if (const auto st = hydmi_->createVDevices(devIndex, 1, &cuArg, &memArg); st != DMI_STATUS_SUCCESS) {
      std::string left;
      size_t freeCus = 0, freeBytes = 0;
      if (hydmi_->getDeviceRemainingInfo(devIndex, &freeCus, &freeBytes) == DMI_STATUS_SUCCESS)
        left = " (the driver has " + std::to_string(freeCus) + " compute units and " +
               std::to_string(freeBytes / (1024 * 1024)) + " MiB left on it)";
      return makeError("cannot create a vDCU with " + std::to_string(cus) + " compute units and " +
                       std::to_string(g.memoryMiB) + " MiB on DCU " + h.deviceId + ": " +
                       hydmi_->describe("dmiCreateVDevices", devIndex, st) + left);
    }
    auto after = hydmiVdevIds(devIndex);
    std::vector<int> created;
    if (after.ok())
      std::set_difference(after->begin(), after->end(), before->begin(), before->end(), std::back_inserter(created));
    if (created.size() != 1) {
      // We cannot tell which vDCU is ours, so none can be destroyed safely; say so loudly.
      return makeError("hydmi created a vDCU on DCU " + h.deviceId + " but it cannot be identified (" +
                       (after.ok() ? std::to_string(created.size()) + " new vDCUs appeared" : after.error().message) +
                       "); destroy it by hand with hy-smi");
    }
    h.vdevId = created.front();
    h.hydmi = true;
    Hydmi* hydmi = hydmi_.get();
    const int vid = h.vdevId;
    undo.push_back([hydmi, vid] { hydmi->destroySingleVDevice(vid); });
    // hydmi placed the CUs and picked the pipe, and wrote them in its own file, which it
    // owns: read it, never write it.
    const fs::path own = hostVdevDir / ("vdev" + std::to_string(vid) + ".conf");
    std::ifstream in(own);
    if (!in)
      return makeError("hydmi made vDCU " + std::to_string(vid) + " on DCU " + h.deviceId + " but wrote no " +
                       own.string() + "; the container needs the CU mask and pipe from it (is options.vdevCopyDir "
                       "hydmi's folder?)");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto theirs = VdevConfig::parse(text);
    if (!theirs.ok()) return makeError("hydmi's " + own.string() + ": " + theirs.error().message);
    if (theirs->vdevId != vid)
      return makeError("hydmi's " + own.string() + " names vDCU " + std::to_string(theirs->vdevId) + ", not " +
                       std::to_string(vid));
    h.mask = theirs->mask;
    h.pipeId = theirs->pipeId;
    if (!theirs->pciBusId.empty()) conf.pciBusId = theirs->pciBusId;
    conf.cuCount = theirs->cuCount;
    conf.memoryMiB = theirs->memoryMiB;
  }
  conf.mask = h.mask;
  conf.vdevId = h.vdevId;
  conf.pipeId = h.pipeId;
  conf.deviceId = 0;  // the container sees its one vDCU as device 0

  const fs::path confDir = confRoot() / confDirName(h);
  fs::remove_all(confDir, ec);  // a folder left by an agent killed half way
  fs::create_directories(confDir, ec);
  if (ec) return makeError(confDir.string() + ": cannot be created: " + ec.message());
  undo.push_back([confDir] {
    std::error_code e;
    fs::remove_all(confDir, e);
  });
  h.confDir = confDir.string();
  const std::string text = conf.render();
  if (auto s = writeFile(confDir / kConfName, text); !s.ok()) return s.error();
  if (options_.enforcement == Enforcement::kVdevFile && !hostVdevDir.empty()) {
    fs::create_directories(hostVdevDir, ec);
    if (ec) return makeError(hostVdevDir.string() + ": cannot be created: " + ec.message());
    const fs::path copy = hostVdevDir / ("vdev" + std::to_string(h.vdevId) + ".conf");
    VdevConfig hostConf = conf;
    hostConf.deviceId = devIndex;  // on the host, the DCU's own index
    if (auto s = writeFile(copy, hostConf.render()); !s.ok()) {
      fs::remove(copy, ec);
      return s.error();
    }
    undo.push_back([copy] {
      std::error_code e;
      fs::remove(copy, e);
    });
    h.copyPath = copy.string();
  }
  return h;
}

Result<ContainerSpec> HygonBackend::containerSpec(const ContainerGrant& grant) {
  std::lock_guard lock(mutex_);
  const std::string who = "container " + grant.container.containerName + " of pod " + grant.podNamespace + "/" + grant.podName;
  if (grant.devices.empty()) return makeError(who + " was granted no DCUs");
  if (auto s = loadState(); !s.ok()) return s.error();
  if (auto s = openLibraries(); !s.ok()) return s.error();

  std::error_code ec;
  const fs::path kfd = options_.devRoot / "kfd";
  if (!fs::exists(kfd, ec)) return makeError(who + ": " + kfd.string() + " does not exist (is the DCU driver loaded?)");

  // Copies: a later dcuFor may probe again and replace dcus_.
  std::vector<Dcu> dcus;
  std::set<std::string> seen;
  std::size_t partial = 0;
  for (const auto& g : grant.devices) {
    auto dcu = dcuFor(g);
    if (!dcu.ok()) return std::move(dcu).error().prefix(who);
    if (!seen.insert(g.deviceId).second) return makeError(who + ": DCU " + g.deviceId + " is granted twice");
    if (!(*dcu)->nodes) return makeError(who + ": DCU " + g.deviceId + " has no DRM nodes");
    dcus.push_back(**dcu);
    if (g.compute < 100 || g.memoryMiB < dcus.back().device.memoryMiB) ++partial;
  }
  if (partial > 0 && grant.devices.size() > 1)
    return makeError(who + ": a slice of a DCU is granted with other DCUs; a container gets at most one vDCU");

  // The kubelet asks again for a container it may have started already (it lost its record
  // of the devices): the same grant keeps its vDCUs, in use. Anything else (a retried
  // Allocate, a vDCU gone with a reboot) starts from a clean slate.
  if (auto kept = heldAsGranted(grant, dcus)) {
    ContainerSpec spec;
    for (const auto& h : *kept)
      if (!h.confDir.empty()) spec.mounts.push_back({h.confDir, kContainerConfDir, true});
    finishSpec(spec, grant, dcus, kfd);
    return spec;
  }
  if (auto s = releaseWhere([&](const ContainerRef& c) { return c == grant.container; }); !s.ok())
    return makeError(who + ": releasing its earlier vDCU: " + s.error().message);

  std::vector<std::function<void()>> undo;
  auto rollback = [&] {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
  };
  std::vector<Holding> added;
  ContainerSpec spec;
  for (size_t i = 0; i < grant.devices.size(); ++i) {
    const DeviceGrant& g = grant.devices[i];
    const Dcu& dcu = dcus[i];
    const bool whole = g.compute >= 100 && g.memoryMiB >= dcu.device.memoryMiB;
    if (whole) {
      for (const auto& o : holdings_)
        if (o.deviceId == g.deviceId) {
          rollback();
          return makeError(who + ": wants DCU " + g.deviceId + " whole but container " + o.container.containerName +
                           " (" + o.container.holder + ") holds part of it");
        }
      Holding h;
      h.container = grant.container;
      h.podUid = grant.podUid;
      h.deviceId = g.deviceId;
      h.deviceIndex = dcu.device.index;
      h.whole = true;
      h.mask = CuMask::firstN(dcu.cuCount == 0 ? kMaxComputeUnits : dcu.cuCount);
      h.memoryMiB = dcu.device.memoryMiB;
      added.push_back(std::move(h));
      continue;
    }
    if (dcu.cuCount == 0) {
      rollback();
      return makeError(who + ": the compute-unit count of DCU " + g.deviceId + " (" + dcu.device.model +
                       ") is unknown, so it can only be given whole");
    }
    auto h = createVdev(grant, g, dcu, grantedComputeUnits(g.compute, dcu.cuCount), undo);
    if (!h.ok()) {
      rollback();
      return std::move(h).error().prefix(who);
    }
    if (!h->confDir.empty()) spec.mounts.push_back({h->confDir, kContainerConfDir, true});
    added.push_back(std::move(*h));
  }

  std::vector<Holding> next = holdings_;
  next.insert(next.end(), added.begin(), added.end());
  if (auto s = saveHoldings(stateFilePath(options_.stateDir), next); !s.ok()) {
    rollback();
    return makeError(who + ": recording its vDCU: " + s.error().message);
  }
  holdings_ = std::move(next);
  finishSpec(spec, grant, dcus, kfd);
  return spec;
}

std::optional<std::vector<Holding>> HygonBackend::heldAsGranted(const ContainerGrant& grant,
                                                                 const std::vector<Dcu>& dcus) {
  std::vector<Holding> mine;
  for (const auto& h : holdings_)
    if (h.container == grant.container) mine.push_back(h);
  if (mine.size() != grant.devices.size()) return std::nullopt;
  std::error_code ec;
  for (size_t i = 0; i < mine.size(); ++i) {
    const Holding& h = mine[i];
    const DeviceGrant& g = grant.devices[i];
    const Dcu& dcu = dcus[i];
    if (h.deviceId != g.deviceId) return std::nullopt;
    const bool whole = g.compute >= 100 && g.memoryMiB >= dcu.device.memoryMiB;
    if (whole != h.whole) return std::nullopt;
    if (whole) continue;
    if (h.memoryMiB != g.memoryMiB || h.mask.count() != grantedComputeUnits(g.compute, dcu.cuCount))
      return std::nullopt;
    if (!h.confDir.empty() && !fs::is_directory(h.confDir, ec)) return std::nullopt;
    if (h.hydmi) {
      auto live = hydmiVdevIds(h.deviceIndex);
      if (!live.ok() || std::find(live->begin(), live->end(), h.vdevId) == live->end()) return std::nullopt;
    }
  }
  return mine;
}

void HygonBackend::finishSpec(ContainerSpec& spec, const ContainerGrant& grant, const std::vector<Dcu>& dcus,
                              const fs::path& kfd) {
  std::error_code ec;
  spec.devices.push_back({kfd.string(), "/dev/kfd", "rwm"});
  if (fs::exists(options_.devRoot / "mkfd", ec))
    spec.devices.push_back({(options_.devRoot / "mkfd").string(), "/dev/mkfd", "rwm"});
  for (const Dcu& dcu : dcus) {
    for (const auto& node : {dcu.nodes->card, dcu.nodes->render})
      spec.devices.push_back({(options_.devRoot / "dri" / node).string(), "/dev/dri/" + node, "rwm"});
  }
  if (!options_.hyhalDir.empty() && fs::is_directory(options_.hyhalDir, ec))
    spec.mounts.push_back({options_.hyhalDir, "/opt/hyhal", true});
  if (!options_.driverMountDir.empty() && fs::is_directory(options_.driverMountDir, ec))
    spec.mounts.push_back({options_.driverMountDir, "/opt/hygondriver", true});
  std::string ids;
  for (const auto& g : grant.devices) ids += (ids.empty() ? "" : ",") + g.deviceId;
  spec.annotations["hygon.com/dcu-ids"] = ids;
}

Status HygonBackend::undoHolding(const Holding& h) {
  if (h.hydmi && h.vdevId >= 0) {
    if (auto s = openLibraries(); !s.ok()) return s;
    if (!hydmi_) return makeError("vDCU " + std::to_string(h.vdevId) + " cannot be destroyed: libhydmi.so is not loaded");
    // hydmi removes its own vdev<id>.conf with the vDCU.
    const auto st = hydmi_->destroySingleVDevice(h.vdevId);
    if (st != DMI_STATUS_SUCCESS && st != DMI_STATUS_VDEV_NOT_EXIST)
      return makeError("vDCU " + std::to_string(h.vdevId) + " on DCU " + h.deviceId + " of container " +
                       h.container.containerName + ": " + hydmi_->describe("dmiDestroySingleVDevice", h.vdevId, st));
  }
  std::error_code ec;
  if (!h.confDir.empty()) fs::remove_all(h.confDir, ec);
  if (!h.copyPath.empty()) fs::remove(h.copyPath, ec);
  return {};
}

Status HygonBackend::releaseWhere(const std::function<bool(const ContainerRef&)>& gone) {
  std::vector<Holding> keep;
  std::string failures;
  bool changed = false;
  for (const auto& h : holdings_) {
    if (!gone(h.container)) {
      keep.push_back(h);
      continue;
    }
    if (auto s = undoHolding(h); !s.ok()) {
      // Kept, so a later release or reconcile tries again.
      keep.push_back(h);
      failures += (failures.empty() ? "" : "; ") + s.error().message;
      continue;
    }
    changed = true;
  }
  if (changed) {
    if (auto s = saveHoldings(stateFilePath(options_.stateDir), keep); !s.ok()) return s;
    holdings_ = std::move(keep);
  }
  if (!failures.empty()) return makeError(failures);
  return {};
}

Status HygonBackend::collectStaleConfDirs() {
  const fs::path root = confRoot();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  std::set<std::string> keepDirs, livePods;
  for (const auto& h : holdings_) {
    if (!h.confDir.empty()) keepDirs.insert(h.confDir);
    if (!h.podUid.empty()) livePods.insert(h.podUid);
  }
  std::string failures;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto pod = podOfConfDir(name);
    // Only folders named as we name them; and never one a live pod holds, even unrecorded.
    if (!pod || !it->is_directory() || keepDirs.contains(it->path().string()) || livePods.contains(*pod)) continue;
    std::error_code rec;
    fs::remove_all(it->path(), rec);
    if (rec) failures += (failures.empty() ? "" : "; ") + it->path().string() + ": " + rec.message();
  }
  if (!failures.empty()) return makeError("removing stale vDCU folders: " + failures);
  return {};
}

Status HygonBackend::release(const ContainerRef& container) {
  std::lock_guard lock(mutex_);
  if (auto s = loadState(); !s.ok()) return s;
  return releaseWhere([&](const ContainerRef& c) { return c == container; });
}

Status HygonBackend::reconcile(const std::vector<ContainerRef>& live) {
  std::lock_guard lock(mutex_);
  if (auto s = loadState(); !s.ok()) return s;
  const std::set<ContainerRef> keep(live.begin(), live.end());
  const Status released = releaseWhere([&](const ContainerRef& c) { return !keep.contains(c); });
  const Status collected = collectStaleConfDirs();
  if (!released.ok()) return released;
  return collected;
}

Result<std::vector<ContainerUsage>> HygonBackend::containerUsage() {
  std::lock_guard lock(mutex_);
  if (auto s = loadState(); !s.ok()) return s.error();
  if (holdings_.empty()) return std::vector<ContainerUsage>{};
  if (auto s = openLibraries(); !s.ok()) return s.error();
  std::map<ContainerRef, int> nextIndex;
  std::vector<ContainerUsage> out;
  for (const auto& h : holdings_) {
    ContainerUsage u;
    u.container = h.container;
    u.deviceId = h.deviceId;
    u.deviceIndex = nextIndex[h.container]++;  // in the container: its DCUs in grant order
    u.memoryLimitBytes = h.memoryMiB << 20;
    std::uint32_t total = 0;
    for (const auto& d : dcus_)
      if (d.device.id == h.deviceId) total = d.cuCount;
    u.computeLimitPercent = h.whole ? 100 : total == 0 ? 0 : percentFor(h.mask.count(), total);
    const auto index = static_cast<uint32_t>(h.deviceIndex);
    if (h.whole) {
      // Held alone: the device's own figures are the container's.
      std::uint64_t used = 0;
      if (rsmi_->devMemoryUsageGet && rsmi_->devMemoryUsageGet(index, RSMI_MEM_TYPE_VRAM, &used) == RSMI_STATUS_SUCCESS)
        u.memoryUsedBytes = used;
      std::uint32_t busy = 0;
      if (rsmi_->devBusyPercentGet(index, &busy) == RSMI_STATUS_SUCCESS) u.utilizationPercent = std::min(busy, 100u);
    } else if (h.hydmi && hydmi_) {
      dmiDeviceInfo info{};
      if (hydmi_->getVDeviceInfo(h.vdevId, &info) == DMI_STATUS_SUCCESS) u.memoryUsedBytes = info.usage_mem_size;
      int busy = 0;
      if (hydmi_->getVDevBusyPercent && hydmi_->getVDevBusyPercent(h.vdevId, &busy) == DMI_STATUS_SUCCESS && busy >= 0)
        u.utilizationPercent = std::min(static_cast<std::uint32_t>(busy), 100u);
    }
    // A vdev-file slice: no query covers a vDCU hydmi did not make; only its limits are known.
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace vgpu::hygon
