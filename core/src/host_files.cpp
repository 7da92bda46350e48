// Link-safe file operations in folders a tenant can write into (vgpu/host_files.h).
#include "vgpu/host_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace vgpu {
namespace {

constexpr int kMaxDepth = 128;

std::string sysError(const std::string& what, const std::string& shown) {
  return what + " " + shown + ": " + std::strerror(errno);
}

/// Why `st` is not this user's own entry of the wanted kind; empty when it is.
std::string foreign(const struct stat& st, bool wantDir) {
  if (wantDir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return wantDir ? "is not a folder" : "is not a regular file";
  if (st.st_uid != ::geteuid())
    return "is owned by user " + std::to_string(st.st_uid) + ", not by the node agent (user " +
           std::to_string(::geteuid()) + ")";
  if (!wantDir && st.st_nlink != 1) return "has " + std::to_string(st.st_nlink) + " hard links";
  return {};
}

Status removeIn(int dir, const std::string& name, const std::string& shown, int depth) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Status() : Status(makeError(sysError("cannot look at", shown)));
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) return makeError(sysError("cannot remove", shown));
    return {};
  }
  if (depth >= kMaxDepth)
    return makeError("cannot remove " + shown + ": folders are nested more than " + std::to_string(kMaxDepth) +
                     " levels deep");
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    // Replaced by a link or a file since fstatat: remove that, without following it.
    if (errno == ELOOP || errno == ENOTDIR) return removeIn(dir, name, shown, depth);
    return errno == ENOENT ? Status() : Status(makeError(sysError("cannot open", shown)));
  }
  std::vector<std::string> names;
  {
    const int listed = ::dup(fd.get());
    DIR* d = listed >= 0 ? ::fdopendir(listed) : nullptr;
    if (d == nullptr) {
      if (listed >= 0) ::close(listed);
      return makeError(sysError("cannot list", shown));
    }
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
  }
  Status result;
  for (const auto& n : names)
    if (auto s = removeIn(fd.get(), n, shown + "/" + n, depth + 1); !s.ok() && result.ok()) result = s;
  if (!result.ok()) return result;
  if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return makeError(sysError("cannot remove", shown));
  return {};
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

std::string pathAt(int dir, const std::string& name) { return "/proc/self/fd/" + std::to_string(dir) + "/" + name; }

std::uint64_t inodeOf(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

Result<UniqueFd> openOwnDir(const std::filesystem::path& path, mode_t mode) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    std::filesystem::create_directories(path, ec);
    if (ec) return makeError("cannot create " + path.string() + ": " + ec.message());
    ::chmod(path.c_str(), mode);
  }
  return openOwnDirAt(AT_FDCWD, path.string(), path.string());
}

Result<UniqueFd> openOwnDirAt(int dir, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno != ELOOP && errno != ENOTDIR) return makeError(sysError("cannot open", shown));
    // O_DIRECTORY answers ENOTDIR for a link too: say which it is.
    struct stat st {};
    const bool link = ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    return makeError("refusing " + shown + (link ? ": it is a symbolic link" : ": it is not a folder"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return makeError(sysError("cannot look at", shown));
  if (auto why = foreign(st, true); !why.empty()) return makeError("refusing " + shown + ": it " + why);
  return fd;
}

Result<UniqueFd> makeOwnDirAt(int dir, const std::string& name, mode_t mode, const std::string& shown) {
  if (::mkdirat(dir, name.c_str(), mode) != 0 && errno != EEXIST) return makeError(sysError("cannot create", shown));
  auto fd = openOwnDirAt(dir, name, shown);
  if (!fd) return fd;
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return makeError(sysError("cannot look at", shown));
  if ((st.st_mode & 07777) != mode && ::fchmod(fd->get(), mode) != 0) return makeError(sysError("cannot chmod", shown));
  return fd;
}

Result<UniqueFd> createOwnFileAt(int dir, const std::string& name, mode_t mode, const std::string& shown,
                                 bool* created) {
  constexpr int kOpen = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  // Twice at most: what a tenant left there is removed once; a second one means a race.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = true;
    UniqueFd fd(::openat(dir, name.c_str(), kOpen | O_CREAT | O_EXCL, mode));
    if (!fd.valid() && errno == EEXIST) {
      fresh = false;
      fd = UniqueFd(::openat(dir, name.c_str(), kOpen));
    }
    if (!fd.valid()) {
      if (errno != ELOOP && errno != EISDIR && errno != ENXIO && errno != ENOENT)
        return makeError(sysError("cannot create", shown));
    } else {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return makeError(sysError("cannot look at", shown));
      if (foreign(st, false).empty()) {
        if ((st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) != 0)
          return makeError(sysError("cannot chmod", shown));
        if (created != nullptr) *created = fresh;
        return fd;
      }
    }
    if (auto s = removeAt(dir, name, shown); !s.ok()) return s.error();
  }
  return makeError("cannot create " + shown + ": something else keeps appearing in its place");
}

Result<UniqueFd> openOwnFileAt(int dir, const std::string& name, std::uint64_t inode, const std::string& shown) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid())
    return makeError(errno == ELOOP ? "refusing " + shown + ": it is a symbolic link" : sysError("cannot open", shown));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return makeError(sysError("cannot look at", shown));
  if (auto why = foreign(st, false); !why.empty()) return makeError("refusing " + shown + ": it " + why);
  if (static_cast<std::uint64_t>(st.st_ino) != inode)
    return makeError("refusing " + shown + ": it is inode " + std::to_string(st.st_ino) + ", not inode " +
                     std::to_string(inode) + " that the node agent created");
  return fd;
}

Status replaceFileAt(int dir, const std::string& name, const std::string& text, mode_t mode, const std::string& shown) {
  const std::string tmp = name + ".tmp";
  if (auto s = removeAt(dir, tmp, shown + ".tmp"); !s.ok()) return s;
  UniqueFd fd(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return makeError(sysError("cannot write", shown + ".tmp"));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string msg = sysError("cannot write", shown + ".tmp");
      ::unlinkat(dir, tmp.c_str(), 0);
      return makeError(msg);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd.get(), mode) != 0 || ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    // A folder in its place cannot be renamed over: it goes, then the file takes its place.
    const bool folder = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST;
    if (!folder || !removeAt(dir, name, shown).ok() || ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
      const std::string msg = sysError("cannot write", shown);
      ::unlinkat(dir, tmp.c_str(), 0);
      return makeError(msg);
    }
  }
  return {};
}

Status removeAt(int dir, const std::string& name, const std::string& shown) { return removeIn(dir, name, shown, 0); }

Result<bool> tmpfsMountedAt(int dir, const std::string& name, const std::string& shown) {
  auto fd = openOwnDirAt(dir, name, shown);
  if (!fd) return fd.error();
  struct stat parent {}, self {};
  struct statfs fs {};
  if (::fstat(dir, &parent) != 0 || ::fstat(fd->get(), &self) != 0 || ::fstatfs(fd->get(), &fs) != 0)
    return makeError(sysError("cannot look at", shown));
  // Another device than its parent's: the root of a mount, not a folder on one.
  return self.st_dev != parent.st_dev && fs.f_type == TMPFS_MAGIC;
}

Status mountTmpfsAt(int dir, const std::string& name, std::uint64_t sizeBytes, std::uint64_t inodes,
                    const std::string& shown) {
  auto fd = openOwnDirAt(dir, name, shown);
  if (!fd) return fd.error();
  // The folder's own mode (0755 for a container's, 0777 for a folder tenants share): the
  // tmpfs root replaces the folder, and whoever may write there must still be able to.
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return makeError(sysError("cannot look at", shown));
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const std::string options = "size=" + std::to_string(sizeBytes) + ",nr_inodes=" + std::to_string(inodes) +
                              ",mode=" + mode + ",uid=" + std::to_string(::geteuid()) + ",gid=" + std::to_string(::getegid());
  // The folder the descriptor holds, whatever its path has become since it was checked.
  const std::string target = "/proc/self/fd/" + std::to_string(fd->get());
  if (::mount("vgpu", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options.c_str()) != 0) {
    return makeError(sysError("cannot mount a tmpfs on", shown));
  }
  return {};
}

Result<bool> mountSharedAt(int dir, const std::string& name, const std::string& shown) {
  auto fd = openOwnDirAt(dir, name, shown);
  if (!fd) return fd.error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return makeError(sysError("cannot look at", shown));
  const std::string device = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return makeError("cannot read /proc/self/mountinfo to see whether " + shown + " is shared");
  // "<id> <parent> <major:minor> <root> <mount point> <options> [<optional>...] - <type> ..."
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, options, optional;
    fields >> id >> parent >> dev >> root >> point >> options;
    if (dev != device || root != "/") continue;
    found = true;
    while (fields >> optional && optional != "-")
      if (optional.rfind("shared:", 0) == 0) return true;
  }
  if (!found) return makeError("refusing " + shown + ": no mount of its device " + device + " in /proc/self/mountinfo");
  return false;
}

Status unmountAt(int dir, const std::string& name, const std::string& shown) {
  // A few at most: one mount each time the agent mounted, stacked if a release was missed.
  for (int attempt = 0; attempt < 16; ++attempt) {
    struct stat parent {}, self {};
    if (::fstatat(dir, name.c_str(), &self, AT_SYMLINK_NOFOLLOW) != 0)
      return errno == ENOENT ? Status() : Status(makeError(sysError("cannot look at", shown)));
    if (!S_ISDIR(self.st_mode)) return {};  // a link or a file: no mount of ours is there
    if (::fstat(dir, &parent) != 0) return makeError(sysError("cannot look at", shown));
    if (self.st_dev == parent.st_dev) return {};
    if (::umount2(pathAt(dir, name).c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
      return makeError(sysError("cannot unmount", shown));
  }
  return makeError("cannot unmount " + shown + ": still a mount after 16 unmounts");
}

}  // namespace vgpu
