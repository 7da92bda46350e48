#include "mig_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>

namespace vgpu::nvidia {
namespace fs = std::filesystem;
namespace {

constexpr const char* kRecordSuffix = ".mig";
constexpr unsigned kMaxInstances = 8;

// Writes `text` to `path` durably: the data and then the name reach the disk.
Status writeDurably(const std::string& tmp, const std::string& path, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return makeError("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) return makeError("cannot write " + path + ": " + std::strerror(errno));
  if (int dir = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

}  // namespace

MigManager::MigManager(const NvmlSession& nvml, std::string stateDir, std::vector<std::string> allowed)
    : nvml_(nvml), dir_(std::move(stateDir)), allowed_(std::move(allowed)) {}

Result<nvml::Device> MigManager::gpu(const std::string& uuid) const {
  const NvmlFunctions& f = nvml_.fn();
  if (!f.deviceGetHandleByUUID || !f.deviceCreateGpuInstanceWithPlacement || !f.gpuInstanceCreateComputeInstance ||
      !f.gpuInstanceGetComputeInstanceProfileInfo || !f.deviceGetGpuInstances || !f.gpuInstanceGetInfo ||
      !f.gpuInstanceDestroy || !f.computeInstanceDestroy || !f.gpuInstanceGetComputeInstances ||
      !f.computeInstanceGetInfo)
    return makeError("the driver's NVML (" + nvml_.library() + ") lacks the calls that create MIG instances");
  nvml::Device h = nullptr;
  if (auto rc = f.deviceGetHandleByUUID(uuid.c_str(), &h); rc != nvml::kSuccess)
    return makeError("GPU " + uuid + ": " + nvml_.describe("nvmlDeviceGetHandleByUUID", rc));
  return h;
}

Result<std::vector<MigProfile>> MigManager::profiles(const std::string& gpuUuid) const {
  auto h = gpu(gpuUuid);
  if (!h.ok()) return std::move(h).error();
  return readMigProfiles(nvml_, *h);
}

Result<std::vector<MigOccupant>> MigManager::occupants(const std::string& gpuUuid) const {
  auto h = gpu(gpuUuid);
  if (!h.ok()) return std::move(h).error();
  auto profiles = readMigProfiles(nvml_, *h);
  if (!profiles.ok()) return std::move(profiles).error();
  std::vector<MigOccupant> out;
  for (const auto& p : *profiles) {
    nvmlGpuInstance_t gis[kMaxInstances] = {};
    unsigned n = kMaxInstances;
    if (auto rc = nvml_.fn().deviceGetGpuInstances(*h, p.id, gis, &n); rc != nvml::kSuccess)
      return makeError("GPU " + gpuUuid + ": " + nvml_.describe("nvmlDeviceGetGpuInstances", rc));
    for (unsigned i = 0; i < n; ++i) {
      nvmlGpuInstanceInfo_t info{};
      if (auto rc = nvml_.fn().gpuInstanceGetInfo(gis[i], &info); rc != nvml::kSuccess)
        return makeError("GPU " + gpuUuid + ": " + nvml_.describe("nvmlGpuInstanceGetInfo", rc));
      out.push_back({info.profileId, info.placement.start, info.placement.size});
    }
  }
  return out;
}

std::set<unsigned> migStartsPlacedByScheduler(const std::string& stateDir, const std::string& gpuUuid) {
  std::set<unsigned> out;
  for (const auto& r : MigManager::readRecords(stateDir))
    if (r.gpu == gpuUuid && r.scheduled) out.insert(r.start);
  return out;
}

std::vector<MigManager::Record> MigManager::records() const { return readRecords(dir_); }

std::vector<MigManager::Record> MigManager::readRecords(const std::string& dir) {
  std::vector<Record> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != kRecordSuffix) continue;
    std::ifstream in(entry.path());
    Record r;
    r.file = entry.path().string();
    std::string line;
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "holder") r.holder = value;
      else if (key == "gpu") r.gpu = value;
      else if (key == "state") r.state = value;
      else if (key == "profile") r.profileId = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
      else if (key == "start") r.start = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
      else if (key == "scheduled") r.scheduled = value == "true";
    }
    if (!r.gpu.empty()) out.push_back(std::move(r));
  }
  return out;
}

Status MigManager::writeRecord(const Record& r) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return makeError("cannot create the MIG state folder " + dir_ + ": " + ec.message());
  const std::string text = "holder=" + r.holder + "\ngpu=" + r.gpu + "\nstate=" + r.state +
                           "\nprofile=" + std::to_string(r.profileId) + "\nstart=" + std::to_string(r.start) +
                           "\nscheduled=" + (r.scheduled ? "true" : "false") + "\n";
  // One temporary name per state, so an intent and its completion never share a file.
  return writeDurably(r.file + "." + r.state + ".new", r.file, text);
}

Result<MigPlan> MigManager::choose(const MigPlanner& planner, std::uint64_t memoryMiB, const std::string& placement,
                                   const std::vector<MigOccupant>& occupants, std::string* replanned) {
  if (placement.empty()) return planner.plan(memoryMiB, occupants);
  std::string why;
  if (auto chosen = planner.fromToken(placement); !chosen.ok()) {
    why = chosen.error().message;
  } else if (const MigProfile& p = *chosen->profile; p.memoryMiB < memoryMiB) {
    why = "a " + p.name + " has " + std::to_string(p.memoryMiB) + " MiB, the container " + std::to_string(memoryMiB);
  } else if (std::none_of(planner.profiles().begin(), planner.profiles().end(),
                          [&](const MigProfile& a) { return a.id == p.id; })) {
    why = p.name + " is not among the profiles this node may create (migAllowedProfiles)";
  } else if (auto blocked = planner.blocked(p, chosen->start, occupants)) {
    why = *blocked;
  } else {
    return chosen;
  }
  auto plan = planner.plan(memoryMiB, occupants);
  if (plan.ok() && replanned != nullptr)
    *replanned = "the scheduler chose a MIG instance at " + placement + ", but " + why + "; created a " +
                 plan->profile->name + " on " + describeSlices(plan->start, plan->profile->placementSize) + " instead";
  if (!plan.ok()) return std::move(plan).error().prefix("the scheduler chose " + placement + ", but " + why);
  return plan;
}

Result<MigDevice> MigManager::acquire(const std::string& holder, const std::string& gpuUuid, std::uint64_t memoryMiB,
                                      const std::string& placement, std::string* replanned) {
  // One change of the GPUs' instances at a time: two Allocates planning on the same state
  // would choose the same slices (and write the same record).
  std::lock_guard lock(mutex_);
  const std::string at = "GPU " + gpuUuid + ": ";
  auto h = gpu(gpuUuid);
  if (!h.ok()) return std::move(h).error();
  auto profiles = readMigProfiles(nvml_, *h);
  if (!profiles.ok()) return std::move(profiles).error().prefix("GPU " + gpuUuid);
  // Asked again for the same container (the kubelet retries Allocate): its instance.
  for (const Record& mine : records()) {
    if (mine.holder != holder || mine.gpu != gpuUuid || mine.state != "created") continue;
    auto devices = readMigDevices(nvml_, *h, *profiles);
    if (!devices.ok()) return std::move(devices).error().prefix("GPU " + gpuUuid);
    for (const MigDevice& d : *devices)
      if (d.start == mine.start) return d;
  }
  auto now = occupants(gpuUuid);
  if (!now.ok()) return std::move(now).error();
  const MigPlanner planner(*profiles, allowed_);
  std::string why;
  auto plan = choose(planner, memoryMiB, placement, *now, &why);
  if (replanned != nullptr) *replanned = why;
  if (!plan.ok()) return std::move(plan).error().prefix("GPU " + gpuUuid);
  const MigProfile& p = *plan->profile;

  Record r{(fs::path(dir_) / (gpuUuid + "@" + std::to_string(plan->start) + kRecordSuffix)).string(), holder, gpuUuid,
           "intent", p.id, plan->start, !placement.empty() && why.empty()};
  if (auto s = writeRecord(r); !s.ok()) return std::move(s).error();
  const NvmlFunctions& f = nvml_.fn();
  nvmlGpuInstance_t gi = nullptr;
  auto undo = [&](std::string why) -> Result<MigDevice> {
    if (gi != nullptr) (void)destroy(gpuUuid, plan->start);  // only what this call created
    std::error_code ec;
    fs::remove(r.file, ec);
    return makeError(at + why);
  };
  nvmlGpuInstancePlacement_t where{plan->start, p.placementSize};
  if (auto rc = f.deviceCreateGpuInstanceWithPlacement(*h, p.id, &where, &gi); rc != nvml::kSuccess)
    return undo("creating a " + p.name + " on " + describeSlices(plan->start, p.placementSize) + ": " +
                nvml_.describe("nvmlDeviceCreateGpuInstanceWithPlacement", rc));
  // The compute instance that fills the GPU instance.
  std::optional<unsigned> ciProfile;
  for (unsigned index = NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE + 1; index-- > 0 && !ciProfile;) {
    nvmlComputeInstanceProfileInfo_t info{};
    if (f.gpuInstanceGetComputeInstanceProfileInfo(gi, index, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) ==
            nvml::kSuccess &&
        info.sliceCount == p.slices)
      ciProfile = info.id;
  }
  if (!ciProfile) return undo("the " + p.name + " GPU instance offers no compute instance of all its slices");
  nvmlComputeInstance_t ci = nullptr;
  if (auto rc = f.gpuInstanceCreateComputeInstance(gi, *ciProfile, &ci); rc != nvml::kSuccess)
    return undo(nvml_.describe("nvmlGpuInstanceCreateComputeInstance", rc));
  nvmlGpuInstanceInfo_t giInfo{};
  nvmlComputeInstanceInfo_t ciInfo{};
  if (auto rc = f.gpuInstanceGetInfo(gi, &giInfo); rc != nvml::kSuccess)
    return undo(nvml_.describe("nvmlGpuInstanceGetInfo", rc));
  if (auto rc = f.computeInstanceGetInfo(ci, &ciInfo); rc != nvml::kSuccess)
    return undo(nvml_.describe("nvmlComputeInstanceGetInfo_v2", rc));
  auto devices = readMigDevices(nvml_, *h, *profiles);
  if (!devices.ok()) return undo(devices.error().message);
  for (const MigDevice& d : *devices) {
    if (d.gpuInstanceId != giInfo.id || d.computeInstanceId != ciInfo.id) continue;
    r.state = "created";
    if (auto s = writeRecord(r); !s.ok()) return undo(s.error().message);
    return d;
  }
  return undo("the new " + p.name + " does not show among the GPU's MIG devices");
}

Status MigManager::destroy(const std::string& gpuUuid, unsigned start) {
  auto h = gpu(gpuUuid);
  if (!h.ok()) return std::move(h).error();
  auto profiles = readMigProfiles(nvml_, *h);
  if (!profiles.ok()) return std::move(profiles).error();
  const NvmlFunctions& f = nvml_.fn();
  for (const auto& p : *profiles) {
    nvmlGpuInstance_t gis[kMaxInstances] = {};
    unsigned n = kMaxInstances;
    if (f.deviceGetGpuInstances(*h, p.id, gis, &n) != nvml::kSuccess) continue;
    for (unsigned i = 0; i < n; ++i) {
      nvmlGpuInstanceInfo_t info{};
      if (f.gpuInstanceGetInfo(gis[i], &info) != nvml::kSuccess || info.placement.start != start) continue;
      // Never take an instance from under running work.
      if (f.deviceGetComputeRunningProcesses) {
        nvml::ProcessInfo procs[64];
        unsigned count = 64;
        if (f.deviceGetComputeRunningProcesses(*h, &count, procs) == nvml::kSuccess) {
          for (unsigned k = 0; k < count; ++k)
            if (procs[k].gpuInstanceId == info.id)
              return makeError("GPU " + gpuUuid + ": the " + p.name + " on " + describeSlices(start, info.placement.size) +
                               " still runs process " + std::to_string(procs[k].pid) + "; left in place");
        }
      }
      for (unsigned index = 0; index <= NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE; ++index) {
        nvmlComputeInstance_t cis[kMaxInstances] = {};
        unsigned m = kMaxInstances;
        if (f.gpuInstanceGetComputeInstances(gis[i], index, cis, &m) != nvml::kSuccess) continue;
        for (unsigned k = 0; k < m; ++k)
          if (auto rc = f.computeInstanceDestroy(cis[k]); rc != nvml::kSuccess)
            return makeError("GPU " + gpuUuid + ": " + nvml_.describe("nvmlComputeInstanceDestroy", rc));
      }
      if (auto rc = f.gpuInstanceDestroy(gis[i]); rc != nvml::kSuccess)
        return makeError("GPU " + gpuUuid + ": " + nvml_.describe("nvmlGpuInstanceDestroy", rc));
      return {};
    }
  }
  return {};  // already gone
}

Status MigManager::reclaim(const std::function<bool(const Record&)>& drop) {
  std::string failed;
  for (const Record& r : records()) {
    if (!drop(r)) continue;
    if (auto s = destroy(r.gpu, r.start); !s.ok()) {
      failed += (failed.empty() ? "" : "; ") + s.error().message;
      continue;
    }
    std::error_code ec;
    fs::remove(r.file, ec);
  }
  if (!failed.empty()) return makeError(failed);
  return {};
}

Status MigManager::release(const std::string& holder) {
  std::lock_guard lock(mutex_);
  return reclaim([&](const Record& r) { return r.holder == holder; });
}

Status MigManager::reconcile(const std::set<std::string>& live) {
  std::lock_guard lock(mutex_);
  return reclaim([&](const Record& r) { return r.state != "created" || !live.contains(r.holder); });
}

}  // namespace vgpu::nvidia
