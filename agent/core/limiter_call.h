#pragma once
// The one place either front end asks a backend's limiter for what a container (or a DRA
// claim, handed to the limiter as one container) gets: env, mounts, device nodes, region.

#include "folder_bound.h"
#include "vgpu/backend.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// The spec the limiter of `backend` makes for `grant`; an empty spec when the backend has no
/// limiter. A node-wide folder the spec mounts writable (the activity board) is bounded as
/// `bound` says before the answer goes out (boundSharedFolders); if it cannot be, the limiter
/// lets go of the grant. An error says that backend cannot set up the devices, and why.
Result<ContainerSpec> containerSpecFor(Backend& backend, const ContainerGrant& grant, const FolderBound& bound);

}  // namespace vgpu::deviceplugin
