#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vgpu/backend_loader.h"
#include "vgpu/device.h"

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

/// `count` healthy sim devices of one model: ids `<idPrefix>gpu<i>`, index i, NUMA node
/// `numaOf(i)` (unknown without it).
inline std::vector<Device> simDevices(int count, const std::string& idPrefix, std::uint64_t memoryMiB,
                                      const std::string& model, std::uint32_t splitCount,
                                      const std::function<int(int)>& numaOf = nullptr) {
  std::vector<Device> out;
  for (int i = 0; i < count; ++i) {
    Device d;
    d.id = idPrefix + "gpu" + std::to_string(i);
    d.index = i;
    d.backend = "sim";
    d.model = model;
    d.memoryMiB = memoryMiB;
    d.splitCount = splitCount;
    if (numaOf) d.numaNode = numaOf(i);
    d.health = Health::kHealthy;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace vgpu::testing
