// Every driver path that takes device memory: check-and-add against the container's
// limit before the real call (so a refused request allocates nothing), give back on
// failure, and remember what was charged, and in which context, so that the matching free,
// the context's destruction or a handle's last unmapping gives exactly that back.
// Stream-ordered pools and graph memory are charged for what they hold (pools.cpp).

#include <string.h>
#include <unistd.h>

#include "monitor.h"
#include "nvml_view.h"
#include "runtime.h"
#include "share.h"

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

uintptr_t key(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

// Gives back what `id` was charged once the driver has freed it; keeps the record if the
// driver refused (the memory is still there).
template <class F>
CUresult freed(Kind kind, uintptr_t id, F&& free) {
  Record rec;
  bool known = ledger::take(kind, id, &rec);
  CUresult rc = free();
  return known ? settleFree(kind, id, rec, rc) : rc;
}

// cuMemFree of a pointer: an ordinary allocation gives its charge back; a pool allocation
// goes back to its pool, which stays charged for it until it gives the memory back.
template <class F>
CUresult freePointer(CUdeviceptr dptr, F&& free) {
  // Not initialised: ledger::take either fills it or says there was no record (every free
  // runs this, and the defaults cost a few stores for nothing).
  union Taken {
    Taken() {}
    Record rec;
  } taken;
  Record& rec = taken.rec;
  if (ledger::take(Kind::kPointer, dptr, &rec)) return settleFree(Kind::kPointer, dptr, rec, free());
  bool pooled = ledger::take(Kind::kPoolPointer, dptr, &rec);
  CUresult rc = free();
  if (pooled) {
    if (rc != CUDA_SUCCESS) {
      ledger::put(Kind::kPoolPointer, dptr, rec);
    } else if ((rec.flags & kReleased) != 0) {
      pools::freedFromDestroyed(reinterpret_cast<CUmemoryPool>(rec.owner), rec.bytes);
    }
  } else if (rc == CUDA_SUCCESS && shares::any()) {
    shares::pointerFreed(dptr);  // exported with cuIpcGetMemHandle: its share entry pays for it
  }
  return rc;
}

// A device pointer allocated in the current context, charged and remembered.
template <class Ptr, class F>
CUresult pointerAlloc(Ptr* dptr, size_t bytes, F&& alloc) {
  uint32_t flags = 0;
  Ctx c;
  if (!currentContext(&c)) return alloc(&flags);  // the driver reports the missing context
  CUresult rc = charged(c.dev, bytes, [&] { return alloc(&flags); });
  if (rc == CUDA_SUCCESS) {
    Record rec;
    rec.dev = c.dev;
    rec.flags = flags;
    rec.bytes = bytes;
    rec.ctx = key(c.ctx);
    ledger::put(Kind::kPointer, *dptr, rec);
  }
  return rc;
}

// cuMemAllocPitch_v2 and its 32-bit v1: the pitch is the driver's choice;
// charge a typical one, then the real one.
template <class Ptr, class Size, class A, class F>
CUresult pitchAlloc(Ptr* dptr, Size* pPitch, Size width, Size height, A&& alloc, F&& free) {
  Ctx c;
  if (!currentContext(&c)) return alloc();
  uint64_t estimate = ((static_cast<uint64_t>(width) + 511) & ~uint64_t{511}) * height;
  CUresult rc = charged(c.dev, estimate, alloc);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t actual = static_cast<uint64_t>(*pPitch) * height;
  CUdeviceptr p = *dptr;
  rc = trueUp(c.dev, estimate, actual, [&] { free(p); });
  if (rc == CUDA_SUCCESS) {
    Record rec;
    rec.dev = c.dev;
    rec.bytes = actual;
    rec.ctx = key(c.ctx);
    ledger::put(Kind::kPointer, p, rec);
  }
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
  Ctx c;
  if (!currentContext(&c)) return create();
  CUresult rc = charged(c.dev, estimate, create);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t actual = estimate;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req;
  memset(&req, 0, sizeof req);
  if (requirement(&req, c.dev) == CUDA_SUCCESS && req.size != 0) actual = req.size;
  if (CUresult t = trueUp(c.dev, estimate, actual, destroy); t != CUDA_SUCCESS) return t;
  Record rec;
  rec.dev = c.dev;
  rec.bytes = actual;
  rec.ctx = key(c.ctx);
  ledger::put(kind, *id, rec);
  return CUDA_SUCCESS;
}

// ---- virtual memory: a handle's memory is charged until it is released and unmapped ----

// The handle's record, whichever kind it is.
bool findHandle(CUmemGenericAllocationHandle h, Kind* kind, Record* rec) {
  if (ledger::peek(Kind::kVmmHandle, h, rec)) {
    *kind = Kind::kVmmHandle;
    return true;
  }
  if (ledger::peek(Kind::kImportedHandle, h, rec)) {
    *kind = Kind::kImportedHandle;
    return true;
  }
  return false;
}

ledger::Keep mapOne(Record& r, void* size) {
  ++r.count;
  if (r.bytes == 0) r.bytes = *static_cast<uint64_t*>(size);  // an import, charged at its first mapping
  return ledger::Keep::kKeep;
}

// The last reference to a handle's memory is gone when it is released and no longer mapped.
ledger::Keep unmapOne(Record& r, void*) {
  if (r.count > 0) --r.count;
  return (r.flags & kReleased) != 0 && r.count == 0 ? ledger::Keep::kErase : ledger::Keep::kKeep;
}

ledger::Keep releaseHandle(Record& r, void*) {
  if (r.owner > 0) {  // a reference cuMemRetainAllocationHandle added (the same handle value)
    --r.owner;
    return ledger::Keep::kKeep;
  }
  r.flags |= kReleased;
  return r.count == 0 ? ledger::Keep::kErase : ledger::Keep::kKeep;
}

// Drops a reference to the handle and gives its charge back if that was the last. False
// when the ledger has no such handle.
bool dropHandleRef(CUmemGenericAllocationHandle h, ledger::Keep (*fn)(Record&, void*)) {
  for (Kind kind : {Kind::kVmmHandle, Kind::kImportedHandle}) {
    Record before, after;
    if (!ledger::peek(kind, h, &before)) continue;
    if (ledger::update(kind, h, fn, nullptr, &after) && (after.flags & kReleased) != 0 && after.count == 0) {
      if ((after.flags & kShared) != 0) {
        shares::handleGone(h);  // a share entry pays for it: let go of it
      } else {
        releaseMemory(after.dev, after.bytes);
      }
    }
    return true;
  }
  return false;
}

// ---- graphs: allocation nodes are charged when a graph runs (pools.cpp); here, what each
// executable graph may allocate, so that its launch can reserve it first ----

void rememberExec(CUgraphExec exec, CUgraph graph) {
  uint64_t bytes[kLimiterMaxDevices] = {};
  ledger::sumOwned(Kind::kGraphNode, key(graph), bytes);
  Record total;
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    if (bytes[d] == 0) continue;
    if (total.dev < 0) total.dev = d;
    total.count |= 1u << d;
    total.bytes += bytes[d];
  }
  if (total.count == 0) return;
  ledger::put(Kind::kGraphExec, key(exec), total);
  pools::gGraphAllocs.store(true, std::memory_order_release);
  if ((total.count & (total.count - 1)) == 0) return;  // one device: the total is its
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    if (bytes[d] == 0) continue;
    Record one;
    one.dev = d;
    one.bytes = bytes[d];
    ledger::put(Kind::kGraphExecDevice, key(exec) | static_cast<uintptr_t>(d) << 56, one);
  }
}

template <class F>
CUresult instantiated(CUgraphExec* exec, CUgraph graph, F&& instantiate) {
  CUresult rc = instantiate();
  if (rc == CUDA_SUCCESS && exec != nullptr) rememberExec(*exec, graph);
  return rc;
}

// ---- contexts ----

// What a context takes (its overhead). Measured per process, as the growth of what NVML's
// process list says this process holds on the device across the creation: other tenants
// allocating at the same moment do not change it. Where NVML cannot say which entry is this
// process, the growth of the device's used memory is taken instead (noisy), and a figure
// measured undisturbed is published in the region for the container's later processes.
std::atomic<int64_t> gContextOverhead[kLimiterMaxDevices];
std::atomic<int> gPrimaryRefs[kLimiterMaxDevices];
std::atomic<bool> gPrimaryActive[kLimiterMaxDevices];
std::atomic<CUcontext> gPrimaryContext[kLimiterMaxDevices];  // as cuDevicePrimaryCtxRetain gave it

bool nvmlDeviceUsed(int dev, uint64_t* used) {
  if (!nvmlview::ready() || real::nvmlDeviceGetMemoryInfo == nullptr) return false;
  const char* uuid = runtime().uuids[dev];
  nvmlDevice_t handle = nullptr;
  nvmlMemory_t mem;
  if (uuid[0] == '\0' || real::nvmlDeviceGetHandleByUUID(uuid, &handle) != NVML_SUCCESS ||
      real::nvmlDeviceGetMemoryInfo(handle, &mem) != NVML_SUCCESS) {
    return false;
  }
  *used = mem.used;
  return true;
}

// What NVML saw on a device at one moment: each process and what it held, and the total.
struct Snapshot {
  nvmlview::Proc procs[128];
  int count = -1;  // -1: NVML could not say
  uint64_t deviceUsed = 0;
  bool haveDeviceUsed = false;

  void take(int dev) {
    count = nvmlview::processes(dev, procs, 128);
    haveDeviceUsed = nvmlDeviceUsed(dev, &deviceUsed);
  }
  const nvmlview::Proc* find(uint32_t pid) const {
    for (int i = 0; i < count; ++i) {
      if (procs[i].pid == pid) return &procs[i];
    }
    return nullptr;
  }
};

// The pid under which the driver (NVML) reports this process: ours if it is in the list
// (the same PID namespace), else the one process that appeared across our first context
// creation. Unknown (0) while ambiguous; tried again at the next creation.
std::atomic<uint32_t> gDriverPid{0};

uint32_t learnDriverPid(const Snapshot& before, const Snapshot& after) {
  uint32_t known = gDriverPid.load();
  if (known != 0 || after.count < 0) return known;
  uint32_t self = static_cast<uint32_t>(getpid());
  uint32_t found = 0;
  if (after.find(self) != nullptr) {
    found = self;
  } else if (before.count >= 0) {
    int fresh = 0;
    for (int i = 0; i < after.count; ++i) {
      if (before.find(after.procs[i].pid) == nullptr) {
        ++fresh;
        found = after.procs[i].pid;
      }
    }
    if (fresh != 1) found = 0;
  }
  if (found != 0) {
    gDriverPid.store(found);
    Runtime& rt = runtime();
    int slot = rt.slot.load();
    if (rt.regionShared && slot >= 0) vgpu_region_set_driver_pid(rt.region, slot, found);
  }
  return found;
}

// Primary contexts' overhead is recorded under these ids, others' under their handle.
constexpr uintptr_t kPrimaryContextId = uintptr_t{1} << 63;

// Charges the context overhead; a context that does not fit is destroyed again (`undo`).
// `*pctx` is the new context (for a primary one, what cuDevicePrimaryCtxRetain gave).
template <class F, class U>
CUresult createContext(CUcontext* pctx, CUdevice dev, F&& create, U&& undo, bool primary = false) {
  int d = static_cast<int>(dev);
  if (d < 0 || d >= kLimiterMaxDevices || pctx == nullptr) return create();
  vgpu_region_device* shared = &runtime().region->devices[d];
  int64_t overhead = gContextOverhead[d].load();
  if (overhead < 0) {
    // The node agent's figure from the read-only limits file, never the region's: any process
    // of the container can write the region (a 1-byte overhead there was believed).
    uint64_t given = runtime().cfg.context_overhead;
    if (given > 0) gContextOverhead[d].store(overhead = static_cast<int64_t>(given));
  }
  publishDevice(d);
  Snapshot before, after;
  before.take(d);
  uint64_t containerBefore = vgpu_region_used(runtime().region, d);
  uint64_t charge = overhead > 0 ? static_cast<uint64_t>(overhead) : 0;
  CUresult rc = charged(d, charge, create);
  if (rc != CUDA_SUCCESS) return rc;
  after.take(d);
  uint32_t pid = learnDriverPid(before, after);
  const nvmlview::Proc* mineAfter = pid != 0 ? after.find(pid) : nullptr;
  bool measured = false;
  uint64_t grew = 0;
  if (mineAfter != nullptr) {
    const nvmlview::Proc* mineBefore = before.find(pid);
    uint64_t was = mineBefore != nullptr ? mineBefore->used : 0;
    grew = mineAfter->used > was ? mineAfter->used - was : 0;
    measured = true;
  } else if (overhead < 0 && before.haveDeviceUsed && after.haveDeviceUsed) {
    grew = after.deviceUsed > before.deviceUsed ? after.deviceUsed - before.deviceUsed : 0;
    if (grew > (2ull << 30)) grew = 0;  // not a plausible overhead: someone else allocated
    // Undisturbed by the rest of the container: good enough for every later context.
    measured = vgpu_region_used(runtime().region, d) == containerBefore;
  }
  if (measured || overhead < 0) {
    if (grew > 0) gContextOverhead[d].store(static_cast<int64_t>(grew));
    if (measured && grew > 0) __atomic_store_n(&shared->context_overhead, grew, __ATOMIC_RELAXED);
    if (CUresult t = trueUp(d, charge, grew, undo); t != CUDA_SUCCESS) return t;
    charge = grew;
  }
  Record rec;
  rec.dev = d;
  rec.bytes = charge;
  rec.ctx = key(*pctx);
  ledger::put(Kind::kContext, primary ? kPrimaryContextId + static_cast<uintptr_t>(d) : key(*pctx), rec);
  monitor::contextCreated();
  return CUDA_SUCCESS;
}

__attribute__((constructor)) void initOverheads() {
  for (auto& o : gContextOverhead) o.store(-1);
}

}  // namespace

namespace vgpu {

void contextGone(CUcontext ctx) {
  releaseContextRecords(ctx);
  if (shares::any()) shares::contextGone(ctx);
  throttle::forget(ctx);
}

CUresult primaryReleased(CUdevice dev, CUresult (*release)(CUdevice)) {
  int d = static_cast<int>(dev);
  bool last = d >= 0 && d < kLimiterMaxDevices && gPrimaryRefs[d].load() == 1;
  if (last) contextsChanged();
  CUresult rc = release(dev);
  if (rc != CUDA_SUCCESS || d < 0 || d >= kLimiterMaxDevices) return rc;
  int refs = gPrimaryRefs[d].load();
  while (refs > 0 && !gPrimaryRefs[d].compare_exchange_weak(refs, refs - 1)) {
  }
  // The last release ends it, and with it what was allocated in it (only that: other
  // contexts on the device keep theirs).
  if (refs == 1 && gPrimaryActive[d].exchange(false)) {
    contextsChanged();
    if (CUcontext ctx = gPrimaryContext[d].load()) contextGone(ctx);
  }
  return rc;
}

CUresult primaryReset(CUdevice dev, CUresult (*reset)(CUdevice)) {
  int d = static_cast<int>(dev);
  contextsChanged();
  CUresult rc = reset(dev);
  contextsChanged();
  if (rc != CUDA_SUCCESS || d < 0 || d >= kLimiterMaxDevices) return rc;
  if (gPrimaryActive[d].exchange(false)) {
    if (CUcontext ctx = gPrimaryContext[d].load()) contextGone(ctx);  // its allocations, overhead and events
  }
  return rc;
}

}  // namespace vgpu

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  VGPU_ENTER_CUDA(cuMemAlloc_v2);
  return pointerAlloc(dptr, bytesize, [&](uint32_t* flags) {
    CUresult r = real::cuMemAlloc_v2(dptr, bytesize);
    // The limit allows it but the device is full: managed memory can page to the host.
    if (r == CUDA_ERROR_OUT_OF_MEMORY && runtime().oversubscribe() && real::cuMemAllocManaged != nullptr) {
      r = real::cuMemAllocManaged(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS) {
        *flags = kManaged;
        logf(kLogInfo, "%zu bytes oversubscribed as managed memory", bytesize);
      }
    }
    return r;
  });
}

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  VGPU_ENTER_CUDA(cuMemAlloc);
  return pointerAlloc(dptr, bytesize, [&](uint32_t*) { return real::cuMemAlloc(dptr, bytesize); });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  VGPU_ENTER_CUDA(cuMemAllocManaged);
  return pointerAlloc(dptr, bytesize, [&](uint32_t* f) {
    *f = kManaged;
    return real::cuMemAllocManaged(dptr, bytesize, flags);
  });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  VGPU_ENTER_CUDA(cuMemAllocPitch_v2);
  return pitchAlloc(
      dptr, pPitch, WidthInBytes, Height,
      [&] { return real::cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); },
      [](CUdeviceptr p) { real::cuMemFree_v2(p); });
}

// The 32-bit ABI of CUDA 2.x, still exported: charged exactly like _v2.
CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes) {
  VGPU_ENTER_CUDA(cuMemAllocPitch);
  return pitchAlloc(
      dptr, pPitch, WidthInBytes, Height,
      [&] { return real::cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); },
      [](CUdeviceptr p) { real::cuMemFree(static_cast<CUdeviceptr_v1>(p)); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_ENTER_CUDA(cuMemFree_v2);
  return freePointer(dptr, [&] { return real::cuMemFree_v2(dptr); });
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  VGPU_ENTER_CUDA(cuMemFree);
  return freePointer(dptr, [&] { return real::cuMemFree(dptr); });
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
        id = key(*pHandle);
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
        id = key(*pHandle);
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
  return freed(Kind::kArray, key(hArray), [&] { return real::cuArrayDestroy(hArray); });
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
        id = key(*pHandle);
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
  return freed(Kind::kMipmap, key(hMipmappedArray), [&] { return real::cuMipmappedArrayDestroy(hMipmappedArray); });
}

// cuMemCreate's memory is not a context's (cuCtxDestroy leaves it): it is charged while the
// handle exists or is mapped (NVIDIA's idiom create, map, release keeps it until the unmap).
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemCreate);
  if (prop == nullptr || handle == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id < 0 || prop->location.id >= kLimiterMaxDevices) {
    return real::cuMemCreate(handle, size, prop, flags);  // host memory, or the driver's error
  }
  int dev = prop->location.id;
  CUresult rc = charged(dev, size, [&] { return real::cuMemCreate(handle, size, prop, flags); });
  if (rc == CUDA_SUCCESS) {
    Record rec;
    rec.dev = dev;
    rec.bytes = size;
    ledger::put(Kind::kVmmHandle, *handle, rec);
  }
  return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VGPU_ENTER_CUDA(cuMemRelease);
  CUresult rc = real::cuMemRelease(handle);
  if (rc == CUDA_SUCCESS && !dropHandleRef(handle, releaseHandle)) shares::otherReleased(handle);
  return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemMap);
  Kind kind;
  Record rec;
  if (!findHandle(handle, &kind, &rec)) return real::cuMemMap(ptr, size, offset, handle, flags);
  // Own handles are charged already; an import is charged at its first mapping, unless a
  // share entry of the container pays for it (kShared).
  uint64_t bytes = rec.bytes == 0 && (rec.flags & kShared) == 0 ? size : 0;
  CUresult rc = charged(rec.dev, bytes, [&] { return real::cuMemMap(ptr, size, offset, handle, flags); });
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t mapped = size;
  ledger::update(kind, handle, mapOne, &mapped);
  Record mapping;
  mapping.dev = rec.dev;
  mapping.bytes = size;
  mapping.owner = handle;
  ledger::put(Kind::kMapping, ptr, mapping);
  return rc;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VGPU_ENTER_CUDA(cuMemUnmap);
  CUresult rc = real::cuMemUnmap(ptr, size);
  if (rc != CUDA_SUCCESS) return rc;
  // The range may cover several mappings laid end to end.
  for (CUdeviceptr at = ptr; at < ptr + size;) {
    Record mapping;
    if (!ledger::take(Kind::kMapping, at, &mapping) || mapping.bytes == 0) break;
    dropHandleRef(mapping.owner, unmapOne);
    at += mapping.bytes;
  }
  return rc;
}

// cuMemRetainAllocationHandle gives the handle value that was mapped, with one more reference
// (released with cuMemRelease): the memory stays until every reference is released.
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  VGPU_ENTER_CUDA(cuMemRetainAllocationHandle);
  CUresult rc = real::cuMemRetainAllocationHandle(handle, addr);
  if (rc != CUDA_SUCCESS || handle == nullptr) return rc;
  auto retain = [](Record& r, void*) {
    ++r.owner;
    return ledger::Keep::kKeep;
  };
  if (!ledger::update(Kind::kVmmHandle, *handle, retain, nullptr))
    ledger::update(Kind::kImportedHandle, *handle, retain, nullptr);
  return rc;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
                                size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  VGPU_ENTER_CUDA(cuGraphAddMemAllocNode);
  CUresult rc = real::cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  if (rc != CUDA_SUCCESS || nodeParams == nullptr || phGraphNode == nullptr) return rc;
  int dev = nodeParams->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? nodeParams->poolProps.location.id
                                                                               : currentDevice();
  // Nothing is taken until a graph instantiated from this one runs (then the graph
  // allocator is charged, pools.cpp); remembered so the launch can reserve it first.
  if (dev >= 0 && dev < kLimiterMaxDevices) {
    Record rec;
    rec.dev = dev;
    rec.bytes = nodeParams->bytesize;
    rec.owner = key(hGraph);
    ledger::put(Kind::kGraphNode, key(*phGraphNode), rec);
  }
  return rc;
}

CUresult cuGraphDestroyNode(CUgraphNode hNode) {
  VGPU_ENTER_CUDA(cuGraphDestroyNode);
  CUresult rc = real::cuGraphDestroyNode(hNode);
  Record rec;
  if (rc == CUDA_SUCCESS) ledger::take(Kind::kGraphNode, key(hNode), &rec);
  return rc;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  VGPU_ENTER_CUDA(cuGraphDestroy);
  CUresult rc = real::cuGraphDestroy(hGraph);
  // Executable graphs made from it keep their allocation nodes: they were copied then.
  uint64_t bytes[kLimiterMaxDevices] = {};
  if (rc == CUDA_SUCCESS) ledger::takeOwned(Kind::kGraphNode, key(hGraph), bytes);
  return rc;
}

CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                            size_t bufferSize) {
  VGPU_ENTER_CUDA(cuGraphInstantiate);
  return instantiated(phGraphExec, hGraph,
                      [&] { return real::cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer,
                               size_t bufferSize) {
  VGPU_ENTER_CUDA(cuGraphInstantiate_v2);
  return instantiated(phGraphExec, hGraph, [&] {
    return real::cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
  });
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  VGPU_ENTER_CUDA(cuGraphInstantiateWithFlags);
  return instantiated(phGraphExec, hGraph, [&] { return real::cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags); });
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  VGPU_ENTER_CUDA(cuGraphInstantiateWithParams);
  return instantiated(phGraphExec, hGraph,
                      [&] { return real::cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams); });
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  VGPU_ENTER_CUDA(cuGraphInstantiateWithParams_ptsz);
  return instantiated(phGraphExec, hGraph,
                      [&] { return real::cuGraphInstantiateWithParams_ptsz(phGraphExec, hGraph, instantiateParams); });
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  VGPU_ENTER_CUDA(cuGraphExecDestroy);
  CUresult rc = real::cuGraphExecDestroy(hGraphExec);
  Record rec;
  if (rc == CUDA_SUCCESS && ledger::take(Kind::kGraphExec, key(hGraphExec), &rec)) {
    for (int d = 0; d < kLimiterMaxDevices; ++d) {
      if ((rec.count >> d & 1) != 0) ledger::take(Kind::kGraphExecDevice, key(hGraphExec) | uintptr_t(d) << 56, &rec);
    }
  }
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
  contextsChanged();  // before and after: no thread keeps the handle's device across its reuse
  CUresult rc = real::cuCtxDestroy_v2(ctx);
  contextsChanged();
  if (rc == CUDA_SUCCESS) contextGone(ctx);
  return rc;
}

// A primary context is retained and released by count; its overhead is charged when it
// becomes active (the first retain, or the first after a reset) and given back, with what
// was allocated in it, when it goes (the last release, or a reset, which does not release it).
CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxRetain);
  int d = static_cast<int>(dev);
  if (d < 0 || d >= kLimiterMaxDevices) return real::cuDevicePrimaryCtxRetain(pctx, dev);
  if (gPrimaryActive[d].load()) {
    CUresult rc = real::cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS) gPrimaryRefs[d].fetch_add(1);
    return rc;
  }
  CUcontext ctx = nullptr;
  CUresult rc = createContext(
      &ctx, dev, [&] { return real::cuDevicePrimaryCtxRetain(&ctx, dev); },
      [&] { real::cuDevicePrimaryCtxRelease_v2(dev); }, true);
  if (rc == CUDA_SUCCESS) {
    if (pctx != nullptr) *pctx = ctx;
    gPrimaryContext[d].store(ctx);
    gPrimaryActive[d].store(true);
    gPrimaryRefs[d].fetch_add(1);
  }
  return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxRelease_v2);
  return primaryReleased(dev, real::cuDevicePrimaryCtxRelease_v2);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  VGPU_ENTER_CUDA(cuDevicePrimaryCtxReset_v2);
  return primaryReset(dev, real::cuDevicePrimaryCtxReset_v2);
}

}  // extern "C"
