#pragma once
// Container Device Interface specs the node agent writes (reference/k8s-protocols.md 6.4):
// the runtime applies a spec's container edits (env, mounts, device nodes, OCI hooks) to the
// containers that name its device: a DRA claim's shares, a device-plugin container's hooks.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::node {

/// The device plugin's CDI kind for one container's spec (a backend's OCI hooks), named by the
/// handout, and the annotation naming it for kubelets that do not pass cdi_devices on.
inline constexpr const char* kContainerCdiKind = "vgpu.io/container";
inline constexpr const char* kContainerCdiAnnotation = "cdi.k8s.io/vgpu-container";

/// "<driver>/share": the CDI kind of the DRA shares of one driver.
std::string cdiKind(const std::string& driver);
/// "<kind>=<name>".
std::string cdiDeviceId(const std::string& kind, const std::string& name);
/// "<kind with '/' as '-'>_<name>.json".
std::string cdiSpecFileName(const std::string& kind, const std::string& name);

/// The CDI devices a limiter asks for through container annotations `cdi.k8s.io/<name>:
/// <kind>=<device>,...` (the device-plugin path's way to name another spec, e.g. the GPU's
/// own from the NVIDIA toolkit); the DRA path returns them to the kubelet as CDI ids.
std::vector<std::string> cdiDevicesFromAnnotations(const std::map<std::string, std::string>& annotations);

/// One CDI device `name` whose edits are `spec`'s env, mounts (bind, read-only unless not),
/// device nodes (path in the container, hostPath on the host) and OCI hooks (hookName, path,
/// args, env: the runtime runs them, a failing createContainer hook fails the start); cdiVersion 0.5.0 (the
/// first with hostPath), 0.6.0 when the spec carries annotations for the runtime (those
/// that do not name CDI devices).
boost::json::object cdiSpec(const std::string& kind, const std::string& name, const ContainerSpec& spec);

/// Writes `json` to `dir`/`fileName` atomically (temp file, fsync, rename): CDI specs and the
/// checkpoint. Errors name the path.
Status writeJsonAtomically(const std::filesystem::path& dir, const std::string& fileName, const boost::json::object& json);

}  // namespace vgpu::node
