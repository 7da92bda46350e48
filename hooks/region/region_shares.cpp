// The table of memory shared between a container's processes (vgpu/region_shares.h).
// Linked into libvgpu.so: no exceptions, no allocation. Every change is made under the
// region lock; the device sums are changed with the same atomics as the hot path.

#include "vgpu/region_shares.h"

#include "vgpu/shared_region.h"

#include <string.h>

static_assert(VGPU_REGION_SHARE_HOLDER_WORDS * 64 == VGPU_REGION_MAX_PROCS, "a holder bit per slot");

namespace {

bool validKind(uint32_t kind) { return kind == VGPU_SHARE_IPC || kind == VGPU_SHARE_FD; }

bool holds(const vgpu_region_share& e, int slot) { return (e.holders[slot / 64] >> (slot % 64) & 1u) != 0; }
void setHolder(vgpu_region_share& e, int slot) { e.holders[slot / 64] |= uint64_t{1} << (slot % 64); }
void clearHolder(vgpu_region_share& e, int slot) { e.holders[slot / 64] &= ~(uint64_t{1} << (slot % 64)); }

bool anyHolder(const vgpu_region_share& e) {
  for (uint64_t w : e.holders)
    if (w != 0) return true;
  return false;
}

vgpu_region_share* findLocked(vgpu_region* r, uint32_t kind, const void* key) {
  for (auto& e : r->shares.entries)
    if (__atomic_load_n(&e.kind, __ATOMIC_RELAXED) == kind && memcmp(e.key, key, VGPU_REGION_SHARE_KEY_LEN) == 0)
      return &e;
  return nullptr;
}

void subClamped(uint64_t* p, uint64_t bytes) {
  uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &cur, cur > bytes ? cur - bytes : 0, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
}

// Frees an entry: its kind first, so a lock-free reader never counts a half-freed entry.
void freeLocked(vgpu_region_share& e) {
  __atomic_store_n(&e.kind, static_cast<uint32_t>(VGPU_SHARE_FREE), __ATOMIC_RELEASE);
  memset(e.holders, 0, sizeof e.holders);
  e.bytes = 0;
  e.dev = 0;
  memset(e.key, 0, sizeof e.key);
}

bool validArgs(vgpu_region* r, int slot, uint32_t kind, const void* key) {
  return r != nullptr && slot >= 0 && slot < VGPU_REGION_MAX_PROCS && validKind(kind) && key != nullptr;
}

}  // namespace

extern "C" {

int vgpu_region_share_publish(vgpu_region* r, int slot, uint32_t kind, const void* key, int dev, uint64_t bytes) {
  if (!validArgs(r, slot, kind, key) || dev < 0 || dev >= VGPU_REGION_MAX_DEVICES) return VGPU_REGION_ERROR;
  if (vgpu_region_lock(r) != 0) return VGPU_REGION_ERROR;
  int rc = VGPU_REGION_OK;
  if (findLocked(r, kind, key) != nullptr) {
    rc = VGPU_REGION_SHARE_EXISTS;
  } else {
    vgpu_region_share* free = nullptr;
    for (auto& c : r->shares.entries)
      if (c.kind == VGPU_SHARE_FREE) {
        free = &c;
        break;
      }
    uint64_t* mine = &r->procs[slot].memory_used[dev];
    if (free == nullptr) {
      rc = VGPU_REGION_FULL;
    } else if (__atomic_load_n(mine, __ATOMIC_RELAXED) < bytes) {
      rc = VGPU_REGION_ERROR;
    } else {
      memcpy(free->key, key, VGPU_REGION_SHARE_KEY_LEN);
      free->dev = dev;
      free->bytes = bytes;
      memset(free->holders, 0, sizeof free->holders);
      setHolder(*free, slot);
      __atomic_store_n(&free->kind, kind, __ATOMIC_RELEASE);
      VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_PUBLISH_ENTRY);
      // The device sum is unchanged (the bytes moved). Atomic: the owner's other threads
      // change the slot meanwhile without the lock.
      __atomic_sub_fetch(mine, bytes, __ATOMIC_RELAXED);
      VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_PUBLISH_SLOT);
    }
  }
  vgpu_region_unlock(r);
  return rc;
}

int vgpu_region_share_hold(vgpu_region* r, int slot, uint32_t kind, const void* key, int* dev, uint64_t* bytes) {
  if (!validArgs(r, slot, kind, key)) return VGPU_REGION_ERROR;
  if (vgpu_region_lock(r) != 0) return VGPU_REGION_ERROR;
  int rc = VGPU_REGION_SHARE_NOT_FOUND;
  vgpu_region_share* e = findLocked(r, kind, key);
  if (e != nullptr && anyHolder(*e)) {
    setHolder(*e, slot);
    VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_HOLD);
    if (dev != nullptr) *dev = e->dev;
    if (bytes != nullptr) *bytes = e->bytes;
    rc = VGPU_REGION_OK;
  }
  vgpu_region_unlock(r);
  return rc;
}

int vgpu_region_share_drop(vgpu_region* r, int slot, uint32_t kind, const void* key) {
  if (!validArgs(r, slot, kind, key)) return VGPU_REGION_ERROR;
  if (vgpu_region_lock(r) != 0) return VGPU_REGION_ERROR;
  int rc = VGPU_REGION_SHARE_NOT_FOUND;
  vgpu_region_share* e = findLocked(r, kind, key);
  if (e != nullptr && holds(*e, slot)) {
    clearHolder(*e, slot);
    VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_DROP_HOLDER);
    if (!anyHolder(*e)) {
      const int dev = e->dev;
      const uint64_t bytes = e->bytes;
      freeLocked(*e);
      VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_DROP_ENTRY);
      if (dev >= 0 && dev < VGPU_REGION_MAX_DEVICES) subClamped(&r->devices[dev].memory_used, bytes);
      VGPU_REGION_KILL_POINT(VGPU_KP_SHARE_DROP_DEVICE);
    }
    rc = VGPU_REGION_OK;
  }
  vgpu_region_unlock(r);
  return rc;
}

void vgpu_region_shares_reclaim_locked(vgpu_region* r, const uint64_t* dead, uint64_t* held) {
  for (auto& e : r->shares.entries) {
    if (e.kind == VGPU_SHARE_FREE) continue;
    for (int w = 0; w < VGPU_REGION_SHARE_HOLDER_WORDS; ++w) e.holders[w] &= ~dead[w];
    if (!anyHolder(e) || e.dev < 0 || e.dev >= VGPU_REGION_MAX_DEVICES) {
      freeLocked(e);
      continue;
    }
    held[e.dev] += e.bytes;
  }
}

uint64_t vgpu_region_shared_bytes(const vgpu_region* r, int dev) {
  uint64_t sum = 0;
  for (const auto& e : r->shares.entries)
    if (__atomic_load_n(&e.kind, __ATOMIC_ACQUIRE) != VGPU_SHARE_FREE && e.dev == dev) sum += e.bytes;
  return sum;
}

}  // extern "C"
