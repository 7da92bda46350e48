// The loadable AMD backend: libvgpu-backend-amd.so's one exported symbol.
#include "amd_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::amd::AmdBackend, "amd", "AMD Instinct GPUs (AMD SMI, MI300 compute partitions)")
