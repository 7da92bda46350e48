#pragma once
/* Layout of the fake GPU driver's shared state file (VGPU_FAKE_GPU_STATE).
 *
 * The file holds the simulated *physical* state of the machine's GPUs, shared by every process
 * that loads the fake libcuda.so.1 or libnvidia-ml.so.1: device memory in use, the kernel
 * schedule (busy time), and per-process usage. It is created on first use, sized to
 * sizeof(vgpu_fake_gpu_state) and mmap'd MAP_SHARED.
 *
 * Concurrency: the counters are only touched with atomic operations (GCC __atomic builtins,
 * C11 atomics or C++ std::atomic_ref), so a process that dies mid-update leaves a consistent
 * value; the per-device schedule is guarded by a robust, process-shared mutex (a holder that
 * dies hands EOWNERDEAD to the next locker, which marks it consistent). Creation is serialised
 * with flock() on the file, which the kernel drops when the holder dies. */

#include <pthread.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_FAKE_STATE_MAGIC 0x31475046u /* "FPG1" */
#define VGPU_FAKE_STATE_VERSION 4u
#define VGPU_FAKE_STATE_MAX_DEVICES 16
#define VGPU_FAKE_STATE_MAX_PROCS 256
#define VGPU_FAKE_STATE_RING 1024
#define VGPU_FAKE_MIG_MAX_GI 8 /* GPU instances per device */
#define VGPU_FAKE_MIG_MAX_CI 8 /* compute instances per GPU instance */

/** One stretch of time a device was (or will be) running kernels of one process. Times are
 *  CLOCK_MONOTONIC nanoseconds, which every process on the host shares. */
typedef struct vgpu_fake_busy_interval {
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t pid;
  uint32_t reserved;
} vgpu_fake_busy_interval;

/** Physical state of one simulated device. */
typedef struct vgpu_fake_device_state {
  uint64_t total_bytes;        /* set once when the file is created */
  uint64_t used_bytes;         /* atomic: device memory held by all processes */
  pthread_mutex_t sched_lock;  /* robust, process-shared; guards the fields below */
  uint64_t busy_until_ns;      /* end of the last kernel scheduled on the device */
  uint64_t scheduled_ns;       /* sum of the run times of every kernel ever scheduled */
  uint64_t ring_next;          /* count of intervals ever written; ring[ring_next % RING] is next */
  vgpu_fake_busy_interval ring[VGPU_FAKE_STATE_RING];
} vgpu_fake_device_state;

#define VGPU_FAKE_CGROUP_PATH_MAX 512

/** Usage of one process (pid as seen by that process). */
typedef struct vgpu_fake_process_slot {
  int32_t pid;                 /* atomic: 0 free, -1 being reclaimed after its process died */
  uint32_t context_mask;       /* atomic: bit d set while the process holds a context on device d */
  uint64_t start_ticks;        /* atomic: the process's start time (/proc/<pid>/stat field 22), so a
                                  new process that reuses a dead one's pid is told apart; 0 unknown */
  uint64_t used_bytes[VGPU_FAKE_STATE_MAX_DEVICES]; /* atomic */
  /* version 4: the sysfs path of the process's memory cgroup (what an NVML memory limit's
   * nameSpace names), written under memory_limits.lock when the slot is taken */
  char cgroup[VGPU_FAKE_CGROUP_PATH_MAX];
} vgpu_fake_process_slot;

/** One MIG compute instance inside a GPU instance (compute slices start..start+size-1). */
typedef struct vgpu_fake_mig_ci {
  uint32_t used;
  uint32_t id;         /* unique within its GPU instance */
  uint32_t profile_id; /* NVML compute instance profile id */
  uint32_t start;
  uint32_t size;
} vgpu_fake_mig_ci;

/** One MIG GPU instance (memory slices start..start+size-1). */
typedef struct vgpu_fake_mig_gi {
  uint32_t used;
  uint32_t id;         /* unique within the device */
  uint32_t profile_id; /* NVML GPU instance profile id */
  uint32_t start;
  uint32_t size;
  uint32_t slices;     /* compute slices */
  vgpu_fake_mig_ci ci[VGPU_FAKE_MIG_MAX_CI];
} vgpu_fake_mig_gi;

/** The MIG instances of one device: they outlive the process that created them, as on the
 *  real driver, until destroyed (or the state file is deleted: a "GPU reset"). */
typedef struct vgpu_fake_mig_state {
  pthread_mutex_t lock; /* robust, process-shared; guards gi[] */
  vgpu_fake_mig_gi gi[VGPU_FAKE_MIG_MAX_GI];
} vgpu_fake_mig_state;

/** Memory another process opened or imported (version 3): its bytes stay in the device's
 *  used_bytes, held by no process slot, until the last process that holds it lets go or dies,
 *  as the real driver keeps exported memory while any process still maps it. */
#define VGPU_FAKE_MAX_SHARED_OBJECTS 256
typedef struct vgpu_fake_shared_object {
  uint64_t key;     /* the memfd's inode; 0: free */
  int32_t dev;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t holders[VGPU_FAKE_STATE_MAX_PROCS / 64]; /* bit i: procs[i] holds it */
} vgpu_fake_shared_object;

/** With VGPU_FAKE_EXPORT_DEVICE_FD set, a VMM export is a descriptor of /dev/null, as the real
 *  driver's is of /dev/nvidiactl (every export the same inode): the exporter keeps one of its
 *  own of the same open file, and an importer finds the export by comparing open files
 *  (kcmp). pid 0: free. */
typedef struct vgpu_fake_device_export {
  int32_t pid;
  int32_t fd;    /* the exporter's descriptor of the exported open file */
  int32_t memfd; /* the exporter's descriptor of the memory */
  int32_t dev;
} vgpu_fake_device_export;

typedef struct vgpu_fake_shared_objects {
  pthread_mutex_t lock; /* robust, process-shared; guards objects[] and exports[] */
  vgpu_fake_shared_object objects[VGPU_FAKE_MAX_SHARED_OBJECTS];
  vgpu_fake_device_export exports[VGPU_FAKE_MAX_SHARED_OBJECTS];
} vgpu_fake_shared_objects;

/** A per-cgroup memory limit set with nvmlDeviceSetMemoryLimits_v1 (version 4): processes of
 *  the cgroup `name_space` (a sysfs path) or of one below it may hold at most `hard_bytes` on
 *  device `dev` together. dev -1: free. */
#define VGPU_FAKE_MAX_MEMORY_LIMITS 64
typedef struct vgpu_fake_memory_limit {
  int32_t dev;
  uint32_t reserved;
  uint64_t soft_bytes;
  uint64_t hard_bytes;
  char name_space[VGPU_FAKE_CGROUP_PATH_MAX];
} vgpu_fake_memory_limit;

typedef struct vgpu_fake_memory_limits {
  pthread_mutex_t lock; /* robust, process-shared; guards limits[], count and every slot's cgroup */
  uint32_t count;       /* atomic: limits in use (0: nothing to check on an allocation) */
  uint32_t reserved;
  vgpu_fake_memory_limit limits[VGPU_FAKE_MAX_MEMORY_LIMITS];
} vgpu_fake_memory_limits;

/** The whole file. */
typedef struct vgpu_fake_gpu_state {
  uint32_t magic;              /* VGPU_FAKE_STATE_MAGIC, stored last (release) once initialised */
  uint32_t version;            /* VGPU_FAKE_STATE_VERSION */
  uint32_t device_count;
  uint32_t size;               /* sizeof(vgpu_fake_gpu_state) */
  vgpu_fake_device_state devices[VGPU_FAKE_STATE_MAX_DEVICES];
  vgpu_fake_process_slot procs[VGPU_FAKE_STATE_MAX_PROCS];
  vgpu_fake_mig_state mig[VGPU_FAKE_STATE_MAX_DEVICES]; /* version 2 */
  vgpu_fake_shared_objects shared; /* version 3 */
  vgpu_fake_memory_limits memory_limits; /* version 4 */
} vgpu_fake_gpu_state;

#ifdef __cplusplus
}
#endif
