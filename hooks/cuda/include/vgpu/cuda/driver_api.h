#pragma once
/* vgpu's declarations of the part of the CUDA driver API that libvgpu.so, the fake
 * libcuda.so.1 and their tests use, written from NVIDIA's public API reference so that
 * nothing here needs a CUDA toolkit. Usable from C and C++; Linux on 64-bit targets only.
 *
 * Every function is declared under its exported ABI name: cuMemAlloc is the 32-bit entry
 * point of CUDA 2.x, cuMemAlloc_v2 the size_t one, cuLaunchKernel_ptsz the per-thread
 * default stream twin. Nothing is renamed by a macro (cuda.h renames cuMemAlloc to
 * cuMemAlloc_v2 unless __CUDA_API_VERSION_INTERNAL is set; here the caller always writes
 * the name it means).
 *
 * Values, layouts and prototypes follow the CUDA 13.0 API (CUDA_VERSION below). Where an
 * enum is large only the enumerators we use are listed; the type keeps the driver's size
 * (an int), so other values pass through unchanged. tests/unit/hooks/cuda_decl_check.cpp
 * compares all of it with a real cuda.h wherever one is installed. */

#if defined(__cuda_cuda_h__)
#error "vgpu/cuda/driver_api.h and the toolkit's cuda.h declare the same names; include only one"
#endif

#include <stddef.h>
#include <stdint.h>

/* The driver API version these declarations describe (major * 1000 + minor * 10). */
#define CUDA_VERSION 13000
/* Calling convention: the platform default on Linux. */
#define CUDAAPI

/* The cross-check includes this file inside a C++ namespace next to the real cuda.h; it
 * defines VGPU_CUDA_API_CXX_LINKAGE so that these prototypes do not clash with cuda.h's. */
#if defined(__cplusplus) && !defined(VGPU_CUDA_API_CXX_LINKAGE)
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Scalars and opaque handles
 * ------------------------------------------------------------------------------------- */

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

/* A device address: 64 bits on every platform this project builds for. */
typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;
/* The 32-bit device address taken by the entry points that predate CUDA 3.2. */
typedef unsigned int CUdeviceptr_v1;

typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice; /* a device ordinal */

typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUkern_st* CUkernel;
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUevent_st* CUevent;
typedef struct CUstream_st* CUstream;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUlib_st* CUlibrary; /* a context-independent module (cuLibraryLoad*) */
typedef struct CUgreenCtx_st* CUgreenCtx; /* a context on a partition of the SMs (CUDA 12.4) */
typedef struct CUdevResourceDesc_st* CUdevResourceDesc; /* the resources a green context gets */

/* A physical allocation made by cuMemCreate or imported from a shareable handle. */
typedef unsigned long long CUmemGenericAllocationHandle_v1;
typedef CUmemGenericAllocationHandle_v1 CUmemGenericAllocationHandle;

/* The two stream handles with a fixed meaning (besides NULL, the default stream). */
#define CU_STREAM_LEGACY ((CUstream)0x1)     /* the legacy default stream */
#define CU_STREAM_PER_THREAD ((CUstream)0x2) /* the calling thread's default stream */

/* ---------------------------------------------------------------------------------------
 * CUresult: what every driver function returns
 * ------------------------------------------------------------------------------------- */

/* X(name, value). Grouped by the oldest cuda.h among 12.6, 12.9 and 13.0 that has the code,
 * so the cross-check compares each one only with headers that declare it. */
#define VGPU_CU_RESULTS(X)                                 \
  X(CUDA_SUCCESS, 0)                                       \
  X(CUDA_ERROR_INVALID_VALUE, 1)                           \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                           \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                         \
  X(CUDA_ERROR_DEINITIALIZED, 4)                           \
  X(CUDA_ERROR_PROFILER_DISABLED, 5)                       \
  X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, 6)                \
  X(CUDA_ERROR_PROFILER_ALREADY_STARTED, 7)                \
  X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, 8)                \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                           \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46)                     \
  X(CUDA_ERROR_NO_DEVICE, 100)                             \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                        \
  X(CUDA_ERROR_DEVICE_NOT_LICENSED, 102)                   \
  X(CUDA_ERROR_INVALID_IMAGE, 200)                         \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                       \
  X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, 202)               \
  X(CUDA_ERROR_MAP_FAILED, 205)                            \
  X(CUDA_ERROR_UNMAP_FAILED, 206)                          \
  X(CUDA_ERROR_ARRAY_IS_MAPPED, 207)                       \
  X(CUDA_ERROR_ALREADY_MAPPED, 208)                        \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)                     \
  X(CUDA_ERROR_ALREADY_ACQUIRED, 210)                      \
  X(CUDA_ERROR_NOT_MAPPED, 211)                            \
  X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, 212)                   \
  X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, 213)                 \
  X(CUDA_ERROR_ECC_UNCORRECTABLE, 214)                     \
  X(CUDA_ERROR_UNSUPPORTED_LIMIT, 215)                     \
  X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216)                \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217)               \
  X(CUDA_ERROR_INVALID_PTX, 218)                           \
  X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, 219)              \
  X(CUDA_ERROR_NVLINK_UNCORRECTABLE, 220)                  \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)                \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)               \
  X(CUDA_ERROR_JIT_COMPILATION_DISABLED, 223)              \
  X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, 224)             \
  X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, 225)              \
  X(CUDA_ERROR_INVALID_SOURCE, 300)                        \
  X(CUDA_ERROR_FILE_NOT_FOUND, 301)                        \
  X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302)        \
  X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303)             \
  X(CUDA_ERROR_OPERATING_SYSTEM, 304)                      \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                        \
  X(CUDA_ERROR_ILLEGAL_STATE, 401)                         \
  X(CUDA_ERROR_LOSSY_QUERY, 402)                           \
  X(CUDA_ERROR_NOT_FOUND, 500)                             \
  X(CUDA_ERROR_NOT_READY, 600)                             \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                       \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701)               \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)                        \
  X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703)         \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704)           \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705)               \
  X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708)                \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)                  \
  X(CUDA_ERROR_ASSERT, 710)                                \
  X(CUDA_ERROR_TOO_MANY_PEERS, 711)                        \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)        \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713)            \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714)                  \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)                   \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)                    \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717)                 \
  X(CUDA_ERROR_INVALID_PC, 718)                            \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)                         \
  X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720)          \
  X(CUDA_ERROR_NOT_PERMITTED, 800)                         \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)                         \
  X(CUDA_ERROR_SYSTEM_NOT_READY, 802)                      \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)                \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)        \
  X(CUDA_ERROR_MPS_CONNECTION_FAILED, 805)                 \
  X(CUDA_ERROR_MPS_RPC_FAILURE, 806)                       \
  X(CUDA_ERROR_MPS_SERVER_NOT_READY, 807)                  \
  X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, 808)               \
  X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, 809)           \
  X(CUDA_ERROR_MPS_CLIENT_TERMINATED, 810)                 \
  X(CUDA_ERROR_CDP_NOT_SUPPORTED, 811)                     \
  X(CUDA_ERROR_CDP_VERSION_MISMATCH, 812)                  \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)            \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)            \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE, 902)                  \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903)              \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 904)               \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, 905)              \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906)               \
  X(CUDA_ERROR_CAPTURED_EVENT, 907)                        \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908)           \
  X(CUDA_ERROR_TIMEOUT, 909)                               \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910)             \
  X(CUDA_ERROR_EXTERNAL_DEVICE, 911)                       \
  X(CUDA_ERROR_INVALID_CLUSTER_SIZE, 912)                  \
  X(CUDA_ERROR_FUNCTION_NOT_LOADED, 913)                   \
  X(CUDA_ERROR_INVALID_RESOURCE_TYPE, 914)                 \
  X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, 915)        \
  X(CUDA_ERROR_UNKNOWN, 999)
#define VGPU_CU_RESULTS_12_9(X)                            \
  X(CUDA_ERROR_CONTAINED, 226)                             \
  X(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721)                    \
  X(CUDA_ERROR_KEY_ROTATION, 916)
#define VGPU_CU_RESULTS_13_0(X)                            \
  X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36)
#define VGPU_CU_ALL_RESULTS(X) VGPU_CU_RESULTS(X) VGPU_CU_RESULTS_12_9(X) VGPU_CU_RESULTS_13_0(X)

#define VGPU_CU_ENUMERATOR_(name, value) name = value,
typedef enum cudaError_enum { VGPU_CU_ALL_RESULTS(VGPU_CU_ENUMERATOR_) } CUresult;
#undef VGPU_CU_ENUMERATOR_

/* ---------------------------------------------------------------------------------------
 * Enumerations
 * ------------------------------------------------------------------------------------- */

/* cuDeviceGetAttribute: the attributes used here. The driver numbers them from 1. */
typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT = 51,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = 125,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,
  /* One past the last attribute of CUDA 13.0 (it grows with every release: 136 in 12.6,
   * 144 in 12.9). A driver refuses this value and anything above its own maximum. */
  CU_DEVICE_ATTRIBUTE_MAX = 148
} CUdevice_attribute;

/* Element formats of CUDA arrays: the plain integer and float ones and a few of the
 * normalised one-channel formats; packed video and block-compressed formats are omitted. */
typedef enum CUarray_format_enum {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
  CU_AD_FORMAT_UNORM_INT8X1 = 0xc0,
  CU_AD_FORMAT_UNORM_INT16X1 = 0xc3,
  CU_AD_FORMAT_SNORM_INT8X1 = 0xc6,
  CU_AD_FORMAT_SNORM_INT16X1 = 0xc9,
  CU_AD_FORMAT_MAX = 0x7FFFFFFF
} CUarray_format;

/* cuStreamCreate flags. */
typedef enum CUstream_flags_enum { CU_STREAM_DEFAULT = 0x0, CU_STREAM_NON_BLOCKING = 0x1 } CUstream_flags;

/* cuStreamWaitValue32: the comparison (low bits) and a flush flag. */
typedef enum CUstreamWaitValue_flags_enum {
  CU_STREAM_WAIT_VALUE_GEQ = 0x0,   /* (int32_t)(*addr - value) >= 0, cyclic */
  CU_STREAM_WAIT_VALUE_EQ = 0x1,    /* *addr == value */
  CU_STREAM_WAIT_VALUE_AND = 0x2,   /* (*addr & value) != 0 */
  CU_STREAM_WAIT_VALUE_NOR = 0x3,   /* ~(*addr | value) != 0 */
  CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30
} CUstreamWaitValue_flags;

/* cuStreamWriteValue32. */
typedef enum CUstreamWriteValue_flags_enum {
  CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
  CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1
} CUstreamWriteValue_flags;

/* cuEventCreate flags (a bit set). */
typedef enum CUevent_flags_enum {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_EVENT_INTERPROCESS = 0x4
} CUevent_flags;

/* cuMemAllocManaged: who may access the allocation at first. */
typedef enum CUmemAttach_flags_enum {
  CU_MEM_ATTACH_GLOBAL = 0x1,
  CU_MEM_ATTACH_HOST = 0x2,
  CU_MEM_ATTACH_SINGLE = 0x4
} CUmemAttach_flags;

/* cuIpcOpenMemHandle flags. */
typedef enum CUipcMem_flags_enum { CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1 } CUipcMem_flags;

/* cuStreamIsCapturing. */
typedef enum CUstreamCaptureStatus_enum {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
} CUstreamCaptureStatus;

/* cuGetProcAddress `flags` (a bit set)... */
typedef enum CUdriverProcAddress_flags_enum {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

/* ...and what cuGetProcAddress_v2 says about the symbol it was asked for. */
typedef enum CUdriverProcAddressQueryResult_enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

/* Virtual memory management and pools. */
typedef enum CUmemLocationType_enum {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1, /* id is a device ordinal */
  CU_MEM_LOCATION_TYPE_HOST = 0x2,
  CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3, /* id is a host NUMA node */
  CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
  CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
  CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
  CU_MEM_ALLOCATION_TYPE_MANAGED = 0x2,
  CU_MEM_ALLOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationType;

/* The kinds of OS handle an allocation can be exported as (a bit set). */
typedef enum CUmemAllocationHandleType_enum {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
  CU_MEM_HANDLE_TYPE_WIN32 = 0x2,
  CU_MEM_HANDLE_TYPE_WIN32_KMT = 0x4,
  CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
  CU_MEM_HANDLE_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationHandleType;

typedef enum CUmemAccess_flags_enum {
  CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
  CU_MEM_ACCESS_FLAGS_PROT_MAX = 0x7FFFFFFF
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

/* cuMemPoolGetAttribute / cuMemPoolSetAttribute; numbered from 1 in this order. */
typedef enum CUmemPool_attribute_enum {
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,     /* cuuint64_t: bytes kept when trimming */
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,  /* cuuint64_t */
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,     /* cuuint64_t, settable to 0 only */
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,      /* cuuint64_t */
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8          /* cuuint64_t, settable to 0 only */
} CUmemPool_attribute;

/* cuDeviceGetGraphMemAttribute / cuDeviceSetGraphMemAttribute: the graph allocator's memory. */
typedef enum CUgraphMem_attribute_enum {
  CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,     /* cuuint64_t: held by live graph allocations */
  CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,        /* cuuint64_t, settable to 0 only */
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2, /* cuuint64_t: mapped for graphs, live or not */
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3     /* cuuint64_t, settable to 0 only */
} CUgraphMem_attribute;

/* cuCtxCreate_v3/_v4 execution affinity. */
typedef enum CUexecAffinityType_enum {
  CU_EXEC_AFFINITY_TYPE_SM_COUNT = 0,
  CU_EXEC_AFFINITY_TYPE_MAX = 1
} CUexecAffinityType;

/* cuCtxCreate_v4: what the CIG (compute in graphics) shared data points to. */
typedef enum CUcigDataType_enum {
  CIG_DATA_TYPE_D3D12_COMMAND_QUEUE = 0x1,
  CIG_DATA_TYPE_NV_BLOB = 0x2
} CUcigDataType;

/* cuGraphInstantiateWithParams: CUDA_GRAPH_INSTANTIATE_PARAMS::result_out. */
typedef enum CUgraphInstantiateResult_enum {
  CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
  CUDA_GRAPH_INSTANTIATE_ERROR = 1,
  CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE = 2,
  CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED = 3,
  CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED = 4,
  CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED = 5
} CUgraphInstantiateResult;

/* cuLaunchKernelEx attributes: the identifiers of the attribute values declared below. */
typedef enum CUlaunchAttributeID_enum {
  CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT = 7,
  CU_LAUNCH_ATTRIBUTE_PRIORITY = 8,
  CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT = 12
} CUlaunchAttributeID;

/* the option lists of the module and library loaders (only their
 * types are needed; the driver reads the options, the limiter passes them on). */
typedef enum CUjit_option_enum {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_THREADS_PER_BLOCK = 1,
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
} CUjit_option;

typedef enum CUlibraryOption_enum {
  CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE = 0,
  CU_LIBRARY_BINARY_IS_PRESERVED = 1
} CUlibraryOption;

/* ---------------------------------------------------------------------------------------
 * Flags and sizes defined as plain numbers
 * ------------------------------------------------------------------------------------- */

#define CU_IPC_HANDLE_SIZE 64

/* cuMemHostAlloc flags. */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04

/* cuMemHostRegister flags. */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08

/* cuLaunchKernel `extra`: a list of (key, value) pointers closed by CU_LAUNCH_PARAM_END. */
#define CU_LAUNCH_PARAM_END_AS_INT 0x00
#define CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT 0x01
#define CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT 0x02
#define CU_LAUNCH_PARAM_END ((void*)CU_LAUNCH_PARAM_END_AS_INT)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void*)CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void*)CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT)

/* ---------------------------------------------------------------------------------------
 * Structures. Field order, types and padding are the driver's ABI.
 * ------------------------------------------------------------------------------------- */

/* A device's UUID as 16 raw bytes. */
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

/* An opaque token naming device memory to another process (cuIpcGetMemHandle). */
typedef struct CUipcMemHandle_st {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle_v1;
typedef CUipcMemHandle_v1 CUipcMemHandle;

/* cuArrayCreate_v2 (the _v2 entry points take size_t extents). */
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v2;
typedef CUDA_ARRAY_DESCRIPTOR_v2 CUDA_ARRAY_DESCRIPTOR;

/* cuArray3DCreate_v2 and cuMipmappedArrayCreate. */
typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v2;
typedef CUDA_ARRAY3D_DESCRIPTOR_v2 CUDA_ARRAY3D_DESCRIPTOR;

/* the 32-bit descriptors of cuArrayCreate / cuArray3DCreate (v1, the
 * ABI of CUDA 3.1 and older, still exported). */
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* cuArrayGetMemoryRequirements: what an array really occupies on a device. */
typedef struct CUDA_ARRAY_MEMORY_REQUIREMENTS_st {
  size_t size;
  size_t alignment;
  unsigned int reserved[4];
} CUDA_ARRAY_MEMORY_REQUIREMENTS_v1;
typedef CUDA_ARRAY_MEMORY_REQUIREMENTS_v1 CUDA_ARRAY_MEMORY_REQUIREMENTS;

/* Where memory lives: a device, the host or a host NUMA node. */
typedef struct CUmemLocation_st {
  CUmemLocationType type;
  int id;
} CUmemLocation_v1;
typedef CUmemLocation_v1 CUmemLocation;

/* cuMemCreate: what to allocate and where. */
typedef struct CUmemAllocationProp_st {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData; /* Windows only; NULL on Linux */
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp_v1;
typedef CUmemAllocationProp_v1 CUmemAllocationProp;

/* A multicast object's properties (cuMulticastCreate). */
typedef struct CUmulticastObjectProp_st {
  unsigned int numDevices;
  size_t size;
  unsigned long long handleTypes; /* CUmemAllocationHandleType bits */
  unsigned long long flags;
} CUmulticastObjectProp_v1;
typedef CUmulticastObjectProp_v1 CUmulticastObjectProp;

/* cuMemPoolExportPointer / cuMemPoolImportPointer: an allocation of an exported pool. */
typedef struct CUmemPoolPtrExportData_st {
  unsigned char reserved[64];
} CUmemPoolPtrExportData_v1;
typedef CUmemPoolPtrExportData_v1 CUmemPoolPtrExportData;

/* cuMemSetAccess: one location's rights on a mapped range. */
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  CUmemAccess_flags flags;
} CUmemAccessDesc_v1;
typedef CUmemAccessDesc_v1 CUmemAccessDesc;

/* cuMemPoolCreate, and the pool of a graph allocation node. */
typedef struct CUmemPoolProps_st {
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize; /* 0: the device's default limit */
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps_v1;
typedef CUmemPoolProps_v1 CUmemPoolProps;

/* cuGraphAddMemAllocNode. This is the v1 layout, the one that entry point takes in every
 * release; the _v2 structure (for cuGraphAddNode) is not used here. dptr is filled in. */
typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_v1_st {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS_v1;
typedef CUDA_MEM_ALLOC_NODE_PARAMS_v1 CUDA_MEM_ALLOC_NODE_PARAMS;

/* cuGraphAddNode, a node of any type. Only the type and an allocation
 * node's parameters are named (the _v2 layout cuGraphAddNode takes has the fields of
 * CUDA_MEM_ALLOC_NODE_PARAMS); the rest of the union is padding here. */
typedef enum CUgraphNodeType_enum {
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11
} CUgraphNodeType;

typedef struct CUgraphNodeParams_st {
  CUgraphNodeType type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
    char asBytes[232];
  };
  long long reserved2;
} CUgraphNodeParams;

/* cuGraphAddNode_v2/_v3: what an edge waits for (ports of kernel nodes). */
typedef struct CUgraphEdgeData_st {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
} CUgraphEdgeData;

/* cuGraphAddKernelNode_v2 (the v1 entry point lacks the last two fields). */
typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
  CUfunction func;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern; /* used instead of func when func is NULL */
  CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;
typedef CUDA_KERNEL_NODE_PARAMS_v2 CUDA_KERNEL_NODE_PARAMS;

/* cuGraphInstantiateWithParams: flags in, the rest out. */
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;

/* One launch attribute value: a 64-byte union of which only the members used are named. */
typedef union CUlaunchAttributeValue_union {
  char pad[64];
  int cooperative;
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
  struct {
    CUevent event;
    int flags;
    int triggerAtBlockStart;
  } programmaticEvent;
  struct {
    CUevent event;
    int flags;
  } launchCompletionEvent;
  int priority;
} CUlaunchAttributeValue;

/* The id is an int padded to 8 bytes so that the value starts on an 8-byte boundary. */
typedef struct CUlaunchAttribute_st {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
} CUlaunchAttribute;

/* cuLaunchKernelEx: the grid, the stream and the attributes of one launch. */
typedef struct CUlaunchConfig_st {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

/* cuCtxCreate_v3/_v4: how many SMs a context may use. */
typedef struct CUexecAffinitySmCount_st {
  unsigned int val;
} CUexecAffinitySmCount_v1;
typedef CUexecAffinitySmCount_v1 CUexecAffinitySmCount;

typedef struct CUexecAffinityParam_st {
  CUexecAffinityType type;
  union {
    CUexecAffinitySmCount smCount;
  } param;
} CUexecAffinityParam_v1;
typedef CUexecAffinityParam_v1 CUexecAffinityParam;

typedef struct CUctxCigParam_st {
  CUcigDataType sharedDataType;
  void* sharedData;
} CUctxCigParam;

/* cuCtxCreate_v4. */
typedef struct CUctxCreateParams_st {
  CUexecAffinityParam* execAffinityParams;
  int numExecAffinityParams;
  CUctxCigParam* cigParams;
} CUctxCreateParams;

/* ---------------------------------------------------------------------------------------
 * Functions, X(name, parameters), each returning CUresult.
 *
 * Grouped like the result codes: VGPU_CU_FUNCTIONS are in every cuda.h from 12.6 on,
 * the _12_9 and _13_0 lists only in headers from that release on (the cross-check skips
 * what an older header cannot declare). VGPU_CU_ALL_FUNCTIONS is the union.
 * ------------------------------------------------------------------------------------- */

// clang-format off
#define VGPU_CU_FUNCTIONS(X)                                                                      \
  /* initialisation, versions, errors, entry points */                                          \
  X(cuInit, (unsigned int Flags))                                                                 \
  X(cuDriverGetVersion, (int* driverVersion))                                                     \
  X(cuGetErrorString, (CUresult error, const char** pStr))                                        \
  X(cuGetErrorName, (CUresult error, const char** pStr))                                          \
  X(cuGetProcAddress, (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags))        \
  X(cuGetProcAddress_v2, (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,      \
                          CUdriverProcAddressQueryResult* symbolStatus))                          \
  /* devices */                                                                                   \
  X(cuDeviceGet, (CUdevice* device, int ordinal))                                                 \
  X(cuDeviceGetCount, (int* count))                                                               \
  X(cuDeviceGetName, (char* name, int len, CUdevice dev))                                         \
  X(cuDeviceGetUuid, (CUuuid* uuid, CUdevice dev))                                                \
  X(cuDeviceGetUuid_v2, (CUuuid* uuid, CUdevice dev))                                             \
  X(cuDeviceTotalMem, (unsigned int* bytes, CUdevice dev))                                        \
  X(cuDeviceTotalMem_v2, (size_t* bytes, CUdevice dev))                                           \
  X(cuDeviceGetAttribute, (int* pi, CUdevice_attribute attrib, CUdevice dev))                     \
  X(cuDeviceGetPCIBusId, (char* pciBusId, int len, CUdevice dev))                                 \
  X(cuDeviceGetByPCIBusId, (CUdevice* dev, const char* pciBusId))                                 \
  X(cuDeviceGetDefaultMemPool, (CUmemoryPool* pool_out, CUdevice dev))                            \
  X(cuDeviceGetMemPool, (CUmemoryPool* pool, CUdevice dev))                                       \
  X(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool))                                        \
  /* primary contexts */                                                                          \
  X(cuDevicePrimaryCtxRetain, (CUcontext* pctx, CUdevice dev))                                    \
  X(cuDevicePrimaryCtxRelease, (CUdevice dev))                                                    \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                                 \
  X(cuDevicePrimaryCtxReset, (CUdevice dev))                                                      \
  X(cuDevicePrimaryCtxReset_v2, (CUdevice dev))                                                   \
  X(cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned int flags))                               \
  X(cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned int flags))                            \
  X(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int* flags, int* active))                 \
  /* contexts */                                                                                  \
  X(cuCtxCreate, (CUcontext* pctx, unsigned int flags, CUdevice dev))                             \
  X(cuCtxCreate_v2, (CUcontext* pctx, unsigned int flags, CUdevice dev))                          \
  X(cuCtxCreate_v3, (CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,            \
                     unsigned int flags, CUdevice dev))                                           \
  X(cuCtxCreate_v4, (CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,     \
                     CUdevice dev))                                                               \
  X(cuCtxDestroy, (CUcontext ctx))                                                                \
  X(cuCtxDestroy_v2, (CUcontext ctx))                                                             \
  X(cuCtxPushCurrent, (CUcontext ctx))                                                            \
  X(cuCtxPushCurrent_v2, (CUcontext ctx))                                                         \
  X(cuCtxPopCurrent, (CUcontext* pctx))                                                           \
  X(cuCtxPopCurrent_v2, (CUcontext* pctx))                                                        \
  X(cuCtxSetCurrent, (CUcontext ctx))                                                             \
  X(cuCtxGetCurrent, (CUcontext* pctx))                                                           \
  X(cuCtxGetDevice, (CUdevice* device))                                                           \
  X(cuCtxGetApiVersion, (CUcontext ctx, unsigned int* version))                                   \
  X(cuCtxSynchronize, (void))                                                                     \
  /* linear device memory */                                                                      \
  X(cuMemGetInfo, (unsigned int* free, unsigned int* total))                                      \
  X(cuMemGetInfo_v2, (size_t* free, size_t* total))                                               \
  X(cuMemAlloc, (CUdeviceptr_v1* dptr, unsigned int bytesize))                                    \
  X(cuMemAlloc_v2, (CUdeviceptr* dptr, size_t bytesize))                                          \
  X(cuMemAllocPitch, (CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int WidthInBytes,      \
                      unsigned int Height, unsigned int ElementSizeBytes))                        \
  X(cuMemAllocPitch_v2, (CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,   \
                         unsigned int ElementSizeBytes))                                          \
  X(cuMemFree, (CUdeviceptr_v1 dptr))                                                             \
  X(cuMemFree_v2, (CUdeviceptr dptr))                                                             \
  X(cuMemGetAddressRange_v2, (CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr))               \
  X(cuMemAllocManaged, (CUdeviceptr* dptr, size_t bytesize, unsigned int flags))                  \
  /* host memory */                                                                               \
  X(cuMemAllocHost, (void** pp, unsigned int bytesize))                                           \
  X(cuMemAllocHost_v2, (void** pp, size_t bytesize))                                              \
  X(cuMemHostAlloc, (void** pp, size_t bytesize, unsigned int Flags))                             \
  X(cuMemFreeHost, (void* p))                                                                     \
  X(cuMemHostRegister, (void* p, size_t bytesize, unsigned int Flags))                            \
  X(cuMemHostRegister_v2, (void* p, size_t bytesize, unsigned int Flags))                         \
  X(cuMemHostUnregister, (void* p))                                                               \
  /* stream-ordered allocation and pools */                                                       \
  X(cuMemAllocAsync, (CUdeviceptr* dptr, size_t bytesize, CUstream hStream))                      \
  X(cuMemAllocAsync_ptsz, (CUdeviceptr* dptr, size_t bytesize, CUstream hStream))                 \
  X(cuMemAllocFromPoolAsync, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,              \
                              CUstream hStream))                                                  \
  X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,         \
                                   CUstream hStream))                                             \
  X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream))                                         \
  X(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream))                                    \
  X(cuMemPoolCreate, (CUmemoryPool* pool, const CUmemPoolProps* poolProps))                       \
  X(cuMemPoolDestroy, (CUmemoryPool pool))                                                        \
  X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))                                  \
  X(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void* value))            \
  X(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void* value))            \
  X(cuMemPoolExportToShareableHandle, (void* handle_out, CUmemoryPool pool,                      \
                                       CUmemAllocationHandleType handleType,                      \
                                       unsigned long long flags))                                 \
  X(cuMemPoolImportFromShareableHandle, (CUmemoryPool* pool_out, void* handle,                    \
                                         CUmemAllocationHandleType handleType,                    \
                                         unsigned long long flags))                               \
  X(cuMemPoolExportPointer, (CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr))             \
  X(cuMemPoolImportPointer, (CUdeviceptr* ptr_out, CUmemoryPool pool,                             \
                             CUmemPoolPtrExportData* shareData))                                  \
  /* arrays */                                                                                    \
  X(cuArrayCreate_v2, (CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray))            \
  X(cuArray3DCreate_v2, (CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray))        \
  X(cuArrayDestroy, (CUarray hArray))                                                             \
  X(cuArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements,            \
                                   CUarray array, CUdevice device))                               \
  X(cuMipmappedArrayCreate, (CUmipmappedArray* pHandle,                                           \
                             const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,                  \
                             unsigned int numMipmapLevels))                                       \
  X(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray))                                  \
  X(cuMipmappedArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements,   \
                                            CUmipmappedArray mipmap, CUdevice device))            \
  /* virtual memory management */                                                                 \
  X(cuMemGetAllocationGranularity, (size_t* granularity, const CUmemAllocationProp* prop,         \
                                    CUmemAllocationGranularity_flags option))                     \
  X(cuMemCreate, (CUmemGenericAllocationHandle* handle, size_t size,                              \
                  const CUmemAllocationProp* prop, unsigned long long flags))                     \
  X(cuMemRelease, (CUmemGenericAllocationHandle handle))                                          \
  X(cuMemAddressReserve, (CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,      \
                          unsigned long long flags))                                              \
  X(cuMemAddressFree, (CUdeviceptr ptr, size_t size))                                             \
  X(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,  \
               unsigned long long flags))                                                         \
  X(cuMemUnmap, (CUdeviceptr ptr, size_t size))                                                   \
  X(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count))    \
  X(cuMemExportToShareableHandle, (void* shareableHandle, CUmemGenericAllocationHandle handle,     \
                                   CUmemAllocationHandleType handleType,                          \
                                   unsigned long long flags))                                     \
  X(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle* handle, void* osHandle,        \
                                     CUmemAllocationHandleType shHandleType))                     \
  X(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp* prop,                           \
                                             CUmemGenericAllocationHandle handle))                \
  /* inter-process memory */                                                                      \
  X(cuIpcGetMemHandle, (CUipcMemHandle* pHandle, CUdeviceptr dptr))                               \
  X(cuIpcOpenMemHandle, (CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags))          \
  X(cuIpcOpenMemHandle_v2, (CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags))       \
  X(cuIpcCloseMemHandle, (CUdeviceptr dptr))                                                      \
  X(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle* handle, void* addr))              \
  X(cuCtxEnablePeerAccess, (CUcontext peerContext, unsigned int Flags))                           \
  X(cuCtxDisablePeerAccess, (CUcontext peerContext))                                              \
  X(cuMulticastCreate, (CUmemGenericAllocationHandle* mcHandle, const CUmulticastObjectProp* prop)) \
  X(cuMulticastAddDevice, (CUmemGenericAllocationHandle mcHandle, CUdevice dev))                  \
  X(cuMulticastBindMem, (CUmemGenericAllocationHandle mcHandle, size_t mcOffset,                  \
                         CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,   \
                         unsigned long long flags))                                               \
  X(cuMulticastBindAddr, (CUmemGenericAllocationHandle mcHandle, size_t mcOffset,                 \
                          CUdeviceptr memptr, size_t size, unsigned long long flags))             \
  X(cuMulticastUnbind, (CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset,     \
                        size_t size))                                                             \
  /* copies and memsets (_ptds: per-thread default stream twins) */                               \
  X(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount))                               \
  X(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount))                          \
  X(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream))        \
  X(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream))   \
  X(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount))              \
  X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount))         \
  X(cuMemcpyDtoH_v2, (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount))                    \
  X(cuMemcpyDtoH_v2_ptds, (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount))               \
  X(cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount))            \
  X(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount))       \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,          \
                           CUstream hStream))                                                     \
  X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,     \
                                CUstream hStream))                                                \
  X(cuMemcpyDtoHAsync_v2, (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,                \
                           CUstream hStream))                                                     \
  X(cuMemcpyDtoHAsync_v2_ptsz, (void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,           \
                                CUstream hStream))                                                \
  X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,        \
                           CUstream hStream))                                                     \
  X(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,   \
                                CUstream hStream))                                                \
  X(cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N))                           \
  X(cuMemsetD8_v2_ptds, (CUdeviceptr dstDevice, unsigned char uc, size_t N))                      \
  X(cuMemsetD16_v2, (CUdeviceptr dstDevice, unsigned short us, size_t N))                         \
  X(cuMemsetD16_v2_ptds, (CUdeviceptr dstDevice, unsigned short us, size_t N))                    \
  X(cuMemsetD32_v2, (CUdeviceptr dstDevice, unsigned int ui, size_t N))                           \
  X(cuMemsetD32_v2_ptds, (CUdeviceptr dstDevice, unsigned int ui, size_t N))                      \
  X(cuMemsetD8Async, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream))       \
  X(cuMemsetD8Async_ptsz, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream))  \
  X(cuMemsetD32Async, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream))       \
  X(cuMemsetD32Async_ptsz, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream))  \
  /* streams */                                                                                   \
  X(cuStreamCreate, (CUstream* phStream, unsigned int Flags))                                     \
  X(cuStreamCreateWithPriority, (CUstream* phStream, unsigned int flags, int priority))           \
  X(cuStreamDestroy, (CUstream hStream))                                                          \
  X(cuStreamDestroy_v2, (CUstream hStream))                                                       \
  X(cuStreamSynchronize, (CUstream hStream))                                                      \
  X(cuStreamSynchronize_ptsz, (CUstream hStream))                                                 \
  X(cuStreamQuery, (CUstream hStream))                                                            \
  X(cuStreamQuery_ptsz, (CUstream hStream))                                                       \
  X(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags))                    \
  X(cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned int Flags))               \
  X(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus* captureStatus))                \
  /* stream memory operations: v1 (CUDA 8.0) and _v2 (11.7), the same parameters */               \
  X(cuStreamWaitValue32, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)) \
  X(cuStreamWaitValue32_v2, (CUstream stream, CUdeviceptr addr, cuuint32_t value,                 \
                             unsigned int flags))                                                 \
  X(cuStreamWaitValue32_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value,            \
                                  unsigned int flags))                                            \
  X(cuStreamWriteValue32, (CUstream stream, CUdeviceptr addr, cuuint32_t value,                   \
                           unsigned int flags))                                                   \
  X(cuStreamWriteValue32_v2, (CUstream stream, CUdeviceptr addr, cuuint32_t value,                \
                              unsigned int flags))                                                \
  X(cuStreamWriteValue32_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value,           \
                                   unsigned int flags))                                           \
  X(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus* captureStatus))           \
  /* events */                                                                                    \
  X(cuEventCreate, (CUevent* phEvent, unsigned int Flags))                                        \
  X(cuEventRecord, (CUevent hEvent, CUstream hStream))                                            \
  X(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream))                                       \
  X(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags))               \
  X(cuEventRecordWithFlags_ptsz, (CUevent hEvent, CUstream hStream, unsigned int flags))          \
  X(cuEventQuery, (CUevent hEvent))                                                               \
  X(cuEventSynchronize, (CUevent hEvent))                                                         \
  X(cuEventElapsedTime, (float* pMilliseconds, CUevent hStart, CUevent hEnd))                     \
  X(cuEventDestroy, (CUevent hEvent))                                                             \
  X(cuEventDestroy_v2, (CUevent hEvent))                                                          \
  /* modules and launches */                                                                      \
  X(cuModuleLoadData, (CUmodule* module, const void* image))                                      \
  X(cuModuleGetFunction, (CUfunction* hfunc, CUmodule hmod, const char* name))                    \
  X(cuModuleUnload, (CUmodule hmod))                                                              \
  /* loading code takes device memory (code, constants, globals) */       \
  X(cuModuleLoad, (CUmodule* module, const char* fname))                                          \
  X(cuModuleLoadDataEx, (CUmodule* module, const void* image, unsigned int numOptions,            \
                         CUjit_option* options, void** optionValues))                             \
  X(cuModuleLoadFatBinary, (CUmodule* module, const void* fatCubin))                              \
  X(cuLibraryLoadData, (CUlibrary* library, const void* code, CUjit_option* jitOptions,           \
                        void** jitOptionsValues, unsigned int numJitOptions,                      \
                        CUlibraryOption* libraryOptions, void** libraryOptionValues,              \
                        unsigned int numLibraryOptions))                                          \
  X(cuLibraryLoadFromFile, (CUlibrary* library, const char* fileName, CUjit_option* jitOptions,   \
                            void** jitOptionsValues, unsigned int numJitOptions,                  \
                            CUlibraryOption* libraryOptions, void** libraryOptionValues,          \
                            unsigned int numLibraryOptions))                                      \
  X(cuLibraryUnload, (CUlibrary library))                                                         \
  X(cuGreenCtxCreate, (CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)) \
  X(cuGreenCtxDestroy, (CUgreenCtx hCtx))                                                         \
  X(cuArrayCreate, (CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray))            \
  X(cuArray3DCreate, (CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray))        \
  X(cuGraphAddNode, (CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,    \
                     size_t numDependencies, CUgraphNodeParams* nodeParams))                      \
  X(cuGraphAddNode_v2, (CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, \
                        const CUgraphEdgeData* dependencyData, size_t numDependencies,            \
                        CUgraphNodeParams* nodeParams))                                           \
  X(cuLaunchKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,                  \
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,       \
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,       \
                     void** kernelParams, void** extra))                                          \
  X(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,             \
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,  \
                          unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,  \
                          void** kernelParams, void** extra))                                     \
  X(cuLaunchKernelEx, (const CUlaunchConfig* config, CUfunction f, void** kernelParams,           \
                       void** extra))                                                             \
  X(cuLaunchKernelEx_ptsz, (const CUlaunchConfig* config, CUfunction f, void** kernelParams,      \
                            void** extra))                                                        \
  X(cuLaunchCooperativeKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,       \
                                unsigned int gridDimZ, unsigned int blockDimX,                    \
                                unsigned int blockDimY, unsigned int blockDimZ,                   \
                                unsigned int sharedMemBytes, CUstream hStream,                    \
                                void** kernelParams))                                             \
  X(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,  \
                                     unsigned int gridDimZ, unsigned int blockDimX,               \
                                     unsigned int blockDimY, unsigned int blockDimZ,              \
                                     unsigned int sharedMemBytes, CUstream hStream,               \
                                     void** kernelParams))                                        \
  /* graphs */                                                                                    \
  X(cuGraphCreate, (CUgraph* phGraph, unsigned int flags))                                        \
  X(cuGraphDestroy, (CUgraph hGraph))                                                             \
  X(cuGraphDestroyNode, (CUgraphNode hNode))                                                      \
  X(cuGraphAddMemAllocNode, (CUgraphNode* phGraphNode, CUgraph hGraph,                            \
                             const CUgraphNode* dependencies, size_t numDependencies,             \
                             CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams))                             \
  X(cuGraphAddMemFreeNode, (CUgraphNode* phGraphNode, CUgraph hGraph,                             \
                            const CUgraphNode* dependencies, size_t numDependencies,              \
                            CUdeviceptr dptr))                                                    \
  X(cuGraphAddKernelNode_v2, (CUgraphNode* phGraphNode, CUgraph hGraph,                           \
                              const CUgraphNode* dependencies, size_t numDependencies,            \
                              const CUDA_KERNEL_NODE_PARAMS* nodeParams))                         \
  /* cuGraphInstantiate and _v2 are the pre-12.0 (exec, graph, errorNode, log, size) ABI; */     \
  /* from 12.0 cuda.h maps the plain name to cuGraphInstantiateWithFlags. */                      \
  X(cuGraphInstantiate, (CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,      \
                         char* logBuffer, size_t bufferSize))                                     \
  X(cuGraphInstantiate_v2, (CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,   \
                            char* logBuffer, size_t bufferSize))                                  \
  X(cuGraphInstantiateWithFlags, (CUgraphExec* phGraphExec, CUgraph hGraph,                       \
                                  unsigned long long flags))                                      \
  X(cuGraphInstantiateWithParams, (CUgraphExec* phGraphExec, CUgraph hGraph,                      \
                                   CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams))             \
  X(cuGraphInstantiateWithParams_ptsz, (CUgraphExec* phGraphExec, CUgraph hGraph,                 \
                                        CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams))        \
  X(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream))                                    \
  X(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream))                               \
  X(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))                                    \
  X(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream))                               \
  X(cuGraphExecDestroy, (CUgraphExec hGraphExec))                                                \
  X(cuDeviceGraphMemTrim, (CUdevice device))                                                      \
  X(cuDeviceGetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void* value))      \
  X(cuDeviceSetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void* value))

#define VGPU_CU_FUNCTIONS_12_9(X)                                                                 \
  X(cuEventElapsedTime_v2, (float* pMilliseconds, CUevent hStart, CUevent hEnd))

#define VGPU_CU_FUNCTIONS_13_0(X)                                                                 \
  X(cuCtxGetDevice_v2, (CUdevice* device, CUcontext ctx))                                         \
  X(cuCtxSynchronize_v2, (CUcontext ctx))

#define VGPU_CU_FUNCTIONS_13_4(X)                                                                 \
  X(cuGraphAddNode_v3, (CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, \
                        const CUgraphEdgeData* dependencyData, size_t numDependencies,            \
                        CUgraphNodeParams* nodeParams))

#define VGPU_CU_ALL_FUNCTIONS(X) \
  VGPU_CU_FUNCTIONS(X) VGPU_CU_FUNCTIONS_12_9(X) VGPU_CU_FUNCTIONS_13_0(X) VGPU_CU_FUNCTIONS_13_4(X)
// clang-format on

#define VGPU_CU_DECLARE_(name, params) CUresult CUDAAPI name params;
VGPU_CU_ALL_FUNCTIONS(VGPU_CU_DECLARE_)
#undef VGPU_CU_DECLARE_

#if defined(__cplusplus) && !defined(VGPU_CUDA_API_CXX_LINKAGE)
} /* extern "C" */
#endif
