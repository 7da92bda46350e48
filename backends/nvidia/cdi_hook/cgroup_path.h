#pragma once
// Which cgroup a container's process is in, as the sysfs path NVML's per-cgroup memory limits
// name (nameSpace): from /proc/<pid>/cgroup, or from the OCI config's linux.cgroupsPath.

#include <string>

#include "vgpu/result.h"

namespace vgpu::nvidia::hook {

/// The memory cgroup in the text of /proc/<pid>/cgroup, relative to <sys>/fs/cgroup: the v1
/// memory controller's ("memory/kubepods/pod1/c1") where a v1 hierarchy has it (also on
/// hybrid hosts), else the unified v2 one ("kubepods.slice/.../cri-containerd-c1.scope").
/// Errors: no such line, or the process is in the root cgroup.
Result<std::string> memoryCgroupFromProc(const std::string& procCgroupText);

/// The same from an OCI runtime's linux.cgroupsPath: "slice:prefix:name" (the systemd cgroup
/// driver: the slice expanded into its parents, the unit "<prefix>-<name>.scope") or a path
/// (cgroupfs). `v1`: prefixed with "memory/". Errors name what is malformed.
Result<std::string> memoryCgroupFromCgroupsPath(const std::string& cgroupsPath, bool v1);

}  // namespace vgpu::nvidia::hook
