// Memory shared between the processes of a container is charged once (share.h): the hooks of
// the export and import paths, and this process's table of the share entries it published or
// holds. An exporter moves what it was charged into an entry of the region; an importer of the
// same container holds that entry and is charged nothing; an import whose source the region
// does not know (an unlimited process, another container, a process without libvgpu.so) is
// charged to the importer as any allocation, so a helper outside the limit cannot smuggle
// memory in.

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd_identity.h"
#include "runtime.h"
#include "share.h"

using namespace vgpu;

namespace {

// What a local entry stands for; the region's entry is keyed by `key` alone.
enum class Role : uint8_t {
  kNone,
  kExportedPointer,
  kOpenedIpc,
  kExportedHandle,
  kHeldHandle,
  kExportedPool,
  kHeldPool,
};

struct Local {
  Role role;
  uint32_t kind;  // VGPU_SHARE_*
  uint32_t refs;  // opens of one IPC handle that gave the same address
  int32_t dev;
  uintptr_t id;   // the pointer or the handle
  uintptr_t ctx;  // pointers: the context they live in (0 for handles)
  uint64_t tagBase;  // an exported handle whose file is a device node: its tags (fd_identity.h)
  uint32_t tags;
  uint8_t key[VGPU_REGION_SHARE_KEY_LEN];
};

// Fixed, like everything libvgpu.so keeps: no allocation. Beyond it nothing is shared (the
// exporter keeps paying, importers are charged): safe, only less precise.
constexpr int kMaxLocal = 1024;
Local gLocal[kMaxLocal];
pthread_mutex_t gMu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> gAny{false};
pthread_once_t gAtExit = PTHREAD_ONCE_INIT;

struct Guard {
  Guard() { pthread_mutex_lock(&gMu); }
  ~Guard() { pthread_mutex_unlock(&gMu); }
};

uintptr_t key(const void* p) { return reinterpret_cast<uintptr_t>(p); }

int slotNow() {
  Runtime& rt = runtime();
  return rt.regionShared ? rt.slot.load(std::memory_order_relaxed) : -1;
}

Local* findLocked(Role role, uintptr_t id) {
  for (Local& l : gLocal)
    if (l.role == role && l.id == id) return &l;
  return nullptr;
}

Local* freeLocked() {
  for (Local& l : gLocal)
    if (l.role == Role::kNone) return &l;
  return nullptr;
}

// Several local entries may stand for one region entry (an exporter that imports its own
// export, one memory opened at two addresses): the slot lets go with the last of them.
bool keyElsewhereLocked(const Local& self) {
  for (const Local& l : gLocal)
    if (&l != &self && l.role != Role::kNone && l.kind == self.kind &&
        memcmp(l.key, self.key, VGPU_REGION_SHARE_KEY_LEN) == 0)
      return true;
  return false;
}

void forgetLocked(Local& l) {
  int slot = slotNow();
  if (!keyElsewhereLocked(l) && slot >= 0) vgpu_region_share_drop(runtime().region, slot, l.kind, l.key);
  memset(&l, 0, sizeof l);
}

// At exit the process lets go of everything (before the library's destructor frees its slot).
void dropAllAtExit() {
  Guard g;
  for (Local& l : gLocal)
    if (l.role != Role::kNone) forgetLocked(l);
}

// A forked child holds nothing of its parent's (the ledger is cleared too).
void afterForkChild() {
  pthread_mutex_init(&gMu, nullptr);
  memset(gLocal, 0, sizeof gLocal);
  gAny.store(false);
}

void remember(Local& l, Role role, uint32_t kind, const uint8_t* k, uintptr_t id, uintptr_t ctx, int dev) {
  l.role = role;
  l.kind = kind;
  l.refs = 1;
  l.dev = dev;
  l.id = id;
  l.ctx = ctx;
  memcpy(l.key, k, VGPU_REGION_SHARE_KEY_LEN);
  gAny.store(true, std::memory_order_release);
  pthread_once(&gAtExit, [] { atexit(dropAllAtExit); });
}

// Exporter: moves `bytes` of `dev` from this process's charge into the region's entry `k`.
bool publish(Role role, uint32_t kind, const uint8_t* k, uintptr_t id, uintptr_t ctx, int dev, uint64_t bytes,
             uint64_t tagBase = 0) {
  int slot = slotNow();
  if (slot < 0 || dev < 0 || dev >= kLimiterMaxDevices) return false;
  Guard g;
  Local* l = freeLocked();
  if (l == nullptr || vgpu_region_share_publish(runtime().region, slot, kind, k, dev, bytes) != VGPU_REGION_OK)
    return false;
  remember(*l, role, kind, k, id, ctx, dev);
  l->tagBase = tagBase;
  l->tags = tagBase != 0 ? 1 : 0;
  return true;
}

// An object published before is exported again, as another open file of a device node: that
// file gets the object's next tag, so that its importers find the same entry.
void retag(Role role, uintptr_t id, int fd) {
  Guard g;
  Local* l = findLocked(role, id);
  if (l != nullptr && l->tagBase != 0 && fdid::tag(fd, l->tagBase, l->tags)) ++l->tags;
}

// Exporter: object `id` (`role`: a VMM handle or a pool) was exported as descriptor `fd`; its
// `bytes` on `dev` move to a share entry keyed by the file's identity, which importers of the
// container find. `again`: published before (the same entry; a device node's new open file is
// tagged). False when nothing was published (the exporter keeps paying, importers are charged).
bool publishFd(Role role, int fd, uintptr_t id, int dev, uint64_t bytes, bool again) {
  uint8_t k[VGPU_REGION_SHARE_KEY_LEN];
  fdid::Export how = fdid::classify(fd, k);
  if (how == fdid::Export::kNone) return false;
  if (again) {
    if (how == fdid::Export::kTagged) retag(role, id, fd);
    return false;
  }
  uint64_t base = 0;
  if (how == fdid::Export::kTagged) {
    base = fdid::newBase();
    if (!fdid::tag(fd, base, 0)) return false;  // cannot be told apart: the importer is charged
    fdid::taggedKey(fd, base, k);
  }
  return publish(role, VGPU_SHARE_FD, k, id, 0, dev, bytes, base);
}

bool exportedBefore(Role role, uintptr_t id) {
  Guard g;
  return findLocked(role, id) != nullptr;
}

// Importer: holds the region's entry `k` if another process of the container published it.
bool hold(Role role, uint32_t kind, const uint8_t* k, uintptr_t id, uintptr_t ctx, int* dev, uint64_t* bytes) {
  int slot = slotNow();
  if (slot < 0) return false;
  Guard g;
  if (Local* l = findLocked(role, id); l != nullptr && memcmp(l->key, k, VGPU_REGION_SHARE_KEY_LEN) == 0) {
    ++l->refs;  // the driver gave the same address for the same memory again
    *dev = l->dev;
    *bytes = 0;
    return true;
  }
  Local* l = freeLocked();
  if (l == nullptr || vgpu_region_share_hold(runtime().region, slot, kind, k, dev, bytes) != VGPU_REGION_OK)
    return false;
  if (*dev < 0 || *dev >= kLimiterMaxDevices) {  // any process of the container can write the region
    vgpu_region_share_drop(runtime().region, slot, kind, k);
    return false;
  }
  remember(*l, role, kind, k, id, ctx, *dev);
  return true;
}

// One reference to (role, id) is gone; the last one lets go of the entry.
bool release(Role role, uintptr_t id) {
  Guard g;
  Local* l = findLocked(role, id);
  if (l == nullptr) return false;
  if (--l->refs == 0) forgetLocked(*l);
  return true;
}

ledger::Keep markShared(Record& r, void*) {
  r.flags |= kShared;
  return ledger::Keep::kKeep;
}

// An IPC handle was opened at *pdptr (`open` did it): held if the container pays for it
// already, else charged to this process (closed again if that does not fit).
template <class F>
CUresult ipcOpened(CUdeviceptr* pdptr, const CUipcMemHandle& handle, F&& open) {
  CUresult rc = open();
  Ctx c;
  if (rc != CUDA_SUCCESS || pdptr == nullptr || !currentContext(&c)) return rc;
  int dev = -1;
  uint64_t held = 0;
  const auto* k = reinterpret_cast<const uint8_t*>(handle.reserved);
  if (hold(Role::kOpenedIpc, VGPU_SHARE_IPC, k, *pdptr, key(c.ctx), &dev, &held)) return rc;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (real::cuMemGetAddressRange_v2 == nullptr || real::cuMemGetAddressRange_v2(&base, &size, *pdptr) != CUDA_SUCCESS)
    return rc;
  // The size is known only once it is open: close it again if it does not fit.
  if (reserveMemory(c.dev, size) != CUDA_SUCCESS) {
    real::cuIpcCloseMemHandle(*pdptr);
    *pdptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record rec;
  rec.dev = c.dev;
  rec.bytes = size;
  rec.ctx = key(c.ctx);
  ledger::put(Kind::kIpc, *pdptr, rec);
  return rc;
}

__attribute__((constructor)) void registerFork() { pthread_atfork(nullptr, nullptr, afterForkChild); }

}  // namespace

namespace vgpu::shares {

bool any() { return gAny.load(std::memory_order_acquire); }

void pointerFreed(CUdeviceptr base) {
  Record rec;
  if (ledger::take(Kind::kSharedPointer, base, &rec)) release(Role::kExportedPointer, base);
}

void handleGone(CUmemGenericAllocationHandle handle) {
  if (!release(Role::kExportedHandle, handle)) release(Role::kHeldHandle, handle);
}

void otherReleased(CUmemGenericAllocationHandle handle) {
  Record rec;
  if (ledger::take(Kind::kMulticast, handle, &rec) && (rec.flags & kShared) != 0)
    release(Role::kExportedHandle, handle);
}

void poolGone(CUmemoryPool pool) {
  if (!release(Role::kExportedPool, key(pool))) release(Role::kHeldPool, key(pool));
}

void contextGone(CUcontext ctx) {
  Guard g;
  for (Local& l : gLocal) {
    if (l.ctx != key(ctx) || (l.role != Role::kExportedPointer && l.role != Role::kOpenedIpc)) continue;
    Record rec;
    if (l.role == Role::kExportedPointer) ledger::take(Kind::kSharedPointer, l.id, &rec);
    forgetLocked(l);
  }
}

}  // namespace vgpu::shares

extern "C" {

// cuMemAlloc memory exported by IPC: its charge moves to the region's entry named by the
// handle's bytes, which every process of the container that opens it holds.
CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  VGPU_ENTER_CUDA(cuIpcGetMemHandle);
  CUresult rc = real::cuIpcGetMemHandle(pHandle, dptr);
  if (rc != CUDA_SUCCESS || pHandle == nullptr) return rc;
  CUdeviceptr base = dptr;
  size_t size = 0;
  if (real::cuMemGetAddressRange_v2 != nullptr && real::cuMemGetAddressRange_v2(&base, &size, dptr) != CUDA_SUCCESS)
    base = dptr;
  Record rec;
  if (!ledger::take(Kind::kPointer, base, &rec)) return rc;  // exported before, or not ours to move
  const auto* k = reinterpret_cast<const uint8_t*>(pHandle->reserved);
  bool moved = (rec.flags & kManaged) == 0 && rec.bytes != 0 &&
               publish(Role::kExportedPointer, VGPU_SHARE_IPC, k, base, rec.ctx, rec.dev, rec.bytes);
  ledger::put(moved ? Kind::kSharedPointer : Kind::kPointer, base, rec);
  return rc;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  VGPU_ENTER_CUDA(cuIpcOpenMemHandle_v2);
  return ipcOpened(pdptr, handle, [&] { return real::cuIpcOpenMemHandle_v2(pdptr, handle, Flags); });
}

CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  VGPU_ENTER_CUDA(cuIpcOpenMemHandle);
  return ipcOpened(pdptr, handle, [&] { return real::cuIpcOpenMemHandle(pdptr, handle, Flags); });
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  VGPU_ENTER_CUDA(cuIpcCloseMemHandle);
  Record rec;
  bool charged = ledger::take(Kind::kIpc, dptr, &rec);
  CUresult rc = real::cuIpcCloseMemHandle(dptr);
  if (charged) return settleFree(Kind::kIpc, dptr, rec, rc);
  if (rc == CUDA_SUCCESS && shares::any()) release(Role::kOpenedIpc, dptr);
  return rc;
}

// A VMM handle exported as a file descriptor: its charge moves to the region's entry named by
// the file's identity (fd_identity.h), which every process of the container that imports that
// file holds.
CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemExportToShareableHandle);
  CUresult rc = real::cuMemExportToShareableHandle(shareableHandle, handle, handleType, flags);
  if (rc != CUDA_SUCCESS || shareableHandle == nullptr || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return rc;
  Record rec;
  int fd = *static_cast<int*>(shareableHandle);
  // A multicast object takes no memory of its own (what is bound to it is charged to its
  // creator): an entry of 0 bytes tells importers so.
  Kind kind = Kind::kMulticast;
  if (!ledger::peek(kind, handle, &rec)) {
    kind = Kind::kVmmHandle;
    if (!ledger::peek(kind, handle, &rec) || rec.bytes == 0) return rc;
  }
  uint64_t bytes = kind == Kind::kMulticast ? 0 : rec.bytes;
  if (publishFd(Role::kExportedHandle, fd, handle, rec.dev < 0 ? 0 : rec.dev, bytes, (rec.flags & kShared) != 0))
    ledger::update(kind, handle, markShared, nullptr);
  return rc;
}

// A multicast object is remembered (not charged: the memory bound to it is, to whoever made
// that memory), so that exporting it tells importers it costs nothing.
CUresult cuMulticastCreate(CUmemGenericAllocationHandle* mcHandle, const CUmulticastObjectProp* prop) {
  VGPU_ENTER_CUDA(cuMulticastCreate);
  CUresult rc = real::cuMulticastCreate(mcHandle, prop);
  if (rc == CUDA_SUCCESS && mcHandle != nullptr && prop != nullptr) {
    Record rec;
    rec.bytes = prop->size;
    ledger::put(Kind::kMulticast, *mcHandle, rec);
  }
  return rc;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  VGPU_ENTER_CUDA(cuMemImportFromShareableHandle);
  // The file's identity before the driver sees it (it may close it).
  uint8_t k[VGPU_REGION_SHARE_KEY_LEN];
  bool keyed = shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
               fdid::importKey(static_cast<int>(reinterpret_cast<intptr_t>(osHandle)), runtime().region, k);
  CUresult rc = real::cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
  if (rc != CUDA_SUCCESS || handle == nullptr) return rc;
  int dev = currentDevice();
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  if (real::cuMemGetAllocationPropertiesFromHandle != nullptr &&
      real::cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS) {
    dev = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop.location.id : -1;  // host memory: never charged
  }
  if (dev < 0 || dev >= kLimiterMaxDevices) return rc;
  Record rec;
  rec.dev = dev;
  int heldDev = -1;
  uint64_t heldBytes = 0;
  if (keyed && hold(Role::kHeldHandle, VGPU_SHARE_FD, k, *handle, 0, &heldDev, &heldBytes)) {
    rec.dev = heldDev;
    rec.bytes = heldBytes;
    rec.flags = kShared;
  }
  // Otherwise the size is only known when the handle is mapped; charged then (cuMemMap).
  ledger::put(Kind::kImportedHandle, *handle, rec);
  return rc;
}

// Memory pools shared between processes (cuMemPoolExportToShareableHandle): a pool this
// process is charged for (pools.cpp) publishes an entry of 0 bytes keyed by the exported file,
// as a multicast object does, since its memory stays charged here; a process of the container
// that imports the pool holds it, and pointers it imports from that pool are charged nothing.
// A pool from outside the container charges each imported pointer to the importer.
CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType handleType,
                                          unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemPoolExportToShareableHandle);
  CUresult rc = real::cuMemPoolExportToShareableHandle(handle_out, pool, handleType, flags);
  int dev = -1;
  if (rc != CUDA_SUCCESS || handle_out == nullptr || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      !pools::charged(pool, &dev))
    return rc;
  int fd = *static_cast<int*>(handle_out);
  publishFd(Role::kExportedPool, fd, key(pool), dev, 0, exportedBefore(Role::kExportedPool, key(pool)));
  return rc;
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle, CUmemAllocationHandleType handleType,
                                            unsigned long long flags) {
  VGPU_ENTER_CUDA(cuMemPoolImportFromShareableHandle);
  // The file's identity before the driver sees it (it may close it).
  uint8_t k[VGPU_REGION_SHARE_KEY_LEN];
  bool keyed = handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
               fdid::importKey(static_cast<int>(reinterpret_cast<intptr_t>(handle)), runtime().region, k);
  CUresult rc = real::cuMemPoolImportFromShareableHandle(pool_out, handle, handleType, flags);
  if (rc != CUDA_SUCCESS || pool_out == nullptr || !keyed) return rc;
  int dev = -1;
  uint64_t bytes = 0;
  hold(Role::kHeldPool, VGPU_SHARE_FD, k, key(*pool_out), 0, &dev, &bytes);
  return rc;
}

// A pointer of an imported pool: nothing when the container pays for the pool already (the
// importer holds its entry); otherwise its size (cuMemGetAddressRange) on the current device,
// freed again if that does not fit, and given back by its cuMemFree / cuMemFreeAsync.
CUresult cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData* shareData) {
  VGPU_ENTER_CUDA(cuMemPoolImportPointer);
  CUresult rc = real::cuMemPoolImportPointer(ptr_out, pool, shareData);
  Ctx c;
  if (rc != CUDA_SUCCESS || ptr_out == nullptr || !currentContext(&c)) return rc;
  if (shares::any()) {
    Guard g;
    if (findLocked(Role::kHeldPool, key(pool)) != nullptr) return rc;
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  if (real::cuMemGetAddressRange_v2 == nullptr || real::cuMemGetAddressRange_v2(&base, &size, *ptr_out) != CUDA_SUCCESS)
    return rc;
  if (reserveMemory(c.dev, size) != CUDA_SUCCESS) {
    real::cuMemFree_v2(*ptr_out);
    *ptr_out = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record rec;  // freed as an allocation of this context (memory_hooks.cpp, pools.cpp)
  rec.dev = c.dev;
  rec.bytes = size;
  rec.ctx = key(c.ctx);
  ledger::put(Kind::kPointer, *ptr_out, rec);
  return rc;
}

}  // extern "C"
