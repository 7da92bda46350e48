#pragma once
// Small builders for the NVIDIA backend's tests: temp folders, devices, requests, params.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "vgpu/backend_params.h"
#include "vgpu/c_views.h"
#include "vgpu/device.h"
#include "vgpu/device_request.h"

namespace vgpu::nvidia::testing {

/// A fresh temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-nvidia-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A healthy 80 GiB GPU; adjust the fields a case is about.
inline Device gpu(const std::string& id, std::uint64_t memoryMiB = 81920, int numa = 0) {
  Device d;
  d.id = id;
  d.backend = "nvidia";
  d.model = "NVIDIA A100-SXM4-80GB";
  d.memoryMiB = memoryMiB;
  d.computeUnits = 100;
  d.splitCount = 10;
  d.numaNode = numa;
  d.health = Health::kHealthy;
  d.attributes["migMode"] = "disabled";
  return d;
}

inline DeviceRequest request(std::uint32_t count, std::uint64_t memoryMiB, std::uint32_t cores) {
  DeviceRequest r;
  r.backend = "nvidia";
  r.count = count;
  r.memoryMiB = memoryMiB;
  r.computePercent = cores;
  return r;
}

inline BackendParams params(std::map<std::string, std::string> options = {}) {
  BackendParams p;
  p.name = "nvidia";
  p.settings.options = std::move(options);
  return p;
}

/// Sets an environment variable for one test (each test runs in its own process under ctest).
inline void setEnv(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

}  // namespace vgpu::nvidia::testing
