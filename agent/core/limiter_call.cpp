// Asking a backend's limiter for a container's spec (limiter_call.h).

#include "limiter_call.h"

namespace vgpu::deviceplugin {

Result<ContainerSpec> containerSpecFor(Backend& backend, const ContainerGrant& grant, const FolderBound& bound) {
  Limiter* limiter = backend.limiter();
  if (!limiter) return ContainerSpec{};
  auto spec = limiter->containerSpec(grant);
  if (!spec.ok()) return makeError("backend " + backend.name() + " cannot set up the devices: " + spec.error().message);
  if (auto b = boundSharedFolders(bound, *spec, grant.hostDir); !b.ok()) {
    (void)limiter->release(grant.container);
    return b.error();
  }
  return spec;
}

}  // namespace vgpu::deviceplugin
