#pragma once
// Runs one fake-GPU scenario per process: the fakes keep process-wide state, as a real driver.

#include <dlfcn.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "vgpu/cuda/driver_api.h"
#include "vgpu/cuda/nvml_api.h"

namespace vgpu::fakegpu::test {

/// Exit status and stderr of a scenario run in a child process.
struct ChildResult {
  int exitCode = -1;   ///< -1 if it did not exit normally
  std::string stderrText;
};

/// Forks, sets `env` (empty value: unset) in the child, runs `body` there and exits with its
/// result. `body` returns 0 on success; CHILD_CHECK prints the failed condition to stderr.
ChildResult runChild(const std::map<std::string, std::string>& env, const std::function<int()>& body);

/// Forks a child running `body` without waiting; returns its pid.
int spawnChild(const std::map<std::string, std::string>& env, const std::function<int()>& body);
/// Waits for a child from spawnChild.
ChildResult waitChild(int pid);

/// A fresh temporary folder, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  /// Writes `text` to `name` in the folder and returns its path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

/// dlopen by soname; aborts the child with a message if the fake is not on LD_LIBRARY_PATH.
void* openLib(const char* soname);

/// Looks a symbol up in a library handle, typed as the function `F` declared by driver_api.h.
template <typename F>
F* sym(void* lib, const char* name) {
  return reinterpret_cast<F*>(dlsym(lib, name));
}

}  // namespace vgpu::fakegpu::test

#define CHILD_CHECK(cond)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return __LINE__;                                                             \
    }                                                                              \
  } while (0)

// Resolves `name` from the fake libcuda into a local of the same name (types from driver_api.h).
#define CU_FN(lib, name) auto* name = ::vgpu::fakegpu::test::sym<decltype(::name)>(lib, #name); \
  CHILD_CHECK(name != nullptr)
#define NVML_FN(lib, name) CU_FN(lib, name)
