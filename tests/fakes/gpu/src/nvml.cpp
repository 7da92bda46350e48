// Fake libnvidia-ml.so.1: the NVML subset of vgpu/cuda/nvml_api.h over the simulated machine.
//
// Memory, utilization and the process list come from the shared physical state that the fake
// libcuda.so.1 writes, so NVML sees what every process holds on a device. Faults come from the
// config: a failing init, a device whose queries fail, Xid events for event sets.

#include "vgpu/cuda/nvml_api.h"

#include "driver_version.h"

#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "config.h"
#include "nvml_internal.h"
#include "shared_state.h"

struct nvmlEventSet_st {
  std::mutex mu;
  std::condition_variable cv;
  struct Pending {
    uint64_t dueNs;
    nvmlEventData_t data;
  };
  std::deque<Pending> pending;  ///< kept sorted by due time
  std::set<unsigned> xidDevices;
};

namespace vgpu::fakegpu {
namespace {

constexpr const char* kDriverVersion = VGPU_FAKE_NVML_DRIVER_VERSION;
constexpr int kCudaDriverVersion = VGPU_FAKE_CUDA_DRIVER_VERSION;
constexpr uint64_t kUtilWindowNs = 1000000000ull;  // NVML's utilization sample period, 1 s
constexpr unsigned long long kSupportedEvents =
    nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
constexpr unsigned kNoInstance = 0xFFFFFFFFu;
// nvmlInitWithFlags accepts bit 2 too, as this fake always did; no nvml.h names it (12.6, 13.0).
constexpr unsigned kInitFlagBit2 = 4;

struct NamedCode {
  nvmlReturn_t code;
  const char* text;
};
#define X(code, text) {code, text},
constexpr NamedCode kNvmlTexts[] = {
#include "nvml_return_names.inc"
};
#undef X

struct Nvml {
  std::mutex mu;
  std::once_flag once;
  MachineConfig cfg;
  SharedState* shared = nullptr;
  std::string loadError;
  int refs = 0;
  nvmlDevice_st devices[VGPU_FAKE_STATE_MAX_DEVICES];
  std::set<nvmlEventSet_st*> sets;
  /// (device, pid) -> SM percent a test set (vgpuFakeNvmlSetProcessUtilization); it wins
  /// over what the fake libcuda's kernels measured.
  std::map<std::pair<int, uint32_t>, unsigned> utilization;
};

Nvml* gNvml = nullptr;
std::once_flag gNvmlCreated;

Nvml& nvml() {
  std::call_once(gNvmlCreated, [] { gNvml = new Nvml(); });
  return *gNvml;
}

// Freed when the library is unloaded, not by a static destructor: at exit that is after the
// program's atexit handlers (which may still call NVML), and a caller that loads and unloads
// NVML again and again (a backend being checked) does not leak one state per load. The mapped
// region stays: the fake libcuda may share it.
__attribute__((destructor)) void freeNvml() {
  if (gNvml == nullptr) return;
  delete gNvml->shared;
  delete gNvml;
  gNvml = nullptr;
}

bool initialised() {
  auto& n = nvml();
  std::lock_guard lock(n.mu);
  return n.refs > 0;
}

// Checks init and the handle, and applies an injected per-device fault.
nvmlReturn_t device(nvmlDevice_t h, const GpuSpec*& g) {
  auto& n = nvml();
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (h < n.devices || h >= n.devices + n.cfg.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  g = &n.cfg.gpus[h->index];
  if (g->nvmlError != 0) return static_cast<nvmlReturn_t>(g->nvmlError);
  return NVML_SUCCESS;
}

nvmlReturn_t copyString(const std::string& s, char* out, unsigned len) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (len < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

uint64_t realtimeUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

nvmlReturn_t init(unsigned flags) {
  auto& n = nvml();
  std::call_once(n.once, [&n] {
    n.cfg = loadMachineConfig();
    if (!n.cfg.error.empty()) {
      n.loadError = n.cfg.error;
      return;
    }
    for (unsigned i = 0; i < VGPU_FAKE_STATE_MAX_DEVICES; ++i) n.devices[i].index = i;
    if (n.cfg.nvmlInitError != 0 || n.cfg.gpus.empty()) return;
    std::string err;
    n.shared = SharedState::attach(n.cfg, "libcuda.so.1", err);
    if (n.shared == nullptr) n.loadError = err;
  });
  if (!n.loadError.empty()) {
    std::fprintf(stderr, "%s\n", n.loadError.c_str());
    return NVML_ERROR_UNKNOWN;
  }
  if (n.cfg.nvmlInitError != 0) return static_cast<nvmlReturn_t>(n.cfg.nvmlInitError);
  if (n.cfg.gpus.empty() && (flags & NVML_INIT_FLAG_NO_GPUS) == 0) return NVML_ERROR_NOT_FOUND;
  std::lock_guard lock(n.mu);
  ++n.refs;
  return NVML_SUCCESS;
}

}  // namespace

bool nvmlReady() { return initialised(); }
const MachineConfig& nvmlMachine() { return nvml().cfg; }
SharedState* nvmlShared() { return nvml().shared; }
nvmlDevice_t gpuHandle(unsigned index) { return &nvml().devices[index]; }
nvmlReturn_t gpuDevice(nvmlDevice_t h, const GpuSpec*& g) { return device(h, g); }
nvmlReturn_t copyNvmlString(const std::string& s, char* out, unsigned len) { return copyString(s, out, len); }

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

nvmlReturn_t nvmlInit_v2(void) { return init(0); }

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  unsigned known = NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH | kInitFlagBit2;
  if ((flags & ~known) != 0) return NVML_ERROR_INVALID_ARGUMENT;
  return init(flags);
}

nvmlReturn_t nvmlShutdown(void) {
  auto& n = nvml();
  std::lock_guard lock(n.mu);
  if (n.refs == 0) return NVML_ERROR_UNINITIALIZED;
  --n.refs;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  for (const auto& e : kNvmlTexts)
    if (e.code == result) return e.text;
  return "Unknown Error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  return copyString(kDriverVersion, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *v = kCudaDriverVersion;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(nvml().cfg.gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* dev) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  auto& n = nvml();
  if (dev == nullptr || index >= n.cfg.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *dev = &n.devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* dev) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  auto& n = nvml();
  if (uuid == nullptr || dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n.cfg.gpus.size(); ++i) {
    if (n.cfg.gpus[i].uuid == uuid) {
      *dev = &n.devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* busId, nvmlDevice_t* dev) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  auto& n = nvml();
  unsigned dom = 0, bus = 0, d = 0, fn = 0;
  if (busId == nullptr || dev == nullptr || std::sscanf(busId, "%x:%x:%x.%x", &dom, &bus, &d, &fn) != 4)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n.cfg.gpus.size(); ++i) {
    const GpuSpec& g = n.cfg.gpus[i];
    if (g.pciDomain == dom && g.pciBus == bus && g.pciDevice == d && g.pciFunction == fn) {
      *dev = &n.devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* uuid, unsigned int length) {
  if (isMigHandle(dev)) return migDeviceUuid(dev, uuid, length);
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  return copyString(g->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* name, unsigned int length) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  return copyString(g->name, name, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int* index) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = dev->index;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int* minor) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = g->minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t* pci) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", g->pciDomain, g->pciBus,
                g->pciDevice, g->pciFunction);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", g->pciBusId.c_str());
  pci->domain = g->pciDomain;
  pci->bus = g->pciBus;
  pci->device = g->pciDevice;
  pci->pciDeviceId = g->pciDeviceId;
  pci->pciSubSystemId = (g->pciDeviceId & 0xFFFF0000u) | 0x10DEu;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t dev1, nvmlDevice_t dev2, nvmlGpuTopologyLevel_t* level) {
  const GpuSpec* a = nullptr;
  const GpuSpec* b = nullptr;
  if (nvmlReturn_t r = device(dev1, a)) return r;
  if (nvmlReturn_t r = device(dev2, b)) return r;
  if (level == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (const PciePathSpec& p : nvml().cfg.pciePaths) {
    if ((p.gpu == dev1->index && p.peer == dev2->index) || (p.gpu == dev2->index && p.peer == dev1->index)) {
      *level = static_cast<nvmlGpuTopologyLevel_t>(p.level);
      return NVML_SUCCESS;
    }
  }
  *level = a->numa == b->numa ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link, nvmlEnableState_t* isActive) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (isActive == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->nvlinkPeers.empty()) return NVML_ERROR_NOT_SUPPORTED;  // a GPU without NVLink
  *isActive = link < g->nvlinkPeers.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned int link, nvmlPciInfo_t* pci) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (pci == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->nvlinkPeers.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= g->nvlinkPeers.size()) return NVML_ERROR_INVALID_ARGUMENT;
  const int peer = g->nvlinkPeers[link];
  if (peer >= 0) return nvmlDeviceGetPciInfo_v3(&nvml().devices[peer], pci);
  // An NVSwitch: one of six, by link number, on buses no fake GPU takes by default.
  std::memset(pci, 0, sizeof *pci);
  pci->bus = 0xC0 + link % 6;
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", 0u, pci->bus, 0u);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", 0u, pci->bus, 0u);
  pci->pciDeviceId = 0x22A310DEu;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int* major, int* minor) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = g->ccMajor;
  *minor = g->ccMinor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int* current, unsigned int* pending) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = g->mig ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int* node) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (node == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->numa < 0) return NVML_ERROR_NOT_SUPPORTED;  // as on GPUs that are not NUMA nodes
  *node = static_cast<unsigned>(g->numa);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* mem) {
  if (isMigHandle(dev)) return migDeviceMemory(dev, mem);
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  SharedState* s = nvml().shared;
  uint64_t total = s->totalBytes(static_cast<int>(dev->index)), used = s->usedBytes(static_cast<int>(dev->index));
  uint64_t free = used >= total ? 0 : total - used;
  // Inside a cgroup with a memory limit (R615+) the caller sees what its cgroup may still take.
  if (s->cgroupView(static_cast<int>(dev->index), total, free)) used = total - free;
  mem->total = total;
  mem->used = std::min(used, total);
  mem->free = total - mem->used;
  return NVML_SUCCESS;
}

// Per-cgroup memory limits (R615+; the default fake exports them, fakegpu-no-memlimits and
// the R470-like one do not). Root only, whole GPUs only, as documented.
nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t dev, nvmlSetMemoryLimits_v1_t* limits) {
  if (isMigHandle(dev)) return nvmlReady() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED;
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (limits == nullptr || limits->nameSpace == nullptr || limits->nameSpace[0] != '/' ||
      limits->softLimit > limits->hardLimit)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (geteuid() != 0) return NVML_ERROR_NO_PERMISSION;
  switch (nvml().shared->setMemoryLimit(static_cast<int>(dev->index), limits->nameSpace, limits->softLimit,
                                        limits->hardLimit)) {
    case SharedState::kLimitOk: return NVML_SUCCESS;
    case SharedState::kLimitNoCgroup: return NVML_ERROR_NOT_FOUND;
    case SharedState::kLimitTableFull: return NVML_ERROR_INSUFFICIENT_RESOURCES;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
}

nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t dev, nvmlGetMemoryLimits_v1_t* limits) {
  if (isMigHandle(dev)) return nvmlReady() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED;
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (limits == nullptr || limits->nameSpace == nullptr || limits->nameSpace[0] != '/')
    return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t soft = 0, hard = 0, used = 0;
  nvml().shared->memoryLimit(static_cast<int>(dev->index), limits->nameSpace, soft, hard, used);
  limits->softLimit = soft;
  limits->hardLimit = hard;
  limits->currentUsed = used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t* mem) {
  const GpuSpec* g = nullptr;
  if (!isMigHandle(dev))
    if (nvmlReturn_t r = device(dev, g)) return r;
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t m{};
  if (nvmlReturn_t r = nvmlDeviceGetMemoryInfo(dev, &m)) return r;
  mem->total = m.total;
  mem->reserved = 0;  // the fake keeps no driver-reserved memory
  mem->used = m.used;
  mem->free = m.free;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t* util) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t now = monotonicNs();
  uint64_t busy = nvml().shared->busyWithin(static_cast<int>(dev->index), now - kUtilWindowNs, now, 0);
  util->gpu = static_cast<unsigned>(std::min<uint64_t>(100, (busy * 100 + kUtilWindowNs / 2) / kUtilWindowNs));
  util->memory = 0;  // no memory traffic is simulated
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev, nvmlProcessUtilizationSample_t* samples,
                                             unsigned int* count, unsigned long long lastSeenTimeStamp) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->mig) return NVML_ERROR_NOT_SUPPORTED;
  SharedState* s = nvml().shared;
  int d = static_cast<int>(dev->index);
  uint64_t nowNs = monotonicNs(), nowUs = realtimeUs();
  // lastSeenTimeStamp is CPU time in microseconds; older than one window means "the last window".
  uint64_t fromNs = nowNs - kUtilWindowNs;
  if (lastSeenTimeStamp != 0 && lastSeenTimeStamp < nowUs && nowUs - lastSeenTimeStamp < kUtilWindowNs / 1000)
    fromNs = nowNs - (nowUs - lastSeenTimeStamp) * 1000;
  uint64_t span = nowNs - fromNs;
  std::set<uint32_t> pids;
  const auto* st = s->raw();
  for (const auto& p : st->procs) {
    int32_t pid = std::atomic_ref<const int32_t>(p.pid).load();
    if (pid > 0) pids.insert(static_cast<uint32_t>(pid));
  }
  std::map<uint32_t, unsigned> set;
  {
    std::lock_guard lock(nvml().mu);
    for (const auto& [key, percent] : nvml().utilization)
      if (key.first == d && pids.contains(key.second)) set[key.second] = percent;
  }
  std::vector<nvmlProcessUtilizationSample_t> out;
  for (uint32_t pid : pids) {
    if (auto it = set.find(pid); it != set.end()) {
      nvmlProcessUtilizationSample_t x{};
      x.pid = pid;
      x.timeStamp = nowUs;
      x.smUtil = it->second;
      out.push_back(x);
      continue;
    }
    uint64_t busy = s->busyWithin(d, fromNs, nowNs, pid);
    if (busy == 0 || span == 0) continue;
    nvmlProcessUtilizationSample_t x{};
    x.pid = pid;
    x.timeStamp = nowUs;
    x.smUtil = static_cast<unsigned>(std::min<uint64_t>(100, (busy * 100 + span / 2) / span));
    out.push_back(x);
  }
  if (samples == nullptr) {
    *count = static_cast<unsigned>(out.size());
    return NVML_SUCCESS;
  }
  if (out.empty()) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (*count < out.size()) {
    *count = static_cast<unsigned>(out.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(out.begin(), out.end(), samples);
  *count = static_cast<unsigned>(out.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  SharedState* s = nvml().shared;
  s->reclaimDead();
  int d = static_cast<int>(dev->index);
  std::vector<nvmlProcessInfo_t> out;
  for (auto& p : s->raw()->procs) {
    int32_t pid = std::atomic_ref<int32_t>(p.pid).load();
    uint32_t mask = std::atomic_ref<uint32_t>(p.context_mask).load();
    uint64_t used = std::atomic_ref<uint64_t>(p.used_bytes[d]).load();
    if (pid <= 0 || ((mask & (1u << d)) == 0 && used == 0)) continue;
    out.push_back({static_cast<unsigned>(pid), used, kNoInstance, kNoInstance});
  }
  if (*infoCount < out.size()) {
    *infoCount = static_cast<unsigned>(out.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!out.empty() && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::copy(out.begin(), out.end(), infos);
  *infoCount = static_cast<unsigned>(out.size());
  return NVML_SUCCESS;
}

/* Test control (fake_gpu_control.h): what process `pid` holds on device `dev`. */
extern "C" int vgpuFakeNvmlSetProcessUsage(int pid, int dev, unsigned long long bytes) {
  if (!initialised()) return -1;
  SharedState* s = nvml().shared;
  if (s == nullptr || dev < 0 || static_cast<unsigned>(dev) >= s->deviceCount()) return -1;
  return s->setProcessUsage(pid, dev, bytes) ? 0 : -1;
}

/* Test control (fake_gpu_control.h): the SM percent NVML reports for `pid` on `dev`. */
extern "C" int vgpuFakeNvmlSetProcessUtilization(int pid, int dev, int percent) {
  if (!initialised()) return -1;
  SharedState* s = nvml().shared;
  if (s == nullptr || dev < 0 || static_cast<unsigned>(dev) >= s->deviceCount() || pid <= 0 || percent > 100)
    return -1;
  std::lock_guard lock(nvml().mu);
  const std::pair<int, uint32_t> key{dev, static_cast<uint32_t>(pid)};
  if (percent < 0)
    nvml().utilization.erase(key);
  else
    nvml().utilization[key] = static_cast<unsigned>(percent);
  return 0;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto& n = nvml();
  std::lock_guard lock(n.mu);
  *set = new nvmlEventSet_st();
  n.sets.insert(*set);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long* types) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *types = kSupportedEvents;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = device(dev, g)) return r;
  auto& n = nvml();
  {
    std::lock_guard lock(n.mu);
    if (!n.sets.count(set)) return NVML_ERROR_INVALID_ARGUMENT;
  }
  if ((types & ~kSupportedEvents) != 0) return NVML_ERROR_NOT_SUPPORTED;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_SUCCESS;
  std::lock_guard lock(set->mu);
  if (!set->xidDevices.insert(dev->index).second) return NVML_SUCCESS;
  uint64_t now = monotonicNs();
  for (const XidSpec& x : n.cfg.xids) {
    if (x.gpu != dev->index) continue;
    nvmlEventSet_st::Pending p{};
    p.dueNs = now + static_cast<uint64_t>(x.delayMs) * 1000000ull;
    p.data.device = dev;
    p.data.eventType = nvmlEventTypeXidCriticalError;
    p.data.eventData = x.code;
    p.data.gpuInstanceId = kNoInstance;
    p.data.computeInstanceId = kNoInstance;
    auto pos = std::upper_bound(set->pending.begin(), set->pending.end(), p.dueNs,
                                [](uint64_t due, const nvmlEventSet_st::Pending& q) { return due < q.dueNs; });
    set->pending.insert(pos, p);
  }
  set->cv.notify_all();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  auto& n = nvml();
  {
    std::lock_guard lock(n.mu);
    if (data == nullptr || !n.sets.count(set)) return NVML_ERROR_INVALID_ARGUMENT;
  }
  uint64_t deadline = monotonicNs() + static_cast<uint64_t>(timeoutms) * 1000000ull;
  std::unique_lock lock(set->mu);
  while (true) {
    uint64_t now = monotonicNs();
    if (!set->pending.empty() && set->pending.front().dueNs <= now) {
      *data = set->pending.front().data;
      set->pending.pop_front();
      return NVML_SUCCESS;
    }
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    uint64_t wake = deadline;
    if (!set->pending.empty()) wake = std::min(wake, set->pending.front().dueNs);
    set->cv.wait_for(lock, std::chrono::nanoseconds(wake - now));
  }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  auto& n = nvml();
  std::lock_guard lock(n.mu);
  if (!n.sets.erase(set)) return NVML_ERROR_INVALID_ARGUMENT;
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"
