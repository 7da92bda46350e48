#pragma once
// File operations of the node side (the agent, a backend's limiter) under folders a tenant
// can write into, such as a container's host folder. The agent runs as root: a path it
// resolves there could be a link a tenant planted, to make root create, chmod, overwrite or
// delete a host file. So every operation here starts from a directory descriptor the caller
// opened and checked, names one entry in it, never follows a link, and refuses entries that
// another user owns (docs/security.md, "The agent's files").

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "vgpu/result.h"

namespace vgpu {

/// Owns one file descriptor; closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// "/proc/self/fd/<dir>/<name>": a path that reaches `name` inside the folder `dir` refers to,
/// whatever became of the folder's own path; for a call that takes only a path (one that
/// opens its last component with O_NOFOLLOW stays inside the folder).
std::string pathAt(int dir, const std::string& name);

/// Opens the folder at `path` (created with `mode`, parents included, when missing):
/// refused when its last component is a link, it is not a folder or this process's user
/// does not own it. `path` itself must be the operator's (only entries inside it are the tenant's).
Result<UniqueFd> openOwnDir(const std::filesystem::path& path, mode_t mode = 0755);

/// The existing folder `name` inside `dir` (AT_FDCWD and an absolute path for the operator's
/// own folders), for reading: refused when it is a link, not a folder, or another user's.
Result<UniqueFd> openOwnDirAt(int dir, const std::string& name, const std::string& shown);

/// The folder `name` inside `dir`, made with `mode` when missing, and set to `mode` (a folder
/// left with another mode by an older version is corrected). Refused: a link, a non-folder,
/// a folder another user owns. `shown` names it in errors.
Result<UniqueFd> makeOwnDirAt(int dir, const std::string& name, mode_t mode, const std::string& shown);

/// The regular file `name` inside `dir`, opened read-write, created with `mode` when missing.
/// What stands there and is not this user's own regular file with one link (a link, a
/// folder's name taken by a file of another user, a hard link to a host file) is removed
/// first, never written through. `created` (when given) says whether the file is new.
Result<UniqueFd> createOwnFileAt(int dir, const std::string& name, mode_t mode, const std::string& shown,
                                 bool* created = nullptr);

/// The regular file `name` inside `dir`, opened read-only, only when it is inode `inode`
/// and this user's own (a link, a replaced or foreign file is refused). Never blocks on a FIFO.
Result<UniqueFd> openOwnFileAt(int dir, const std::string& name, std::uint64_t inode, const std::string& shown);

/// Replaces `name` inside `dir` with a file holding `text`, of mode `mode`, so that a reader
/// sees the old file or the new one, never half of one (a temporary file, then a rename).
Status replaceFileAt(int dir, const std::string& name, const std::string& text, mode_t mode, const std::string& shown);

/// Removes `name` inside `dir`: a file or link is unlinked (a link's target is left alone),
/// a folder is emptied the same way and removed. Missing is fine. Folders nested deeper than
/// 128 levels are refused (a tenant's trap for the stack); what could not go is named.
Status removeAt(int dir, const std::string& name, const std::string& shown);

/// The inode number of the open file `fd` (0 on error).
std::uint64_t inodeOf(int fd);

// Size-limited folders (a tmpfs per container folder, so what a tenant writes into a file
// mounted from it cannot fill the host's disk). Mounting needs CAP_SYS_ADMIN in the mount
// namespace; none of these follows a link in place of the folder.

/// Whether the folder `name` inside `dir` is the root of a tmpfs mounted on exactly that
/// folder (not a folder on a tmpfs mounted higher up). Refused: a link, a non-folder, a
/// folder another user owns.
Result<bool> tmpfsMountedAt(int dir, const std::string& name, const std::string& shown);

/// Mounts a tmpfs of at most `sizeBytes` bytes and `inodes` files on the folder `name` inside
/// `dir` (nosuid, nodev, noexec, the folder's mode, owned by this user). The folder is opened without
/// following a link and the tmpfs goes onto that folder (through /proc/self/fd), never where a
/// link points. Errors name the path and errno's text (EPERM: no CAP_SYS_ADMIN).
Status mountTmpfsAt(int dir, const std::string& name, std::uint64_t sizeBytes, std::uint64_t inodes,
                    const std::string& shown);

/// Whether the mount whose root is the folder `name` inside `dir` is shared with a peer group
/// (/proc/self/mountinfo "shared:"): only then does a mount made here reach the mount
/// namespaces it was propagated from (a container's hostPath with Bidirectional propagation).
Result<bool> mountSharedAt(int dir, const std::string& name, const std::string& shown);

/// Unmounts what is mounted on the folder `name` inside `dir`, lazily (MNT_DETACH: a process
/// still using it keeps it until it lets go), all of a stack of mounts, without following a
/// link. Nothing mounted there, or nothing there, is fine.
Status unmountAt(int dir, const std::string& name, const std::string& shown);

}  // namespace vgpu
