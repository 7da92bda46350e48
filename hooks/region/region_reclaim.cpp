// The exact reclaim of the shared region (vgpu/shared_region.h, "Concurrency"): freeing the
// slots of dead processes and recomputing every device sum from what live slots and live
// share entries hold, once no live process is between two steps of an update, and the pacing
// of reclaims before a refusal (reclaimBeforeRefusal). Linked into
// libvgpu.so like the rest of the region: no exceptions, no allocation.

#include "region_reclaim.h"

#include "vgpu/region_shares.h"

#include <sched.h>
#include <string.h>
#include <time.h>

namespace vgpu::region_detail {

namespace {

uint64_t loadU64(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
void storeU64(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

// Subtracts at most what is there: a device sum never wraps below zero.
void subClamped(uint64_t* p, uint64_t bytes) {
  uint64_t cur = loadU64(p);
  while (!__atomic_compare_exchange_n(p, &cur, cur > bytes ? cur - bytes : 0, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
}

// Marks the slot free; the pid last, so a slot that looks free holds nothing.
void freeSlotLocked(vgpu_region_proc* p) {
  p->start_time = 0;
  __atomic_store_n(&p->flags, 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&p->pid, 0, __ATOMIC_RELEASE);
}

// With `reclaiming` raised: waits until no live slot is in flight. A slot that stays in flight
// is looked at again and joins `dead` if its owner died meanwhile. False when a live one is
// still in flight after VGPU_REGION_QUIESCE_MS (stopped, or a counter a tenant wrote).
bool waitQuiet(vgpu_region* r, SlotDeadFn slotDead, void* ctx, uint64_t* dead) {
  const int64_t start = monotonicNs();
  for (int round = 0;; ++round) {
    int busy = -1;
    for (int s = 0; s < VGPU_REGION_MAX_PROCS && busy < 0; ++s) {
      if (inUse(r, s) && !inSet(dead, s) && __atomic_load_n(&r->in_flight[s], __ATOMIC_SEQ_CST) != 0) busy = s;
    }
    if (busy < 0) return true;
    if (round < 8) {  // an update in flight takes nanoseconds unless its thread was preempted
      sched_yield();
      continue;
    }
    if (slotDead(r, ctx, busy)) {
      addToSet(dead, busy);
      continue;
    }
    if (monotonicNs() - start >= VGPU_REGION_QUIESCE_MS * 1000000LL) return false;
    timespec pause{0, 50 * 1000};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

// Gives the device sums back what the slot holds and frees it (a process detaching, or the
// fallback of a reclaim that could not recompute). The slot's counters are exchanged before
// the device sums are lowered, so dying in between leaves the sums high, and the slot's pid is
// cleared last, so the next reclaim finds the slot dead and recomputes.
void clearSlotLocked(vgpu_region* r, int slot) {
  vgpu_region_proc* p = &r->procs[slot];
  for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
    uint64_t held = __atomic_exchange_n(&p->memory_used[d], 0, __ATOMIC_RELAXED);
    if (held == 0) continue;
    VGPU_REGION_KILL_POINT(VGPU_KP_CLEAR_SLOT);
    subClamped(&r->devices[d].memory_used, held);
    VGPU_REGION_KILL_POINT(VGPU_KP_CLEAR_DEVICE);
  }
  freeSlotLocked(p);
}

// The share entries held by the slots in `set` lose those holders; entries left without one
// are freed and their bytes leave the device sums.
void releaseSharesLocked(vgpu_region* r, const uint64_t* set) {
  uint64_t before[VGPU_REGION_MAX_DEVICES] = {}, after[VGPU_REGION_MAX_DEVICES] = {};
  for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) before[d] = vgpu_region_shared_bytes(r, d);
  vgpu_region_shares_reclaim_locked(r, set, after);
  for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
    if (before[d] > after[d]) subClamped(&r->devices[d].memory_used, before[d] - after[d]);
  }
}

// The exact reclaim (region lock held): the sums become what live slots and live share
// entries hold, recomputed from scratch, so whatever a process killed between two steps left
// behind is gone. Runs when dead slots are found, or when `recompute` (the lock was recovered
// from a dead holder) or `sums_stale` asks for it. Returns how many slots were freed.
int reclaimDeadLocked(vgpu_region* r, SlotDeadFn slotDead, void* ctx, bool recompute) {
  uint64_t dead[kSetWords] = {};
  bool any = false;
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
    if (inUse(r, s) && slotDead(r, ctx, s)) {
      addToSet(dead, s);
      any = true;
    }
  }
  if (!any && !recompute && __atomic_load_n(&r->sums_stale, __ATOMIC_RELAXED) == 0) return 0;
  __atomic_store_n(&r->reclaiming, 1u, __ATOMIC_SEQ_CST);
  VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_FLAGGED);
  if (waitQuiet(r, slotDead, ctx, dead)) {
    VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_QUIET);
    uint64_t sums[VGPU_REGION_MAX_DEVICES] = {};
    vgpu_region_shares_reclaim_locked(r, dead, sums);
    VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_SHARES);
    for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
      if (!inUse(r, s) || inSet(dead, s)) continue;
      for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) sums[d] += loadU64(&r->procs[s].memory_used[d]);
    }
    for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
      storeU64(&r->devices[d].memory_used, sums[d]);
      VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_DEVICE);
    }
    __atomic_store_n(&r->sums_stale, 0u, __ATOMIC_RELAXED);
    for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
      if (!inSet(dead, s)) continue;
      memset(r->procs[s].memory_used, 0, sizeof r->procs[s].memory_used);
      __atomic_store_n(&r->in_flight[s], 0u, __ATOMIC_RELAXED);
      freeSlotLocked(&r->procs[s]);
      VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_SLOT);
    }
  } else {
    // A live process stays in flight: the sums cannot be recomputed now. Take out what the
    // dead slots and the share entries they alone held account for, as version 3 did; a torn
    // update of a dead process stays in the sums (high) until a later reclaim recomputes.
    __atomic_store_n(&r->reclaiming, 0u, __ATOMIC_SEQ_CST);
    releaseSharesLocked(r, dead);
    for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
      if (!inSet(dead, s)) continue;
      clearSlotLocked(r, s);
      __atomic_store_n(&r->in_flight[s], 0u, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&r->sums_stale, 1u, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&r->reclaiming, 0u, __ATOMIC_SEQ_CST);
  VGPU_REGION_KILL_POINT(VGPU_KP_RECLAIM_DONE);
  int freed = 0;
  for (uint64_t w : dead) freed += __builtin_popcountll(w);
  return freed;
}

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Before a refusal, a reclaim that began after the refused check: usage held by processes
// that are gone is freed, sums left behind by one killed between two steps recomputed. They
// are spaced (one starts kReclaimSpacingNs after the last ended at the earliest) and shared
// (a caller whose check came before another's reclaim began takes that one), so processes
// refused again and again, as a program retrying an out-of-memory is, leave the region lock
// free for the others: a reclaim per refusal held it nearly always, and newcomers waited out
// its bound and were refused (fail closed). Every refusal still follows a reclaim that began
// after its check. The stamps are the container's to write: a wait is bounded whatever they say.
constexpr int64_t kReclaimSpacingNs = 1000000;
constexpr int64_t kReclaimWaitNs = 50000000;

void reclaimBeforeRefusal(vgpu_region* r, uint32_t seen) {
  const uint32_t target = seen + 2 + (seen & 1u);  // a whole reclaim that began after `seen`
  const auto reached = [&] {
    return static_cast<int32_t>(__atomic_load_n(&r->reclaim_seq, __ATOMIC_ACQUIRE) - target) >= 0;
  };
  const int64_t start = monotonicNs();
  for (;;) {
    if (reached()) return;
    const int64_t now = monotonicNs();
    const int64_t due = __atomic_load_n(&r->reclaim_end_ns, __ATOMIC_RELAXED) + kReclaimSpacingNs;
    if (now < due && due - now <= kReclaimSpacingNs && now - start < kReclaimWaitNs) {
      timespec pause{0, static_cast<long>(due - now)};
      nanosleep(&pause, nullptr);
      continue;
    }
    if (vgpu_region_lock(r) != VGPU_REGION_OK) return;  // the add refuses or fails on its own
    if (!reached()) vgpu_region_reclaim_dead_locked(r);
    vgpu_region_unlock(r);
    return;
  }
}

}  // namespace vgpu::region_detail
