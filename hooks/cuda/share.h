#pragma once
// Memory shared between the processes of a container (CUDA IPC, VMM handles and memory pools
// exported as file descriptors): the exporter moves its charge into a share entry of the region
// (vgpu/region_shares.h) and every process of the container that opens or imports the same
// memory holds that entry instead of being charged again. This process's side of it: which
// of its pointers and handles stand for which entry. Only export and import paths come here;
// the allocation fast path never does.

#include <stdint.h>

#include "cuda_api.h"

namespace vgpu::shares {

/// Whether this process has published or holds anything (a free of an unknown pointer then
/// looks here).
bool any();

/// A cuMemAlloc pointer was freed (or its context is gone): if it was published, its entry is
/// let go.
void pointerFreed(CUdeviceptr base);

/// The last reference to a handle marked kShared is gone: its entry is let go.
void handleGone(CUmemGenericAllocationHandle handle);

/// A pool is destroyed: what it published (exported) or held (imported) is let go.
void poolGone(CUmemoryPool pool);

/// Context `ctx` is gone: what was exported or opened in it is let go.
void contextGone(CUcontext ctx);

/// cuMemRelease of a handle that is not an allocation of the ledger (a multicast object).
void otherReleased(CUmemGenericAllocationHandle handle);

}  // namespace vgpu::shares
