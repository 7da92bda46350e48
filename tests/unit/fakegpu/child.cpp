#include "child.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vgpu::fakegpu::test {

int spawnChild(const std::map<std::string, std::string>& env, const std::function<int()>& body) {
  char tmpl[] = "/tmp/vgpu-fakegpu-err-XXXXXX";
  int errFd = mkstemp(tmpl);
  std::fflush(nullptr);
  int pid = fork();
  if (pid == 0) {
    dup2(errFd, 2);
    // Hermetic: the fakes see only what the test sets, whatever the caller's shell had.
    unsetenv("VGPU_FAKE_GPU_CONFIG");
    unsetenv("VGPU_FAKE_GPU_STATE");
    for (const auto& [k, v] : env) {
      if (v.empty()) {
        unsetenv(k.c_str());
      } else {
        setenv(k.c_str(), v.c_str(), 1);
      }
    }
    int rc = body();
    std::fflush(nullptr);
    std::exit(rc);  // a normal exit, so the fake driver releases this process's memory
  }
  close(errFd);
  // Remember where the child's stderr goes: the file is named after its pid.
  std::filesystem::rename(tmpl, "/tmp/vgpu-fakegpu-err-" + std::to_string(pid));
  return pid;
}

ChildResult waitChild(int pid) {
  ChildResult r;
  int status = 0;
  waitpid(pid, &status, 0);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string errPath = "/tmp/vgpu-fakegpu-err-" + std::to_string(pid);
  std::ifstream in(errPath);
  std::stringstream ss;
  ss << in.rdbuf();
  r.stderrText = ss.str();
  std::filesystem::remove(errPath);
  return r;
}

ChildResult runChild(const std::map<std::string, std::string>& env, const std::function<int()>& body) {
  return waitChild(spawnChild(env, body));
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/vgpu-fakegpu-test-XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  std::string p = path_ + "/" + name;
  std::ofstream(p) << text;
  return p;
}

void* openLib(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "cannot dlopen %s (%s): run through ctest, which sets LD_LIBRARY_PATH\n", soname, dlerror());
    std::exit(97);
  }
  return h;
}

}  // namespace vgpu::fakegpu::test
