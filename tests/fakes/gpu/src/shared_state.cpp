// The shared physical-device state: mapping, memory accounting, kernel schedule.

#include "shared_state.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace vgpu::fakegpu {
namespace {

template <typename T>
std::atomic_ref<T> at(T& v) {
  return std::atomic_ref<T>(v);
}

// The region this library mapped when no state file is configured, for the other fake to share.
void* gAnonRegion = nullptr;

using SchedLock = RobustLock;

void initialise(vgpu_fake_gpu_state* s, const MachineConfig& cfg) {
  std::memset(static_cast<void*>(s), 0, sizeof *s);
  s->version = VGPU_FAKE_STATE_VERSION;
  s->size = sizeof *s;
  s->device_count = static_cast<uint32_t>(cfg.gpus.size());
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  for (unsigned d = 0; d < VGPU_FAKE_STATE_MAX_DEVICES; ++d) {
    pthread_mutex_init(&s->devices[d].sched_lock, &attr);
    pthread_mutex_init(&s->mig[d].lock, &attr);
    if (d < cfg.gpus.size()) s->devices[d].total_bytes = cfg.gpus[d].memoryMib << 20;
  }
  pthread_mutex_init(&s->shared.lock, &attr);
  pthread_mutex_init(&s->memory_limits.lock, &attr);
  for (auto& l : s->memory_limits.limits) l.dev = -1;
  pthread_mutexattr_destroy(&attr);
  at(s->magic).store(VGPU_FAKE_STATE_MAGIC, std::memory_order_release);
}

std::string checkMatches(const vgpu_fake_gpu_state* s, const MachineConfig& cfg, const char* path) {
  std::string where = std::string("vgpu fake GPU: state file ") + path + ": ";
  if (s->version != VGPU_FAKE_STATE_VERSION || s->size != sizeof *s)
    return where + "was written by another version of the fake (delete it)";
  if (s->device_count != cfg.gpus.size())
    return where + "holds " + std::to_string(s->device_count) + " devices but the config (" + cfg.source +
           ") has " + std::to_string(cfg.gpus.size()) + " (delete it or use the same config)";
  for (unsigned d = 0; d < s->device_count; ++d) {
    if (s->devices[d].total_bytes != (cfg.gpus[d].memoryMib << 20))
      return where + "device " + std::to_string(d) + " memory differs from the config (" + cfg.source + ")";
  }
  return {};
}

// Start time of a process in clock ticks since boot (0 if it cannot be read).
uint64_t startTicks(int32_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces
  if (p == nullptr) return 0;
  // Fields after ")" start with field 3 (state); starttime is field 22.
  unsigned long long v = 0;
  int field = 2;
  for (const char* q = p + 1; *q != '\0'; ++q) {
    if (*q == ' ') {
      ++field;
      if (field == 22) {
        v = std::strtoull(q + 1, nullptr, 10);
        break;
      }
    }
  }
  return v;
}

// A slot's process is gone: no such pid, or the pid now belongs to a newer process.
bool slotOwnerDead(const vgpu_fake_process_slot& p, int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  uint64_t recorded = std::atomic_ref<const uint64_t>(p.start_ticks).load();
  if (recorded == 0) return false;
  uint64_t now = startTicks(pid);
  return now != 0 && now != recorded;
}

}  // namespace

RobustLock::RobustLock(pthread_mutex_t* m) : m_(m) {
  if (pthread_mutex_lock(m_) == EOWNERDEAD) pthread_mutex_consistent(m_);
}

RobustLock::~RobustLock() { pthread_mutex_unlock(m_); }

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

SharedState* SharedState::attach(const MachineConfig& cfg, const char* peerSoname, std::string& error) {
  const char* path = std::getenv("VGPU_FAKE_GPU_STATE");
  auto* self = new SharedState();
  if (path == nullptr || *path == '\0') {
    void* region = nullptr;
    if (void* peer = dlopen(peerSoname, RTLD_LAZY | RTLD_NOLOAD)) {
      using RegionFn = void* (*)();
      if (auto fn = reinterpret_cast<RegionFn>(dlsym(peer, "vgpuFakeStateRegion"))) region = fn();
      dlclose(peer);
    }
    if (region == nullptr) {
      region = mmap(nullptr, sizeof(vgpu_fake_gpu_state), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (region == MAP_FAILED) {
        error = std::string("vgpu fake GPU: cannot map state: ") + std::strerror(errno);
        delete self;
        return nullptr;
      }
      initialise(static_cast<vgpu_fake_gpu_state*>(region), cfg);
    }
    gAnonRegion = region;
    self->state_ = static_cast<vgpu_fake_gpu_state*>(region);
    return self;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    error = std::string("vgpu fake GPU: cannot open VGPU_FAKE_GPU_STATE file ") + path + ": " + std::strerror(errno);
    delete self;
    return nullptr;
  }
  flock(fd, LOCK_EX);
  // (lseek rather than fstat: fstat is a GLIBC_2.33 symbol, and the fakes also run in older roots)
  off_t size = lseek(fd, 0, SEEK_END);
  if (size != 0 && static_cast<size_t>(size) != sizeof(vgpu_fake_gpu_state)) {
    error = std::string("vgpu fake GPU: state file ") + path + " has the wrong size (another version? delete it)";
  } else if (size == 0 && ftruncate(fd, sizeof(vgpu_fake_gpu_state)) != 0) {
    error = std::string("vgpu fake GPU: cannot size state file ") + path + ": " + std::strerror(errno);
  }
  void* region = MAP_FAILED;
  if (error.empty()) {
    region = mmap(nullptr, sizeof(vgpu_fake_gpu_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (region == MAP_FAILED) error = std::string("vgpu fake GPU: cannot map ") + path + ": " + std::strerror(errno);
  }
  if (error.empty()) {
    auto* s = static_cast<vgpu_fake_gpu_state*>(region);
    if (at(s->magic).load(std::memory_order_acquire) != VGPU_FAKE_STATE_MAGIC) {
      initialise(s, cfg);
    } else {
      error = checkMatches(s, cfg, path);
    }
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (!error.empty()) {
    if (region != MAP_FAILED) munmap(region, sizeof(vgpu_fake_gpu_state));
    delete self;
    return nullptr;
  }
  self->state_ = static_cast<vgpu_fake_gpu_state*>(region);
  self->reclaimDead();
  return self;
}

vgpu_fake_process_slot* SharedState::mySlot() {
  if (slot_ != nullptr) return slot_;
  int32_t pid = static_cast<int32_t>(getpid());
  uint64_t start = startTicks(pid);
  reclaimDead();  // also frees a slot an earlier process with this pid left behind
  for (auto& p : state_->procs) {
    if (at(p.pid).load() == pid) return slot_ = &p;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto& p : state_->procs) {
      int32_t expected = 0;
      if (at(p.pid).compare_exchange_strong(expected, pid)) {
        at(p.start_ticks).store(start);
        recordCgroup(p, pid);
        return slot_ = &p;
      }
    }
    reclaimDead();
  }
  return nullptr;
}

bool SharedState::setProcessUsage(int32_t pid, int dev, uint64_t bytes) {
  uint64_t start = startTicks(pid);
  if (pid <= 0 || start == 0) return false;
  reclaimDead();
  vgpu_fake_process_slot* slot = nullptr;
  for (auto& p : state_->procs)
    if (at(p.pid).load() == pid) slot = &p;
  for (auto& p : state_->procs) {
    int32_t expected = 0;
    if (slot != nullptr) break;
    if (at(p.pid).compare_exchange_strong(expected, pid)) {
      at(p.start_ticks).store(start);
      recordCgroup(p, pid);
      slot = &p;
    }
  }
  if (slot == nullptr) return false;
  uint64_t before = at(slot->used_bytes[dev]).exchange(bytes);
  at(state_->devices[dev].used_bytes).fetch_add(bytes - before);  // wraps to a subtraction when it shrinks
  uint32_t bit = 1u << dev;
  if (bytes != 0) {
    at(slot->context_mask).fetch_or(bit);
  } else {
    at(slot->context_mask).fetch_and(~bit);
  }
  return true;
}

void SharedState::reclaimDead() {
  for (auto& p : state_->procs) {
    int32_t pid = at(p.pid).load();
    if (pid <= 0 || !slotOwnerDead(p, pid)) continue;
    if (!at(p.pid).compare_exchange_strong(pid, -1)) continue;
    for (unsigned d = 0; d < VGPU_FAKE_STATE_MAX_DEVICES; ++d) {
      uint64_t held = at(p.used_bytes[d]).exchange(0);
      if (held != 0) at(state_->devices[d].used_bytes).fetch_sub(held);
    }
    dropDeadHolder(static_cast<size_t>(&p - state_->procs));
    at(p.context_mask).store(0);
    at(p.start_ticks).store(0);
    at(p.pid).store(0);
  }
}

bool SharedState::chargeDevice(int dev, uint64_t bytes) {
  auto& dv = state_->devices[dev];
  vgpu_fake_process_slot* slot = mySlot();
  uint64_t used = at(dv.used_bytes).load();
  while (true) {
    if (bytes > dv.total_bytes || used > dv.total_bytes - bytes) return false;
    if (at(dv.used_bytes).compare_exchange_weak(used, used + bytes)) break;
  }
  if (slot != nullptr) at(slot->used_bytes[dev]).fetch_add(bytes);
  return true;
}

bool SharedState::charge(int dev, uint64_t bytes) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool limited = false;
    if (chargeWithinLimits(dev, bytes, limited)) return true;
    if (!limited && chargeDevice(dev, bytes)) return true;
    reclaimDead();  // memory of a killed process is freed by the driver, as on real hardware
  }
  return false;
}

void SharedState::uncharge(int dev, uint64_t bytes) {
  at(state_->devices[dev].used_bytes).fetch_sub(bytes);
  if (vgpu_fake_process_slot* slot = mySlot()) at(slot->used_bytes[dev]).fetch_sub(bytes);
}

uint64_t SharedState::usedBytes(int dev) const { return at(state_->devices[dev].used_bytes).load(); }

void SharedState::setContext(int dev, bool held) {
  vgpu_fake_process_slot* slot = mySlot();
  if (slot == nullptr) return;
  uint32_t bit = 1u << dev;
  if (held) {
    at(slot->context_mask).fetch_or(bit);
  } else {
    at(slot->context_mask).fetch_and(~bit);
  }
}

void SharedState::releaseSelf() {
  if (slot_ == nullptr) return;
  for (unsigned d = 0; d < VGPU_FAKE_STATE_MAX_DEVICES; ++d) {
    uint64_t held = at(slot_->used_bytes[d]).exchange(0);
    if (held != 0) at(state_->devices[d].used_bytes).fetch_sub(held);
  }
  dropDeadHolder(static_cast<size_t>(slot_ - state_->procs));
  at(slot_->context_mask).store(0);
  at(slot_->start_ticks).store(0);
  at(slot_->pid).store(0);
  slot_ = nullptr;
}

uint64_t SharedState::scheduleKernel(int dev, uint64_t durNs) {
  auto& dv = state_->devices[dev];
  uint32_t pid = static_cast<uint32_t>(getpid());
  SchedLock lock(&dv.sched_lock);
  uint64_t start = std::max(monotonicNs(), dv.busy_until_ns);
  uint64_t end = start + durNs;
  dv.busy_until_ns = end;
  dv.scheduled_ns += durNs;
  if (dv.ring_next > 0) {
    auto& last = dv.ring[(dv.ring_next - 1) % VGPU_FAKE_STATE_RING];
    if (last.pid == pid && last.end_ns == start) {
      last.end_ns = end;
      return end;
    }
  }
  auto& slot = dv.ring[dv.ring_next % VGPU_FAKE_STATE_RING];
  slot.start_ns = start;
  slot.end_ns = end;
  slot.pid = pid;
  ++dv.ring_next;
  return end;
}

uint64_t SharedState::busyNs(int dev, uint64_t nowNs) {
  auto& dv = state_->devices[dev];
  SchedLock lock(&dv.sched_lock);
  // Work is back to back from the latest launch on, so what is still ahead is busy_until - now.
  uint64_t ahead = dv.busy_until_ns > nowNs ? dv.busy_until_ns - nowNs : 0;
  return dv.scheduled_ns > ahead ? dv.scheduled_ns - ahead : 0;
}

uint64_t SharedState::busyWithin(int dev, uint64_t fromNs, uint64_t toNs, uint32_t pid) {
  auto& dv = state_->devices[dev];
  SchedLock lock(&dv.sched_lock);
  uint64_t n = std::min<uint64_t>(dv.ring_next, VGPU_FAKE_STATE_RING);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const auto& iv = dv.ring[(dv.ring_next - 1 - i) % VGPU_FAKE_STATE_RING];
    if (iv.end_ns <= fromNs && iv.start_ns < fromNs) break;  // older ones end earlier still
    if (pid != 0 && iv.pid != pid) continue;
    uint64_t a = std::max(iv.start_ns, fromNs), b = std::min(iv.end_ns, toNs);
    if (b > a) sum += b - a;
  }
  return sum;
}

}  // namespace vgpu::fakegpu

extern "C" __attribute__((visibility("default"))) void* vgpuFakeStateRegion() {
  return vgpu::fakegpu::gAnonRegion;
}
