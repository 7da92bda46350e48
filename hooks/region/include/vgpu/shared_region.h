#pragma once
/*
 * The shared region: one file per container, mapped by every process of the container
 * that loads libvgpu.so, and read by the node agent to export usage.
 *
 * C-compatible on purpose: the layout is an ABI between libvgpu.so builds of different
 * ages and the node agent. It only grows at the end (readers check `header_size` and
 * `version`); a change of meaning bumps VGPU_REGION_VERSION.
 *
 * Concurrency (version 4):
 * - Memory is counted without a lock: a device's `memory_used` is changed only by atomic
 *   read-modify-write operations (the check-and-add is a compare-and-swap loop against the
 *   limit), and a process slot's counters only by the threads of the process that owns the
 *   slot, also atomically. A process adds to the device first and to its slot second, and
 *   takes from its slot first and from the device second, so the device sum is never below
 *   what the slots hold; a process killed between the two steps leaves it too high.
 * - That excess is not left for good: reclaiming dead slots recomputes every device sum from
 *   scratch, as the sum over live slots of `memory_used[dev]` plus the bytes of the share
 *   entries that keep a live holder. A sum may only be recomputed while no live process is
 *   between its two steps: each slot has an in-flight counter (`in_flight[slot]`) that its
 *   owner's threads raise (sequentially consistent) before touching the device sum and lower
 *   after touching the slot; having raised it, they read `reclaiming` and, if set, lower it and
 *   take the slow path (the region lock). The reclaimer holds the lock, sets `reclaiming`,
 *   waits (bounded: VGPU_REGION_QUIESCE_MS) until no live slot is in flight, recomputes and
 *   clears it. A dead slot's in-flight state is simply discarded: its device memory went with
 *   the process. A live process that stays in flight (stopped, say) makes the reclaimer fall
 *   back to taking out only what the dead slots hold, leaving the sums high, never low, and to
 *   recompute at the next reclaim (`sums_stale`).
 * - `lock`, a process-shared robust mutex, serialises what changes the set of slots and the
 *   share table: claiming a slot, detaching, reclaiming, exporting and importing. A process
 *   killed while holding it makes the next locker recover: it reclaims and recomputes.
 * - Who owns a slot survives PID namespaces: the owner holds an open-file-description lock
 *   (F_OFD_SETLK) on byte `slot` of the file for as long as it lives; the kernel drops it when
 *   the process dies (or execs, the descriptor is close-on-exec). A slot whose byte nobody
 *   holds is dead, whatever its pid says. Where the kernel has no OFD locks (before 3.15),
 *   liveness falls back to /proc/<pid> and the start time, which PID namespaces can fool.
 * Readers (the node agent) read the 64-bit counters without the lock and get values that
 * were true at some instant.
 *
 * Index space: device i is the CUDA ordinal i as the container sees it (after
 * CUDA_VISIBLE_DEVICES); `uuid` names the physical device for the agent.
 */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu/region_kill_points.h"
#include "vgpu/region_shares.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_REGION_MAGIC 0x314e475255504756ULL /* "VGPURGN1" little-endian */
/* Version 2 gave devices[i].unenforced its meaning. Version 3 counts memory lock-free and
 * identifies processes by a file lock (above), with the same layout. Version 4 grows the file
 * at the end: the table of memory shared between processes, then what makes a reclaim exact
 * (`reclaiming`, `sums_stale`, `in_flight`). Processes of older versions count differently and
 * their files have another size: a writer opens only version 4 (the node agent re-creates a
 * region it cannot open; a region a process made itself must be removed by hand, which the
 * message says), and the reader refuses the others, naming the version. */
#define VGPU_REGION_VERSION 4u
#define VGPU_REGION_OLDEST_VERSION 4u /* the oldest a reader reads */
#define VGPU_REGION_MAX_DEVICES 16
#define VGPU_REGION_MAX_PROCS 1024
#define VGPU_REGION_UUID_LEN 48

/** Bits of vgpu_region_device.unenforced: a limit is set but this driver gives the library no
 *  way to enforce it (a missing entry point with no older equivalent). The library also says
 *  so once on stderr; the node agent exports it. */
#define VGPU_REGION_UNENFORCED_MEMORY 0x1u
#define VGPU_REGION_UNENFORCED_COMPUTE 0x2u

/** vgpu_region_proc.flags (version 3): the slot's owner holds the OFD lock on byte `slot` of
 *  the file (else its liveness is judged by pid and start time); the low bits hold the
 *  process's pid as the driver reports it (NVML's process lists), 0 while unknown. */
#define VGPU_REGION_PROC_LOCKED 0x80000000u
#define VGPU_REGION_PROC_DRIVER_PID_MASK 0x007fffffu

/** Per-device state shared by the container. */
typedef struct vgpu_region_device {
  char uuid[VGPU_REGION_UUID_LEN]; /* "GPU-xxxxxxxx-..." (a MIG device: "MIG-..."), NUL-terminated; "" until known */
  uint64_t memory_limit;           /* bytes, 0 = none; as last published by a process */
  uint64_t memory_used;            /* bytes, sum of memory_used over live process slots */
  uint32_t sm_limit;               /* percent, 0 = none; as last published */
  uint32_t unenforced;             /* VGPU_REGION_UNENFORCED_* (version 2; always 0 before) */
  int64_t compute_credit_ns; /* token bucket of GPU time (atomic) */
  int64_t compute_stamp_ns;  /* CLOCK_MONOTONIC of the last refill (atomic) */
  uint64_t compute_busy_ns;  /* cumulative measured kernel time (atomic) */
  uint64_t compute_held_ns;  /* cumulative time launches were held back (atomic) */
  uint64_t context_overhead; /* bytes a context takes, as first measured undisturbed */
  uint64_t reserved[2];      /* 3 before version 4: 128 bytes make an entry's address one shift */
} vgpu_region_device;

/** One process of the container. pid 0 marks a free slot. */
typedef struct vgpu_region_proc {
  int32_t pid;    /* getpid() of the owner, in its own PID namespace: for people, not liveness */
  uint32_t flags; /* VGPU_REGION_PROC_* (version 3; 0 before) */
  uint64_t start_time;                           /* /proc/<pid>/stat field 22, tells a reused PID apart */
  uint64_t memory_used[VGPU_REGION_MAX_DEVICES]; /* bytes this process holds per device */
} vgpu_region_proc;

/** The whole file. */
typedef struct vgpu_region {
  uint64_t magic;       /* VGPU_REGION_MAGIC, written last at creation */
  uint32_t version;     /* VGPU_REGION_VERSION */
  uint32_t header_size; /* sizeof(vgpu_region) of the writer */
  uint32_t max_devices; /* VGPU_REGION_MAX_DEVICES */
  uint32_t max_procs;   /* VGPU_REGION_MAX_PROCS */
  int32_t priority;     /* CUDA_TASK_PRIORITY as last published */
  uint32_t tenant;      /* version 3: random, non-zero, set at creation: names the container on
                           the activity board (vgpu/activity_board.h) */
  union {
    pthread_mutex_t mutex;
    char pad[48];
  } lock;
  /* Version 4, where the lock's padding was (older writers of version 4 left zeros): reclaims
   * before a refusal are spaced (vgpu_region_try_add). */
  uint32_t reclaim_seq;   /* +1 when a reclaim starts, +1 when it ends: odd while one runs */
  uint32_t reserved0;
  int64_t reclaim_end_ns; /* CLOCK_MONOTONIC when the last one ended */
  vgpu_region_device devices[VGPU_REGION_MAX_DEVICES];
  vgpu_region_proc procs[VGPU_REGION_MAX_PROCS];
  vgpu_region_shares shares; /* version 4: memory shared between processes (vgpu/region_shares.h) */
  /* Version 4, exact reclaim (see Concurrency above): */
  uint32_t reclaiming;                      /* non-zero while a reclaimer recomputes the sums */
  uint32_t sums_stale;                      /* a reclaim gave up waiting: the next one recomputes */
  uint32_t in_flight[VGPU_REGION_MAX_PROCS]; /* threads of slot s between two steps of an update */
} vgpu_region;

/** Results of the region functions; errors also leave a message in `err` where given. */
enum {
  VGPU_REGION_OK = 0,
  VGPU_REGION_OVER_LIMIT = 1, /* check-and-add refused: the limit would be exceeded */
  VGPU_REGION_ERROR = -1,     /* system error or bad file; see the message */
  VGPU_REGION_FULL = -2,      /* attach: every process slot is held by a live process */
  VGPU_REGION_TAMPERED = -3   /* the counters contradict each other: someone rewrote them */
};

/**
 * Maps the region at `path` for writing, creating and initialising it if absent or empty.
 * Refuses a file with another magic or size with a message naming the path. A file of an
 * older version (or another version 4 size) is rewritten as this version if none of its
 * processes is alive, and refused (naming the version) if one is. Safe against processes racing to create the same file
 * (flock during initialisation). Keeps a descriptor of the file open (close-on-exec) for the
 * slot locks, until vgpu_region_close.
 */
int vgpu_region_open(const char* path, vgpu_region** out, char* err, size_t err_len);

/** Like vgpu_region_open, for a region the node agent created: opens only the file whose
 *  inode number is `inode`, and only once initialised with this version's size. A missing,
 *  truncated, uninitialised or replaced (another inode) file is refused with a message saying
 *  which, never started afresh. */
int vgpu_region_open_existing(const char* path, uint64_t inode, vgpu_region** out, char* err, size_t err_len);

/** A copy of an existing region, for the node agent. The file is never mapped: it is read
 *  with pread into private memory (a tenant that truncates or grows the file meanwhile gets
 *  this call refused, never the reader killed by SIGBUS); links, FIFOs and files of another
 *  size are refused; magic and version (any from VGPU_REGION_OLDEST_VERSION to
 *  VGPU_REGION_VERSION) are checked, and UUIDs are NUL-terminated in the copy. The copy is a
 *  snapshot: read it again for newer values. Free it with vgpu_region_close. */
int vgpu_region_open_readonly(const char* path, const vgpu_region** out, char* err, size_t err_len);

/** A private, unshared region (anonymous memory), for a process that has no file. */
int vgpu_region_open_private(vgpu_region** out, char* err, size_t err_len);

/** Unmaps a region returned by one of the open functions (and closes its descriptor). */
void vgpu_region_close(const vgpu_region* region);

/** In a forked child: the descriptor inherited from the parent shares the parent's slot
 *  locks, so the child opens the file afresh and holds no slot (it attaches anew). */
void vgpu_region_after_fork(vgpu_region* region);

/** How long the region's locks are waited for (flock while opening, the region lock):
 *  another process of the container may hold them for ever, and then the region is refused
 *  as unusable instead of hanging the caller. */
#define VGPU_REGION_LOCK_TIMEOUT_MS 2000

/** Takes the region lock, recovering it if its holder died. 0, or VGPU_REGION_ERROR when it
 *  was not free within VGPU_REGION_LOCK_TIMEOUT_MS or is damaged. */
int vgpu_region_lock(vgpu_region* region);
void vgpu_region_unlock(vgpu_region* region);

/**
 * Claims a slot for the calling process and returns its index in *slot. Slots of processes
 * that are gone are reclaimed first. VGPU_REGION_FULL (with a message) when every slot
 * belongs to a live process; VGPU_REGION_TAMPERED when the counters contradict each other
 * (vgpu_region_verify); VGPU_REGION_ERROR when the lock was not free in time.
 */
int vgpu_region_attach(vgpu_region* region, int* slot, char* err, size_t err_len);

/** Releases the slot and everything it holds (at process exit). */
void vgpu_region_detach(vgpu_region* region, int slot);

/**
 * Check-and-add: adds `bytes` to device `dev` for `slot` unless the device's usage would
 * then exceed `limit` (0 = no limit). On refusal, dead processes are reclaimed and the check
 * is retried once. Returns VGPU_REGION_OK, VGPU_REGION_OVER_LIMIT, VGPU_REGION_ERROR, or
 * VGPU_REGION_TAMPERED (nothing added) when vgpu_region_verify finds the counters rewritten.
 */
int vgpu_region_try_add(vgpu_region* region, int slot, int dev, uint64_t bytes, uint64_t limit);

/** vgpu_region_add_fast's answer when a reclaim is recomputing the sums: nothing was added;
 *  vgpu_region_try_add waits for the region lock and adds under it. */
#define VGPU_REGION_ADD_BUSY 3

/** How long a reclaimer waits for live processes to finish the update they are in the middle
 *  of before it falls back to leaving the sums high (milliseconds). */
#define VGPU_REGION_QUIESCE_MS 5

/** The two steps of a check-and-add, for a caller that is in flight or holds the lock. */
static inline int vgpu_region_add_steps(vgpu_region* r, int slot, int dev, uint64_t bytes, uint64_t limit) {
  uint64_t* used = &r->devices[dev].memory_used;
  uint64_t cur = __atomic_load_n(used, __ATOMIC_RELAXED);
  do {
    if (limit != 0 && (bytes > limit || cur > limit - bytes)) return 0;
  } while (!__atomic_compare_exchange_n(used, &cur, cur + bytes, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  VGPU_REGION_KILL_POINT(VGPU_KP_ADD_DEVICE);
  /* The slot held more than the sum before these bytes: only a rewritten sum does that. */
  uint64_t mine = __atomic_fetch_add(&r->procs[slot].memory_used[dev], bytes, __ATOMIC_RELAXED);
  VGPU_REGION_KILL_POINT(VGPU_KP_ADD_SLOT);
  return mine > cur ? 2 : 1;
}

/** The check-and-add itself, without the retry after reclaiming dead processes: 1 when
 *  `bytes` were added, 0 when the limit refused them, 2 when they were added but the device's
 *  sum is below what this slot alone holds, which honest processes never leave behind (see
 *  vgpu_region_verify), VGPU_REGION_ADD_BUSY when a reclaim is under way (nothing added).
 *  Inline because every allocation of every process runs it: the slot's in-flight counter
 *  up, the reclaim flag read, the device sum, the owner's slot, the counter down. */
static inline int vgpu_region_add_fast(vgpu_region* r, int slot, int dev, uint64_t bytes, uint64_t limit) {
  uint32_t* busy = &r->in_flight[slot];
  __atomic_add_fetch(busy, 1u, __ATOMIC_SEQ_CST);
  VGPU_REGION_KILL_POINT(VGPU_KP_ADD_MARKED);
  int added = VGPU_REGION_ADD_BUSY;
  if (__builtin_expect(__atomic_load_n(&r->reclaiming, __ATOMIC_SEQ_CST) == 0, 1))
    added = vgpu_region_add_steps(r, slot, dev, bytes, limit);
  __atomic_sub_fetch(busy, 1u, __ATOMIC_RELEASE);
  return added;
}

/**
 * Whether the region's usage counters are consistent: a device's sum is never below what the
 * slot `slot` holds (slot -1: what any slot in use holds). Honest processes keep that true at
 * every instant (adds go to the device first, subtractions to it last); a sum lowered below a
 * live process's share by a process that rewrote the file breaks it. Looked at up to three
 * times, a few hundred microseconds apart, so that an update in flight is not taken for
 * tampering. A sum lowered, but not below any one process's share, goes unnoticed here.
 * VGPU_REGION_OK, or VGPU_REGION_TAMPERED with a message naming the device and the figures.
 * This catches a rewritten sum, not a process that rewrites its own slot and the sum
 * together: the node agent's watchdog compares with what the driver reports.
 */
int vgpu_region_verify(const vgpu_region* region, int slot, char* err, size_t err_len);

/** Out of line: the subtraction while a reclaim is under way (under the region lock). */
void vgpu_region_sub_slow(vgpu_region* region, int slot, int dev, uint64_t bytes);

/** The two steps of a subtraction (clamped at what the slot holds): the slot first, then the
 *  device sum, which honest processes keep at or above what the slot held, so it is not
 *  clamped (a sum a tenant rewrote lower wraps: the container is refused memory until a
 *  reclaim recomputes it, which is the safe side). The slot is
 *  changed atomically (the owner's threads share it); a subtraction of more than it holds
 *  takes the clamped path. (Threads that each take less but together more than the slot holds
 *  give back more than was taken: a caller's bug; the slot's counter then wraps.) */
static inline void vgpu_region_sub_steps(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  uint64_t* mine = &r->procs[slot].memory_used[dev];
  uint64_t take = bytes;
  uint64_t held = __atomic_load_n(mine, __ATOMIC_RELAXED);
  if (__builtin_expect(held >= bytes, 1)) {
    __atomic_sub_fetch(mine, bytes, __ATOMIC_RELAXED);
  } else {
    do {
      take = bytes < held ? bytes : held;
    } while (!__atomic_compare_exchange_n(mine, &held, held - take, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  }
  VGPU_REGION_KILL_POINT(VGPU_KP_SUB_SLOT);
  __atomic_sub_fetch(&r->devices[dev].memory_used, take, __ATOMIC_RELAXED);
  VGPU_REGION_KILL_POINT(VGPU_KP_SUB_DEVICE);
}

/** Subtracts `bytes` (clamped at what the slot holds) for `slot`: its slot first, then the
 *  device sum, in flight like vgpu_region_add_fast. Inline for the same reason. */
static inline void vgpu_region_sub_fast(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  uint32_t* busy = &r->in_flight[slot];
  __atomic_add_fetch(busy, 1u, __ATOMIC_SEQ_CST);
  VGPU_REGION_KILL_POINT(VGPU_KP_SUB_MARKED);
  if (__builtin_expect(__atomic_load_n(&r->reclaiming, __ATOMIC_SEQ_CST) == 0, 1)) {
    vgpu_region_sub_steps(r, slot, dev, bytes);
    __atomic_sub_fetch(busy, 1u, __ATOMIC_RELEASE);
    return;
  }
  __atomic_sub_fetch(busy, 1u, __ATOMIC_RELEASE);
  vgpu_region_sub_slow(r, slot, dev, bytes);
}

/** Adds `bytes` whatever the limit: memory the driver has already taken (and that the
 *  container's later requests must therefore see). */
void vgpu_region_force_add(vgpu_region* region, int slot, int dev, uint64_t bytes);

/** Subtracts `bytes` (clamped at what the slot holds) from device `dev` for `slot`. */
void vgpu_region_sub(vgpu_region* region, int slot, int dev, uint64_t bytes);

/** Device usage as last written (lock-free read). */
uint64_t vgpu_region_used(const vgpu_region* region, int dev);

/** Frees the slots of processes that no longer exist and recomputes every device sum from
 *  what live slots and live share entries hold (see Concurrency above); returns how many
 *  slots were freed. Takes the lock. Finding none dead, it changes nothing unless a reclaim
 *  before it had to leave the sums high (`sums_stale`). */
int vgpu_region_reclaim_dead(vgpu_region* region);
/** The same with the region lock already held by the caller. */
int vgpu_region_reclaim_dead_locked(vgpu_region* region);

/** Records the pid under which the driver (NVML) reports the slot's process. */
void vgpu_region_set_driver_pid(vgpu_region* region, int slot, uint32_t driver_pid);

/** Publishes a device's UUID and limits for the node agent (under the lock). */
void vgpu_region_publish_device(vgpu_region* region, int dev, const char* uuid, uint64_t memory_limit,
                                uint32_t sm_limit);

/** Publishes which of the device's limits are not enforced (VGPU_REGION_UNENFORCED_* bits). */
void vgpu_region_publish_unenforced(vgpu_region* region, int dev, uint32_t bits);

/** Publishes the container's priority (CUDA_TASK_PRIORITY). */
void vgpu_region_publish_priority(vgpu_region* region, int32_t priority);

#ifdef __cplusplus
}
#endif
