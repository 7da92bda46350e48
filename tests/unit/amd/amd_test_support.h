#pragma once
// Shared by the AMD tests: a temp folder with the fake libamd_smi.so's config and /dev, and params.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "amd_backend.h"
#include "vgpu/backend_params.h"

namespace vgpu::amd::testing {

/// A whole MI300X (SPX/NPS1), an MI300X in CPX/NPS4 (8 processors of 24 GiB) and an MI210
/// (no partition modes).
inline std::string wholeCpxAndMi210() {
  std::string text = "gpu uuid=AMD-A bdf=0x100 compute=SPX memory=NPS1 vramMiB=196608 numa=0 render=128 card=0\n";
  for (int p = 0; p < 8; ++p)
    text += "gpu uuid=AMD-B" + std::to_string(p) + " bdf=0x200 partition=" + std::to_string(p) +
            " compute=CPX memory=NPS4 vramMiB=24576 numa=1 render=" + std::to_string(129 + p) +
            " card=" + std::to_string(1 + p) + "\n";
  text += "gpu uuid=AMD-C bdf=0x300 compute= memory= vramMiB=65520 numa=0 render=137 card=9 name=AMD_Instinct_MI210\n";
  return text;
}

class FakeAmdSmi {
 public:
  explicit FakeAmdSmi(std::string gpus) {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-amd-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    config_ = dir_ / "amdsmi.conf";
    std::filesystem::create_directories(devRoot() / "dri");
    std::ofstream(devRoot() / "kfd").put('\n');
    for (int n = 0; n < 10; ++n) {
      std::ofstream(devRoot() / "dri" / ("card" + std::to_string(n))).put('\n');
      std::ofstream(devRoot() / "dri" / ("renderD" + std::to_string(128 + n))).put('\n');
    }
    write(std::move(gpus));
    setenv("VGPU_FAKE_AMDSMI_CONFIG", config_.c_str(), 1);
  }
  ~FakeAmdSmi() {
    unsetenv("VGPU_FAKE_AMDSMI_CONFIG");
    std::filesystem::remove_all(dir_);
  }
  void write(std::string text) {
    text_ = std::move(text);
    std::ofstream(config_, std::ios::trunc) << text_;
  }
  void append(const std::string& line) { write(text_ + line + "\n"); }
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& config() const { return config_; }
  std::filesystem::path devRoot() const { return dir_ / "dev"; }
  BackendParams params() const {
    BackendParams p;
    p.name = "amd";
    p.settings.options = {{"libraryPath", VGPU_FAKE_AMDSMI_LIBRARY}, {"devRoot", devRoot().string()}};
    return p;
  }

 private:
  std::filesystem::path dir_, config_;
  std::string text_;
};

}  // namespace vgpu::amd::testing
