#pragma once
// Size limits for the host folders the agent hands to tenants (--region-tmpfs): a tmpfs of
// its own mounted on such a folder, so that what a tenant writes into a file mounted from it
// fails with ENOSPC past a few hundred KiB instead of filling the host's disk
// (docs/security.md, "The agent's files"). Used by both front ends: the handout store for a
// device-plugin container's folder, the claim preparer for a DRA claim's folder.

#include <cstdint>
#include <functional>
#include <string>

#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// Whether each tenant folder is a size-limited tmpfs (--region-tmpfs).
enum class FolderTmpfs {
  kOff,         ///< folders on the host's disk
  kBestEffort,  ///< a tmpfs when the agent can mount one that reaches the host, else the disk and a warning
  kRequired,    ///< a tmpfs, else the Allocate (NodePrepareResources) is refused
};
Result<FolderTmpfs> parseFolderTmpfs(const std::string& text);  ///< "off", "best-effort", "required"
std::string toString(FolderTmpfs mode);

/// How the folders are bounded.
struct FolderBound {
  FolderTmpfs mode = FolderTmpfs::kOff;
  /// The tmpfs's size: libvgpu.so's shared region rounded up to pages, a limits file twice
  /// (while it is replaced) and a little (defaultFolderBytes()).
  std::uint64_t sizeBytes = defaultFolderBytes();
  std::uint64_t inodes = 64;
  /// best-effort (and a folder made before folders were bounded): why `folder` stays on the
  /// host's disk. Called under the caller's lock: keep it short.
  std::function<void(const std::string& folder, const std::string& why)> unbounded;
  /// The chart value that gives the daemon CAP_SYS_ADMIN and Bidirectional propagation,
  /// named in the reasons.
  std::string privilegedValue = "devicePlugin.privileged";

  static std::uint64_t defaultFolderBytes();
};

/// Bounds the folder `name` inside `dir` (the caller made it, without following a link) as
/// `bound` says: a tmpfs mounted on it unless one already is (kept with what is in it, so a
/// region keeps its inode) or the folder already holds files on the disk (an upgrade: kept,
/// reported through `unbounded`). A tmpfs that would not reach the host's mount namespace is
/// taken down again. Errors (name `shown`): a link or another user's folder in its place
/// (never mounted over); with kRequired, any reason the folder stays on the disk.
Status boundFolderAt(const FolderBound& bound, int dir, const std::string& name, const std::string& shown);

/// Bounds, as boundFolderAt does, every folder `spec` mounts writable into the container from
/// outside the container's own `hostDir`: node-wide folders that tenants write together (the
/// NVIDIA backend's activity board), made by the backend. Mounted once and kept while mounted
/// (it outlives every container); the tmpfs keeps the folder's mode. Writable files from
/// outside `hostDir` and read-only mounts are left alone. The folder's parent must be the
/// operator's (its path is the backend's config); errors name the folder.
Status boundSharedFolders(const FolderBound& bound, const ContainerSpec& spec, const std::string& hostDir);

}  // namespace vgpu::deviceplugin
