#pragma once
/* vgpu's declarations of the part of NVML (libnvidia-ml.so.1) that libvgpu.so, the NVIDIA
 * backend, the fake NVML and their tests use, written from NVIDIA's public NVML reference
 * (API version 13) so that nothing here needs nvml.h. Usable from C and C++.
 *
 * Functions are declared under their exported names, versioned ones included
 * (nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetPciInfo_v3...). nvml.h maps the plain
 * names onto these with macros; here nothing is renamed and code that dlopens NVML looks
 * up exactly the name it calls. tests/unit/hooks/nvml_decl_check.cpp compares all of it
 * with a real nvml.h wherever one is installed. */

#if defined(__nvml_nvml_h__)
#error "vgpu/cuda/nvml_api.h and the driver's nvml.h declare the same names; include only one"
#endif

#if defined(__cplusplus) && !defined(VGPU_CUDA_API_CXX_LINKAGE)
extern "C" {
#endif

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

/* X(name, value); the _13 list is new in NVML API 13 (the cross-check skips it for 12). */
#define VGPU_NVML_RETURNS(X)                  \
  X(NVML_SUCCESS, 0)                          \
  X(NVML_ERROR_UNINITIALIZED, 1)              \
  X(NVML_ERROR_INVALID_ARGUMENT, 2)           \
  X(NVML_ERROR_NOT_SUPPORTED, 3)              \
  X(NVML_ERROR_NO_PERMISSION, 4)              \
  X(NVML_ERROR_ALREADY_INITIALIZED, 5)        \
  X(NVML_ERROR_NOT_FOUND, 6)                  \
  X(NVML_ERROR_INSUFFICIENT_SIZE, 7)          \
  X(NVML_ERROR_INSUFFICIENT_POWER, 8)         \
  X(NVML_ERROR_DRIVER_NOT_LOADED, 9)          \
  X(NVML_ERROR_TIMEOUT, 10)                   \
  X(NVML_ERROR_IRQ_ISSUE, 11)                 \
  X(NVML_ERROR_LIBRARY_NOT_FOUND, 12)         \
  X(NVML_ERROR_FUNCTION_NOT_FOUND, 13)        \
  X(NVML_ERROR_CORRUPTED_INFOROM, 14)         \
  X(NVML_ERROR_GPU_IS_LOST, 15)               \
  X(NVML_ERROR_RESET_REQUIRED, 16)            \
  X(NVML_ERROR_OPERATING_SYSTEM, 17)          \
  X(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18)   \
  X(NVML_ERROR_IN_USE, 19)                    \
  X(NVML_ERROR_MEMORY, 20)                    \
  X(NVML_ERROR_NO_DATA, 21)                   \
  X(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, 22)    \
  X(NVML_ERROR_INSUFFICIENT_RESOURCES, 23)    \
  X(NVML_ERROR_FREQ_NOT_SUPPORTED, 24)        \
  X(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25) \
  X(NVML_ERROR_DEPRECATED, 26)                \
  X(NVML_ERROR_NOT_READY, 27)                 \
  X(NVML_ERROR_GPU_NOT_FOUND, 28)             \
  X(NVML_ERROR_INVALID_STATE, 29)             \
  X(NVML_ERROR_UNKNOWN, 999)
#define VGPU_NVML_RETURNS_13(X) X(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, 30)
#define VGPU_NVML_ALL_RETURNS(X) VGPU_NVML_RETURNS(X) VGPU_NVML_RETURNS_13(X)

#define VGPU_NVML_ENUMERATOR_(name, value) name = value,
typedef enum nvmlReturn_enum { VGPU_NVML_ALL_RETURNS(VGPU_NVML_ENUMERATOR_) } nvmlReturn_t;
#undef VGPU_NVML_ENUMERATOR_

/* nvmlInitWithFlags. */
#define NVML_INIT_FLAG_NO_GPUS 1   /* succeed on a machine without GPUs */
#define NVML_INIT_FLAG_NO_ATTACH 2 /* do not attach to the GPUs */

/* Buffer sizes the string queries are documented to need. */
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* nvmlDeviceGetMigMode. */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* Event types (a 64-bit mask) for nvmlDeviceRegisterEvents. */
#define nvmlEventTypeNone 0x0000000000000000LL
#define nvmlEventTypeSingleBitEccError 0x0000000000000001LL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002LL
#define nvmlEventTypePState 0x0000000000000004LL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL
#define nvmlEventTypeClock 0x0000000000000010LL

/* The `version` word of a versioned structure: its size, and its version in the top byte. */
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

/* nvmlDeviceGetMemoryInfo, in bytes. */
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

/* nvmlDeviceGetMemoryInfo_v2: the caller sets `version` to nvmlMemory_v2. */
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved; /* taken by the driver and firmware */
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

/* nvmlDeviceGetPciInfo_v3. */
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;    /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* Topology: nvmlDeviceGetTopologyCommonAncestor's levels, nearest first. */
typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,    /* the same board */
  NVML_TOPOLOGY_SINGLE = 10,     /* one PCIe switch */
  NVML_TOPOLOGY_MULTIPLE = 20,   /* several PCIe switches, no host bridge */
  NVML_TOPOLOGY_HOSTBRIDGE = 30, /* one PCIe host bridge */
  NVML_TOPOLOGY_NODE = 40,       /* host bridges within one NUMA node */
  NVML_TOPOLOGY_SYSTEM = 50      /* across NUMA nodes */
} nvmlGpuTopologyLevel_t;

/* nvmlDeviceGetNvLinkState. */
typedef enum nvmlEnableState_enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;
#define NVML_NVLINK_MAX_LINKS 18

/* nvmlDeviceGetUtilizationRates: percent of the last sample period. */
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

/* nvmlDeviceGetComputeRunningProcesses_v3 (the v2 layout, which nvml.h calls the default). */
typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

/* nvmlDeviceGetProcessUtilization: one sample per process. */
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp; /* microseconds */
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlEventSetWait_v2. */
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData; /* the Xid for nvmlEventTypeXidCriticalError */
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

/* Multi-Instance GPU. The `profile` argument of nvmlDeviceGetGpuInstanceProfileInfo(V) is one
 * of these indices (not a profile id); the profile id comes back in the info. */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

/* Where a GPU instance sits: its first memory slice and how many it takes. */
typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;
  unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id; /* the profile id (what create and placements take) */
  unsigned int isP2pSupported;
  unsigned int sliceCount; /* compute slices */
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

/* nvmlDeviceGetGpuInstanceProfileInfoV: the caller sets `version`. */
typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* "MIG 1g.5gb" */
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
  unsigned int start;
  unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceInfo_st {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* nvmlDeviceGetAttributes_v2: what a MIG device (or a whole GPU) has. */
typedef struct nvmlDeviceAttributes_st {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* Per-cgroup device memory limits (R615+ drivers; nvidia-ml-py 13.615.71): `nameSpace` is the
 * cgroup's full sysfs path, `hardLimit` the most its processes may hold on the device,
 * `softLimit` what they are guaranteed. These structures carry no `version` word. Clearing:
 * softLimit 0 and hardLimit NVML_DEVICE_MEMORY_LIMIT_MAX. Older drivers do not export the
 * calls, so they are kept out of VGPU_NVML_FUNCTIONS (and of the cross-check against nvml.h
 * 12.x/13.x, which does not declare them). */
#define NVML_DEVICE_MEMORY_LIMIT_MAX 0xFFFFFFFFFFFFFFFFULL
typedef struct nvmlSetMemoryLimits_v1_st {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
} nvmlSetMemoryLimits_v1_t;

typedef struct nvmlGetMemoryLimits_v1_st {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
  unsigned long long currentUsed; /* out */
} nvmlGetMemoryLimits_v1_t;

// clang-format off
#define VGPU_NVML_MEMORY_LIMIT_FUNCTIONS(X)                                                              \
  X(nvmlReturn_t, nvmlDeviceSetMemoryLimits_v1, (nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits)) \
  X(nvmlReturn_t, nvmlDeviceGetMemoryLimits_v1, (nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits))
// clang-format on

/* X(return type, name, parameters). */
// clang-format off
#define VGPU_NVML_FUNCTIONS(X)                                                                          \
  X(nvmlReturn_t, nvmlInit_v2, (void))                                                                  \
  X(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags))                                              \
  X(nvmlReturn_t, nvmlShutdown, (void))                                                                 \
  X(const char*, nvmlErrorString, (nvmlReturn_t result))                                                \
  X(nvmlReturn_t, nvmlSystemGetDriverVersion, (char* version, unsigned int length))                     \
  X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion, (int* cudaDriverVersion))                             \
  X(nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2, (int* cudaDriverVersion))                          \
  X(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int* deviceCount))                                   \
  X(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t* device))            \
  X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char* uuid, nvmlDevice_t* device))                  \
  X(nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2, (const char* pciBusId, nvmlDevice_t* device))       \
  X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char* uuid, unsigned int length))            \
  X(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t device, char* name, unsigned int length))            \
  X(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int* index))                       \
  X(nvmlReturn_t, nvmlDeviceGetMinorNumber, (nvmlDevice_t device, unsigned int* minorNumber))           \
  X(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t* pci))                   \
  X(nvmlReturn_t, nvmlDeviceGetCudaComputeCapability, (nvmlDevice_t device, int* major, int* minor))    \
  X(nvmlReturn_t, nvmlDeviceGetMigMode, (nvmlDevice_t device, unsigned int* currentMode,                \
                                         unsigned int* pendingMode))                                    \
  X(nvmlReturn_t, nvmlDeviceGetNumaNodeId, (nvmlDevice_t device, unsigned int* node))                   \
  X(nvmlReturn_t, nvmlDeviceGetTopologyCommonAncestor, (nvmlDevice_t device1, nvmlDevice_t device2,     \
                                                        nvmlGpuTopologyLevel_t* pathInfo))              \
  X(nvmlReturn_t, nvmlDeviceGetNvLinkState, (nvmlDevice_t device, unsigned int link,                    \
                                             nvmlEnableState_t* isActive))                              \
  X(nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2, (nvmlDevice_t device, unsigned int link,         \
                                                        nvmlPciInfo_t* pci))                            \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t* memory))                 \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t* memory))           \
  X(nvmlReturn_t, nvmlDeviceGetUtilizationRates, (nvmlDevice_t device, nvmlUtilization_t* utilization)) \
  X(nvmlReturn_t, nvmlDeviceGetProcessUtilization, (nvmlDevice_t device,                                \
                                                    nvmlProcessUtilizationSample_t* utilization,        \
                                                    unsigned int* processSamplesCount,                  \
                                                    unsigned long long lastSeenTimeStamp))              \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t device,                        \
                                                            unsigned int* infoCount,                    \
                                                            nvmlProcessInfo_t* infos))                  \
  X(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t* set))                                            \
  X(nvmlReturn_t, nvmlDeviceGetSupportedEventTypes, (nvmlDevice_t device,                               \
                                                     unsigned long long* eventTypes))                   \
  X(nvmlReturn_t, nvmlDeviceRegisterEvents, (nvmlDevice_t device, unsigned long long eventTypes,        \
                                             nvmlEventSet_t set))                                       \
  X(nvmlReturn_t, nvmlEventSetWait_v2, (nvmlEventSet_t set, nvmlEventData_t* data,                      \
                                        unsigned int timeoutms))                                        \
  X(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t set))                                              \
  VGPU_NVML_MIG_FUNCTIONS(X)
#define VGPU_NVML_MIG_FUNCTIONS(X)                                                                      \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfo, (nvmlDevice_t device, unsigned int profile,      \
                                                        nvmlGpuInstanceProfileInfo_t* info))            \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfoV, (nvmlDevice_t device, unsigned int profile,     \
                                                         nvmlGpuInstanceProfileInfo_v2_t* info))        \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstancePossiblePlacements_v2, (nvmlDevice_t device,                  \
                                                                  unsigned int profileId,               \
                                                                  nvmlGpuInstancePlacement_t* placements, \
                                                                  unsigned int* count))                 \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceRemainingCapacity, (nvmlDevice_t device, unsigned int profileId, \
                                                              unsigned int* count))                     \
  X(nvmlReturn_t, nvmlDeviceCreateGpuInstance, (nvmlDevice_t device, unsigned int profileId,            \
                                                nvmlGpuInstance_t* gpuInstance))                        \
  X(nvmlReturn_t, nvmlDeviceCreateGpuInstanceWithPlacement, (nvmlDevice_t device, unsigned int profileId, \
                                                             const nvmlGpuInstancePlacement_t* placement, \
                                                             nvmlGpuInstance_t* gpuInstance))           \
  X(nvmlReturn_t, nvmlGpuInstanceDestroy, (nvmlGpuInstance_t gpuInstance))                              \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstances, (nvmlDevice_t device, unsigned int profileId,              \
                                              nvmlGpuInstance_t* gpuInstances, unsigned int* count))    \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceById, (nvmlDevice_t device, unsigned int id,                  \
                                                 nvmlGpuInstance_t* gpuInstance))                       \
  X(nvmlReturn_t, nvmlGpuInstanceGetInfo, (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info)) \
  X(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceProfileInfo, (nvmlGpuInstance_t gpuInstance,         \
                                                                 unsigned int profile,                  \
                                                                 unsigned int engProfile,               \
                                                                 nvmlComputeInstanceProfileInfo_t* info)) \
  X(nvmlReturn_t, nvmlGpuInstanceCreateComputeInstance, (nvmlGpuInstance_t gpuInstance,                 \
                                                         unsigned int profileId,                        \
                                                         nvmlComputeInstance_t* computeInstance))       \
  X(nvmlReturn_t, nvmlComputeInstanceDestroy, (nvmlComputeInstance_t computeInstance))                  \
  X(nvmlReturn_t, nvmlGpuInstanceGetComputeInstances, (nvmlGpuInstance_t gpuInstance,                   \
                                                       unsigned int profileId,                          \
                                                       nvmlComputeInstance_t* computeInstances,         \
                                                       unsigned int* count))                            \
  X(nvmlReturn_t, nvmlComputeInstanceGetInfo_v2, (nvmlComputeInstance_t computeInstance,                \
                                                  nvmlComputeInstanceInfo_t* info))                     \
  X(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t device, unsigned int* isMigDevice))        \
  X(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int* id))                  \
  X(nvmlReturn_t, nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int* id))              \
  X(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t device, unsigned int* count))           \
  X(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex, (nvmlDevice_t device, unsigned int index,        \
                                                        nvmlDevice_t* migDevice))                       \
  X(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle, (nvmlDevice_t migDevice,                \
                                                                 nvmlDevice_t* device))                 \
  X(nvmlReturn_t, nvmlDeviceGetAttributes_v2, (nvmlDevice_t device, nvmlDeviceAttributes_t* attributes))
// clang-format on

#define VGPU_NVML_DECLARE_(ret, name, params) ret name params;
VGPU_NVML_FUNCTIONS(VGPU_NVML_DECLARE_)
VGPU_NVML_MEMORY_LIMIT_FUNCTIONS(VGPU_NVML_DECLARE_)
#undef VGPU_NVML_DECLARE_

#if defined(__cplusplus) && !defined(VGPU_CUDA_API_CXX_LINKAGE)
} /* extern "C" */
#endif
