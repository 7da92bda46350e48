// The thin shim that exports NvidiaBackend over the C ABI; all logic is in the library.
#include "nvidia_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::nvidia::NvidiaBackend, "nvidia",
                    "NVIDIA GPUs shared through libvgpu.so (NVML discovery, Xid health)")
