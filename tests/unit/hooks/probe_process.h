#pragma once
// Running a probe program as a limited process: the library under test, its output and exit
// code, and a deadline so that no test hangs on a probe. Shared by the limiter's process tests.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace vgpu::test {

struct ProbeResult {
  int exitCode = -1;  // -1: killed or timed out
  std::string out;
  std::string err;
};

inline std::string readAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The library under test: VGPU_TEST_LIBVGPU names another build of it (to see a new test fail
/// on the library from before a fix); else the one this build made (VGPU_LIBVGPU).
inline std::string libvgpuPath() {
  const char* lib = getenv("VGPU_TEST_LIBVGPU");
  return lib != nullptr && lib[0] != '\0' ? lib : VGPU_LIBVGPU;
}

/// Runs `exe args...` with exactly the environment `env`, stdout and stderr to files in `dir`;
/// killed (a test failure) if it runs past `timeout`.
inline ProbeResult runProbe(const std::string& exe, const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& env, const std::string& dir,
                            std::chrono::seconds timeout = std::chrono::seconds(60)) {
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  const std::string outPath = dir + "/stdout", errPath = dir + "/stderr";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& s : envStrings) envp.push_back(s.data());
    envp.push_back(nullptr);
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  ProbeResult r;
  if (pid < 0) {
    ADD_FAILURE() << "cannot start " << exe << ": " << strerror(errno);
    return r;
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << exe << " timed out";
      break;
    }
    usleep(2000);
  }
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readAll(outPath);
  r.err = readAll(errPath);
  return r;
}

}  // namespace vgpu::test
