#pragma once
// What a CDI-aware container runtime (containerd 1.7+, CRI-O) does with the CDI device ids the
// kubelet got from a DRA driver, for the end-to-end tests: find each id's device in the spec
// files of the CDI folders and apply its spec's container edits, then the device's, to the
// container, as the Container Device Interface specification and its reference
// implementation (cncf-tags/container-device-interface, pkg/cdi) do:
// - spec files are JSON objects {cdiVersion, kind "vendor/class", annotations, devices[]
//   {name, annotations, containerEdits}, containerEdits}; a field the spec does not define,
//   or one newer than the file's cdiVersion (deviceNodes[].hostPath needs 0.5.0,
//   annotations 0.6.0), makes the file invalid;
// - a device is "<kind>=<name>"; folders later in the list win over earlier ones
//   (/var/run/cdi over /etc/cdi); the same device twice in one folder is a conflict;
// - an id no spec defines fails the container ("unresolvable CDI devices");
// - a spec's own containerEdits are applied once, when the first of its devices is, before
//   that device's edits; then every device's own, in the order asked;
// - env "K=V" replaces an earlier K, else is added; a device node or mount replaces an
//   earlier one at the same container path; a device node's hostPath defaults to its path,
//   its permissions to "rwm"; mounts are ordered by the depth of their container path.
// The container is started by container_runtime.h, so what it models is what this applies:
// env, bind mounts ("bind"/"rbind", "ro" or read-write) and device nodes (bind-mounted, since
// the fake devices are plain files, where a runtime creates a node of the host's type).
// Hooks, additionalGids, intelRdt and netDevices are refused with an error naming them rather
// than dropped, so a spec that relies on one cannot pass here unnoticed.

#include <filesystem>
#include <string>
#include <vector>

#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::e2e {

/// The container edits of `cdiIds` from the spec files (*.json) in `specDirs` (lowest priority
/// first), applied to `base`. Errors name the file, the device or the field.
Result<ContainerSpec> applyCdiDevices(const std::vector<std::filesystem::path>& specDirs,
                                      const std::vector<std::string>& cdiIds, ContainerSpec base = {});

}  // namespace vgpu::e2e
