// The loadable Ascend backend: libvgpu-backend-ascend.so's one exported symbol.
#include "ascend_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::ascend::AscendBackend, "ascend", "Huawei Ascend NPUs (DCMI, vNPU templates)")
