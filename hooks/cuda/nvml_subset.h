#pragma once
// The few NVML types libvgpu.so needs. No nvml.h is installed on the build machines;
// these match the layout of NVIDIA's public header (enums are int-sized).

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlReturn_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_UNKNOWN = 999
};

/** nvmlDeviceGetMemoryInfo */
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

/** nvmlDeviceGetMemoryInfo_v2 (`version` is set by the caller) */
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
