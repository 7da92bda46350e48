// The thin shim that exports CambriconBackend over the C ABI; the logic is in
// cambricon_backend.cpp.
#include "cambricon_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::cambricon::CambriconBackend, "cambricon",
                    "Cambricon MLUs, shared through driver-enforced sMLU partitions (cnDev)")
