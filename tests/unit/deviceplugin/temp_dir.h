#pragma once
// A temp folder for the node agent's tests, removed with everything in it.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace vgpu::deviceplugin::testing {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    // Short: unix socket paths are limited to 107 bytes.
    std::string pattern = "/tmp/vdp-XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    fs::create_directories(p.parent_path());
    const auto tmp = p.string() + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, p);
    return p;
  }

 private:
  fs::path path_;
};

}  // namespace vgpu::deviceplugin::testing
