#pragma once
// The one place either front end asks a backend's limiter for what a container (or a DRA
// claim, handed to the limiter as one container) gets: env, mounts, device nodes, region.

#include "vgpu/backend.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// The spec the limiter of `backend` makes for `grant`; an empty spec when the backend has no
/// limiter. An error says that backend cannot set up the devices, and why.
Result<ContainerSpec> containerSpecFor(Backend& backend, const ContainerGrant& grant);

}  // namespace vgpu::deviceplugin
