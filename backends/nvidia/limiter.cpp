#include "limiter.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "vgpu/host_files.h"
#include "vgpu/limiter_contract.h"
#include "vgpu/shared_region.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::nvidia {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxDevices = 16;  // libvgpu.so knows CUDA ordinals 0..15

bool optedOut(const ContainerGrant& grant) {
  auto it = grant.podAnnotations.find(kOptOutAnnotation);
  return it != grant.podAnnotations.end() && optOutNames(it->second, grant.container.containerName);
}

/// Creates the container's shared region `name` in the folder `shared` (or keeps a sound one
/// already there) and returns its inode number: libvgpu.so then opens only that file, so a
/// tenant that deletes, truncates or replaces it gets CUDA refused instead of a fresh region
/// with nothing counted. The file is opened by the agent without following links (whatever a
/// tenant planted there goes) and handed to vgpu_region_open as /proc/self/fd/<n>, which
/// reaches exactly that inode.
Result<std::uint64_t> createRegion(int shared, const std::string& name, const std::string& shown) {
  std::string why;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto fd = createOwnFileAt(shared, name, 0666, shown);
    if (!fd) return fd.error();
    const std::string at = "/proc/self/fd/" + std::to_string(fd->get());
    char err[512] = "";
    vgpu_region* region = nullptr;
    if (vgpu_region_open(at.c_str(), &region, err, sizeof err) == VGPU_REGION_OK) {
      vgpu_region_close(region);
      return inodeOf(fd->get());
    }
    why = err;
    if (auto pos = why.find(at); pos != std::string::npos) why.replace(pos, at.size(), shown);
    // Not a region this build can use: start it over.
    if (auto s = removeAt(shared, name, shown); !s.ok()) return s.error();
  }
  return makeError("cannot create the shared region: " + why);
}

}  // namespace

bool optOutNames(const std::string& containers, const std::string& container) {
  for (const auto& item : sdk::splitList(containers))
    if (item == "true" || item == "*" || item == container) return true;
  return false;
}

Status kernelMemoryCapSupport(bool nvmlHasSetMemoryLimits, const std::string& sysRoot, bool needCgroupV2) {
  if (!nvmlHasSetMemoryLimits)
    return makeError("the NVIDIA driver's NVML has no nvmlDeviceSetMemoryLimits_v1 (the kernel memory cap "
                     "needs driver r615 or newer)");
  if (!needCgroupV2) return {};
  const fs::path cgroup = fs::path(sysRoot) / "fs/cgroup";
  std::error_code ec;
  if (!fs::exists(cgroup / "cgroup.controllers", ec))
    return makeError("cgroup v2 is not mounted at " + cgroup.string() + " (the kernel memory cap needs cgroup v2)");
  return {};
}

std::vector<std::string> cdiHookArgs(const std::vector<std::pair<std::string, std::uint64_t>>& devices,
                                     const std::string& softLimit, bool mustApply, const std::string& nvmlLibrary) {
  std::vector<std::string> args{"vgpu-cdi-hook", "memory-limits"};
  for (const auto& [uuid, mib] : devices) {
    args.emplace_back("--device");
    args.push_back(uuid + "=" + std::to_string(mib));
  }
  args.insert(args.end(), {"--soft-limit", softLimit, "--on-failure", mustApply ? "fail" : "preload-only"});
  if (!nvmlLibrary.empty()) args.insert(args.end(), {"--nvml-library", nvmlLibrary});
  return args;
}

/// Who holds the container to its memory, in words for the pod's events.
std::string NvidiaLimiter::memoryEnforcerNote(const ContainerGrant& grant, bool driverCap, bool optOut) const {
  std::string limits;
  for (size_t i = 0; i < grant.devices.size(); ++i)
    limits += (i ? ", " : "") + std::to_string(grant.devices[i].memoryMiB) + " MiB on " + grant.devices[i].deviceId;
  if (driverCap && !settings_.cdiHookPath.empty())
    return "memory limit (" + limits + ") enforced by the NVIDIA driver, a per-cgroup cap vgpu-cdi-hook sets when the "
           "container is created" + (optOut ? "" : ", and by libvgpu.so in the container");
  if (driverCap)
    return "memory limit (" + limits + ") enforced by the NVIDIA driver, a cap applied through the CDI kind " +
           settings_.cdiKind;
  if (optOut)
    return "memory limit (" + limits + ") NOT enforced: the pod opted out of libvgpu.so with " +
           std::string(kOptOutAnnotation) + ", which backends." + settings_.backend +
           ".options.allowOptOut permits on this node";
  return "memory limit (" + limits + ") enforced by libvgpu.so in the container";
}

NvidiaLimiter::NvidiaLimiter(LimiterSettings settings, std::function<Status()> kernelCapSupport)
    : settings_(std::move(settings)), probe_(std::move(kernelCapSupport)) {}

const Status& NvidiaLimiter::kernelCap() {
  if (!kernelCap_) kernelCap_ = probe_ ? probe_() : Status(makeError("no way to check the driver's memory cap"));
  return *kernelCap_;
}

Result<ContainerSpec> NvidiaLimiter::containerSpec(const ContainerGrant& grant) {
  const std::string who = "container \"" + grant.container.containerName + "\" of pod " + grant.podNamespace + "/" +
                          grant.podName;
  if (grant.devices.empty()) return makeError(who + " was granted no " + settings_.backend + " GPUs");
  if (grant.devices.size() > kMaxDevices)
    return makeError(who + " was granted " + std::to_string(grant.devices.size()) + " GPUs; libvgpu.so limits at most " +
                     std::to_string(kMaxDevices));
  if (grant.hostDir.empty() || !fs::path(grant.hostDir).is_absolute())
    return makeError(who + ": the agent gave no absolute host folder for the container's files (got \"" +
                     grant.hostDir + "\")");
  std::set<std::string> ids;
  for (const auto& d : grant.devices) {
    if (d.deviceId.empty() || d.deviceId.find_first_of(", \t\n=") != std::string::npos)
      return makeError(who + ": device id \"" + d.deviceId + "\" cannot be passed in NVIDIA_VISIBLE_DEVICES");
    if (!ids.insert(d.deviceId).second) return makeError(who + " was granted GPU " + d.deviceId + " twice");
  }
  const bool optOut = optedOut(grant);
  if (optOut && !settings_.allowOptOut)
    return makeError(who + ": the pod annotation " + std::string(kOptOutAnnotation) +
                     " asks to run without libvgpu.so, but backends." + settings_.backend +
                     ".options.allowOptOut is false on this node");

  // The driver's cap reaches the container only through a CDI hook: vgpu-cdi-hook's (in a
  // spec of the agent's) or the toolkit's of cdiKind's spec; with neither, memory stays
  // libvgpu.so's (parseOptions refuses "driver" then). MIG devices take no per-cgroup limit.
  const bool ownHook = !settings_.cdiHookPath.empty();
  bool anyMig = false;
  for (const auto& d : grant.devices) anyMig = anyMig || d.deviceId.rfind("MIG-", 0) == 0;
  bool driverCap = false;
  if (ownHook && anyMig) {
    driverCap = false;  // libvgpu.so, as on older drivers (the hook would be refused)
  } else if (ownHook && settings_.memory != MemoryEnforcement::kLibvgpu) {
    std::lock_guard lock(mutex_);
    const Status& s = kernelCap();
    if (!s.ok() && settings_.memory == MemoryEnforcement::kDriver)
      return makeError(who + ": backends." + settings_.backend +
                       ".options.memoryEnforcement is driver, but this node cannot cap GPU memory in the kernel: " +
                       s.error().message);
    driverCap = s.ok();
  } else if (settings_.memory == MemoryEnforcement::kDriver && settings_.cdiKind.empty()) {
    return makeError(who + ": backends." + settings_.backend +
                     ".options.memoryEnforcement is driver, but no cdiKind is set: nothing would apply the "
                     "driver's memory cap");
  } else if (settings_.memory == MemoryEnforcement::kDriver) {
    std::lock_guard lock(mutex_);
    if (const Status& s = kernelCap(); !s.ok())
      return makeError(who + ": backends." + settings_.backend +
                       ".options.memoryEnforcement is driver, but this node cannot cap GPU memory in the kernel: " +
                       s.error().message);
    driverCap = true;
  } else if (settings_.memory == MemoryEnforcement::kAuto && !settings_.cdiKind.empty()) {
    std::lock_guard lock(mutex_);
    driverCap = kernelCap().ok();
  }

  ContainerSpec spec;
  std::vector<std::pair<std::string, std::string>> limits;  // also written to the limits file
  std::string visible;
  std::uint64_t smallestMemory = UINT64_MAX;
  bool computeLimited = false;
  for (size_t i = 0; i < grant.devices.size(); ++i) {
    const auto& d = grant.devices[i];
    visible += (i ? "," : "") + d.deviceId;
    smallestMemory = std::min(smallestMemory, d.memoryMiB);
    const std::uint32_t sm = std::min<std::uint32_t>(d.compute, 100);
    computeLimited = computeLimited || (sm > 0 && sm < 100);
    const std::string n = std::to_string(i);
    // With vgpu-cdi-hook libvgpu.so keeps its limit too: it reports the smaller view and holds
    // memory alone where the hook may fail (auto).
    if (!driverCap || ownHook) limits.emplace_back(VGPU_ENV_MEMORY_LIMIT_PREFIX + n, std::to_string(d.memoryMiB) + "m");
    limits.emplace_back(VGPU_ENV_SM_LIMIT_PREFIX + n, std::to_string(sm));
  }
  // HAMi-core reads only the unindexed compute limit, taken from the first GPU.
  limits.emplace_back(VGPU_ENV_SM_LIMIT, std::to_string(std::min<std::uint32_t>(grant.devices[0].compute, 100)));
  limits.emplace_back(VGPU_ENV_SHARED_REGION, kContainerRegionFile);
  if ((!driverCap || ownHook) && settings_.memoryScaling > 1.0) limits.emplace_back(VGPU_ENV_OVERSUBSCRIBE, "true");
  // Always in the file, "default" included: a key missing from the file would be taken from
  // the container's environment, where the tenant could write "disable".
  limits.emplace_back(VGPU_ENV_CORE_POLICY, settings_.corePolicy.empty() ? "default" : settings_.corePolicy);
  if (grant.devices[0].priority >= 0) limits.emplace_back(VGPU_ENV_TASK_PRIORITY, std::to_string(grant.devices[0].priority));
  if (!settings_.activityBoardHostPath.empty()) limits.emplace_back(VGPU_ENV_ACTIVITY_BOARD, kContainerActivityBoard);

  spec.env[kVisibleDevicesEnv] = visible;
  // Who enforces memory, on the pod for people to see (the same for every container of the
  // pod on this node; opted-out containers are named by their own annotation).
  spec.podAnnotations[kMemoryEnforcerAnnotation] = driverCap ? "driver" : "libvgpu.so";
  if (!settings_.cdiKind.empty()) {
    std::string devices;
    for (size_t i = 0; i < grant.devices.size(); ++i)
      devices += (i ? "," : "") + settings_.cdiKind + "=" + grant.devices[i].deviceId;
    spec.annotations[kCdiAnnotation] = devices;
  }
  for (const auto& [k, v] : limits) spec.env[k] = v;
  if (!settings_.logLevel.empty()) {
    spec.env[VGPU_ENV_LOG_LEVEL] = settings_.logLevel;
    // HAMi-core's name, for images and scripts that read it; the levels agree from 1 to 4
    // (HAMi-core cannot silence errors, so our 0 reads as its "errors only").
    spec.env[VGPU_ENV_HAMI_LOG_LEVEL] = settings_.logLevel;
  }
  // HAMi's mark of a container that runs without the limiter, for scripts that look for it.
  // In the environment only: libvgpu.so, if a program loads it anyway, keeps the file's limits.
  if (optOut) spec.env[VGPU_ENV_DISABLE_CONTROL] = "true";
  if (driverCap && ownHook) {
    std::vector<std::pair<std::string, std::uint64_t>> devices;
    for (const auto& d : grant.devices) devices.emplace_back(d.deviceId, d.memoryMiB);
    spec.hooks.push_back({"createContainer", settings_.cdiHookPath,
                          cdiHookArgs(devices, settings_.driverSoftLimit, settings_.memory == MemoryEnforcement::kDriver,
                                      settings_.hookNvmlLibrary),
                          {}});
  } else if (driverCap) {
    // The toolkit hook applies one request/limit pair to every GPU of the container: the
    // smallest grant is the one no GPU may exceed. With oversubscription only the physical
    // part is protected (the request); the limit is what the container was promised.
    const std::uint64_t limit = smallestMemory;
    const auto request = settings_.memoryScaling > 1.0
                             ? static_cast<std::uint64_t>(std::floor(static_cast<double>(limit) / settings_.memoryScaling))
                             : limit;
    spec.env[kDriverMemoryRequestEnv] = std::to_string(request);
    spec.env[kDriverMemoryLimitEnv] = std::to_string(limit);
  }

  // Files first: a container must never start with its limits missing. The host folder is
  // the agent's; the region file in it is the container's to write (mounted alone, so the
  // container can create nothing in the host folder), and every step refuses links and
  // files of other users, for a repeated Allocate finds what the container did meanwhile.
  const fs::path hostDir(grant.hostDir);
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(hostDir, ec)))
    return makeError(who + ": host folder " + hostDir.string() + " does not exist");
  auto host = openOwnDir(hostDir);
  if (!host) return makeError(who + ": " + host.error().message);
  const fs::path regionDir = hostDir / kHostRegionDir;
  auto shared = makeOwnDirAt(host->get(), kHostRegionDir, 0755, regionDir.string());
  if (!shared) return makeError(who + ": " + shared.error().message);
  const std::string regionName = fs::path(kContainerRegionFile).filename().string();
  const fs::path regionFile = regionDir / regionName;
  std::ostringstream file;
  file << "# Limits of " << who << ", written by the vgpu " << settings_.backend
       << " backend. Read-only in the container; wins over its environment.\n";
  for (const auto& [k, v] : limits) file << k << "=" << v << "\n";
  auto inode = createRegion(shared->get(), regionName, regionFile.string());
  if (!inode) return makeError(who + ": " + inode.error().message);
  file << VGPU_REGION_INODE << "=" << *inode << "\n";  // the file's alone: not a variable
  if (settings_.contextOverheadMiB > 0) file << VGPU_ENV_CONTEXT_OVERHEAD << "=" << settings_.contextOverheadMiB << "m\n";
  const fs::path limitsFile = hostDir / kHostLimitsFile;
  if (auto s = replaceFileAt(host->get(), kHostLimitsFile, file.str(), 0444, limitsFile.string()); !s.ok())
    return makeError(who + ": " + s.error().message);
  spec.region = RegionFile{(fs::path(kHostRegionDir) / regionName).string(), *inode};

  spec.mounts.push_back({regionFile.string(), kContainerRegionFile, false});
  spec.mounts.push_back({limitsFile.string(), VGPU_LIMITS_FILE_PATH, true});
  if (!settings_.activityBoardHostPath.empty()) {
    // Only a high-priority tenant may say it is active: a low-priority one cannot hold anyone back.
    const fs::path board(settings_.activityBoardHostPath);
    auto boardDir = openOwnDir(board, 0777);
    if (!boardDir || ::fchmod(boardDir->get(), 0777) != 0)
      return makeError(who + ": cannot create the activity board folder " + board.string() +
                       (boardDir ? "" : ": " + boardDir.error().message));
    const bool high = grant.devices[0].priority == 0;
    spec.mounts.push_back({board.string(), kContainerActivityBoard, !high});
  }
  // With the driver capping memory, libvgpu.so is needed only to throttle compute.
  const bool preload = !optOut && (!driverCap || ownHook || computeLimited || settings_.corePolicy == "force");
  if (preload) {
    spec.mounts.push_back({settings_.libvgpuHostPath, settings_.libvgpuContainerPath, true});
    spec.mounts.push_back({settings_.ldPreloadHostPath, kContainerPreloadFile, true});
  }

  spec.notices.push_back({"VgpuMemoryEnforcer", memoryEnforcerNote(grant, driverCap, optOut)});

  std::lock_guard lock(mutex_);
  held_[grant.container] = grant.hostDir;
  return spec;
}

Status NvidiaLimiter::release(const ContainerRef& container) {
  std::string hostDir;
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(container);
    if (it == held_.end()) return {};
    hostDir = it->second;
    held_.erase(it);
  }
  // Gone already (the agent removed the whole folder): nothing to undo.
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(hostDir, ec))) return {};
  const std::string what = "releasing container " + container.containerName + " (" + container.holder + ")";
  auto host = openOwnDir(hostDir);
  if (!host) return makeError(what + ": " + host.error().message);
  Status result = removeAt(host->get(), kHostLimitsFile, (fs::path(hostDir) / kHostLimitsFile).string());
  if (auto s = removeAt(host->get(), kHostRegionDir, (fs::path(hostDir) / kHostRegionDir).string()); !s.ok() && result.ok())
    result = s;
  if (!result.ok()) return makeError(what + ": " + result.error().message);
  return {};
}

Status NvidiaLimiter::reconcile(const std::vector<ContainerRef>& live) {
  const std::set<ContainerRef> keep(live.begin(), live.end());
  std::vector<ContainerRef> gone;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [c, dir] : held_)
      if (!keep.contains(c)) gone.push_back(c);
  }
  Status result;
  for (const auto& c : gone)
    if (auto s = release(c); !s.ok() && result.ok()) result = s;
  return result;
}

std::map<ContainerRef, std::string> NvidiaLimiter::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

}  // namespace vgpu::nvidia
