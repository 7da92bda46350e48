#include "container_runtime.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

namespace vgpu::e2e {
namespace {

namespace fs = std::filesystem;

/// Everything the child does, as plain strings made before fork.
struct MountPlan {
  struct Overlay {
    std::string target, options;
  };
  struct Bind {
    std::string source, target;
    bool readOnly = false;
  };
  std::string uidMap, gidMap;  ///< for a user namespace when not root; empty when root
  std::vector<Overlay> overlays;
  std::vector<std::string> mkdirs;   ///< in order, parents first
  std::vector<std::string> touches;  ///< empty files to bind a file onto
  std::vector<Bind> binds;
};

// ---- in the child: system calls only ----

void say(const char* a, const char* b = "", int err = 0) {
  char digits[16];
  int n = 0;
  for (int e = err; e > 0 && n < 15; e /= 10) digits[n++] = static_cast<char>('0' + e % 10);
  (void)!::write(2, "container runtime: ", 19);
  (void)!::write(2, a, std::strlen(a));
  (void)!::write(2, " ", 1);
  (void)!::write(2, b, std::strlen(b));
  (void)!::write(2, " errno ", 7);
  while (n > 0) (void)!::write(2, &digits[--n], 1);
  (void)!::write(2, "\n", 1);
}

bool writeProcFile(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

/// The steps every container start begins with; their number is the probe's exit code.
enum NamespaceStep : int { kStepUnshare = 10, kStepIdMaps = 11, kStepPrivateRoot = 12 };

/// A mount namespace of our own whose mounts never reach the host: 0, or the step that failed.
int enterPrivateMountNamespace(const MountPlan& plan) {
  if (plan.uidMap.empty()) {
    if (::unshare(CLONE_NEWNS) != 0) return say("unshare(CLONE_NEWNS)", "", errno), kStepUnshare;
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
      return say("unshare(CLONE_NEWUSER|CLONE_NEWNS)", "", errno), kStepUnshare;
    if (!writeProcFile("/proc/self/setgroups", "deny") || !writeProcFile("/proc/self/uid_map", plan.uidMap) ||
        !writeProcFile("/proc/self/gid_map", plan.gidMap))
      return say("writing the user namespace's id maps", "", errno), kStepIdMaps;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return say("making / private", "", errno), kStepPrivateRoot;
  return 0;
}

bool applyPlan(const MountPlan& plan) {
  if (enterPrivateMountNamespace(plan) != 0) return false;
  for (const auto& o : plan.overlays)
    if (::mount("overlay", o.target.c_str(), "overlay", 0, o.options.c_str()) != 0)
      return say("overlay on", o.target.c_str(), errno), false;
  for (const auto& d : plan.mkdirs)
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return say("mkdir", d.c_str(), errno), false;
  for (const auto& f : plan.touches) {
    const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return say("creating", f.c_str(), errno), false;
    ::close(fd);
  }
  for (const auto& b : plan.binds) {
    if (::mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      return say("bind mount onto", b.target.c_str(), errno), false;
    if (b.readOnly && ::mount(nullptr, b.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return say("read-only remount of", b.target.c_str(), errno), false;
  }
  return true;
}

// ---- in the parent ----

/// Who the container's user namespace maps to root, when we are not root ourselves.
void mapToRoot(MountPlan& plan) {
  if (::geteuid() == 0) return;
  plan.uidMap = "0 " + std::to_string(::geteuid()) + " 1\n";
  plan.gidMap = "0 " + std::to_string(::getegid()) + " 1\n";
}

/// The nearest folder of `path` that exists on the host.
fs::path existingAncestor(fs::path path) {
  std::error_code ec;
  while (!fs::exists(path, ec) && path.has_parent_path() && path != path.parent_path()) path = path.parent_path();
  return path;
}

Result<MountPlan> planMounts(const ContainerSpec& spec, const std::string& scratchDir) {
  MountPlan plan;
  mapToRoot(plan);
  std::vector<MountPlan::Bind> wanted;
  for (const auto& m : spec.mounts) wanted.push_back({m.hostPath, m.containerPath, m.readOnly});
  for (const auto& d : spec.devices) wanted.push_back({d.hostPath, d.containerPath, false});

  std::set<fs::path> overlayRoots;
  std::set<std::string> created;
  for (auto& b : wanted) {
    std::error_code ec;
    if (!fs::exists(b.source, ec)) return makeError("mount source " + b.source + " does not exist on the host");
    // Resolve symlinks of the host's own folders (/var/run -> /run): the mount lands there.
    const fs::path target = fs::weakly_canonical(b.target, ec);
    if (ec || !target.is_absolute()) return makeError("container path " + b.target + " is not absolute");
    b.target = target.string();
    if (fs::exists(target, ec)) continue;
    const fs::path root = existingAncestor(target);
    overlayRoots.insert(root);
    std::vector<fs::path> missing;
    for (fs::path p = target.parent_path(); p != root && p.has_relative_path(); p = p.parent_path())
      missing.push_back(p);
    for (auto it = missing.rbegin(); it != missing.rend(); ++it)
      if (created.insert(it->string()).second) plan.mkdirs.push_back(it->string());
    if (fs::is_directory(b.source, ec)) {
      if (created.insert(target.string()).second) plan.mkdirs.push_back(target.string());
    } else {
      plan.touches.push_back(target.string());
    }
  }
  // An overlay inside another overlay is not needed: the outer one holds the new paths.
  int n = 0;
  for (const auto& root : overlayRoots) {
    const bool nested = std::any_of(overlayRoots.begin(), overlayRoots.end(), [&](const fs::path& other) {
      const auto rel = root.lexically_relative(other);
      return other != root && !rel.empty() && *rel.begin() != "..";
    });
    if (nested) continue;
    const fs::path upper = fs::path(scratchDir) / ("overlay-" + std::to_string(n)) / "upper";
    const fs::path work = fs::path(scratchDir) / ("overlay-" + std::to_string(n++)) / "work";
    std::error_code ec;
    fs::create_directories(upper, ec);
    fs::create_directories(work, ec);
    if (ec) return makeError("cannot create " + work.string() + ": " + ec.message());
    plan.overlays.push_back(
        {root.string(), "lowerdir=" + root.string() + ",upperdir=" + upper.string() + ",workdir=" + work.string()});
  }
  plan.binds = std::move(wanted);
  return plan;
}

constexpr const char* kLeaveOut = " To leave the end-to-end tests out, configure with -DVGPU_WITHOUT_E2E=ON.";

}  // namespace

Status checkContainerSupport() {
  MountPlan plan;
  mapToRoot(plan);
  const pid_t pid = ::fork();
  if (pid < 0) return makeError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int devNull = ::open("/dev/null", O_WRONLY);
    if (devNull >= 0) ::dup2(devNull, 2);  // the parent words the failure
    ::_exit(enterPrivateMountNamespace(plan));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int step = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  switch (step) {
    case 0:
      return {};
    case kStepUnshare:
    case kStepIdMaps:
      return makeError(std::string("the end-to-end tests start each container in a mount namespace of its own, and "
                                   "this process cannot make one: they need root (CAP_SYS_ADMIN), or unprivileged "
                                   "user namespaces for other users (sysctl kernel.unprivileged_userns_clone=1), "
                                   "and a seccomp profile that allows unshare.") + kLeaveOut);
    case kStepPrivateRoot:
      return makeError(std::string("the end-to-end tests make / private in each container's mount namespace, and "
                                   "the kernel refused (EINVAL: / is not a mount point, as inside a plain chroot). "
                                   "Bind-mount the root folder onto itself before entering it (mount --bind DIR DIR; "
                                   "docs/development.md shows the steps).") + kLeaveOut);
    default:
      return makeError("the mount namespace probe ended with status " + std::to_string(status));
  }
}

Result<std::unique_ptr<ChildProcess>> startContainer(const ContainerLaunch& launch) {
  auto plan = planMounts(launch.spec, launch.scratchDir);
  if (!plan.ok()) return std::move(plan).error();
  auto shared = std::make_shared<MountPlan>(std::move(plan).value());
  ProcessOptions o;
  o.program = launch.program;
  o.args = launch.args;
  o.env = launch.runtimeEnv;
  for (const auto& [k, v] : launch.spec.env) o.env[k] = v;
  o.logFile = launch.logFile;
  o.pipeStdin = true;
  o.pipeStdout = true;
  o.beforeExec = [shared] { return applyPlan(*shared); };
  return ChildProcess::start(std::move(o));
}

bool hasDeviceNode(const ContainerSpec& spec, const std::string& containerPath) {
  return std::any_of(spec.devices.begin(), spec.devices.end(),
                     [&](const DeviceNode& d) { return d.containerPath == containerPath; });
}

void removeTree(const std::filesystem::path& root) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(root, ec);
}

}  // namespace vgpu::e2e
