// Size-limited tenant folders (folder_bound.h): the tmpfs policy and the one function both
// front ends bound a folder with.

#include "folder_bound.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "vgpu/host_files.h"
#include "vgpu/shared_region.h"

namespace vgpu::deviceplugin {
namespace {

/// Whether the folder `name` inside `dir` has nothing in it (false when it cannot be read).
bool emptyAt(int dir, const std::string& name, const std::string& shown) {
  auto fd = openOwnDirAt(dir, name, shown);
  DIR* d = fd ? ::fdopendir(fd->get()) : nullptr;
  if (d == nullptr) return false;
  fd->release();
  bool empty = true;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  ::closedir(d);
  return empty;
}

}  // namespace

Result<FolderTmpfs> parseFolderTmpfs(const std::string& text) {
  if (text == "off") return FolderTmpfs::kOff;
  if (text == "best-effort") return FolderTmpfs::kBestEffort;
  if (text == "required") return FolderTmpfs::kRequired;
  return makeError("\"" + text + "\" is not one of required, best-effort, off");
}

std::string toString(FolderTmpfs mode) {
  switch (mode) {
    case FolderTmpfs::kOff: return "off";
    case FolderTmpfs::kBestEffort: return "best-effort";
    case FolderTmpfs::kRequired: return "required";
  }
  return "off";
}

std::uint64_t FolderBound::defaultFolderBytes() {
  constexpr std::uint64_t kPage = 4096;
  // The region, then a limits file and its replacement (a page each) and room for a few more.
  return (sizeof(vgpu_region) + kPage - 1) / kPage * kPage + 16 * kPage;
}

Status boundFolderAt(const FolderBound& bound, int dir, const std::string& name, const std::string& shown) {
  if (bound.mode == FolderTmpfs::kOff) return {};
  auto mounted = tmpfsMountedAt(dir, name, shown);
  if (!mounted) return mounted.error();  // a link or another user's folder: never mounted over
  if (*mounted) return {};                // its own, from the first time: kept with the region in it
  std::string why;
  bool keep = false;
  if (!emptyAt(dir, name, shown)) {
    // Made while folders were not bounded: a tmpfs over it would hide the running
    // container's region, and the agent would lose its accounting.
    keep = true;
    why = shown + " already holds files made without a tmpfs (a running container's region, tenants' boards): "
                  "left on the host's disk so that they are kept";
  } else if (auto m = mountTmpfsAt(dir, name, bound.sizeBytes, bound.inodes, shown); !m.ok()) {
    why = m.error().message;
    if (why.ends_with(std::strerror(EPERM))) why += " (the agent needs CAP_SYS_ADMIN: " + bound.privilegedValue + ")";
  } else if (auto shared = mountSharedAt(dir, name, shown); !shared || !*shared) {
    // Only a mount that reaches the host's mount namespace is what the kubelet mounts from.
    (void)unmountAt(dir, name, shown);
    why = shared ? "the tmpfs on " + shown +
                       " would not reach the host's mount namespace, where the kubelet mounts the container's files "
                       "from: the agent's state folder needs mountPropagation: Bidirectional (" +
                       bound.privilegedValue + ")"
                 : shared.error().message;
  }
  if (why.empty()) return {};
  if (bound.mode == FolderTmpfs::kRequired && !keep) return makeError(why + " (--region-tmpfs=required)");
  if (bound.unbounded) bound.unbounded(shown, why);
  return {};
}

Status boundSharedFolders(const FolderBound& bound, const ContainerSpec& spec, const std::string& hostDir) {
  namespace fs = std::filesystem;
  if (bound.mode == FolderTmpfs::kOff) return {};
  const fs::path own = fs::path(hostDir).lexically_normal();
  for (const auto& m : spec.mounts) {
    if (m.readOnly) continue;
    const fs::path folder = fs::path(m.hostPath).lexically_normal();
    const auto inside = folder.lexically_relative(own);
    if (!hostDir.empty() && !inside.empty() && *inside.begin() != "..") continue;  // the container's own
    struct stat st {};
    if (::lstat(folder.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;  // a file
    auto parent = openOwnDirAt(AT_FDCWD, folder.parent_path().string(), folder.parent_path().string());
    if (!parent) return makeError("the shared folder " + folder.string() + ": " + parent.error().message);
    if (auto s = boundFolderAt(bound, parent->get(), folder.filename().string(), folder.string()); !s.ok())
      return s;
  }
  return {};
}

}  // namespace vgpu::deviceplugin
