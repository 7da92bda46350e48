// The fake's memory shared between processes (SharedState::exportObject and friends): what
// one process exported and others opened or imported stays on the device, charged to no
// process, until the last process that holds it lets go or dies, as on the real driver.

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "shared_state.h"

namespace vgpu::fakegpu {
namespace {

constexpr size_t kWords = VGPU_FAKE_STATE_MAX_PROCS / 64;

bool anyHolder(const vgpu_fake_shared_object& o) {
  for (uint64_t w : o.holders)
    if (w != 0) return true;
  return false;
}

vgpu_fake_shared_object* find(vgpu_fake_shared_objects& t, uint64_t key) {
  for (auto& o : t.objects)
    if (o.key == key) return &o;
  return nullptr;
}

// The last holder is gone: the device gets the memory back.
void freeObject(vgpu_fake_gpu_state* s, vgpu_fake_shared_object& o) {
  std::atomic_ref<uint64_t>(s->devices[o.dev].used_bytes).fetch_sub(o.bytes);
  o = vgpu_fake_shared_object{};
}

}  // namespace

bool SharedState::exportObject(uint64_t key, int dev, uint64_t bytes) {
  vgpu_fake_process_slot* slot = mySlot();
  if (slot == nullptr || key == 0) return false;
  size_t index = static_cast<size_t>(slot - state_->procs);
  RobustLock lock(&state_->shared.lock);
  vgpu_fake_shared_object* o = find(state_->shared, key);
  if (o == nullptr) {
    o = find(state_->shared, 0);
    if (o == nullptr) return false;
    o->key = key;
    o->dev = dev;
    o->bytes = bytes;
    std::atomic_ref<uint64_t>(slot->used_bytes[dev]).fetch_sub(bytes);  // moved, the device sum stays
  }
  o->holders[index / 64] |= uint64_t{1} << (index % 64);
  return true;
}

bool SharedState::holdObject(uint64_t key) {
  vgpu_fake_process_slot* slot = mySlot();
  if (slot == nullptr || key == 0) return false;
  size_t index = static_cast<size_t>(slot - state_->procs);
  RobustLock lock(&state_->shared.lock);
  vgpu_fake_shared_object* o = find(state_->shared, key);
  if (o == nullptr) return false;
  o->holders[index / 64] |= uint64_t{1} << (index % 64);
  return true;
}

void SharedState::dropObject(uint64_t key) {
  vgpu_fake_process_slot* slot = mySlot();
  if (slot == nullptr || key == 0) return;
  size_t index = static_cast<size_t>(slot - state_->procs);
  RobustLock lock(&state_->shared.lock);
  vgpu_fake_shared_object* o = find(state_->shared, key);
  if (o == nullptr) return;
  o->holders[index / 64] &= ~(uint64_t{1} << (index % 64));
  if (!anyHolder(*o)) freeObject(state_, *o);
}

void SharedState::dropDeadHolder(size_t index) {
  RobustLock lock(&state_->shared.lock);
  for (auto& o : state_->shared.objects) {
    if (o.key == 0) continue;
    o.holders[index / 64] &= ~(uint64_t{1} << (index % 64));
    if (!anyHolder(o)) freeObject(state_, o);
  }
}

bool SharedState::addDeviceExport(int fd, int memfd, int dev) {
  RobustLock lock(&state_->shared.lock);
  for (auto& e : state_->shared.exports) {
    if (e.pid != 0 && kill(e.pid, 0) != 0) e = vgpu_fake_device_export{};  // its process is gone
    if (e.pid != 0) continue;
    e = vgpu_fake_device_export{static_cast<int32_t>(getpid()), fd, memfd, dev};
    return true;
  }
  return false;
}

bool SharedState::findDeviceExport(int fd, int32_t* pid, int32_t* memfd, int32_t* dev) {
  constexpr int kKcmpFile = 0;  // KCMP_FILE
  RobustLock lock(&state_->shared.lock);
  for (const auto& e : state_->shared.exports) {
    if (e.pid == 0 || syscall(SYS_kcmp, getpid(), e.pid, kKcmpFile, fd, e.fd) != 0) continue;
    *pid = e.pid;
    *memfd = e.memfd;
    *dev = e.dev;
    return true;
  }
  return false;
}

void SharedState::removeDeviceExport(int fd) {
  RobustLock lock(&state_->shared.lock);
  for (auto& e : state_->shared.exports)
    if (e.pid == static_cast<int32_t>(getpid()) && e.fd == fd) e = vgpu_fake_device_export{};
}

static_assert(kWords * 64 == VGPU_FAKE_STATE_MAX_PROCS);

}  // namespace vgpu::fakegpu
