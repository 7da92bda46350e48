#pragma once
// Which pod and container a process belongs to, from its cgroup path (/proc/<pid>/cgroup):
// the kubelet puts every container in a cgroup named by its pod's UID, the runtime names
// the leaf by the container's id. The process cannot move itself out of it without
// privileges it does not have in a container, which is why the watchdog trusts it.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace vgpu::deviceplugin {

struct CgroupIdentity {
  std::string podUid;       ///< with dashes, as in metadata.uid
  std::string containerId;  ///< the runtime's id (64 hex digits for containerd, CRI-O, docker); may be empty
  bool operator==(const CgroupIdentity&) const = default;
};

/// Parses the text of /proc/<pid>/cgroup: cgroup v2 ("0::/path") or v1 ("N:controllers:/path"),
/// the kubelet's systemd driver (kubepods-burstable-pod<uid with '_'>.slice/cri-containerd-<id>.scope)
/// and cgroupfs driver (kubepods/burstable/pod<uid>/<id>), paths seen through a cgroup
/// namespace ("/../../...") included. nullopt: the process is in no pod (a host process).
std::optional<CgroupIdentity> parseCgroupIdentity(std::string_view text);

/// What <procRoot>/<pid>/cgroup says; `readable` false when the file cannot be read (the
/// process is gone, or procRoot is not the host's /proc).
struct ProcessCgroup {
  bool readable = false;
  std::optional<CgroupIdentity> identity;
  std::string text;  ///< the file as read (for a backend's per-cgroup query)
};
ProcessCgroup readProcessCgroup(const std::filesystem::path& procRoot, std::uint32_t pid);

/// The runtime's id in a pod status' containerID ("containerd://<id>", "cri-o://<id>",
/// "docker://<id>"): what follows "://", as the cgroup names it; empty when there is none.
std::string runtimeContainerId(std::string_view containerID);

}  // namespace vgpu::deviceplugin
