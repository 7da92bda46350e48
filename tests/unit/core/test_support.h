#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "vgpu/backend_loader.h"

namespace vgpu::testing {

/// A fresh temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

/// The real sim backend through the real loader (dlopen of libvgpu-backend-sim.so).
inline std::unique_ptr<Backend> loadSim(BackendParams params = {}) {
  if (params.name.empty()) params.name = "sim";
  auto loaded = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  if (!loaded.ok()) ADD_FAILURE() << loaded.error().message;
  return loaded.ok() ? std::move(loaded).value() : nullptr;
}

}  // namespace vgpu::testing
