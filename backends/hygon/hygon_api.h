/*
 * The subset of Hygon's management libraries this backend calls: ROCm-SMI
 * (librocm_smi64.so, rocm_smi.h) and hydmi (libhydmi.so, dmi.h / dmi_virtual.h /
 * dmi_error.h). Declared here from the published interfaces because the vendor headers are
 * not installed on build machines; the libraries themselves are opened with dlopen at run
 * time. The test doubles in tests/fakes/rocm define exactly these symbols.
 */
#ifndef VGPU_HYGON_API_H
#define VGPU_HYGON_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ROCm-SMI ---- */

typedef enum {
  RSMI_STATUS_SUCCESS = 0,
  RSMI_STATUS_INVALID_ARGS = 1,
  RSMI_STATUS_NOT_SUPPORTED = 2,
  RSMI_STATUS_FILE_ERROR = 3,
  RSMI_STATUS_PERMISSION = 4,
  RSMI_STATUS_OUT_OF_RESOURCES = 5,
  RSMI_STATUS_INTERNAL_EXCEPTION = 6,
  RSMI_STATUS_INPUT_OUT_OF_BOUNDS = 7,
  RSMI_STATUS_INIT_ERROR = 8,
  RSMI_STATUS_NOT_YET_IMPLEMENTED = 9,
  RSMI_STATUS_NOT_FOUND = 10,
  RSMI_STATUS_INSUFFICIENT_SIZE = 11,
  RSMI_STATUS_INTERRUPT = 12,
  RSMI_STATUS_UNEXPECTED_SIZE = 13,
  RSMI_STATUS_NO_DATA = 14,
  RSMI_STATUS_UNEXPECTED_DATA = 15,
  RSMI_STATUS_BUSY = 16,
  RSMI_STATUS_REFCOUNT_OVERFLOW = 17,
  RSMI_STATUS_SETTING_UNAVAILABLE = 18,
  RSMI_STATUS_AMDGPU_RESTART_ERR = 19,
  RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF
} rsmi_status_t;

typedef enum {
  RSMI_MEM_TYPE_VRAM = 0,
  RSMI_MEM_TYPE_VIS_VRAM = 1,
  RSMI_MEM_TYPE_GTT = 2
} rsmi_memory_type_t;

typedef rsmi_status_t (*rsmi_init_fn)(uint64_t flags);
typedef rsmi_status_t (*rsmi_shut_down_fn)(void);
typedef rsmi_status_t (*rsmi_num_monitor_devices_fn)(uint32_t* num_devices);
typedef rsmi_status_t (*rsmi_dev_id_get_fn)(uint32_t dv_ind, uint16_t* id);
typedef rsmi_status_t (*rsmi_dev_name_get_fn)(uint32_t dv_ind, char* name, size_t len);
typedef rsmi_status_t (*rsmi_dev_serial_number_get_fn)(uint32_t dv_ind, char* serial_num, uint32_t len);
typedef rsmi_status_t (*rsmi_dev_unique_id_get_fn)(uint32_t dv_ind, uint64_t* id);
typedef rsmi_status_t (*rsmi_dev_pci_id_get_fn)(uint32_t dv_ind, uint64_t* bdfid);
typedef rsmi_status_t (*rsmi_dev_memory_total_get_fn)(uint32_t dv_ind, rsmi_memory_type_t type, uint64_t* total);
typedef rsmi_status_t (*rsmi_dev_memory_usage_get_fn)(uint32_t dv_ind, rsmi_memory_type_t type, uint64_t* used);
typedef rsmi_status_t (*rsmi_dev_busy_percent_get_fn)(uint32_t dv_ind, uint32_t* busy_percent);
typedef rsmi_status_t (*rsmi_dev_drm_render_minor_get_fn)(uint32_t dv_ind, uint32_t* minor);
typedef rsmi_status_t (*rsmi_topo_get_numa_node_number_fn)(uint32_t dv_ind, uint32_t* numa_node);

/* ---- hydmi ---- */

typedef enum {
  DMI_STATUS_SUCCESS = 0,
  DMI_STATUS_ERROR = 1,
  DMI_STATUS_NO_MEMORY = 2,
  DMI_STATUS_OPEN_MKFD_FAILED = 3,
  DMI_STATUS_MKFD_ALREADY_OPENED = 4,
  DMI_STATUS_SYS_NODE_NOT_EXIST = 5,
  DMI_STATUS_NOT_SUPPORTED = 6,
  DMI_STATUS_MKFD_NOT_OPENED = 7,
  DMI_STATUS_CREATE_VDEV_FAILED = 8,
  DMI_STATUS_DESTROY_VDEV_FAILED = 9,
  DMI_STATUS_INVALID_ARGUMENTS = 10,
  DMI_STATUS_OUT_OF_RESOURCES = 11,
  DMI_STATUS_QUERY_VDEV_INFO_FAILED = 12,
  DMI_STATUS_NOT_INITIALIZED = 13,
  DMI_STATUS_DEVICE_NOT_SUPPORT = 14,
  DMI_STATUS_VDEV_NOT_EXIST = 15,
  DMI_STATUS_UNKNOWN_ERROR = 32
} dmiStatus;

typedef struct {
  char name[256];
  int compute_unit_count;
  size_t global_mem_size; /* bytes */
  size_t usage_mem_size;  /* bytes */
  uint64_t container_id;
  int device_id;
} dmiDeviceInfo;

typedef dmiStatus (*dmiGetDeviceCount_fn)(int* count);
typedef dmiStatus (*dmiGetDeviceInfo_fn)(int device_id, dmiDeviceInfo* info);
typedef dmiStatus (*dmiGetMaxVDeviceCount_fn)(int* count);
typedef dmiStatus (*dmiGetVDeviceCount_fn)(int* count);
typedef dmiStatus (*dmiGetDeviceRemainingInfo_fn)(int device_id, size_t* cus, size_t* mem);
typedef dmiStatus (*dmiGetVDeviceInfo_fn)(int vdev_id, dmiDeviceInfo* info);
typedef dmiStatus (*dmiCreateVDevices_fn)(int device_id, int vdev_count, int* vdev_cus, int* vdev_mem_size);
typedef dmiStatus (*dmiDestroyVDevices_fn)(int device_id);
typedef dmiStatus (*dmiDestroySingleVDevice_fn)(int vdev_id);
typedef dmiStatus (*dmiGetStatusString_fn)(dmiStatus status, const char** text);
typedef dmiStatus (*dmiGetDevBusyPercent_fn)(int device_id, int* busy_percent);
typedef dmiStatus (*dmiGetVDevBusyPercent_fn)(int vdevice_id, int* busy_percent);

#ifdef __cplusplus
}
#endif

#endif /* VGPU_HYGON_API_H */
