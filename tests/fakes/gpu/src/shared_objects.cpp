// The fake's memory shared between processes (SharedState::exportObject and friends): what
// one process exported and others opened or imported stays on the device, charged to no
// process, until the last process that holds it lets go or dies, as on the real driver.

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

static_assert(kWords * 64 == VGPU_FAKE_STATE_MAX_PROCS);

}  // namespace vgpu::fakegpu
