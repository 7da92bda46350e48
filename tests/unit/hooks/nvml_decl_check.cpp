// Cross-check of vgpu/cuda/nvml_api.h against a real nvml.h (built only where CMake finds
// one): return codes, macro values, structure layouts and the type of every function we
// declare. Ours go into namespace `ours` with C++ linkage; nvml.h comes after, at global
// scope, with NVML_NO_UNVERSIONED_FUNC_DEFS so that it renames nothing. Nothing runs: a
// difference is a failed static_assert that names it.

#include <cstddef>
#include <type_traits>

#include "decl_check.h"

#define VGPU_CUDA_API_CXX_LINKAGE 1
namespace ours {
#include "vgpu/cuda/nvml_api.h"
}  // namespace ours

#define VGPU_NVML_MACROS(X)                      \
  X(NVML_INIT_FLAG_NO_GPUS)                      \
  X(NVML_INIT_FLAG_NO_ATTACH)                    \
  X(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)      \
  X(NVML_DEVICE_UUID_BUFFER_SIZE)                \
  X(NVML_DEVICE_UUID_V2_BUFFER_SIZE)             \
  X(NVML_DEVICE_NAME_BUFFER_SIZE)                \
  X(NVML_DEVICE_NAME_V2_BUFFER_SIZE)             \
  X(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)          \
  X(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE)       \
  X(NVML_DEVICE_MIG_DISABLE)                     \
  X(NVML_DEVICE_MIG_ENABLE)                      \
  X(NVML_NVLINK_MAX_LINKS)                       \
  X(nvmlEventTypeNone)                           \
  X(nvmlEventTypeSingleBitEccError)              \
  X(nvmlEventTypeDoubleBitEccError)              \
  X(nvmlEventTypePState)                         \
  X(nvmlEventTypeXidCriticalError)               \
  X(nvmlEventTypeClock)                          \
  X(nvmlMemory_v2)                               \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_3_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_4_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_7_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_8_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_6_SLICE)            \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)       \
  X(NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1)       \
  X(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)       \
  X(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE)        \
  X(NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE)        \
  X(NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)        \
  X(NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE)        \
  X(NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE)        \
  X(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)  \
  X(nvmlGpuInstanceProfileInfo_v2)
// Kept inside `ours` so that nvmlMemory_v2 measures our structure.
#define VGPU_KEEP(name) constexpr unsigned long long name##_ = static_cast<unsigned long long>(name);
namespace ours::macro {
VGPU_NVML_MACROS(VGPU_KEEP)
}  // namespace ours::macro

#undef NVML_INIT_FLAG_NO_GPUS
#undef NVML_INIT_FLAG_NO_ATTACH
#undef NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
#undef NVML_DEVICE_UUID_BUFFER_SIZE
#undef NVML_DEVICE_UUID_V2_BUFFER_SIZE
#undef NVML_DEVICE_NAME_BUFFER_SIZE
#undef NVML_DEVICE_NAME_V2_BUFFER_SIZE
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
#undef NVML_DEVICE_MIG_DISABLE
#undef NVML_DEVICE_MIG_ENABLE
#undef NVML_NVLINK_MAX_LINKS
#undef nvmlEventTypeNone
#undef nvmlEventTypeSingleBitEccError
#undef nvmlEventTypeDoubleBitEccError
#undef nvmlEventTypePState
#undef nvmlEventTypeXidCriticalError
#undef nvmlEventTypeClock
#undef NVML_STRUCT_VERSION
#undef nvmlMemory_v2
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_2_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_3_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_4_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_7_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_8_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_6_SLICE
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
#undef NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1
#undef NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
#undef NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE
#undef NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE
#undef NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
#undef nvmlGpuInstanceProfileInfo_v2

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

namespace real_macro {
VGPU_NVML_MACROS(VGPU_KEEP)
}  // namespace real_macro
#define VGPU_SAME_MACRO(name) static_assert(ours::macro::name##_ == real_macro::name##_, "macro " #name " differs");
VGPU_NVML_MACROS(VGPU_SAME_MACRO)

VGPU_DECLCHECK_MAP_HANDLE(nvmlDevice_t)
VGPU_DECLCHECK_MAP_HANDLE(nvmlEventSet_t)
VGPU_DECLCHECK_MAP_HANDLE(nvmlGpuInstance_t)
VGPU_DECLCHECK_MAP_HANDLE(nvmlComputeInstance_t)

#define VGPU_NVML_TYPES(X)         \
  X(nvmlReturn_t)                  \
  X(nvmlMemory_t)                  \
  X(nvmlMemory_v2_t)               \
  X(nvmlPciInfo_t)                 \
  X(nvmlUtilization_t)             \
  X(nvmlProcessInfo_t)             \
  X(nvmlProcessUtilizationSample_t) \
  X(nvmlEventData_t)                \
  X(nvmlGpuTopologyLevel_t)         \
  X(nvmlEnableState_t)              \
  X(nvmlGpuInstancePlacement_t)      \
  X(nvmlGpuInstanceProfileInfo_t)    \
  X(nvmlGpuInstanceProfileInfo_v2_t) \
  X(nvmlGpuInstanceInfo_t)           \
  X(nvmlComputeInstancePlacement_t)  \
  X(nvmlComputeInstanceProfileInfo_t) \
  X(nvmlComputeInstanceInfo_t)       \
  X(nvmlDeviceAttributes_t)
VGPU_NVML_TYPES(VGPU_DECLCHECK_MAP)
VGPU_DECLCHECK_ENUM(nvmlReturn_t)
VGPU_DECLCHECK_ENUM(nvmlGpuTopologyLevel_t)
VGPU_DECLCHECK_ENUM(nvmlEnableState_t)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_INTERNAL)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_SINGLE)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_MULTIPLE)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_HOSTBRIDGE)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_NODE)
VGPU_DECLCHECK_VALUE(NVML_TOPOLOGY_SYSTEM)
VGPU_DECLCHECK_VALUE(NVML_FEATURE_DISABLED)
VGPU_DECLCHECK_VALUE(NVML_FEATURE_ENABLED)
VGPU_DECLCHECK_TYPE(nvmlMemory_t)
VGPU_DECLCHECK_TYPE(nvmlMemory_v2_t)
VGPU_DECLCHECK_TYPE(nvmlPciInfo_t)
VGPU_DECLCHECK_TYPE(nvmlUtilization_t)
VGPU_DECLCHECK_TYPE(nvmlProcessInfo_t)
VGPU_DECLCHECK_TYPE(nvmlProcessUtilizationSample_t)
VGPU_DECLCHECK_TYPE(nvmlEventData_t)
// In both headers the plain process info is the v2 layout.
static_assert(std::is_same_v<ours::nvmlProcessInfo_t, ours::nvmlProcessInfo_v2_t>);
static_assert(std::is_same_v<::nvmlProcessInfo_t, ::nvmlProcessInfo_v2_t>);

#define VGPU_CHECK_RETURN(name, value) \
  VGPU_DECLCHECK_VALUE(name)           \
  static_assert(ours::name == (value));
VGPU_NVML_RETURNS(VGPU_CHECK_RETURN)
#if NVML_API_VERSION >= 13
VGPU_NVML_RETURNS_13(VGPU_CHECK_RETURN)
#endif

VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_t, total)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_t, free)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_t, used)

VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_v2_t, version)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_v2_t, total)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_v2_t, reserved)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_v2_t, free)
VGPU_DECLCHECK_TYPED_FIELD(nvmlMemory_v2_t, used)

VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, busIdLegacy)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, domain)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, bus)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, device)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, pciDeviceId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, pciSubSystemId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlPciInfo_t, busId)

VGPU_DECLCHECK_TYPED_FIELD(nvmlUtilization_t, gpu)
VGPU_DECLCHECK_TYPED_FIELD(nvmlUtilization_t, memory)

VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessInfo_t, pid)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessInfo_t, usedGpuMemory)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessInfo_t, gpuInstanceId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessInfo_t, computeInstanceId)

VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, pid)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, timeStamp)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, smUtil)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, memUtil)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, encUtil)
VGPU_DECLCHECK_TYPED_FIELD(nvmlProcessUtilizationSample_t, decUtil)

VGPU_DECLCHECK_TYPED_FIELD(nvmlEventData_t, device)
VGPU_DECLCHECK_TYPED_FIELD(nvmlEventData_t, eventType)
VGPU_DECLCHECK_TYPED_FIELD(nvmlEventData_t, eventData)
VGPU_DECLCHECK_TYPED_FIELD(nvmlEventData_t, gpuInstanceId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlEventData_t, computeInstanceId)

// Multi-Instance GPU.
VGPU_DECLCHECK_TYPE(nvmlGpuInstancePlacement_t)
VGPU_DECLCHECK_TYPE(nvmlGpuInstanceProfileInfo_t)
VGPU_DECLCHECK_TYPE(nvmlGpuInstanceProfileInfo_v2_t)
VGPU_DECLCHECK_TYPE(nvmlGpuInstanceInfo_t)
VGPU_DECLCHECK_TYPE(nvmlComputeInstancePlacement_t)
VGPU_DECLCHECK_TYPE(nvmlComputeInstanceProfileInfo_t)
VGPU_DECLCHECK_TYPE(nvmlComputeInstanceInfo_t)
VGPU_DECLCHECK_TYPE(nvmlDeviceAttributes_t)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstancePlacement_t, start)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstancePlacement_t, size)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, id)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, isP2pSupported)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, sliceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, instanceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, multiprocessorCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, copyEngineCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, decoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, encoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, jpegCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, ofaCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_t, memorySizeMB)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, version)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, id)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, isP2pSupported)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, sliceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, instanceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, multiprocessorCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, copyEngineCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, decoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, encoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, jpegCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, ofaCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceProfileInfo_v2_t, name)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceInfo_t, device)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceInfo_t, id)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceInfo_t, profileId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlGpuInstanceInfo_t, placement)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstancePlacement_t, start)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstancePlacement_t, size)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, id)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sliceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, instanceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, multiprocessorCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sharedDecoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sharedEncoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sharedJpegCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceProfileInfo_t, sharedOfaCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceInfo_t, device)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceInfo_t, gpuInstance)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceInfo_t, id)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceInfo_t, profileId)
VGPU_DECLCHECK_TYPED_FIELD(nvmlComputeInstanceInfo_t, placement)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, multiprocessorCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, sharedCopyEngineCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, sharedDecoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, sharedEncoderCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, sharedJpegCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, sharedOfaCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, gpuInstanceSliceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, computeInstanceSliceCount)
VGPU_DECLCHECK_TYPED_FIELD(nvmlDeviceAttributes_t, memorySizeMB)

VGPU_NVML_FUNCTIONS(VGPU_DECLCHECK_FUNCTION_RET)
