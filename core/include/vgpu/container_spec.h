#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vgpu {

/// A bind mount from the host into the container.
struct Mount {
  std::string hostPath;
  std::string containerPath;
  bool readOnly = true;
  bool operator==(const Mount&) const = default;
};

/// A device node from the host made available in the container.
struct DeviceNode {
  std::string hostPath;
  std::string containerPath;
  std::string permissions = "rw";  ///< cgroup permissions: some of "r", "w", "m".
  bool operator==(const DeviceNode&) const = default;
};

/// An OCI hook the container runtime runs for the container (CDI containerEdits.hooks), e.g.
/// one that sets a driver's limits on the container's cgroup before it starts.
struct OciHook {
  std::string hookName = "createContainer";  ///< the OCI hook point
  std::string path;                          ///< the program, on the host
  std::vector<std::string> args;             ///< argv, args[0] the program's name
  std::vector<std::string> env;              ///< NAME=value
  bool operator==(const OciHook&) const = default;
};

/// A note for whoever runs the pod (e.g. which component enforces its memory limit): the
/// node agent posts it as a Normal event on the pod.
struct PodNotice {
  std::string reason;   ///< CamelCase, the event's reason
  std::string message;  ///< one sentence a person can act on
  bool operator==(const PodNotice&) const = default;
};

/// A shared region (vgpu/shared_region.h) the limiter created in the container's host folder.
/// The node agent reads usage from this file only, and only while it is this inode: whatever
/// else a tenant writes into the folder is never read (docs/security.md).
struct RegionFile {
  std::string path;         ///< relative to ContainerGrant::hostDir, e.g. "shared/shared-region"
  std::uint64_t inode = 0;  ///< as the limiter created it
  bool operator==(const RegionFile&) const = default;
};

/// What the kubelet must do to start one container with its devices: the vendor-neutral
/// form of the device plugin's ContainerAllocateResponse.
struct ContainerSpec {
  std::map<std::string, std::string> env;
  std::vector<Mount> mounts;
  std::vector<DeviceNode> devices;
  std::map<std::string, std::string> annotations;  ///< for the container runtime (the response's)
  /// For the container runtime too: the front ends put them in a CDI spec (the DRA claim's,
  /// or one the device plugin writes and names in the response's cdi_devices).
  std::vector<OciHook> hooks;
  /// For the pod: the node agent writes them on the pod when it records the Allocate
  /// outcome (e.g. what another vendor's components read there).
  std::map<std::string, std::string> podAnnotations;
  /// Not part of the kubelet's answer: the agent posts them on the pod as events.
  std::vector<PodNotice> notices;
  /// Not part of the kubelet's answer: the region the agent exports the container's usage from.
  std::optional<RegionFile> region;
  bool operator==(const ContainerSpec&) const = default;
};

}  // namespace vgpu
