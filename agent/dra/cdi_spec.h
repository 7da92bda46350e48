#pragma once
// Container Device Interface specs for prepared shares (reference/k8s-protocols.md 6.4):
// the kubelet passes the CDI device ids we return to the runtime, which applies the spec's
// container edits (env, mounts, device nodes) to every container that uses the claim.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::dra {

/// "<driver>/share": the CDI kind of the shares of one driver.
std::string cdiKind(const std::string& driver);
/// "<kind>=<name>".
std::string cdiDeviceId(const std::string& kind, const std::string& name);
/// "<kind with '/' as '-'>_<name>.json".
std::string cdiSpecFileName(const std::string& kind, const std::string& name);

/// The CDI devices a limiter asks for through container annotations `cdi.k8s.io/<name>:
/// <kind>=<device>,...` (the device-plugin path's way to name another spec, e.g. the GPU's
/// own from the NVIDIA toolkit); the DRA path returns them to the kubelet as CDI ids.
std::vector<std::string> cdiDevicesFromAnnotations(const std::map<std::string, std::string>& annotations);

/// One CDI device `name` whose edits are `spec`'s env, mounts (bind, read-only unless not)
/// and device nodes (path in the container, hostPath on the host); cdiVersion 0.5.0 (the
/// first with hostPath), 0.6.0 when the spec carries annotations for the runtime (those
/// that do not name CDI devices).
boost::json::object cdiSpec(const std::string& kind, const std::string& name, const ContainerSpec& spec);

/// Writes `json` to `dir`/`fileName` atomically (temp file, fsync, rename): CDI specs and the
/// checkpoint. Errors name the path.
Status writeJsonAtomically(const std::filesystem::path& dir, const std::string& fileName, const boost::json::object& json);

}  // namespace vgpu::dra
