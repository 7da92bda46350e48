// The thin shim that exports SimBackend over the C ABI; all logic is in sim_backend.cpp.
#include "sim_backend.h"
#include "vgpu/sdk/backend_adapter.h"

VGPU_DEFINE_BACKEND(vgpu::sim::SimBackend, "sim", "Simulated devices described in a YAML file")
