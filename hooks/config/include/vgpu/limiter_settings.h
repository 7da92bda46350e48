#pragma once
/*
 * The limiter's configuration in C: limits file + environment (vgpu/limiter_contract.h names
 * the keys, docs/limiter.md the syntax), parsed strictly so a typo is an error, not a
 * silently different limit.
 *
 * This is what libvgpu.so itself runs, so it needs nothing but libc: no allocation beyond one
 * buffer for the file, no C++ runtime. vgpu/limiter_config.h is the C++ face of the same
 * parser for the node agent's side and the tests.
 *
 * Every function returns 0 on success and -1 on failure, with a message in `err` (which may
 * be NULL) that names the value, and for the loader the variable or file line at fault.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_LIMITER_MAX_DEVICES 16
#define VGPU_LIMITER_PATH_MAX 4096
/* Keys a limits file can hold: nine plain ones and two indexed ones per device. */
#define VGPU_LIMITS_FILE_MAX_KEYS (9 + 2 * VGPU_LIMITER_MAX_DEVICES)

/* GPU_CORE_UTILIZATION_POLICY: when the compute limit applies (default: while the GPU is
 * shared; force: always; disable: never). */
enum { VGPU_CORE_POLICY_DEFAULT = 0, VGPU_CORE_POLICY_FORCE = 1, VGPU_CORE_POLICY_DISABLE = 2 };

/* Everything libvgpu.so reads at start. Limits of 0 mean none; a compute limit of 100 too. */
typedef struct vgpu_limiter_settings {
  uint64_t memory_bytes[VGPU_LIMITER_MAX_DEVICES];
  uint32_t sm_percent[VGPU_LIMITER_MAX_DEVICES];
  char region_path[VGPU_LIMITER_PATH_MAX]; /* never empty after loading */
  char limits_file[VGPU_LIMITER_PATH_MAX]; /* the file that was read, "" if none */
  int oversubscribe;
  int32_t priority;  /* as given; 1 (low) when unset */
  int priority_set;  /* CUDA_TASK_PRIORITY was given */
  int core_policy;   /* VGPU_CORE_POLICY_* */
  char activity_board[VGPU_LIMITER_PATH_MAX]; /* VGPU_ACTIVITY_BOARD, "" if unset */
  uint64_t context_overhead; /* VGPU_CONTEXT_OVERHEAD in bytes, from the limits file only; 0 = not given */
  uint64_t region_inode;     /* VGPU_REGION_INODE, from the limits file only; 0 = any (created if absent) */
  int control_disabled;         /* CUDA_DISABLE_CONTROL=true and no limits file: nothing is limited */
  int disable_control_ignored;  /* CUDA_DISABLE_CONTROL=true, ignored because a limits file was read */
} vgpu_limiter_settings;

/* "1073741824", "1024m", "4g", "512k" (binary units); "" and "0" mean no limit. */
int vgpu_parse_memory_size(const char* text, size_t len, uint64_t* out, char* err, size_t err_len);
/* An integer 0..100; "" is 0. */
int vgpu_parse_percent(const char* text, size_t len, uint32_t* out, char* err, size_t err_len);
/* true/false/1/0/yes/no (any case); "" is false. */
int vgpu_parse_bool(const char* text, size_t len, int* out, char* err, size_t err_len);

/* One KEY=VALUE of a limits file; both point into the content that was parsed (trimmed). */
typedef struct vgpu_limits_entry {
  const char* key;
  size_t key_len;
  const char* value;
  size_t value_len;
} vgpu_limits_entry;

typedef struct vgpu_limits_file {
  vgpu_limits_entry entries[VGPU_LIMITS_FILE_MAX_KEYS];
  int count;
} vgpu_limits_file;

/* KEY=VALUE lines; '#' starts a comment line; unknown keys and keys given twice are errors
 * that name `file_name` and the line. */
int vgpu_parse_limits_file(const char* content, size_t len, const char* file_name, vgpu_limits_file* out,
                           char* err, size_t err_len);

/* Looks a variable up (getenv-like); returns NULL when unset. */
typedef const char* (*vgpu_env_lookup)(void* ctx, const char* name);

/* Reads the limits file (`fixed_file_path`, NULL meaning VGPU_LIMITS_FILE_PATH, if it exists;
 * else $VGPU_LIMITS_FILE) and the environment. With a file, the environment only tightens
 * what the file says (vgpu/limiter_contract.h); without one, it is read as HAMi-core reads it. */
int vgpu_limiter_settings_load(vgpu_env_lookup env, void* ctx, const char* fixed_file_path,
                               vgpu_limiter_settings* out, char* err, size_t err_len);

/* True when `dev` has a compute limit that may apply (under the policy: while shared, always). */
static inline int vgpu_limiter_compute_limited(const vgpu_limiter_settings* s, int dev) {
  if (dev < 0 || dev >= VGPU_LIMITER_MAX_DEVICES || s->core_policy == VGPU_CORE_POLICY_DISABLE) return 0;
  return s->sm_percent[dev] > 0 && s->sm_percent[dev] < 100;
}

#ifdef __cplusplus
}
#endif
