#pragma once
/*
 * Memory shared between processes of one container (CUDA IPC handles, VMM handles exported
 * as file descriptors): the table in the shared region that charges such memory once.
 *
 * An exporter moves the bytes it was charged for the object from its process slot into a
 * share entry it holds; a process of the same container that opens, imports or maps the
 * object finds the entry by its key and becomes a holder too, charged nothing. The entry's
 * bytes stay in the device's sum while any live slot holds it, and leave it when the last
 * holder lets go or dies. So a device's `memory_used` is, whenever the region lock is free
 * and no process is between two steps of an update: the sum over live slots of
 * `memory_used[dev]`, plus the bytes of every entry on `dev` with a live holder.
 *
 * An object whose key is not in the table (exported by an unlimited process, another
 * container, or a table that was full) is charged to the importer as any allocation.
 *
 * All functions take the region lock themselves, except those named `_locked`.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vgpu_region;

#define VGPU_REGION_MAX_SHARES 512
#define VGPU_REGION_SHARE_KEY_LEN 64
#define VGPU_REGION_SHARE_HOLDER_WORDS (1024 / 64) /* VGPU_REGION_MAX_PROCS bits */

/** What an entry's key is made of. */
enum {
  VGPU_SHARE_FREE = 0, /* unused entry */
  VGPU_SHARE_IPC = 1,  /* key: the CUipcMemHandle's 64 bytes */
  VGPU_SHARE_FD = 2    /* key: the identity of the exported file (see the limiter's docs) */
};

typedef struct vgpu_region_share {
  uint32_t kind;  /* VGPU_SHARE_*; written last when an entry is made, first when freed */
  int32_t dev;    /* device index in the region */
  uint64_t bytes; /* bytes the entry keeps in devices[dev].memory_used */
  uint8_t key[VGPU_REGION_SHARE_KEY_LEN];
  uint64_t holders[VGPU_REGION_SHARE_HOLDER_WORDS]; /* bit s: slot s holds the object */
} vgpu_region_share;

typedef struct vgpu_region_shares {
  vgpu_region_share entries[VGPU_REGION_MAX_SHARES];
} vgpu_region_shares;

/** Results beyond the region's VGPU_REGION_* codes. */
#define VGPU_REGION_SHARE_NOT_FOUND 3 /* no entry with that key and a live holder */
#define VGPU_REGION_SHARE_EXISTS 4    /* publish: the key is in the table already */

/**
 * Exporter: moves `bytes` on device `dev` from `slot`'s counter into an entry keyed by
 * (kind, key) that `slot` holds; the device's sum does not change. `bytes` may be 0 (an
 * object that takes no memory of its own, such as a multicast object: importers are then
 * charged nothing for it). Returns VGPU_REGION_OK; VGPU_REGION_SHARE_EXISTS when an entry
 * with that key is in the table already (nothing moved, `slot` does not become a holder: the
 * exporter keeps paying for what it was charged, so a key that a driver reuses for new memory
 * never hides that memory); VGPU_REGION_FULL when the table has no free entry (the exporter
 * keeps paying, importers are charged: safe); or VGPU_REGION_ERROR (lock not free in time,
 * bad arguments, or the slot holds fewer than `bytes`).
 */
int vgpu_region_share_publish(struct vgpu_region* region, int slot, uint32_t kind, const void* key, int dev,
                              uint64_t bytes);

/**
 * Importer: makes `slot` a holder of the entry keyed by (kind, key) and returns its device
 * and bytes; nothing is charged. VGPU_REGION_SHARE_NOT_FOUND when there is no such entry
 * (the caller charges the import as its own allocation), VGPU_REGION_ERROR otherwise.
 */
int vgpu_region_share_hold(struct vgpu_region* region, int slot, uint32_t kind, const void* key, int* dev,
                           uint64_t* bytes);

/**
 * A holder lets go: clears `slot`'s bit; the last holder frees the entry and takes its
 * bytes out of the device's sum. VGPU_REGION_OK, VGPU_REGION_SHARE_NOT_FOUND when `slot`
 * held no such entry, VGPU_REGION_ERROR when the lock was not free in time.
 */
int vgpu_region_share_drop(struct vgpu_region* region, int slot, uint32_t kind, const void* key);

/**
 * For the reclaim of dead slots (region lock held): clears the bits of the slots in `dead`
 * (a VGPU_REGION_MAX_PROCS-bit set), frees the entries left without a holder, and adds the
 * bytes of every remaining entry to held[dev] (an array of VGPU_REGION_MAX_DEVICES).
 */
void vgpu_region_shares_reclaim_locked(struct vgpu_region* region, const uint64_t* dead, uint64_t* held);

/** Bytes held through entries per device (lock-free read, for readers and tests). */
uint64_t vgpu_region_shared_bytes(const struct vgpu_region* region, int dev);

#ifdef __cplusplus
}
#endif
