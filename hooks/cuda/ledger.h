#pragma once
// This process's memory objects and what each was charged: the ledger the wrappers keep so
// that a free, a context's destruction or a handle's last unmap gives back exactly what the
// object was charged. Thread-safe (a spin lock held for a few dozen instructions).

#include <stdint.h>

namespace vgpu {

inline constexpr int kLedgerDevices = 16;

/// What a kind of tracked object is; the ledger keys records by (kind, id).
enum class Kind : uint8_t {
  kPointer,         // cuMemAlloc*, pitch, managed: charged; ctx = the context that made it
  kIpc,             // cuIpcOpenMemHandle: charged; ctx
  kArray,           // cuArrayCreate / cuArray3DCreate: charged; ctx
  kMipmap,          // cuMipmappedArrayCreate: charged; ctx
  kContext,         // a context's overhead: charged; ctx = the context (id: see memory_hooks.cpp)
  kVmmHandle,       // cuMemCreate on a device: charged; count = mappings; kReleased once released;
                    // owner = references cuMemRetainAllocationHandle added
  kImportedHandle,  // cuMemImportFromShareableHandle: charged at its first mapping unless kShared;
                    // like kVmmHandle
  kMapping,         // cuMemMap: id = address, bytes = size, owner = handle (not charged)
  kPoolPointer,     // cuMemAlloc(FromPool)Async: owner = pool (the pool is charged, not the pointer)
  kGraphNode,       // cuGraphAddMemAllocNode: owner = graph, bytes = size (not charged)
  kGraphExec,       // an executable graph's allocation nodes: count = device mask, bytes = total
  kGraphExecDevice, // the same for one device when the graph allocates on several
  kSharedPointer,   // a kPointer exported with cuIpcGetMemHandle: its bytes moved to a share
                    // entry of the region (share.h), so not charged here; ctx
  kMulticast,       // cuMulticastCreate: bytes = its size per device (not charged: bound memory is)
  kModule,          // cuModuleLoad*: what the load took (driver_taken.h): charged; ctx
  kLibrary,         // cuLibraryLoad*: what the load took in the current context: charged; ctx
  kGreenContext,    // cuGreenCtxCreate: what the creation took: charged; ctx = 0 (owned by none)
};

/// Whether records of a kind stand for bytes charged to the region.
constexpr bool charges(Kind k) {
  return k == Kind::kPointer || k == Kind::kIpc || k == Kind::kArray || k == Kind::kMipmap || k == Kind::kContext ||
         k == Kind::kVmmHandle || k == Kind::kImportedHandle || k == Kind::kModule || k == Kind::kLibrary ||
         k == Kind::kGreenContext;
}

/// Record flags.
inline constexpr uint32_t kReleased = 0x1;  // a handle released while still mapped
inline constexpr uint32_t kManaged = 0x2;   // managed memory: charged, but not device memory yet
/// A VMM handle whose memory a share entry of the region pays for (share.h): exported (its
/// charge moved there) or imported from one; its last reference drops the entry instead of
/// giving bytes back.
inline constexpr uint32_t kShared = 0x4;
/// An executable graph whose allocation memory an upload or a launch has mapped already.
inline constexpr uint32_t kMapped = 0x8;

struct Record {
  int32_t dev = -1;
  uint32_t flags = 0;
  uint32_t count = 0;
  uint64_t bytes = 0;
  uintptr_t owner = 0;
  uintptr_t ctx = 0;
};

namespace ledger {

void put(Kind kind, uintptr_t id, const Record& rec);
/// Removes and returns the record; false if there was none.
bool take(Kind kind, uintptr_t id, Record* out);
/// Reads the record without removing it.
bool peek(Kind kind, uintptr_t id, Record* out);

/// What update()'s function decides.
enum class Keep : uint8_t { kKeep, kErase };
/// Runs `fn(record&, ctx)` on the record under the ledger's lock (it must not call the driver
/// or block) and erases it if asked; *after receives the record as it was left. False if
/// there is no such record.
bool update(Kind kind, uintptr_t id, Keep (*fn)(Record&, void*), void* ctx, Record* after = nullptr);

/// Removes every charging record made in context `ctx`; adds their bytes per device.
void takeContext(uintptr_t ctx, uint64_t bytesPerDevice[kLedgerDevices]);
/// Removes every record of `kind` whose owner is `owner`; adds their bytes per device.
void takeOwned(Kind kind, uintptr_t owner, uint64_t bytesPerDevice[kLedgerDevices]);
/// Adds the bytes of every record of `kind` whose owner is `owner`, per device.
void sumOwned(Kind kind, uintptr_t owner, uint64_t bytesPerDevice[kLedgerDevices]);
/// Forgets everything (a forked child owns none of its parent's device memory).
void clear();

}  // namespace ledger
}  // namespace vgpu
