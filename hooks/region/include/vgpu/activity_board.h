#pragma once
/*
 * The activity board: one small file per physical GPU (named by its UUID) in a folder that
 * every container of the node sees, through which high-priority tenants (CUDA_TASK_PRIORITY
 * 0) say that they are running kernels on the GPU. Lower-priority tenants read it and hold
 * their launches back while one is active; a high-priority tenant reads it to know whether
 * another high-priority tenant shares the GPU.
 *
 * Who may write: the node agent mounts the folder read-write only into high-priority
 * containers and read-only into the others, so a low-priority tenant can neither hold
 * anyone back nor erase an announcement; a high-priority tenant can only claim what its
 * priority gives it anyway. Readers ignore a file that is not a board.
 *
 * Entries are updated with atomic operations only: no lock, nothing a process killed at any
 * point could leave held. An entry is a tenant (the container's region `tenant` id) and the
 * CLOCK_MONOTONIC time until which it counts as active; expired entries are free.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_BOARD_MAGIC 0x3144524255504756ULL /* "VGPUBRD1" little-endian */
#define VGPU_BOARD_VERSION 1u
#define VGPU_BOARD_ENTRIES 64

typedef struct vgpu_board_entry {
  uint32_t tenant;         /* 0: free */
  uint32_t reserved;
  int64_t active_until_ns; /* CLOCK_MONOTONIC */
} vgpu_board_entry;

typedef struct vgpu_board {
  uint64_t magic;
  uint32_t version;
  uint32_t size; /* sizeof(vgpu_board) */
  vgpu_board_entry high[VGPU_BOARD_ENTRIES];
} vgpu_board;

/**
 * Maps the board of GPU `uuid` in folder `dir`. `writable`: create it if absent and map it
 * for writing (a high-priority tenant); otherwise map an existing one read-only (it may not
 * exist yet: no high-priority tenant has come). 0 on success, -1 otherwise (message in err).
 */
int vgpu_board_open(const char* dir, const char* uuid, int writable, vgpu_board** out, char* err, size_t err_len);

void vgpu_board_close(vgpu_board* board);

/** Tenant `tenant` is active until `until_ns` (keeps the later of this and what it said). */
void vgpu_board_announce(vgpu_board* board, uint32_t tenant, int64_t until_ns);

/** How many tenants other than `self` (0: none excluded) are active at `now_ns`. */
int vgpu_board_active(const vgpu_board* board, uint32_t self, int64_t now_ns);

#ifdef __cplusplus
}
#endif
