#pragma once
// "Start the container": what containerd does with a device plugin's answer, for one
// process. The child gets its own mount namespace in which every Mount of the ContainerSpec
// is bind-mounted at its container path (read-only where asked), so libvgpu.so reads its
// limits file at /etc/vgpu/limits.env, the dynamic loader preloads what /etc/ld.so.preload
// names, and the shared region lives where the agent looks for it on the host. Container
// paths that do not exist on the host are created on an overlay of their nearest existing
// folder, visible only inside that namespace: the host is never changed. Device nodes are
// bind-mounted the same way.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::e2e {

struct ContainerLaunch {
  ContainerSpec spec;  ///< the Allocate responses of the container, merged
  std::string program;
  std::vector<std::string> args;
  /// What the image and the runtime add to the spec's env (PATH, the driver libraries a
  /// vendor runtime injects); the spec's own variables win, as in containerd.
  std::map<std::string, std::string> runtimeEnv;
  std::string scratchDir;  ///< the overlays' upper and work folders go here
  std::string logFile;     ///< the process's stderr
};

/// Whether this process can start containers (a private mount namespace, as root or in a
/// user namespace); the error says what is missing and how to provide it.
Status checkContainerSupport();

/// Starts the process with its stdin and stdout on pipes. Errors: a mount plan that cannot
/// be prepared; a mount that fails in the child shows as exit code 127 with the reason in
/// the log.
Result<std::unique_ptr<ChildProcess>> startContainer(const ContainerLaunch& launch);

/// Whether the spec has a device node at `containerPath`.
bool hasDeviceNode(const ContainerSpec& spec, const std::string& containerPath);

/// remove_all, also through the overlays' work folders, which the kernel leaves with mode
/// 000 (unremovable by their owner unless made readable first).
void removeTree(const std::filesystem::path& root);

}  // namespace vgpu::e2e
