#pragma once
// Memory the driver takes inside a call that does not say how much: loading a module or a
// library (its code, constant banks and __device__ globals), creating a green context. It is
// measured as the growth of what this process holds on the device across the call (NVML's
// process list, as the context overhead is), less what the limiter itself charged this
// process meanwhile (another thread's allocation is charged once, by its own hook); charged
// after the call, and a call whose memory does not fit is undone and refused. The charge is a
// ledger record under the object, owned by a context (the current one for code), so that the
// object's end, or its context's, gives back exactly it.

#include <stdint.h>

#include "runtime.h"

namespace vgpu::taken {

/// What this process holds on a device at one moment, as the driver and the limiter count it.
struct Mark {
  uint64_t driver = 0;   // the driver's figure (this process, or the whole device)
  uint64_t charged = 0;  // what the limiter had charged over the same scope
  int scope = 0;         // 0: no figure; 1: this process (NVML); 2: the whole device
};

/// Takes a mark on CUDA ordinal `dev`.
Mark mark(int dev);

/// Bytes the driver took between two marks beyond what the limiter charged; 0 when unknown.
uint64_t grown(const Mark& before, const Mark& after);

/// Runs `make` (which creates the object whose id `id()` then gives) in the current context and
/// charges what it took on the context's device, recorded under (`kind`, id); if that does not fit, `undo` destroys the
/// object again and CUDA_ERROR_OUT_OF_MEMORY is returned. Without a current context (the
/// driver reports the error, or loads nothing onto a device yet) `make` runs alone.
template <class Make, class Undo, class Id>
CUresult charge(Kind kind, Make&& make, Undo&& undo, Id&& id);

/// The same on device `dev` for an object owned by context `owner` (0: by none, given back
/// only by its own destruction).
template <class Make, class Undo, class Id>
CUresult chargeOn(Kind kind, int dev, uintptr_t owner, Make&& make, Undo&& undo, Id&& id);

/// Runs `unload` and, if it succeeds, gives back what the object (`kind`, `handle`) was charged.
template <class F>
CUresult release(Kind kind, const void* handle, F&& unload);

template <class Make, class Undo, class Id>
CUresult charge(Kind kind, Make&& make, Undo&& undo, Id&& id) {
  Ctx c;
  if (!currentContext(&c)) return make();
  return chargeOn(kind, c.dev, reinterpret_cast<uintptr_t>(c.ctx), make, undo, id);
}

template <class Make, class Undo, class Id>
CUresult chargeOn(Kind kind, int dev, uintptr_t owner, Make&& make, Undo&& undo, Id&& id) {
  // Measuring costs two NVML queries per call (a framework may load hundreds of libraries at
  // start): only where there is a limit to keep.
  if (dev < 0 || dev >= kLimiterMaxDevices || runtime().memoryLimit(dev) == 0) return make();
  publishDevice(dev);
  Mark before = mark(dev);
  CUresult rc = make();
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t bytes = grown(before, mark(dev));
  if (bytes != 0 && reserveMemory(dev, bytes) != CUDA_SUCCESS) {
    undo();
    logf(kLogInfo, "%llu bytes the driver took refused: over the memory limit", static_cast<unsigned long long>(bytes));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Record rec;
  rec.dev = dev;
  rec.bytes = bytes;
  rec.ctx = owner;
  ledger::put(kind, reinterpret_cast<uintptr_t>(id()), rec);
  return CUDA_SUCCESS;
}

template <class F>
CUresult release(Kind kind, const void* handle, F&& unload) {
  auto id = reinterpret_cast<uintptr_t>(handle);
  Record rec;
  bool known = ledger::take(kind, id, &rec);
  CUresult rc = unload();
  return known ? settleFree(kind, id, rec, rc) : rc;
}

}  // namespace vgpu::taken
