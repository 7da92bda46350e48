// libvgpu.so exports exactly what hook_list.h names (plus dlsym) and needs only libc, at
// symbol versions old enough for every mainstream CUDA image: the same list that generates
// the table and the version script is the expectation here.

#include <gtest/gtest.h>
#include <stdio.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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
  // glibc's own parts only: libdl and libpthread hold, before glibc 2.34, what libc holds
  // after it; ld-linux is the loader (thread-local storage). No libstdc++, no libgcc_s.
  std::set<std::string> allowed{"libc.so.6",       "libdl.so.2",           "libpthread.so.0",
                                "librt.so.1",      "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
  ASSERT_TRUE(needed.count("libc.so.6"));
  for (const auto& lib : needed) EXPECT_TRUE(allowed.count(lib)) << "unexpected dependency " << lib;
}

// Every symbol version libvgpu.so asks of its dependencies (readelf's version-needs section),
// with the library it names. The highest GLIBC_ one decides which images it loads in: it must
// be no newer than GLIBC_2.17 (CentOS 7, the manylinux2014 baseline; Ubuntu 18.04 has 2.27,
// Debian 11 2.31, UBI 8 2.28). Through /etc/ld.so.preload a newer one breaks every process.
TEST(LimiterExports, NeedsNoGlibcNewerThan217) {
  std::istringstream readelf(run("readelf -V --wide " VGPU_LIBVGPU));
  std::string line, file;
  std::regex fileLine(R"(File: (\S+))"), nameLine(R"(Name: (\S+))");
  std::vector<std::string> versions;
  while (std::getline(readelf, line)) {
    std::smatch m;
    if (std::regex_search(line, m, fileLine)) file = m[1];
    if (line.find("Version:") != std::string::npos && std::regex_search(line, m, nameLine) &&
        line.find("File:") == std::string::npos) {
      versions.push_back(std::string(m[1]) + " (" + file + ")");
    }
  }
  ASSERT_FALSE(versions.empty()) << "readelf -V listed no version needs for " VGPU_LIBVGPU;
  std::regex glibc(R"(GLIBC_2\.([0-9]+)(\.[0-9]+)? .*)");
  for (const std::string& v : versions) {
    std::smatch m;
    if (std::regex_match(v, m, glibc)) {
      EXPECT_LE(std::stoi(m[1]), 17) << v << " is newer than GLIBC_2.17";
    } else {
      ADD_FAILURE() << "needs " << v << ": only glibc's symbol versions may be needed";
    }
  }
}

// cuGetProcAddress hands out a wrapper by the symbol's name, version and flags, from the
// driver facts in VGPU_CUDA_PROC_ABI: every hooked driver function must be there.
TEST(LimiterExports, EveryHookHasItsDriverVersion) {
  std::map<std::string, int> abi;
#define VGPU_ROW(base, version, variant, twin) \
  abi[#variant] = version;                     \
  if (std::string(#twin) != "none") abi[#twin] = version;
  VGPU_CUDA_PROC_ABI(VGPU_ROW)
#undef VGPU_ROW
#define VGPU_HOOK(name, params) EXPECT_TRUE(abi.count(#name)) << #name " is hooked but not in VGPU_CUDA_PROC_ABI";
  VGPU_CUDA_HOOKS(VGPU_HOOK)
#undef VGPU_HOOK
}

}  // namespace
