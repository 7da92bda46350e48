// Cross-check of vgpu/cuda/driver_api.h against a real cuda.h (built only where CMake finds
// one, from CUDA 12.6 on): every enumerator, every macro value, the size, alignment and
// field offsets and types of every structure, and the type of every function prototype we
// declare. Ours go into namespace `ours` with C++ linkage; cuda.h comes after, at global
// scope, with __CUDA_API_VERSION_INTERNAL so that it too declares every ABI variant under
// its own name. Nothing runs: a difference is a failed static_assert that names it.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "decl_check.h"

#define VGPU_CUDA_API_CXX_LINKAGE 1
namespace ours {
#include "vgpu/cuda/driver_api.h"
#include "vgpu/cuda/per_thread_twins.h"
}  // namespace ours

// Our macros' values, kept before they are undefined to make room for cuda.h's. The stream
// handles are pointer casts: with CUstream naming an integer type here they read as numbers.
// (CU_LAUNCH_PARAM_END and friends are ((void*)<the _AS_INT value>) in both headers.)
#define VGPU_CUDA_MACROS(X)                   \
  X(CU_STREAM_LEGACY)                         \
  X(CU_STREAM_PER_THREAD)                     \
  X(CU_IPC_HANDLE_SIZE)                       \
  X(CU_MEMHOSTALLOC_PORTABLE)                 \
  X(CU_MEMHOSTALLOC_DEVICEMAP)                \
  X(CU_MEMHOSTALLOC_WRITECOMBINED)            \
  X(CU_MEMHOSTREGISTER_PORTABLE)              \
  X(CU_MEMHOSTREGISTER_DEVICEMAP)             \
  X(CU_MEMHOSTREGISTER_IOMEMORY)              \
  X(CU_MEMHOSTREGISTER_READ_ONLY)             \
  X(CU_LAUNCH_PARAM_END_AS_INT)               \
  X(CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT)    \
  X(CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT)
#define VGPU_KEEP(name) constexpr unsigned long long name##_ = static_cast<unsigned long long>(name);
namespace ours::macro {
using CUstream = std::uintptr_t;
VGPU_CUDA_MACROS(VGPU_KEEP)
// Which API our declarations follow; the installed header may be older or newer.
static_assert(CUDA_VERSION == 13000);
}  // namespace ours::macro

#undef CUDA_VERSION
#undef CUDAAPI
#undef CU_STREAM_LEGACY
#undef CU_STREAM_PER_THREAD
#undef CU_IPC_HANDLE_SIZE
#undef CU_MEMHOSTALLOC_PORTABLE
#undef CU_MEMHOSTALLOC_DEVICEMAP
#undef CU_MEMHOSTALLOC_WRITECOMBINED
#undef CU_MEMHOSTREGISTER_PORTABLE
#undef CU_MEMHOSTREGISTER_DEVICEMAP
#undef CU_MEMHOSTREGISTER_IOMEMORY
#undef CU_MEMHOSTREGISTER_READ_ONLY
#undef CU_LAUNCH_PARAM_END_AS_INT
#undef CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT
#undef CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT
#undef CU_LAUNCH_PARAM_END
#undef CU_LAUNCH_PARAM_BUFFER_POINTER
#undef CU_LAUNCH_PARAM_BUFFER_SIZE

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#if CUDA_VERSION < 12060
#error "the cross-check compares with cuda.h from CUDA 12.6 on (CMake should not have built it)"
#endif

namespace real_macro {
using CUstream = std::uintptr_t;
VGPU_CUDA_MACROS(VGPU_KEEP)
}  // namespace real_macro
#define VGPU_SAME_MACRO(name) static_assert(ours::macro::name##_ == real_macro::name##_, "macro " #name " differs");
VGPU_CUDA_MACROS(VGPU_SAME_MACRO)

// ---- Types: every named type of ours is the header's type of the same name ----------------

VGPU_DECLCHECK_MAP_HANDLE(CUcontext)
VGPU_DECLCHECK_MAP_HANDLE(CUmodule)
VGPU_DECLCHECK_MAP_HANDLE(CUfunction)
VGPU_DECLCHECK_MAP_HANDLE(CUkernel)
VGPU_DECLCHECK_MAP_HANDLE(CUarray)
VGPU_DECLCHECK_MAP_HANDLE(CUmipmappedArray)
VGPU_DECLCHECK_MAP_HANDLE(CUevent)
VGPU_DECLCHECK_MAP_HANDLE(CUstream)
VGPU_DECLCHECK_MAP_HANDLE(CUgraph)
VGPU_DECLCHECK_MAP_HANDLE(CUgraphNode)
VGPU_DECLCHECK_MAP_HANDLE(CUgraphExec)
VGPU_DECLCHECK_MAP_HANDLE(CUmemoryPool)
VGPU_DECLCHECK_MAP_HANDLE(CUlibrary)
VGPU_DECLCHECK_MAP_HANDLE(CUgreenCtx)
VGPU_DECLCHECK_MAP_HANDLE(CUdevResourceDesc)

#define VGPU_CUDA_ENUMS(X)           \
  X(CUresult)                        \
  X(CUdevice_attribute)              \
  X(CUarray_format)                  \
  X(CUstream_flags)                  \
  X(CUstreamWaitValue_flags)         \
  X(CUstreamWriteValue_flags)        \
  X(CUevent_flags)                   \
  X(CUmemAttach_flags)               \
  X(CUipcMem_flags)                  \
  X(CUstreamCaptureStatus)           \
  X(CUdriverProcAddress_flags)       \
  X(CUdriverProcAddressQueryResult)  \
  X(CUmemLocationType)               \
  X(CUmemAllocationType)             \
  X(CUmemAllocationHandleType)       \
  X(CUmemAccess_flags)               \
  X(CUmemAllocationGranularity_flags) \
  X(CUmemPool_attribute)             \
  X(CUgraphMem_attribute)            \
  X(CUexecAffinityType)              \
  X(CUcigDataType)                   \
  X(CUgraphInstantiateResult)        \
  X(CUlaunchAttributeID)              \
  X(CUjit_option)                    \
  X(CUlibraryOption)                 \
  X(CUgraphNodeType)
#define VGPU_CUDA_STRUCTS(X)            \
  X(CUuuid)                             \
  X(CUipcMemHandle)                     \
  X(CUDA_ARRAY_DESCRIPTOR)              \
  X(CUDA_ARRAY3D_DESCRIPTOR)            \
  X(CUDA_ARRAY_MEMORY_REQUIREMENTS)     \
  X(CUmemLocation)                      \
  X(CUmemAllocationProp)                \
  X(CUmemAccessDesc)                    \
  X(CUmemPoolProps)                     \
  X(CUDA_MEM_ALLOC_NODE_PARAMS)         \
  X(CUDA_KERNEL_NODE_PARAMS)            \
  X(CUDA_GRAPH_INSTANTIATE_PARAMS)      \
  X(CUlaunchAttributeValue)             \
  X(CUlaunchAttribute)                  \
  X(CUlaunchConfig)                     \
  X(CUexecAffinitySmCount)              \
  X(CUexecAffinityParam)                \
  X(CUctxCigParam)                      \
  X(CUctxCreateParams)                  \
  X(CUDA_ARRAY_DESCRIPTOR_v1)           \
  X(CUDA_ARRAY3D_DESCRIPTOR_v1)         \
  X(CUgraphNodeParams)                  \
  X(CUgraphEdgeData)                    \
  X(CUmulticastObjectProp)              \
  X(CUmemPoolPtrExportData)
VGPU_CUDA_ENUMS(VGPU_DECLCHECK_MAP)
VGPU_CUDA_STRUCTS(VGPU_DECLCHECK_MAP)
VGPU_CUDA_ENUMS(VGPU_DECLCHECK_ENUM)
VGPU_CUDA_STRUCTS(VGPU_DECLCHECK_TYPE)

// Scalar typedefs (the versioned aliases included) name the same built-in types.
#define VGPU_SAME_SCALAR(name) static_assert(std::is_same_v<ours::name, ::name>, #name " differs");
VGPU_SAME_SCALAR(cuuint32_t)
VGPU_SAME_SCALAR(cuuint64_t)
VGPU_SAME_SCALAR(CUdeviceptr)
VGPU_SAME_SCALAR(CUdeviceptr_v2)
VGPU_SAME_SCALAR(CUdeviceptr_v1)
VGPU_SAME_SCALAR(CUdevice)
VGPU_SAME_SCALAR(CUdevice_v1)
VGPU_SAME_SCALAR(CUmemGenericAllocationHandle)
VGPU_SAME_SCALAR(CUmemGenericAllocationHandle_v1)
// The versioned struct names are the same types as the plain ones, in both headers.
#define VGPU_SAME_ALIAS(plain, versioned)                                                \
  static_assert(std::is_same_v<ours::plain, ours::versioned>, #versioned " (ours)");     \
  static_assert(std::is_same_v<::plain, ::versioned>, #versioned " (cuda.h)");
VGPU_SAME_ALIAS(CUipcMemHandle, CUipcMemHandle_v1)
VGPU_SAME_ALIAS(CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR_v2)
VGPU_SAME_ALIAS(CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR_v2)
VGPU_SAME_ALIAS(CUDA_ARRAY_MEMORY_REQUIREMENTS, CUDA_ARRAY_MEMORY_REQUIREMENTS_v1)
VGPU_SAME_ALIAS(CUmemLocation, CUmemLocation_v1)
VGPU_SAME_ALIAS(CUmemAllocationProp, CUmemAllocationProp_v1)
VGPU_SAME_ALIAS(CUmemAccessDesc, CUmemAccessDesc_v1)
VGPU_SAME_ALIAS(CUmemPoolProps, CUmemPoolProps_v1)
VGPU_SAME_ALIAS(CUDA_MEM_ALLOC_NODE_PARAMS, CUDA_MEM_ALLOC_NODE_PARAMS_v1)
VGPU_SAME_ALIAS(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2)
VGPU_SAME_ALIAS(CUexecAffinitySmCount, CUexecAffinitySmCount_v1)
VGPU_SAME_ALIAS(CUexecAffinityParam, CUexecAffinityParam_v1)
VGPU_SAME_ALIAS(CUmulticastObjectProp, CUmulticastObjectProp_v1)
VGPU_SAME_ALIAS(CUmemPoolPtrExportData, CUmemPoolPtrExportData_v1)

// ---- Enumerators --------------------------------------------------------------------------

#define VGPU_CHECK_RESULT(name, value) \
  VGPU_DECLCHECK_VALUE(name)           \
  static_assert(ours::name == (value));
VGPU_CU_RESULTS(VGPU_CHECK_RESULT)
#if CUDA_VERSION >= 12090
VGPU_CU_RESULTS_12_9(VGPU_CHECK_RESULT)
#endif
#if CUDA_VERSION >= 13000
VGPU_CU_RESULTS_13_0(VGPU_CHECK_RESULT)
#endif

#define VGPU_CUDA_ENUMERATORS(X)                                   \
  X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)                     \
  X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)                           \
  X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)                           \
  X(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)                           \
  X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)                            \
  X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)                            \
  X(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)                            \
  X(CU_DEVICE_ATTRIBUTE_WARP_SIZE)                                 \
  X(CU_DEVICE_ATTRIBUTE_MAX_PITCH)                                 \
  X(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)                                \
  X(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)                         \
  X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)                      \
  X(CU_DEVICE_ATTRIBUTE_INTEGRATED)                                \
  X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)                       \
  X(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS)                        \
  X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)                                \
  X(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)                             \
  X(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)                         \
  X(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)                   \
  X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)            \
  X(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)                        \
  X(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)                             \
  X(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)                   \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)                  \
  X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)                  \
  X(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)                            \
  X(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)                 \
  X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)       \
  X(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) \
  X(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)                    \
  X(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED)                       \
  X(CU_DEVICE_ATTRIBUTE_NUMA_ID)                                   \
  X(CU_AD_FORMAT_UNSIGNED_INT8)                                    \
  X(CU_AD_FORMAT_UNSIGNED_INT16)                                   \
  X(CU_AD_FORMAT_UNSIGNED_INT32)                                   \
  X(CU_AD_FORMAT_SIGNED_INT8)                                      \
  X(CU_AD_FORMAT_SIGNED_INT16)                                     \
  X(CU_AD_FORMAT_SIGNED_INT32)                                     \
  X(CU_AD_FORMAT_HALF)                                             \
  X(CU_AD_FORMAT_FLOAT)                                            \
  X(CU_AD_FORMAT_UNORM_INT8X1)                                     \
  X(CU_AD_FORMAT_UNORM_INT16X1)                                    \
  X(CU_AD_FORMAT_SNORM_INT8X1)                                     \
  X(CU_AD_FORMAT_SNORM_INT16X1)                                    \
  X(CU_AD_FORMAT_MAX)                                              \
  X(CU_STREAM_DEFAULT)                                             \
  X(CU_STREAM_NON_BLOCKING)                                        \
  X(CU_STREAM_WAIT_VALUE_GEQ)                                      \
  X(CU_STREAM_WAIT_VALUE_EQ)                                       \
  X(CU_STREAM_WAIT_VALUE_AND)                                      \
  X(CU_STREAM_WAIT_VALUE_NOR)                                      \
  X(CU_STREAM_WAIT_VALUE_FLUSH)                                    \
  X(CU_STREAM_WRITE_VALUE_DEFAULT)                                 \
  X(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)                       \
  X(CU_EVENT_DEFAULT)                                              \
  X(CU_EVENT_BLOCKING_SYNC)                                        \
  X(CU_EVENT_DISABLE_TIMING)                                       \
  X(CU_EVENT_INTERPROCESS)                                         \
  X(CU_MEM_ATTACH_GLOBAL)                                          \
  X(CU_MEM_ATTACH_HOST)                                            \
  X(CU_MEM_ATTACH_SINGLE)                                          \
  X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)                            \
  X(CU_STREAM_CAPTURE_STATUS_NONE)                                 \
  X(CU_STREAM_CAPTURE_STATUS_ACTIVE)                               \
  X(CU_STREAM_CAPTURE_STATUS_INVALIDATED)                          \
  X(CU_GET_PROC_ADDRESS_DEFAULT)                                   \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM)                             \
  X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)                 \
  X(CU_GET_PROC_ADDRESS_SUCCESS)                                   \
  X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)                          \
  X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)                    \
  X(CU_MEM_LOCATION_TYPE_INVALID)                                  \
  X(CU_MEM_LOCATION_TYPE_DEVICE)                                   \
  X(CU_MEM_LOCATION_TYPE_HOST)                                     \
  X(CU_MEM_LOCATION_TYPE_HOST_NUMA)                                \
  X(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)                        \
  X(CU_MEM_LOCATION_TYPE_MAX)                                      \
  X(CU_MEM_ALLOCATION_TYPE_INVALID)                                \
  X(CU_MEM_ALLOCATION_TYPE_PINNED)                                 \
  X(CU_MEM_ALLOCATION_TYPE_MAX)                                    \
  X(CU_MEM_HANDLE_TYPE_NONE)                                       \
  X(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)                      \
  X(CU_MEM_HANDLE_TYPE_WIN32)                                      \
  X(CU_MEM_HANDLE_TYPE_WIN32_KMT)                                  \
  X(CU_MEM_HANDLE_TYPE_FABRIC)                                     \
  X(CU_MEM_HANDLE_TYPE_MAX)                                        \
  X(CU_MEM_ACCESS_FLAGS_PROT_NONE)                                 \
  X(CU_MEM_ACCESS_FLAGS_PROT_READ)                                 \
  X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)                            \
  X(CU_MEM_ACCESS_FLAGS_PROT_MAX)                                  \
  X(CU_MEM_ALLOC_GRANULARITY_MINIMUM)                              \
  X(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)                          \
  X(CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES)               \
  X(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC)                     \
  X(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)             \
  X(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)                             \
  X(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)                          \
  X(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)                             \
  X(CU_MEMPOOL_ATTR_USED_MEM_CURRENT)                              \
  X(CU_MEMPOOL_ATTR_USED_MEM_HIGH)                                 \
  X(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)                            \
  X(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)                               \
  X(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)                        \
  X(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)                           \
  X(CU_EXEC_AFFINITY_TYPE_SM_COUNT)                                \
  X(CU_EXEC_AFFINITY_TYPE_MAX)                                     \
  X(CIG_DATA_TYPE_D3D12_COMMAND_QUEUE)                             \
  X(CUDA_GRAPH_INSTANTIATE_SUCCESS)                                \
  X(CUDA_GRAPH_INSTANTIATE_ERROR)                                  \
  X(CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE)                      \
  X(CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED)           \
  X(CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED)            \
  X(CU_LAUNCH_ATTRIBUTE_IGNORE)                                    \
  X(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)                               \
  X(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)                         \
  X(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)                        \
  X(CU_LAUNCH_ATTRIBUTE_PRIORITY)                                  \
  X(CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
VGPU_CUDA_ENUMERATORS(VGPU_DECLCHECK_VALUE)
// the loaders' option enumerators we declare
VGPU_DECLCHECK_VALUE(CU_JIT_MAX_REGISTERS)
VGPU_DECLCHECK_VALUE(CU_JIT_THREADS_PER_BLOCK)
VGPU_DECLCHECK_VALUE(CU_JIT_WALL_TIME)
VGPU_DECLCHECK_VALUE(CU_JIT_INFO_LOG_BUFFER)
VGPU_DECLCHECK_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
VGPU_DECLCHECK_VALUE(CU_JIT_ERROR_LOG_BUFFER)
VGPU_DECLCHECK_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
VGPU_DECLCHECK_VALUE(CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE)
VGPU_DECLCHECK_VALUE(CU_LIBRARY_BINARY_IS_PRESERVED)
VGPU_DECLCHECK_VALUE(CU_GRAPH_NODE_TYPE_MEM_ALLOC)
VGPU_DECLCHECK_VALUE(CU_GRAPH_NODE_TYPE_MEM_FREE)
#if CUDA_VERSION >= 13000
VGPU_DECLCHECK_VALUE(CU_MEM_ALLOCATION_TYPE_MANAGED)
#endif
#if CUDA_VERSION >= 12090
VGPU_DECLCHECK_VALUE(CIG_DATA_TYPE_NV_BLOB)
VGPU_DECLCHECK_VALUE(CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED)
#endif
// One past the last device attribute grows with every release: equal for the release our
// declarations follow, never above a newer header's.
#if CUDA_VERSION == 13000
VGPU_DECLCHECK_VALUE(CU_DEVICE_ATTRIBUTE_MAX)
#elif CUDA_VERSION > 13000
static_assert(static_cast<long long>(ours::CU_DEVICE_ATTRIBUTE_MAX) <= static_cast<long long>(::CU_DEVICE_ATTRIBUTE_MAX));
#endif

// ---- Structure layouts ----------------------------------------------------------------------

VGPU_DECLCHECK_TYPED_FIELD(CUuuid, bytes)
VGPU_DECLCHECK_TYPED_FIELD(CUipcMemHandle, reserved)

VGPU_DECLCHECK_TYPED_FIELD(CUgraphNodeParams, type)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphNodeParams, reserved0)
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc)  // the header's is the _v2 struct: same fields, checked below
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc.poolProps)
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc.accessDescs)
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc.accessDescCount)
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc.bytesize)
VGPU_DECLCHECK_FIELD(CUgraphNodeParams, alloc.dptr)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphNodeParams, reserved2)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphEdgeData, from_port)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphEdgeData, to_port)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphEdgeData, type)
VGPU_DECLCHECK_TYPED_FIELD(CUgraphEdgeData, reserved)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR_v1, Width)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR_v1, Height)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR_v1, Format)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR_v1, NumChannels)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, Width)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, Height)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, Depth)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, Format)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, NumChannels)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, Flags)

VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR, Width)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR, Height)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR, Format)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_DESCRIPTOR, NumChannels)

VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Width)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Height)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Depth)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Format)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, NumChannels)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY3D_DESCRIPTOR, Flags)

VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, size)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, alignment)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_ARRAY_MEMORY_REQUIREMENTS, reserved)

VGPU_DECLCHECK_TYPED_FIELD(CUmemLocation, type)
VGPU_DECLCHECK_TYPED_FIELD(CUmemLocation, id)

VGPU_DECLCHECK_TYPED_FIELD(CUmulticastObjectProp, numDevices)
VGPU_DECLCHECK_TYPED_FIELD(CUmulticastObjectProp, size)
VGPU_DECLCHECK_TYPED_FIELD(CUmulticastObjectProp, handleTypes)
VGPU_DECLCHECK_TYPED_FIELD(CUmulticastObjectProp, flags)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, type)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, requestedHandleTypes)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, location)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, win32HandleMetaData)
VGPU_DECLCHECK_FIELD(CUmemAllocationProp, allocFlags)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, allocFlags.compressionType)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, allocFlags.usage)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAllocationProp, allocFlags.reserved)

VGPU_DECLCHECK_TYPED_FIELD(CUmemAccessDesc, location)
VGPU_DECLCHECK_TYPED_FIELD(CUmemAccessDesc, flags)

VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, allocType)
VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, handleTypes)
VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, location)
VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, win32SecurityAttributes)
VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, maxSize)
VGPU_DECLCHECK_TYPED_FIELD(CUmemPoolProps, usage)
// A newer header carves gpuDirectRDMACapable out of the front of `reserved` (13.5: 1 + 53
// bytes where 13.0 has 54): ours, the 13.0 layout, must then cover the same bytes.
namespace {
template <class T>
constexpr bool kHasRdmaField = requires(T t) { t.gpuDirectRDMACapable; };
}  // namespace
#define VGPU_POOL_PROPS_RESERVED_CHECK(T)                                                                   \
  if constexpr (kHasRdmaField<T>) {                                                                         \
    static_assert(offsetof(ours::CUmemPoolProps, reserved) == offsetof(T, gpuDirectRDMACapable),          \
                  "CUmemPoolProps::reserved does not start where the header's gpuDirectRDMACapable does"); \
    static_assert(sizeof(ours::CUmemPoolProps::reserved) ==                                                \
                      sizeof(T::gpuDirectRDMACapable) + sizeof(T::reserved),                              \
                  "CUmemPoolProps::reserved does not cover gpuDirectRDMACapable and reserved");          \
  } else {                                                                                                  \
    static_assert(offsetof(ours::CUmemPoolProps, reserved) == offsetof(T, reserved), "offsetof differs");  \
    static_assert(sizeof(ours::CUmemPoolProps::reserved) == sizeof(T::reserved), "size differs");          \
  }
template <class T>
constexpr bool poolPropsReservedAgree() {
  VGPU_POOL_PROPS_RESERVED_CHECK(T)
  return true;
}
#undef VGPU_POOL_PROPS_RESERVED_CHECK
static_assert(poolPropsReservedAgree<::CUmemPoolProps>());

VGPU_DECLCHECK_TYPED_FIELD(CUDA_MEM_ALLOC_NODE_PARAMS, poolProps)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_MEM_ALLOC_NODE_PARAMS, accessDescs)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_MEM_ALLOC_NODE_PARAMS, accessDescCount)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_MEM_ALLOC_NODE_PARAMS, dptr)

VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, func)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimX)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimY)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, gridDimZ)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimX)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimY)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, blockDimZ)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, sharedMemBytes)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, kernelParams)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, extra)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, kern)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_KERNEL_NODE_PARAMS, ctx)

VGPU_DECLCHECK_TYPED_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, flags)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out)
VGPU_DECLCHECK_TYPED_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, result_out)

VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, pad)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, cooperative)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, clusterDim.x)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, clusterDim.y)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, clusterDim.z)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, programmaticEvent.event)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, programmaticEvent.flags)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, programmaticEvent.triggerAtBlockStart)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, launchCompletionEvent.event)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, launchCompletionEvent.flags)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttributeValue, priority)

VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttribute, id)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttribute, pad)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchAttribute, value)

VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, gridDimX)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, gridDimY)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, gridDimZ)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, blockDimX)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, blockDimY)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, blockDimZ)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, sharedMemBytes)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, hStream)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, attrs)
VGPU_DECLCHECK_TYPED_FIELD(CUlaunchConfig, numAttrs)

VGPU_DECLCHECK_TYPED_FIELD(CUexecAffinitySmCount, val)
VGPU_DECLCHECK_TYPED_FIELD(CUexecAffinityParam, type)
VGPU_DECLCHECK_FIELD(CUexecAffinityParam, param)
VGPU_DECLCHECK_TYPED_FIELD(CUexecAffinityParam, param.smCount)

VGPU_DECLCHECK_TYPED_FIELD(CUctxCigParam, sharedDataType)
VGPU_DECLCHECK_TYPED_FIELD(CUctxCigParam, sharedData)

VGPU_DECLCHECK_TYPED_FIELD(CUctxCreateParams, execAffinityParams)
VGPU_DECLCHECK_TYPED_FIELD(CUctxCreateParams, numExecAffinityParams)
VGPU_DECLCHECK_TYPED_FIELD(CUctxCreateParams, cigParams)

// ---- Prototypes: every function we declare has cuda.h's type under the same ABI name ---------

VGPU_CU_FUNCTIONS(VGPU_DECLCHECK_FUNCTION)
#if CUDA_VERSION >= 12090
VGPU_CU_FUNCTIONS_12_9(VGPU_DECLCHECK_FUNCTION)
#endif
#if CUDA_VERSION >= 13000
VGPU_CU_FUNCTIONS_13_0(VGPU_DECLCHECK_FUNCTION)
#endif
#if CUDA_VERSION >= 13040
VGPU_CU_FUNCTIONS_13_4(VGPU_DECLCHECK_FUNCTION)
#endif

// ---- Per-thread twins: every pair this cuda.h routes through its per-thread macros is listed
// in per_thread_twins.h (the pairs are read from the header by CMake: the macros are gone
// once cuda.h has been included with __CUDA_API_VERSION_INTERNAL).

namespace {
struct Twin {
  std::string_view function;
  std::string_view twin;
};
#define VGPU_TWIN(function, twin) Twin{#function, #twin},
constexpr Twin kOurTwins[] = {VGPU_CU_PER_THREAD_TWINS(VGPU_TWIN)};
#undef VGPU_TWIN
constexpr bool listed(std::string_view function, std::string_view twin) {
  for (const Twin& t : kOurTwins) {
    if (t.function == function && t.twin == twin) return true;
  }
  return false;
}
#define VGPU_REAL_TWIN(function, twin) \
  static_assert(listed(#function, #twin), "per_thread_twins.h lacks " #function " -> " #twin);
#include "real_per_thread_twins.inc"
#undef VGPU_REAL_TWIN
}  // namespace
