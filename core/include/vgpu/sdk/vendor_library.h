#pragma once
// The vendor library a backend drives, opened with dlopen from a list of candidate paths
// (an option's path first, then the usual names), and its symbols looked up by name.

#include <dlfcn.h>

#include <string>
#include <type_traits>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::sdk {

/// A library dlopen loaded (RTLD_NOW | RTLD_LOCAL), and the path it was loaded from.
struct OpenedLibrary {
  void* handle = nullptr;
  std::string path;
};

/// The first of `paths` that loads; when none does, an error of each path's dlerror text
/// (joined by "; ") after `what`, e.g. "cannot load libdcmi.so (...)".
inline Result<OpenedLibrary> openFirstLibrary(const std::vector<std::string>& paths, const std::string& what) {
  std::string tried;
  for (const auto& path : paths) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return OpenedLibrary{handle, path};
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + (e ? std::string(e) : path);
  }
  return makeError(what + ": " + (tried.empty() ? std::string("no path to try") : tried));
}

/// Sets `slot` (a function pointer) to `name` in `handle`, or null when it is not there.
template <class Fn>
void lookUp(void* handle, Fn& slot, const char* name) {
  static_assert(std::is_pointer_v<Fn>, "a slot is a function pointer");
  slot = reinterpret_cast<Fn>(::dlsym(handle, name));
}

}  // namespace vgpu::sdk
