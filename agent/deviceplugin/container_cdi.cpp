// The device plugin's CDI spec of one container (kind vgpu.io/container, named by the
// handout): what carries a backend's OCI hooks (vgpu-cdi-hook) to the container runtime.

#include <filesystem>

#include "agent_impl.h"
#include "cdi_spec.h"

namespace vgpu::deviceplugin {

Status Agent::Impl::writeContainerCdi(const std::string& handoutId, ContainerSpec& spec) {
  const std::string file = node::cdiSpecFileName(node::kContainerCdiKind, handoutId);
  if (spec.hooks.empty()) {
    removeContainerCdi(handoutId);  // an earlier answer's, for the same handout
    return {};
  }
  // Only the hooks: env, mounts and device nodes travel in the Allocate answer as before.
  ContainerSpec edits;
  edits.hooks = spec.hooks;
  if (auto s = node::writeJsonAtomically(options.cdiDir, file, node::cdiSpec(node::kContainerCdiKind, handoutId, edits));
      !s.ok())
    return makeError("cannot write the container's CDI spec (its backend needs the runtime to run " +
                     spec.hooks.front().path + "): " + s.error().message);
  // Named both ways: cdi_devices for kubelets that pass CDI devices on, the annotation for
  // those that do not. A runtime that applies both runs the hooks twice; vgpu-cdi-hook's
  // limits are the same each time.
  spec.annotations[node::kContainerCdiAnnotation] = node::cdiDeviceId(node::kContainerCdiKind, handoutId);
  return {};
}

void Agent::Impl::removeContainerCdi(const std::string& handoutId) {
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(options.cdiDir) / node::cdiSpecFileName(node::kContainerCdiKind, handoutId),
                          ec);
  if (ec) logLine("warning", "cannot remove the CDI spec of " + handoutId + " in " + options.cdiDir + ": " + ec.message());
}

}  // namespace vgpu::deviceplugin
