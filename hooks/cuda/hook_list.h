// The one list of what libvgpu.so wraps. It drives the table of real functions, the
// wrappers' declarations, the linker version script (exports.map.in) and the
// exported-symbol test; nothing else names the set. (VGPU_CUDA_PROC_ABI below states what
// the driver's cuGetProcAddress returns for each of them; LimiterExports tests that it
// covers every hook.)
//
// X(name, params): `name` is the exact exported symbol (a versioned or _ptsz name is a
// distinct ABI and gets its own entry), `params` its parameter list as vgpu/cuda/driver_api.h
// declares it (a mismatch fails to compile). No #include here: the version script is made
// by running the preprocessor over this file alone.

// clang-format off
#define VGPU_CUDA_HOOKS(X)                                                                  \
  /* entry points */                                                                        \
  X(cuInit, (unsigned int Flags))                                                           \
  X(cuGetProcAddress, (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags)) \
  X(cuGetProcAddress_v2, (const char* symbol, void** pfn, int cudaVersion,                 \
                          cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus)) \
  /* what the container sees */                                                             \
  X(cuMemGetInfo, (unsigned int* free, unsigned int* total))                                \
  X(cuMemGetInfo_v2, (size_t* free, size_t* total))                                         \
  X(cuDeviceTotalMem_v2, (size_t* bytes, CUdevice dev))                                     \
  /* linear allocations */                                                                  \
  X(cuMemAlloc, (CUdeviceptr_v1* dptr, unsigned int bytesize))                              \
  X(cuMemAlloc_v2, (CUdeviceptr* dptr, size_t bytesize))                                    \
  X(cuMemAllocPitch_v2, (CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,           \
                         size_t Height, unsigned int ElementSizeBytes))                     \
  X(cuMemAllocManaged, (CUdeviceptr* dptr, size_t bytesize, unsigned int flags))           \
  X(cuMemFree, (CUdeviceptr_v1 dptr))                                                       \
  X(cuMemFree_v2, (CUdeviceptr dptr))                                                       \
  X(cuMemAllocAsync, (CUdeviceptr* dptr, size_t bytesize, CUstream hStream))               \
  X(cuMemAllocAsync_ptsz, (CUdeviceptr* dptr, size_t bytesize, CUstream hStream))          \
  X(cuMemAllocFromPoolAsync, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,       \
                              CUstream hStream))                                            \
  X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,  \
                                   CUstream hStream))                                       \
  X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream))                                   \
  X(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream))                              \
  /* allocators found missing by tests/unit/hooks/cuda_coverage.py */  \
  X(cuMemAllocPitch, (CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int WidthInBytes, \
                      unsigned int Height, unsigned int ElementSizeBytes))                  \
  X(cuModuleLoad, (CUmodule* module, const char* fname))                                    \
  X(cuModuleLoadData, (CUmodule* module, const void* image))                                \
  X(cuModuleLoadDataEx, (CUmodule* module, const void* image, unsigned int numOptions,      \
                         CUjit_option* options, void** optionValues))                       \
  X(cuModuleLoadFatBinary, (CUmodule* module, const void* fatCubin))                        \
  X(cuModuleUnload, (CUmodule hmod))                                                        \
  X(cuLibraryLoadData, (CUlibrary* library, const void* code, CUjit_option* jitOptions,     \
                        void** jitOptionsValues, unsigned int numJitOptions,                \
                        CUlibraryOption* libraryOptions, void** libraryOptionValues,        \
                        unsigned int numLibraryOptions))                                    \
  X(cuLibraryLoadFromFile, (CUlibrary* library, const char* fileName,                       \
                            CUjit_option* jitOptions, void** jitOptionsValues,              \
                            unsigned int numJitOptions, CUlibraryOption* libraryOptions,    \
                            void** libraryOptionValues, unsigned int numLibraryOptions))    \
  X(cuLibraryUnload, (CUlibrary library))                                                   \
  X(cuGreenCtxCreate, (CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev,            \
                       unsigned int flags))                                                 \
  X(cuGreenCtxDestroy, (CUgreenCtx hCtx))                                                   \
  X(cuArrayCreate, (CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray))      \
  X(cuArray3DCreate, (CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray))  \
  X(cuCtxDestroy, (CUcontext ctx))                                                          \
  X(cuDevicePrimaryCtxRelease, (CUdevice dev))                                              \
  X(cuDevicePrimaryCtxReset, (CUdevice dev))                                                \
  X(cuGraphAddNode, (CUgraphNode* phGraphNode, CUgraph hGraph,                              \
                     const CUgraphNode* dependencies, size_t numDependencies,               \
                     CUgraphNodeParams* nodeParams))                                        \
  X(cuGraphAddNode_v2, (CUgraphNode* phGraphNode, CUgraph hGraph,                           \
                        const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData, \
                        size_t numDependencies, CUgraphNodeParams* nodeParams))             \
  X(cuGraphAddNode_v3, (CUgraphNode* phGraphNode, CUgraph hGraph,                           \
                        const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData, \
                        size_t numDependencies, CUgraphNodeParams* nodeParams))             \
  /* memory pools: charged for what they hold */                                            \
  X(cuMemPoolCreate, (CUmemoryPool* pool, const CUmemPoolProps* poolProps))                 \
  X(cuMemPoolDestroy, (CUmemoryPool pool))                                                  \
  X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))                            \
  X(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void* value))      \
  /* arrays */                                                                              \
  X(cuArrayCreate_v2, (CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray))     \
  X(cuArray3DCreate_v2, (CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray)) \
  X(cuArrayDestroy, (CUarray hArray))                                                       \
  X(cuMipmappedArrayCreate, (CUmipmappedArray* pHandle,                                     \
                             const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,            \
                             unsigned int numMipmapLevels))                                 \
  X(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray))                            \
  /* virtual memory management, IPC and shareable handles */                                \
  X(cuMemCreate, (CUmemGenericAllocationHandle* handle, size_t size,                       \
                  const CUmemAllocationProp* prop, unsigned long long flags))              \
  X(cuMemRelease, (CUmemGenericAllocationHandle handle))                                    \
  X(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset,                                 \
               CUmemGenericAllocationHandle handle, unsigned long long flags))              \
  X(cuMemUnmap, (CUdeviceptr ptr, size_t size))                                             \
  X(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle* handle, void* osHandle, \
                                     CUmemAllocationHandleType shHandleType))               \
  X(cuIpcOpenMemHandle_v2, (CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags)) \
  X(cuIpcCloseMemHandle, (CUdeviceptr dptr))                                                \
  /* exports record what they share, so an import is charged once */   \
  X(cuIpcGetMemHandle, (CUipcMemHandle* pHandle, CUdeviceptr dptr))                         \
  X(cuIpcOpenMemHandle, (CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags))    \
  X(cuMemExportToShareableHandle, (void* shareableHandle, CUmemGenericAllocationHandle handle, \
                                   CUmemAllocationHandleType handleType,                    \
                                   unsigned long long flags))                               \
  X(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle* handle, void* addr))        \
  X(cuMulticastCreate, (CUmemGenericAllocationHandle* mcHandle,                             \
                        const CUmulticastObjectProp* prop))                                 \
  X(cuMemPoolExportToShareableHandle, (void* handle_out, CUmemoryPool pool,                \
                                       CUmemAllocationHandleType handleType,                \
                                       unsigned long long flags))                           \
  X(cuMemPoolImportFromShareableHandle, (CUmemoryPool* pool_out, void* handle,              \
                                         CUmemAllocationHandleType handleType,              \
                                         unsigned long long flags))                         \
  X(cuMemPoolImportPointer, (CUdeviceptr* ptr_out, CUmemoryPool pool,                       \
                             CUmemPoolPtrExportData* shareData))                            \
  /* graph memory nodes */                                                                  \
  X(cuGraphAddMemAllocNode, (CUgraphNode* phGraphNode, CUgraph hGraph,                      \
                             const CUgraphNode* dependencies, size_t numDependencies,       \
                             CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams))                       \
  X(cuGraphDestroyNode, (CUgraphNode hNode))                                                \
  X(cuGraphDestroy, (CUgraph hGraph))                                                       \
  X(cuGraphInstantiate, (CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, \
                         char* logBuffer, size_t bufferSize))                               \
  X(cuGraphInstantiate_v2, (CUgraphExec* phGraphExec, CUgraph hGraph,                       \
                            CUgraphNode* phErrorNode, char* logBuffer, size_t bufferSize))  \
  X(cuGraphInstantiateWithFlags, (CUgraphExec* phGraphExec, CUgraph hGraph,                 \
                                  unsigned long long flags))                                \
  X(cuGraphInstantiateWithParams, (CUgraphExec* phGraphExec, CUgraph hGraph,                \
                                   CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams))       \
  X(cuGraphInstantiateWithParams_ptsz, (CUgraphExec* phGraphExec, CUgraph hGraph,           \
                                        CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams))  \
  X(cuGraphExecDestroy, (CUgraphExec hGraphExec))                                           \
  X(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream))                              \
  X(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream))                         \
  X(cuDeviceGraphMemTrim, (CUdevice device))                                                \
  /* contexts (their overhead counts against the limit) */                                  \
  X(cuCtxCreate, (CUcontext* pctx, unsigned int flags, CUdevice dev))                       \
  X(cuCtxCreate_v2, (CUcontext* pctx, unsigned int flags, CUdevice dev))                    \
  X(cuCtxCreate_v3, (CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,     \
                     unsigned int flags, CUdevice dev))                                     \
  X(cuCtxCreate_v4, (CUcontext* pctx, CUctxCreateParams* ctxCreateParams,                   \
                     unsigned int flags, CUdevice dev))                                     \
  X(cuCtxDestroy_v2, (CUcontext ctx))                                                       \
  X(cuDevicePrimaryCtxRetain, (CUcontext* pctx, CUdevice dev))                              \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                           \
  X(cuDevicePrimaryCtxReset_v2, (CUdevice dev))                                             \
  /* synchronisation: pools give memory back, the throttle ends a burst */                  \
  X(cuCtxSynchronize, (void))                                                               \
  X(cuCtxSynchronize_v2, (CUcontext ctx))                                                   \
  X(cuStreamSynchronize, (CUstream hStream))                                                \
  X(cuStreamSynchronize_ptsz, (CUstream hStream))                                           \
  X(cuEventSynchronize, (CUevent hEvent))                                                   \
  /* launches (the compute limit) */                                                        \
  X(cuLaunchKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,            \
                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
                     void** kernelParams, void** extra))                                    \
  X(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,       \
                          unsigned int gridDimZ, unsigned int blockDimX,                    \
                          unsigned int blockDimY, unsigned int blockDimZ,                   \
                          unsigned int sharedMemBytes, CUstream hStream,                    \
                          void** kernelParams, void** extra))                               \
  X(cuLaunchKernelEx, (const CUlaunchConfig* config, CUfunction f, void** kernelParams,    \
                       void** extra))                                                       \
  X(cuLaunchKernelEx_ptsz, (const CUlaunchConfig* config, CUfunction f,                     \
                            void** kernelParams, void** extra))                             \
  X(cuLaunchCooperativeKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
                                unsigned int gridDimZ, unsigned int blockDimX,              \
                                unsigned int blockDimY, unsigned int blockDimZ,             \
                                unsigned int sharedMemBytes, CUstream hStream,              \
                                void** kernelParams))                                       \
  X(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gridDimX,                   \
                                     unsigned int gridDimY, unsigned int gridDimZ,          \
                                     unsigned int blockDimX, unsigned int blockDimY,        \
                                     unsigned int blockDimZ, unsigned int sharedMemBytes,   \
                                     CUstream hStream, void** kernelParams))                \
  X(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))                              \
  X(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream))

// Driver functions libvgpu.so calls for itself; looked up, never exported.
#define VGPU_CUDA_INTERNAL(X)                                                               \
  X(cuCtxGetCurrent, (CUcontext* pctx))                                                     \
  X(cuCtxGetDevice, (CUdevice* device))                                                     \
  X(cuDeviceGetCount, (int* count))                                                         \
  X(cuDeviceGet, (CUdevice* device, int ordinal))                                           \
  X(cuDeviceGetUuid_v2, (CUuuid* uuid, CUdevice dev))                                       \
  X(cuEventCreate, (CUevent* phEvent, unsigned int Flags))                                  \
  X(cuEventDestroy_v2, (CUevent hEvent))                                                    \
  /* what older drivers have instead (runtime.cpp: kFallbacks) */                            \
  X(cuDeviceGetUuid, (CUuuid* uuid, CUdevice dev))                                          \
  X(cuEventDestroy, (CUevent hEvent))                                                       \
  X(cuEventElapsedTime, (float* pMilliseconds, CUevent hStart, CUevent hEnd))               \
  X(cuEventRecord, (CUevent hEvent, CUstream hStream))                                      \
  X(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream))                                 \
  X(cuEventQuery, (CUevent hEvent))                                                         \
  X(cuEventElapsedTime_v2, (float* pMilliseconds, CUevent hStart, CUevent hEnd))           \
  X(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus* captureStatus))          \
  X(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus* captureStatus))     \
  X(cuMemGetAddressRange_v2, (CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr))        \
  X(cuArrayGetMemoryRequirements, (CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements,      \
                                   CUarray array, CUdevice device))                         \
  X(cuMipmappedArrayGetMemoryRequirements,                                                  \
    (CUDA_ARRAY_MEMORY_REQUIREMENTS* memoryRequirements, CUmipmappedArray mipmap,           \
     CUdevice device))                                                                      \
  X(cuMemGetAllocationPropertiesFromHandle, (CUmemAllocationProp* prop,                     \
                                             CUmemGenericAllocationHandle handle))          \
  X(cuDeviceGetMemPool, (CUmemoryPool* pool, CUdevice dev))                                 \
  X(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void* value))      \
  X(cuDeviceGetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void* value))

// What the driver's cuGetProcAddress hands out for a base name, as facts about the driver
// API (not a second list of hooks): every ABI variant of each function wrapped above, the
// CUDA version that introduced it (the PFN_<name>_v<version> typedefs of cudaTypedefs.h)
// and its per-thread-default-stream twin, or `none`. Variants that are not wrapped are
// listed too, so that an old caller gets the driver's own function, never a wrapper of
// another ABI. R(base, version, variant, twin).
#define VGPU_CUDA_PROC_ABI(R)                                                               \
  R(cuInit, 2000, cuInit, none)                                                             \
  R(cuGetProcAddress, 11030, cuGetProcAddress, none)                                        \
  R(cuGetProcAddress, 12000, cuGetProcAddress_v2, none)                                     \
  R(cuMemGetInfo, 2000, cuMemGetInfo, none)                                                 \
  R(cuMemGetInfo, 3020, cuMemGetInfo_v2, none)                                              \
  R(cuDeviceTotalMem, 2000, cuDeviceTotalMem, none)                                         \
  R(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2, none)                                      \
  R(cuMemAlloc, 2000, cuMemAlloc, none)                                                     \
  R(cuMemAlloc, 3020, cuMemAlloc_v2, none)                                                  \
  R(cuMemAllocPitch, 2000, cuMemAllocPitch, none)                                           \
  R(cuMemAllocPitch, 3020, cuMemAllocPitch_v2, none)                                        \
  R(cuMemAllocManaged, 6000, cuMemAllocManaged, none)                                       \
  R(cuModuleLoad, 2000, cuModuleLoad, none)                                                 \
  R(cuModuleLoadData, 2000, cuModuleLoadData, none)                                         \
  R(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx, none)                                     \
  R(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary, none)                               \
  R(cuModuleUnload, 2000, cuModuleUnload, none)                                             \
  R(cuLibraryLoadData, 12000, cuLibraryLoadData, none)                                      \
  R(cuLibraryLoadFromFile, 12000, cuLibraryLoadFromFile, none)                              \
  R(cuLibraryUnload, 12000, cuLibraryUnload, none)                                          \
  R(cuGreenCtxCreate, 12040, cuGreenCtxCreate, none)                                        \
  R(cuGreenCtxDestroy, 12040, cuGreenCtxDestroy, none)                                      \
  R(cuGraphAddNode, 12020, cuGraphAddNode, none)                                            \
  R(cuGraphAddNode, 12030, cuGraphAddNode_v2, none)                                         \
  R(cuGraphAddNode, 13040, cuGraphAddNode_v3, none)                                         \
  R(cuMemFree, 2000, cuMemFree, none)                                                       \
  R(cuMemFree, 3020, cuMemFree_v2, none)                                                    \
  R(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz)                          \
  R(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)  \
  R(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz)                             \
  R(cuMemPoolCreate, 11020, cuMemPoolCreate, none)                                          \
  R(cuMemPoolDestroy, 11020, cuMemPoolDestroy, none)                                        \
  R(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo, none)                                          \
  R(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute, none)                              \
  R(cuArrayCreate, 2000, cuArrayCreate, none)                                               \
  R(cuArrayCreate, 3020, cuArrayCreate_v2, none)                                            \
  R(cuArray3DCreate, 2000, cuArray3DCreate, none)                                           \
  R(cuArray3DCreate, 3020, cuArray3DCreate_v2, none)                                        \
  R(cuArrayDestroy, 2000, cuArrayDestroy, none)                                             \
  R(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate, none)                             \
  R(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy, none)                           \
  R(cuMemCreate, 10020, cuMemCreate, none)                                                  \
  R(cuMemRelease, 10020, cuMemRelease, none)                                                \
  R(cuMemMap, 10020, cuMemMap, none)                                                        \
  R(cuMemUnmap, 10020, cuMemUnmap, none)                                                    \
  R(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle, none)            \
  R(cuIpcOpenMemHandle, 4010, cuIpcOpenMemHandle, none)                                     \
  R(cuIpcOpenMemHandle, 11000, cuIpcOpenMemHandle_v2, none)                                 \
  R(cuIpcCloseMemHandle, 4010, cuIpcCloseMemHandle, none)                                   \
  R(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle, none)                                       \
  R(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle, none)                \
  R(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle, none)                  \
  R(cuMulticastCreate, 12010, cuMulticastCreate, none)                                      \
  R(cuMemPoolExportToShareableHandle, 11020, cuMemPoolExportToShareableHandle, none)        \
  R(cuMemPoolImportFromShareableHandle, 11020, cuMemPoolImportFromShareableHandle, none)    \
  R(cuMemPoolImportPointer, 11020, cuMemPoolImportPointer, none)                            \
  R(cuGraphAddMemAllocNode, 11040, cuGraphAddMemAllocNode, none)                            \
  R(cuGraphDestroyNode, 10000, cuGraphDestroyNode, none)                                    \
  R(cuGraphDestroy, 10000, cuGraphDestroy, none)                                            \
  R(cuGraphInstantiate, 10000, cuGraphInstantiate, none)                                    \
  R(cuGraphInstantiate, 11000, cuGraphInstantiate_v2, none)                                 \
  R(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags, none)                           \
  R(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags, none)                  \
  R(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams,                      \
    cuGraphInstantiateWithParams_ptsz)                                                      \
  R(cuGraphExecDestroy, 10000, cuGraphExecDestroy, none)                                    \
  R(cuGraphUpload, 11010, cuGraphUpload, cuGraphUpload_ptsz)                                \
  R(cuDeviceGraphMemTrim, 11040, cuDeviceGraphMemTrim, none)                                \
  R(cuCtxCreate, 2000, cuCtxCreate, none)                                                   \
  R(cuCtxCreate, 3020, cuCtxCreate_v2, none)                                                \
  R(cuCtxCreate, 11040, cuCtxCreate_v3, none)                                               \
  R(cuCtxCreate, 12050, cuCtxCreate_v4, none)                                               \
  R(cuCtxDestroy, 2000, cuCtxDestroy, none)                                                 \
  R(cuCtxDestroy, 4000, cuCtxDestroy_v2, none)                                              \
  R(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, none)                         \
  R(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease, none)                       \
  R(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, none)                   \
  R(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset, none)                           \
  R(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2, none)                       \
  R(cuCtxSynchronize, 2000, cuCtxSynchronize, none)                                         \
  R(cuCtxSynchronize, 13000, cuCtxSynchronize_v2, none)                                     \
  R(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz)               \
  R(cuEventSynchronize, 2000, cuEventSynchronize, none)                                     \
  R(cuLaunchKernel, 4000, cuLaunchKernel, cuLaunchKernel_ptsz)                              \
  R(cuLaunchKernelEx, 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz)                       \
  R(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel,                             \
    cuLaunchCooperativeKernel_ptsz)                                                         \
  R(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz)

#define VGPU_NVML_HOOKS(X)                                                                  \
  X(nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t* memory))                   \
  X(nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t* memory))

#define VGPU_NVML_INTERNAL(X)                                                               \
  X(nvmlInit_v2, ())                                                                        \
  X(nvmlDeviceGetHandleByUUID, (const char* uuid, nvmlDevice_t* device))                    \
  X(nvmlDeviceGetUUID, (nvmlDevice_t device, char* uuid, unsigned int length))              \
  X(nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t device, unsigned int* infoCount, \
                                              nvmlProcessInfo_t* infos))                    \
  /* what R470 has instead (the same layout) */                                             \
  X(nvmlDeviceGetComputeRunningProcesses_v2, (nvmlDevice_t device, unsigned int* infoCount, \
                                              nvmlProcessInfo_t* infos))                    \
  X(nvmlDeviceGetProcessUtilization, (nvmlDevice_t device,                                  \
                                      nvmlProcessUtilizationSample_t* utilization,          \
                                      unsigned int* processSamplesCount,                    \
                                      unsigned long long lastSeenTimeStamp))
// clang-format on
