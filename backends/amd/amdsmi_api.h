#pragma once
/* The part of AMD SMI (libamd_smi.so, ROCm's include/amd_smi/amdsmi.h) the amd backend
 * calls, declared here so the backend builds without ROCm and dlopens the library.
 *
 * Checked against amdsmi.h of ROCm 6.3 (amdsmi 24.7) and ROCm 7 (amdsmi 26). Where a struct's
 * layout differs between them, only the leading fields that both share are declared, and the
 * caller passes a buffer larger than either version's struct:
 *   amdsmi_enumeration_info_t (ROCm 6.4+): drm_render, drm_card, hsa_id, hip_id, then hip_uuid
 *   amdsmi_kfd_info_t:                     kfd_id, node_id, current_partition_id, reserved
 *   amdsmi_engine_usage_t:                 gfx_activity, umc_activity, mm_activity, reserved
 * amdsmi_proc_info_t's string fields grew (name[32] -> name[256]), which moves every field
 * after them: both layouts are declared, and amdsmi_get_lib_version says which one applies
 * (its own struct lost its leading `year` in amdsmi 26, so only the first word is read). */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t amdsmi_status_t; /* an enum in amdsmi.h: 0 success */
#define AMDSMI_STATUS_SUCCESS 0u
#define AMDSMI_STATUS_INVAL 1u
#define AMDSMI_STATUS_NOT_SUPPORTED 2u
#define AMDSMI_STATUS_OUT_OF_RESOURCES 15u
#define AMDSMI_STATUS_INSUFFICIENT_SIZE 41u
#define AMDSMI_STATUS_NOT_FOUND 31u

typedef void* amdsmi_socket_handle;
typedef void* amdsmi_processor_handle;

#define AMDSMI_INIT_AMD_GPUS (1u << 1)
#define AMDSMI_MEM_TYPE_VRAM 0u /* amdsmi_memory_type_t */
#define AMDSMI_GPU_UUID_SIZE 38

/* Big enough for any version's struct the backend reads only the head of. */
#define VGPU_AMDSMI_STRUCT_BYTES 4096

typedef struct vgpu_amdsmi_enumeration_head {
  uint32_t drm_render; /* the N of /dev/dri/renderD<N> */
  uint32_t drm_card;   /* the N of /dev/dri/card<N> */
  uint32_t hsa_id;
  uint32_t hip_id;
} vgpu_amdsmi_enumeration_head;

typedef struct vgpu_amdsmi_kfd_head {
  uint64_t kfd_id;
  uint32_t node_id;
  uint32_t current_partition_id; /* 0xFFFFFFFF: not supported */
} vgpu_amdsmi_kfd_head;

typedef struct vgpu_amdsmi_engine_head {
  uint32_t gfx_activity; /* percent */
  uint32_t umc_activity;
  uint32_t mm_activity;
} vgpu_amdsmi_engine_head;

/* amdsmi_proc_info_t up to the per-process VRAM, as amdsmi 24.x/25.x (strings of 32) ... */
typedef struct vgpu_amdsmi_proc_info_v24 {
  char name[32];
  uint32_t pid;
  uint64_t mem;
  struct { uint64_t gfx; uint64_t enc; uint32_t reserved[12]; } engine_usage;
  struct { uint64_t gtt_mem; uint64_t cpu_mem; uint64_t vram_mem; uint32_t reserved[10]; } memory_usage;
  char container_name[32];
  uint32_t reserved[4];
} vgpu_amdsmi_proc_info_v24;
/* ... and as amdsmi 26 (ROCm 7: AMDSMI_MAX_STRING_LENGTH 256). */
typedef struct vgpu_amdsmi_proc_info_v26 {
  char name[256];
  uint32_t pid;
  uint64_t mem;
  struct { uint64_t gfx; uint64_t enc; uint32_t reserved[12]; } engine_usage;
  struct { uint64_t gtt_mem; uint64_t cpu_mem; uint64_t vram_mem; uint32_t reserved[10]; } memory_usage;
  char container_name[256];
  uint32_t cu_occupancy;
  uint32_t evicted_time;
  uint32_t reserved[10];
} vgpu_amdsmi_proc_info_v26;

typedef amdsmi_status_t (*amdsmi_init_fn)(uint64_t init_flags);
typedef amdsmi_status_t (*amdsmi_shut_down_fn)(void);
typedef amdsmi_status_t (*amdsmi_get_lib_version_fn)(void* version);
typedef amdsmi_status_t (*amdsmi_status_code_to_string_fn)(amdsmi_status_t status, const char** text);
typedef amdsmi_status_t (*amdsmi_get_socket_handles_fn)(uint32_t* count, amdsmi_socket_handle* handles);
typedef amdsmi_status_t (*amdsmi_get_processor_handles_fn)(amdsmi_socket_handle socket, uint32_t* count,
                                                          amdsmi_processor_handle* handles);
typedef amdsmi_status_t (*amdsmi_get_gpu_device_uuid_fn)(amdsmi_processor_handle h, unsigned int* length, char* uuid);
typedef amdsmi_status_t (*amdsmi_get_gpu_device_bdf_fn)(amdsmi_processor_handle h, uint64_t* bdf); /* amdsmi_bdf_t */
typedef amdsmi_status_t (*amdsmi_get_gpu_asic_info_fn)(amdsmi_processor_handle h, void* info); /* market_name[256] first */
typedef amdsmi_status_t (*amdsmi_get_gpu_memory_total_fn)(amdsmi_processor_handle h, uint32_t mem_type, uint64_t* bytes);
typedef amdsmi_status_t (*amdsmi_get_gpu_topo_numa_affinity_fn)(amdsmi_processor_handle h, int32_t* numa_node);
typedef amdsmi_status_t (*amdsmi_get_gpu_compute_partition_fn)(amdsmi_processor_handle h, char* partition, uint32_t len);
typedef amdsmi_status_t (*amdsmi_get_gpu_memory_partition_fn)(amdsmi_processor_handle h, char* partition, uint32_t len);
typedef amdsmi_status_t (*amdsmi_get_gpu_kfd_info_fn)(amdsmi_processor_handle h, void* info);
typedef amdsmi_status_t (*amdsmi_get_gpu_enumeration_info_fn)(amdsmi_processor_handle h, void* info);
typedef amdsmi_status_t (*amdsmi_get_gpu_activity_fn)(amdsmi_processor_handle h, void* info);
typedef amdsmi_status_t (*amdsmi_get_gpu_process_list_fn)(amdsmi_processor_handle h, uint32_t* max_processes, void* list);

#ifdef __cplusplus
}
#endif
