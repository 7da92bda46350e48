#pragma once
/*
 * The contract between the node agent (which writes limits) and libvgpu.so (which
 * enforces them): variable names and the limits file. C-compatible so any backend can
 * include it. docs/limiter.md describes the value syntax in full.
 *
 * The limits file holds the same KEY=VALUE pairs as the environment, one per line ('#'
 * starts a comment line, blank lines are ignored, no quoting). With a limits file, the
 * environment can only make a limit tighter (a smaller memory or compute limit, a stricter
 * policy, a lower priority, no oversubscription) and never names the region or the board,
 * so a process cannot raise its own limit by changing its environment. Without one, the
 * environment is read as HAMi-core reads it. Unknown keys and malformed values are errors
 * naming file and line (or the variable).
 */

/* Memory limit for every device / for CUDA ordinal <i> (0..15; the indexed one wins).
 * Value: a byte count, or a number with a k, m or g suffix (KiB, MiB, GiB). 0 = none. */
#define VGPU_ENV_MEMORY_LIMIT "CUDA_DEVICE_MEMORY_LIMIT"
#define VGPU_ENV_MEMORY_LIMIT_PREFIX "CUDA_DEVICE_MEMORY_LIMIT_"
/* Compute limit in percent of the device, 0..100 (0 and 100 = not throttled). */
#define VGPU_ENV_SM_LIMIT "CUDA_DEVICE_SM_LIMIT"
#define VGPU_ENV_SM_LIMIT_PREFIX "CUDA_DEVICE_SM_LIMIT_"
/* Path of the container's shared region file (vgpu/shared_region.h). */
#define VGPU_ENV_SHARED_REGION "CUDA_DEVICE_MEMORY_SHARED_CACHE"
/* true/false: fall back to managed memory when the device is full but the limit is not. */
#define VGPU_ENV_OVERSUBSCRIBE "CUDA_OVERSUBSCRIBE"
/* Priority of the container's work on its GPUs: 0 is high, anything else (and unset) low.
 * While a high-priority tenant runs kernels on a GPU, low-priority tenants' launches there
 * wait (docs/limiter.md, "Priority"). */
#define VGPU_ENV_TASK_PRIORITY "CUDA_TASK_PRIORITY"
/* default | force | disable: when the compute limit applies. default: while another tenant
 * runs kernels on the GPU; force: always; disable: never. */
#define VGPU_ENV_CORE_POLICY "GPU_CORE_UTILIZATION_POLICY"
/* Folder shared by every container of the node, one file per GPU (vgpu/activity_board.h),
 * through which high-priority tenants announce that they are active. Mount it read-write into
 * high-priority containers only, read-only into the others. Unset: priorities are not acted on. */
#define VGPU_ENV_ACTIVITY_BOARD "VGPU_ACTIVITY_BOARD"
/* Bytes a CUDA context takes on the node's GPUs (a memory size, like the limits), as the node
 * agent measured or was told: what libvgpu.so charges a new context before it has measured
 * one itself. Taken from here rather than from the shared region, which the tenant can write. */
#define VGPU_ENV_CONTEXT_OVERHEAD "VGPU_CONTEXT_OVERHEAD"
/* The inode number of the region file the node agent created for the container (decimal).
 * Given (in the limits file; it is not read from the environment), libvgpu.so opens only that
 * file: a region that is missing, truncated, not initialised or another file (deleted and made
 * again) is refused instead of being started afresh with nothing counted. */
#define VGPU_REGION_INODE "VGPU_REGION_INODE"
/* Diagnostics on stderr: 0 none, 1 errors (default), 2 warnings, 3 info, 4 debug. */
#define VGPU_ENV_LOG_LEVEL "LIBVGPU_LOG_LEVEL"
/* HAMi-core's name for the same, read when LIBVGPU_LOG_LEVEL is unset, with HAMi-core's
 * meaning: errors always; 2 (HAMi-core's default) adds warnings, 3 info, 4 debug. */
#define VGPU_ENV_HAMI_LOG_LEVEL "LIBCUDA_LOG_LEVEL"
/* HAMi's switch "run this container without the limiter" (true/false as Go's ParseBool).
 * Honoured only without a limits file (a HAMi-style deployment); with one it is ignored:
 * the node agent decides (nvidia.com/disable-control), never the container. */
#define VGPU_ENV_DISABLE_CONTROL "CUDA_DISABLE_CONTROL"

/* Where the limits file is read from. The fixed path wins when it exists; otherwise the
 * path in VGPU_LIMITS_FILE is read (and must exist when set). */
#define VGPU_LIMITS_FILE_PATH "/etc/vgpu/limits.env"
#define VGPU_ENV_LIMITS_FILE "VGPU_LIMITS_FILE"

/* Default region path when CUDA_DEVICE_MEMORY_SHARED_CACHE is not set. */
#define VGPU_DEFAULT_REGION_PATH "/tmp/vgpu-shared-region"
