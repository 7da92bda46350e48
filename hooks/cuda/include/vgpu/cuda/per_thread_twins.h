#pragma once
/* Which driver functions have a per-thread default stream twin, and its name: `_ptsz` for
 * functions that take a stream, `_ptds` for the synchronous copies and memsets. A program
 * built with per-thread default streams (nvcc --default-stream per-thread) calls the twin,
 * and so does cuGetProcAddress given CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 *
 * The list is every pair cuda.h 12.6, 12.9, 13.0 or 13.5 routes through its per-thread renaming, so
 * that a test can ask "the fake exports f: does it export f's twin too?" without a
 * toolkit. Names only: most of these functions are not declared in driver_api.h. The
 * cross-check (tests/unit/hooks/cuda_decl_check.cpp) fails when a real cuda.h names a pair
 * missing here.
 *
 * X(function, twin) */

// clang-format off
#define VGPU_CU_PER_THREAD_TWINS(X) \
  X(cuEventRecord, cuEventRecord_ptsz) \
  X(cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz) \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz) \
  X(cuGraphLaunch, cuGraphLaunch_ptsz) \
  X(cuGraphUpload, cuGraphUpload_ptsz) \
  X(cuGraphicsMapResources, cuGraphicsMapResources_ptsz) \
  X(cuGraphicsUnmapResources, cuGraphicsUnmapResources_ptsz) \
  X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz) \
  X(cuLaunchHostFunc, cuLaunchHostFunc_ptsz) \
  X(cuLaunchKernel, cuLaunchKernel_ptsz) \
  X(cuLaunchKernelEx, cuLaunchKernelEx_ptsz) \
  X(cuMemAllocAsync, cuMemAllocAsync_ptsz) \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz) \
  X(cuMemBatchDecompressAsync, cuMemBatchDecompressAsync_ptsz) \
  X(cuMemDiscardAndPrefetchBatchAsync, cuMemDiscardAndPrefetchBatchAsync_ptsz) \
  X(cuMemDiscardBatchAsync, cuMemDiscardBatchAsync_ptsz) \
  X(cuMemFreeAsync, cuMemFreeAsync_ptsz) \
  X(cuMemMapArrayAsync, cuMemMapArrayAsync_ptsz) \
  X(cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz) \
  X(cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz) \
  X(cuMemPrefetchBatchAsync, cuMemPrefetchBatchAsync_ptsz) \
  X(cuMemcpy, cuMemcpy_ptds) \
  X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz) \
  X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds) \
  X(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds) \
  X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz) \
  X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync_ptsz) \
  X(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz) \
  X(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds) \
  X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz) \
  X(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds) \
  X(cuMemcpyAsync, cuMemcpyAsync_ptsz) \
  X(cuMemcpyAtoA_v2, cuMemcpyAtoA_v2_ptds) \
  X(cuMemcpyAtoD_v2, cuMemcpyAtoD_v2_ptds) \
  X(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2_ptsz) \
  X(cuMemcpyAtoH_v2, cuMemcpyAtoH_v2_ptds) \
  X(cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz) \
  X(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz) \
  X(cuMemcpyDtoA_v2, cuMemcpyDtoA_v2_ptds) \
  X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz) \
  X(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds) \
  X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz) \
  X(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds) \
  X(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2_ptsz) \
  X(cuMemcpyHtoA_v2, cuMemcpyHtoA_v2_ptds) \
  X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz) \
  X(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds) \
  X(cuMemcpyPeer, cuMemcpyPeer_ptds) \
  X(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz) \
  X(cuMemsetD16Async, cuMemsetD16Async_ptsz) \
  X(cuMemsetD16_v2, cuMemsetD16_v2_ptds) \
  X(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz) \
  X(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds) \
  X(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz) \
  X(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds) \
  X(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz) \
  X(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds) \
  X(cuMemsetD32Async, cuMemsetD32Async_ptsz) \
  X(cuMemsetD32_v2, cuMemsetD32_v2_ptds) \
  X(cuMemsetD8Async, cuMemsetD8Async_ptsz) \
  X(cuMemsetD8_v2, cuMemsetD8_v2_ptds) \
  X(cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync_ptsz) \
  X(cuStreamAddCallback, cuStreamAddCallback_ptsz) \
  X(cuStreamAttachMemAsync, cuStreamAttachMemAsync_ptsz) \
  X(cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz) \
  X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph_ptsz) \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz) \
  X(cuStreamCopyAttributes, cuStreamCopyAttributes_ptsz) \
  X(cuStreamEndCapture, cuStreamEndCapture_ptsz) \
  X(cuStreamGetAttribute, cuStreamGetAttribute_ptsz) \
  X(cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz) \
  X(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz) \
  X(cuStreamGetCtx, cuStreamGetCtx_ptsz) \
  X(cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz) \
  X(cuStreamGetDevice, cuStreamGetDevice_ptsz) \
  X(cuStreamGetFlags, cuStreamGetFlags_ptsz) \
  X(cuStreamGetId, cuStreamGetId_ptsz) \
  X(cuStreamGetPriority, cuStreamGetPriority_ptsz) \
  X(cuStreamIsCapturing, cuStreamIsCapturing_ptsz) \
  X(cuStreamQuery, cuStreamQuery_ptsz) \
  X(cuStreamSetAttribute, cuStreamSetAttribute_ptsz) \
  X(cuStreamSynchronize, cuStreamSynchronize_ptsz) \
  X(cuStreamUpdateCaptureDependencies, cuStreamUpdateCaptureDependencies_ptsz) \
  X(cuStreamUpdateCaptureDependencies_v2, cuStreamUpdateCaptureDependencies_v2_ptsz) \
  X(cuStreamWaitEvent, cuStreamWaitEvent_ptsz) \
  X(cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz) \
  X(cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz) \
  X(cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz) \
  X(cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz) \
  X(cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync_ptsz) \
  /* new in cuda.h 13.5 (the newest header, checked in CI) */ \
  X(cuFabricCpyBatchAsync, cuFabricCpyBatchAsync_ptsz) \
  X(cuLaunchHostFunc_v2, cuLaunchHostFunc_v2_ptsz) \
  X(cuMemcpy3DWithAttributesAsync, cuMemcpy3DWithAttributesAsync_ptsz) \
  X(cuMemcpyWithAttributesAsync, cuMemcpyWithAttributesAsync_ptsz) \
  X(cuStreamBeginCaptureToCig, cuStreamBeginCaptureToCig_ptsz) \
  X(cuStreamBeginRecaptureToGraph, cuStreamBeginRecaptureToGraph_ptsz) \
  X(cuStreamEndCaptureToCig, cuStreamEndCaptureToCig_ptsz) \
  X(cuStreamGetDevResource, cuStreamGetDevResource_ptsz)
// clang-format on
