// The fake's per-cgroup device memory limits (nvmlDeviceSetMemoryLimits_v1, R615+): the table
// in the shared state, which cgroup a process is in, and the check every allocation passes.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "shared_state.h"

namespace vgpu::fakegpu {
namespace {

constexpr uint64_t kNoLimit = ~uint64_t{0};

std::string sysfsRoot() {
  const char* root = std::getenv("VGPU_FAKE_GPU_SYSFS");
  return root != nullptr && *root != '\0' ? root : "/sys";
}

// "/a/b" lies in (or is) the cgroup "/a".
bool within(const char* path, const char* cgroup) {
  size_t n = std::strlen(cgroup);
  while (n > 1 && cgroup[n - 1] == '/') --n;
  return std::strncmp(path, cgroup, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

// A cgroup that is gone takes its limits with it, as on the driver.
bool cgroupExists(const char* path) { return access((std::string(path) + "/.").c_str(), F_OK) == 0; }

void prune(vgpu_fake_memory_limits& t) {
  for (auto& l : t.limits) {
    if (l.dev < 0 || cgroupExists(l.name_space)) continue;
    l = vgpu_fake_memory_limit{};
    l.dev = -1;
    std::atomic_ref<uint32_t>(t.count).fetch_sub(1);
  }
}

vgpu_fake_memory_limit* find(vgpu_fake_memory_limits& t, int dev, const char* ns) {
  for (auto& l : t.limits)
    if (l.dev == dev && std::strcmp(l.name_space, ns) == 0) return &l;
  return nullptr;
}

}  // namespace

std::string cgroupSysfsPath(int32_t pid) {
  std::string file = "/proc/" + std::to_string(pid) + "/cgroup";
  if (pid == static_cast<int32_t>(getpid()))
    if (const char* own = std::getenv("VGPU_FAKE_GPU_PROC_CGROUP"); own != nullptr && *own != '\0') file = own;
  std::ifstream in(file);
  std::string line, unified, memory;
  // "0::/path" on cgroup v2; "N:ctrl,ctrl:/path" per v1 hierarchy. Memory is the v1 memory
  // controller's where there is one (hybrid hosts), else the unified hierarchy's.
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && ctrls.empty()) unified = path;
    for (size_t from = 0; from <= ctrls.size();) {
      size_t comma = ctrls.find(',', from);
      if (comma == std::string::npos) comma = ctrls.size();
      if (ctrls.compare(from, comma - from, "memory") == 0) memory = path;
      from = comma + 1;
    }
  }
  const std::string base = sysfsRoot() + "/fs/cgroup";
  if (!memory.empty()) return base + "/memory" + (memory == "/" ? "" : memory);
  if (!unified.empty()) return base + (unified == "/" ? "" : unified);
  return {};
}

void SharedState::recordCgroup(vgpu_fake_process_slot& slot, int32_t pid) {
  const std::string path = cgroupSysfsPath(pid);
  RobustLock lock(&state_->memory_limits.lock);
  std::snprintf(slot.cgroup, sizeof slot.cgroup, "%s", path.c_str());
}

int SharedState::setMemoryLimit(int dev, const char* ns, uint64_t soft, uint64_t hard) {
  auto& t = state_->memory_limits;
  if (std::strlen(ns) >= VGPU_FAKE_CGROUP_PATH_MAX) return kLimitBadArgument;
  if (!cgroupExists(ns)) return kLimitNoCgroup;
  RobustLock lock(&t.lock);
  prune(t);
  vgpu_fake_memory_limit* l = find(t, dev, ns);
  if (soft == 0 && hard == kNoLimit) {  // clearing
    if (l != nullptr) {
      *l = vgpu_fake_memory_limit{};
      l->dev = -1;
      std::atomic_ref<uint32_t>(t.count).fetch_sub(1);
    }
    return kLimitOk;
  }
  if (l == nullptr) {
    l = find(t, -1, "");
    if (l == nullptr) return kLimitTableFull;
    l->dev = dev;
    std::snprintf(l->name_space, sizeof l->name_space, "%s", ns);
    std::atomic_ref<uint32_t>(t.count).fetch_add(1);
  }
  l->soft_bytes = soft;
  l->hard_bytes = hard;
  return kLimitOk;
}

bool SharedState::memoryLimit(int dev, const char* ns, uint64_t& soft, uint64_t& hard, uint64_t& used) {
  auto& t = state_->memory_limits;
  RobustLock lock(&t.lock);
  prune(t);
  const vgpu_fake_memory_limit* l = find(t, dev, ns);
  soft = l != nullptr ? l->soft_bytes : 0;
  hard = l != nullptr ? l->hard_bytes : kNoLimit;
  used = cgroupUsedLocked(dev, ns);
  return l != nullptr;
}

uint64_t SharedState::cgroupUsedLocked(int dev, const char* ns) {
  uint64_t sum = 0;
  for (auto& p : state_->procs)
    if (std::atomic_ref<int32_t>(p.pid).load() > 0 && p.cgroup[0] != '\0' && within(p.cgroup, ns))
      sum += std::atomic_ref<uint64_t>(p.used_bytes[dev]).load();
  return sum;
}

bool SharedState::headroomLocked(const char* cgroup, int dev, uint64_t& room, uint64_t& hardest) {
  auto& t = state_->memory_limits;
  if (cgroup[0] == '\0') return false;
  prune(t);
  bool limited = false;
  for (const auto& l : t.limits) {
    if (l.dev != dev || !within(cgroup, l.name_space)) continue;
    const uint64_t used = cgroupUsedLocked(dev, l.name_space);
    const uint64_t left = used >= l.hard_bytes ? 0 : l.hard_bytes - used;
    if (!limited || left < room) room = left, hardest = l.hard_bytes;
    limited = true;
  }
  return limited;
}

bool SharedState::cgroupView(int dev, uint64_t& total, uint64_t& free) {
  auto& t = state_->memory_limits;
  if (std::atomic_ref<uint32_t>(t.count).load() == 0) return false;
  // (not through a slot: a process that only asks, like a monitor, takes none)
  const std::string cgroup = cgroupSysfsPath(static_cast<int32_t>(getpid()));
  RobustLock lock(&t.lock);
  uint64_t room = 0, hard = 0;
  if (!headroomLocked(cgroup.c_str(), dev, room, hard)) return false;
  total = std::min(total, hard);
  free = std::min(free, room);
  return true;
}

bool SharedState::chargeWithinLimits(int dev, uint64_t bytes, bool& handled) {
  auto& t = state_->memory_limits;
  handled = false;
  if (std::atomic_ref<uint32_t>(t.count).load() == 0) return false;
  vgpu_fake_process_slot* slot = mySlot();  // (before the lock: taking a slot records its cgroup under it)
  if (slot == nullptr) return false;
  RobustLock lock(&t.lock);
  uint64_t room = 0, hard = 0;
  if (!headroomLocked(slot->cgroup, dev, room, hard)) return false;
  handled = true;
  if (bytes > room) return false;
  // Under the table's lock, so two processes of one cgroup cannot both take its last bytes.
  return chargeDevice(dev, bytes);
}

}  // namespace vgpu::fakegpu
