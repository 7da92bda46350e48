// libvgpu.so exports exactly what hook_list.h names (plus dlsym) and needs only libc:
// the same list that generates the table and the version script is the expectation here.

#include <gtest/gtest.h>
#include <stdio.h>

#include <set>
#include <sstream>
#include <string>

#include "hook_list.h"

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::set<std::string> expectedExports() {
  std::set<std::string> names{"dlsym"};
#define VGPU_NAME(name, params) names.insert(#name);
  VGPU_CUDA_HOOKS(VGPU_NAME)
  VGPU_NVML_HOOKS(VGPU_NAME)
#undef VGPU_NAME
  return names;
}

TEST(LimiterExports, ExactlyTheHookListIsExported) {
  std::istringstream nm(run("nm -D --defined-only --format=posix " VGPU_LIBVGPU));
  std::set<std::string> exported;
  std::string line;
  while (std::getline(nm, line)) {
    std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) exported.insert(name);
  }
  ASSERT_FALSE(exported.empty()) << "nm gave nothing for " VGPU_LIBVGPU;
  EXPECT_EQ(exported, expectedExports());
}

TEST(LimiterExports, DependsOnLibcOnly) {
  std::istringstream readelf(run("readelf -d " VGPU_LIBVGPU));
  std::set<std::string> needed;
  std::string line;
  while (std::getline(readelf, line)) {
    auto open = line.find("Shared library: [");
    if (open == std::string::npos) continue;
    open += 17;
    needed.insert(line.substr(open, line.find(']', open) - open));
  }
  // ld-linux is glibc's own loader (thread-local storage); nothing else may appear.
  std::set<std::string> allowed{"libc.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
  ASSERT_TRUE(needed.count("libc.so.6"));
  for (const auto& lib : needed) EXPECT_TRUE(allowed.count(lib)) << "unexpected dependency " << lib;
}

}  // namespace
