// Every driver path that takes device memory: check-and-add against the container's
// limit before the real call (so a refused request allocates nothing), give back on
// failure, and remember what was charged so the matching free gives exactly that back.

#include <string.h>

#include "runtime.h"

using namespace vgpu;

namespace {

// Charges `bytes` on `dev`, runs `alloc`, and undoes the charge if the driver fails.
template <class F>
CUresult charged(int dev, uint64_t bytes, F&& alloc) {
  if (dev < 0) return alloc();  // no context: the driver reports the error itself
  if (CUresult rc = reserveMemory(dev, bytes); rc != CUDA_SUCCESS) return rc;
  CUresult rc = alloc();
  if (rc != CUDA_SUCCESS) releaseMemory(dev, bytes);
  return rc;
}

// Adjusts a charge made from an estimate to the size the driver really used. On
// refusal the object is destroyed with `undo` and the whole charge given back.
template <class U>
CUresult trueUp(int dev, uint64_t estimate, uint64_t actual, U&& undo) {
  if (actual > estimate) {
    if (reserveMemory(dev, actual - estimate) != CUDA_SUCCESS) {
      undo();
      releaseMemory(dev, estimate);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } else if (actual < estimate) {
    releaseMemory(dev, estimate - actual);
  }
  return CUDA_SUCCESS;
}

// Gives back what `id` was charged once the driver has freed it; keeps the record if the
// driver refused (the memory is still there).
template <class F>
CUresult freed(Kind kind, uintptr_t id, F&& free) {
  Record rec;
  bool known = ledger::take(kind, id, &rec);
  CUresult rc = free();
  if (!known) return rc;
  if (rc == CUDA_SUCCESS) {
    releaseMemory(rec.dev, rec.bytes);
  } else {
    ledger::put(kind, id, rec);
  }
  return rc;
}

// A device pointer allocated on the current context's device, charged and remembered.
template <class Ptr, class F>
CUresult pointerAlloc(Ptr* dptr, size_t bytes, F&& alloc) {
  int dev = currentDevice();
  CUresult rc = charged(dev, bytes, alloc);
  if (rc == CUDA_SUCCESS && dev >= 0) ledger::put(Kind::kPointer, *dptr, {dev, bytes, 0});
  return rc;
}

size_t formatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 4;  // packed and compressed formats: trued up from the driver's figure
  }
}

uint64_t arrayEstimate(size_t w, size_t h, size_t d, CUarray_format format, unsigned channels) {
  return static_cast<uint64_t>(w) * (h ? h : 1) * (d ? d : 1) * formatBytes(format) * (channels ? channels : 1);
}

// Creates an array from an estimate, then trues up to the driver's memory requirement.
template <class Create, class Requirement, class Destroy>
CUresult arrayAlloc(Kind kind, uint64_t estimate, Create&& create, Requirement&& requirement, Destroy&& destroy,
                    uintptr_t* id) {
  int dev = currentDevice();
  CUresult rc = charged(dev, estimate, create);
  if (rc != CUDA_SUCCESS || dev < 0) return rc;
  uint64_t actual = estimate;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req;
  memset(&req, 0, sizeof req);
  if (requirement(&req, dev) == CUDA_SUCCESS && req.size != 0) actual = req.size;
  if (CUresult t = trueUp(dev, estimate, actual, destroy); t != CUDA_SUCCESS) return t;
  ledger::put(kind, *id, {dev, actual, 0});
  return CUDA_SUCCESS;
}

// Context overhead: what the driver's used memory grew by when this process created its
// first context on the device, read through NVML (cuMemGetInfo needs a context to exist).
std::atomic<int64_t> gContextOverhead[kLimiterMaxDevices];
std::atomic<int> gPrimaryRefs[kLimiterMaxDevices];
std::atomic<CUcontext> gPrimaryContext[kLimiterMaxDevices];  // as cuDevicePrimaryCtxRetain gave it

bool nvmlDeviceUsed(int dev, uint64_t* used) {
  if (ensureNvml() != NVML_SUCCESS || real::nvmlInit_v2 == nullptr || real::nvmlDeviceGetHandleByUUID == nullptr ||
      real::nvmlDeviceGetMemoryInfo == nullptr) {
    return false;
  }
  publishDevice(dev);
  const char* uuid = runtime().uuids[dev];
  nvmlDevice_t handle = nullptr;
  nvmlMemory_t mem;
  if (uuid[0] == '\0' || real::nvmlInit_v2() != NVML_SUCCESS ||
      real::nvmlDeviceGetHandleByUUID(uuid, &handle) != NVML_SUCCESS ||
      real::nvmlDeviceGetMemoryInfo(handle, &mem) != NVML_SUCCESS) {
    return false;
  }
  *used = mem.used;
  return true;
}

// Primary contexts are recorded under these ids, others under their handle.
constexpr uintptr_t kPrimaryContextId = uintptr_t{1} << 63;

// Charges the context overhead; a context that does not fit is destroyed again (`undo`).
template <class F, class U>
CUresult createContext(CUcontext* pctx, CUdevice dev, F&& create, U&& undo, bool primary = false) {
  int d = static_cast<int>(dev);
  if (d < 0 || d >= kLimiterMaxDevices) return create();
  vgpu_region_device* shared = &runtime().region->devices[d];
  int64_t overhead = gContextOverhead[d].load();
  if (overhead < 0) {  // another process of the container may have measured it already
    uint64_t published = __atomic_load_n(&shared->context_overhead, __ATOMIC_RELAXED);
    if (published > 0) gContextOverhead[d].store(overhead = static_cast<int64_t>(published));
  }
  uint64_t before = 0;
  uint64_t containerBefore = vgpu_region_used(runtime().region, d);
  bool measure = overhead < 0 && nvmlDeviceUsed(d, &before);
  uint64_t charge = overhead > 0 ? static_cast<uint64_t>(overhead) : 0;
  CUresult rc = charged(d, charge, create);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t after = 0;
  if (measure && nvmlDeviceUsed(d, &after)) {
    uint64_t grew = after > before ? after - before : 0;
    if (grew > (2ull << 30)) grew = 0;  // not a plausible overhead: someone else allocated
    gContextOverhead[d].store(static_cast<int64_t>(grew));
    // Undisturbed by the rest of the container: good enough for every later context.
    if (grew > 0 && vgpu_region_used(runtime().region, d) == containerBefore) {
      __atomic_store_n(&shared->context_overhead, grew, __ATOMIC_RELAXED);
    }
    if (CUresult t = trueUp(d, charge, grew, undo); t != CUDA_SUCCESS) return t;
    charge = grew;
  }
  if (primary) {
    ledger::put(Kind::kContext, kPrimaryContextId + static_cast<uintptr_t>(d), {d, charge, 0});
  } else if (pctx != nullptr) {
    ledger::put(Kind::kContext, reinterpret_cast<uintptr_t>(*pctx), {d, charge, 0});
  }
  return CUDA_SUCCESS;
}

__attribute__((constructor)) void initOverheads() {
  for (auto& o : gContextOverhead) o.store(-1);
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  VGPU_ENTER_CUDA(cuMemAlloc_v2);
  return pointerAlloc(dptr, bytesize, [&] {
    CUresult r = real::cuMemAlloc_v2(dptr, bytesize);
    // The limit allows it but the device is full: managed memory can page to the host.
    if (r == CUDA_ERROR_OUT_OF_MEMORY && runtime().oversubscribe() && real::cuMemAllocManaged != nullptr) {
      r = real::cuMemAllocManaged(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS) logf(kLogInfo, "%zu bytes oversubscribed as managed memory", bytesize);
    }
    return r;
  });
}

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  VGPU_ENTER_CUDA(cuMemAlloc);
  return pointerAlloc(dptr, bytesize, [&] { return real::cuMemAlloc(dptr, bytesize); });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  VGPU_ENTER_CUDA(cuMemAllocManaged);
  return pointerAlloc(dptr, bytesize, [&] { return real::cuMemAllocManaged(dptr, bytesize, flags); });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  VGPU_ENTER_CUDA(cuMemAllocPitch_v2);
  int dev = currentDevice();
  // The pitch is the driver's choice; charge a typical one, then the real one.
  uint64_t estimate = ((static_cast<uint64_t>(WidthInBytes) + 511) & ~uint64_t{511}) * Height;
  CUresult rc = charged(dev, estimate,
                        [&] { return real::cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); });
  if (rc != CUDA_SUCCESS || dev < 0) return rc;
  uint64_t actual = static_cast<uint64_t>(*pPitch) * Height;
  CUdeviceptr p = *dptr;
  rc = trueUp(dev, estimate, actual, [&] { real::cuMemFree_v2(p); });
  if (rc == CUDA_SUCCESS) ledger::put(Kind::kPointer, p, {dev, actual, 0});
  return rc;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_ENTER_CUDA(cuMemFree_v2);
  return freed(Kind::kPointer, dptr, [&] { return real::cuMemFree_v2(dptr); });
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  VGPU_ENTER_CUDA(cuMemFree);
  return freed(Kind::kPointer, dptr, [&] { return real::cuMemFree(dptr); });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocAsync);
  return pointerAlloc(dptr, bytesize, [&] { return real::cuMemAllocAsync(dptr, bytesize, hStream); });
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocAsync_ptsz);
  return pointerAlloc(dptr, bytesize, [&] { return real::cuMemAllocAsync_ptsz(dptr, bytesize, hStream); });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync);
  return pointerAlloc(dptr, bytesize, [&] { return real::cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream); });
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync_ptsz);
  return pointerAlloc(dptr, bytesize,
                      [&] { return real::cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream); });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemFreeAsync);
  return freed(Kind::kPointer, dptr, [&] { return real::cuMemFreeAsync(dptr, hStream); });
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_ENTER_CUDA(cuMemFreeAsync_ptsz);
  return freed(Kind::kPointer, dptr, [&] { return real::cuMemFreeAsync_ptsz(dptr, hStream); });
}

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  VGPU_ENTER_CUDA(cuArrayCreate_v2);
  if (desc == nullptr || pHandle == nullptr) return real::cuArrayCreate_v2(pHandle, desc);
  uint64_t estimate = arrayEstimate(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  uintptr_t id = 0;
  return arrayAlloc(
      Kind::kArray, estimate,
      [&] {
        CUresult r = real::cuArrayCreate_v2(pHandle, desc);
        id = reinterpret_cast<uintptr_t>(*pHandle);
        return r;
      },
      [&](CUDA_ARRAY_MEMORY_REQUIREMENTS* req, int dev) {
        return real::cuArrayGetMemoryRequirements ? real::cuArrayGetMemoryRequirements(req, *pHandle, dev)
                                                  : CUDA_ERROR_NOT_SUPPORTED;
      },
      [&] { real::cuArrayDestroy(*pHandle); }, &id);
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  VGPU_ENTER_CUDA(cuArray3DCreate_v2);
  if (desc == nullptr || pHandle == nullptr) return real::cuArray3DCreate_v2(pHandle, desc);
  uint64_t estimate = arrayEstimate(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
  uintptr_t id = 0;
  return arrayAlloc(
      Kind::kArray, estimate,
      [&] {
        CUresult r = real::cuArray3DCreate_v2(pHandle, desc);
        id = reinterpret_cast<uintptr_t>(*pHandle);
        return r;
      },
      [&](CUDA_ARRAY_MEMORY_REQUIREMENTS* req, int dev) {
        return real::cuArrayGetMemoryRequirements ? real::cuArrayGetMemoryRequirements(req, *pHandle, dev)
                                                  : CUDA_ERROR_NOT_SUPPORTED;
      },
      [&] { real::cuArrayDestroy(*pHandle); }, &id);
}

CUresult cuArrayDestroy(CUarray hArray) {
  VGPU_ENTER_CUDA(cuArrayDestroy);
  return freed(Kind::kArray, reinterpret_cast<uintptr_t>(hArray), [&] { return real::cuArrayDestroy(hArray); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int numMipmapLevels) {
  VGPU_ENTER_CUDA(cuMipmappedArrayCreate);
  if (desc == nullptr || pHandle == nullptr) {
    return real::cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
  }
  // Each level is a quarter (2D) of the one above: the total is below 4/3 of level 0.
  uint64_t base = arrayEstimate(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
  uint64_t estimate = numMipmapLevels > 1 ? base + base / 3 : base;
  uintptr_t id = 0;
  return arrayAlloc(
      Kind::kMipmap, estimate,
      [&] {
        CUresult r = real::cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
        id = reinterpret_cast<uintptr_t>(*pHandle);
        return r;
      },
      [&](CUDA_ARRAY_MEMORY_REQUIREMENTS* req, int dev) {
        return real::cuMipmappedArrayGetMemoryRequirements
                   ? real::cuMipmappedArrayGetMemoryRequirements(req, *pHandle, dev)
                   : CUDA_ERROR_NOT_SUPPORTED;
      },
      [&] { real::cuMipmappedArrayDestroy(*pHandle); }, &id);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  VGPU_ENTER_CUDA(cuMipmappedArrayDestroy);
  return freed(Kind::kMipmap, reinterpret_cast<uintptr_t>(hMipmappedArray),
               [&] { return real::cuMipmappedArrayDestroy(hMipmappedArray); });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemCreate);
  if (prop == nullptr || handle == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id < 0 || prop->location.id >= kLimiterMaxDevices) {
    return real::cuMemCreate(handle, size, prop, flags);  // host memory, or the driver's error
  }
  int dev = prop->location.id;
  CUresult rc = charged(dev, size, [&] { return real::cuMemCreate(handle, size, prop, flags); });
  if (rc == CUDA_SUCCESS) ledger::put(Kind::kVmmHandle, *handle, {dev, size, 0});
  return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VGPU_ENTER_CUDA(cuMemRelease);
  Record rec;
  Kind kind = ledger::peek(Kind::kImportedHandle, handle, &rec) ? Kind::kImportedHandle : Kind::kVmmHandle;
  return freed(kind, handle, [&] { return real::cuMemRelease(handle); });
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  VGPU_ENTER_CUDA(cuMemImportFromShareableHandle);
  CUresult rc = real::cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
  if (rc != CUDA_SUCCESS || handle == nullptr) return rc;
  // The size is only known when the handle is mapped; charge it then (cuMemMap).
  int dev = currentDevice();
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  if (real::cuMemGetAllocationPropertiesFromHandle != nullptr &&
      real::cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS) {
    dev = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop.location.id : -1;
  }
  if (dev >= 0 && dev < kLimiterMaxDevices) ledger::put(Kind::kImportedHandle, *handle, {dev, 0, 0});
  return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemMap);
  Record rec;
  if (!ledger::peek(Kind::kImportedHandle, handle, &rec) || rec.bytes != 0) {
    return real::cuMemMap(ptr, size, offset, handle, flags);  // own handles are already charged
  }
  CUresult rc = charged(rec.dev, size, [&] { return real::cuMemMap(ptr, size, offset, handle, flags); });
  if (rc == CUDA_SUCCESS) ledger::setBytes(Kind::kImportedHandle, handle, size);
  return rc;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  VGPU_ENTER_CUDA(cuIpcOpenMemHandle_v2);
  CUresult rc = real::cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
  int dev = currentDevice();
  if (rc != CUDA_SUCCESS || dev < 0 || real::cuMemGetAddressRange_v2 == nullptr) return rc;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (real::cuMemGetAddressRange_v2(&base, &size, *pdptr) != CUDA_SUCCESS) return rc;
  // The size is known only once it is open: close it again if it does not fit.
  if (reserveMemory(dev, size) != CUDA_SUCCESS) {
    real::cuIpcCloseMemHandle(*pdptr);
    *pdptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ledger::put(Kind::kIpc, *pdptr, {dev, size, 0});
  return rc;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  VGPU_ENTER_CUDA(cuIpcCloseMemHandle);
  return freed(Kind::kIpc, dptr, [&] { return real::cuIpcCloseMemHandle(dptr); });
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                                size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  VGPU_ENTER_CUDA(cuGraphAddMemAllocNode);
  if (nodeParams == nullptr || phGraphNode == nullptr) {
    return real::cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  }
  int dev = nodeParams->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? nodeParams->poolProps.location.id
                                                                               : currentDevice();
  if (dev >= kLimiterMaxDevices) dev = -1;
  // Charged while the node exists: the graph may hold the memory whenever it runs.
  CUresult rc = charged(dev, nodeParams->bytesize, [&] {
    return real::cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  });
  if (rc == CUDA_SUCCESS && dev >= 0) {
    ledger::put(Kind::kGraphNode, reinterpret_cast<uintptr_t>(*phGraphNode),
                {dev, nodeParams->bytesize, reinterpret_cast<uintptr_t>(hGraph)});
  }
  return rc;
}

CUresult cuGraphDestroyNode(CUgraphNode hNode) {
  VGPU_ENTER_CUDA(cuGraphDestroyNode);
  return freed(Kind::kGraphNode, reinterpret_cast<uintptr_t>(hNode), [&] { return real::cuGraphDestroyNode(hNode); });
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  VGPU_ENTER_CUDA(cuGraphDestroy);
  CUresult rc = real::cuGraphDestroy(hGraph);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t bytes[kLimiterMaxDevices] = {};
  ledger::takeOwned(Kind::kGraphNode, reinterpret_cast<uintptr_t>(hGraph), bytes);
  for (int d = 0; d < kLimiterMaxDevices; ++d) releaseMemory(d, bytes[d]);
  return rc;
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  VGPU_ENTER_CUDA(cuCtxCreate);
  return createContext(
      pctx, dev, [&] { return real::cuCtxCreate(pctx, flags, dev); }, [&] { real::cuCtxDestroy_v2(*pctx); });
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  VGPU_ENTER_CUDA(cuCtxCreate_v2);
  return createContext(
      pctx, dev, [&] { return real::cuCtxCreate_v2(pctx, flags, dev); }, [&] { real::cuCtxDestroy_v2(*pctx); });
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                        CUdevice dev) {
  VGPU_ENTER_CUDA(cuCtxCreate_v3);
  return createContext(
      pctx, dev, [&] { return real::cuCtxCreate_v3(pctx, paramsArray, numParams, flags, dev); },
      [&] { real::cuCtxDestroy_v2(*pctx); });
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  VGPU_ENTER_CUDA(cuCtxCreate_v4);
  return createContext(
      pctx, dev, [&] { return real::cuCtxCreate_v4(pctx, params, flags, dev); }, [&] { real::cuCtxDestroy_v2(*pctx); });
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  VGPU_ENTER_CUDA(cuCtxDestroy_v2);
  CUresult rc = freed(Kind::kContext, reinterpret_cast<uintptr_t>(ctx), [&] { return real::cuCtxDestroy_v2(ctx); });
  if (rc == CUDA_SUCCESS) throttle::forget(ctx);
  return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxRetain);
  int d = static_cast<int>(dev);
  if (d < 0 || d >= kLimiterMaxDevices) return real::cuDevicePrimaryCtxRetain(pctx, dev);
  // The overhead is charged on the first retain and given back on the last release.
  if (gPrimaryRefs[d].load() > 0) {
    CUresult rc = real::cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS) {
      gPrimaryRefs[d].fetch_add(1);
      if (pctx != nullptr) gPrimaryContext[d].store(*pctx);
    }
    return rc;
  }
  CUcontext ctx = nullptr;
  CUresult rc = createContext(
      &ctx, dev, [&] { return real::cuDevicePrimaryCtxRetain(&ctx, dev); },
      [&] { real::cuDevicePrimaryCtxRelease_v2(dev); }, true);
  if (rc == CUDA_SUCCESS) {
    if (pctx != nullptr) *pctx = ctx;
    gPrimaryContext[d].store(ctx);
    gPrimaryRefs[d].fetch_add(1);
  }
  return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxRelease_v2);
  int d = static_cast<int>(dev);
  CUresult rc = real::cuDevicePrimaryCtxRelease_v2(dev);
  if (rc != CUDA_SUCCESS || d < 0 || d >= kLimiterMaxDevices) return rc;
  if (gPrimaryRefs[d].fetch_sub(1) == 1) {
    // The primary context is gone, and with it everything allocated in it.
    uint64_t bytes = 0;
    ledger::takeDevice(d, &bytes);
    Record ctxRec;
    if (ledger::take(Kind::kContext, kPrimaryContextId + static_cast<uintptr_t>(d), &ctxRec)) {
      bytes += ctxRec.bytes;
    }
    releaseMemory(d, bytes);
    if (CUcontext ctx = gPrimaryContext[d].load()) throttle::forget(ctx);
  }
  return rc;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxReset_v2);
  int d = static_cast<int>(dev);
  CUresult rc = real::cuDevicePrimaryCtxReset_v2(dev);
  if (rc != CUDA_SUCCESS || d < 0 || d >= kLimiterMaxDevices) return rc;
  uint64_t bytes = 0;
  ledger::takeDevice(d, &bytes);  // the reset freed every allocation of the context
  releaseMemory(d, bytes);
  if (CUcontext ctx = gPrimaryContext[d].load()) throttle::forget(ctx);  // and its events
  return rc;
}

}  // extern "C"
