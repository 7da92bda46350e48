// The thin shim that exports HygonBackend over the C ABI; all logic is in hygon_backend.cpp.
#include "hygon_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::hygon::HygonBackend, "hygon",
                    "Hygon DCUs: ROCm-SMI/hydmi discovery, vDCU partitions by compute units and memory")
