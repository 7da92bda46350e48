#pragma once
// The exact reclaim of the shared region (region_reclaim.cpp), for shared_region.cpp: what the
// lock's holder calls to free dead slots and recompute the sums, and the slot-set helpers.
// Every function here expects the region lock held, but reclaimBeforeRefusal, which takes it.

#include "vgpu/shared_region.h"

#include <stdint.h>

namespace vgpu::region_detail {

/// A set of slots, one bit each (the form vgpu_region_shares_reclaim_locked takes).
constexpr int kSetWords = VGPU_REGION_MAX_PROCS / 64;
inline bool inSet(const uint64_t* set, int s) { return (set[s / 64] >> (s % 64) & 1) != 0; }
inline void addToSet(uint64_t* set, int s) { set[s / 64] |= uint64_t{1} << (s % 64); }

/// Whether a slot is taken (by a live process or one not yet found dead).
inline bool inUse(const vgpu_region* r, int s) { return __atomic_load_n(&r->procs[s].pid, __ATOMIC_ACQUIRE) != 0; }

/// Whether the owner of slot `s` is gone; `ctx` is the caller's (its open file).
using SlotDeadFn = bool (*)(vgpu_region* r, void* ctx, int s);

/// Gives the device sums back what the slot holds and frees it (a process detaching).
void clearSlotLocked(vgpu_region* r, int slot);

/// The share entries held by the slots in `set` lose those holders; entries left without one
/// are freed and their bytes leave the device sums.
void releaseSharesLocked(vgpu_region* r, const uint64_t* set);

/// Frees the slots found dead and recomputes the sums (also with none dead when `recompute`
/// or the region's `sums_stale` asks for it). Returns how many slots were freed.
int reclaimDeadLocked(vgpu_region* r, SlotDeadFn slotDead, void* ctx, bool recompute);

/// CLOCK_MONOTONIC in nanoseconds (the region's reclaim_end_ns).
int64_t monotonicNs();

/// Before a refusal: returns once a reclaim that began after `seen` (the region's reclaim_seq
/// read after the refused check) has run, by another process or by this call; paced so that
/// processes refused again and again leave the lock free (region_reclaim.cpp). Takes the lock.
void reclaimBeforeRefusal(vgpu_region* r, uint32_t seen);

}  // namespace vgpu::region_detail
