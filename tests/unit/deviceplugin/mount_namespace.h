#pragma once
// Tests that mount: a child process with a mount namespace of its own (nothing it mounts is
// seen on this machine), and what they look at in it. Shared by the tmpfs tests of both
// front ends (folder_tmpfs_test.cpp, tests/unit/dra/claim_tmpfs_test.cpp); they need root.

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace vgpu::deviceplugin::testing {

/// Runs `body` in a child with a mount namespace of its own (private from the start: nothing
/// reaches this machine's mounts, and all goes when the child ends). A failure in the child
/// fails the test; its messages are printed by the child.
inline void inOwnMountNamespace(const std::function<void()>& body) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      std::perror("unshare / private mounts");
      ::_exit(2);
    }
    body();
    std::fflush(stdout);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the test's child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the test's child failed (above)";
}

/// A daemon's state folder as the chart mounts it when privileged (hostPath, mountPropagation:
/// Bidirectional): a shared mount, so what is mounted under it propagates.
inline void mountShared(const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  ASSERT_EQ(::mount(folder.c_str(), folder.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(::mount(nullptr, folder.c_str(), nullptr, MS_SHARED, nullptr), 0) << std::strerror(errno);
}

inline bool isTmpfs(const std::filesystem::path& p) {
  struct statfs st {};
  return ::statfs(p.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

/// Lines of /proc/self/mountinfo whose mount point is `p`.
inline int mountsAt(const std::filesystem::path& p) {
  std::ifstream in("/proc/self/mountinfo");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == p.string()) ++n;
  }
  return n;
}

inline std::uint64_t inodeAt(const std::filesystem::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace vgpu::deviceplugin::testing
