#pragma once
// Shared by the Ascend tests: a temp folder with the fake libdcmi.so's config and /dev, and params.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ascend_backend.h"
#include "vgpu/backend_params.h"

namespace vgpu::ascend::testing {

/// Two 910B3 chips on card 0 and one 310P3 (DDR memory) on card 1.
inline std::string twoTrainingOneInference() {
  return "chip card=0 device=0 logic=0 phy=0 name=910B3 aicores=20 memoryMB=65536 die=A0\n"
         "chip card=0 device=1 logic=1 phy=1 name=910B3 aicores=20 memoryMB=65536 die=A1\n"
         "chip card=1 device=0 logic=2 phy=4 name=310P3 aicores=8 memoryMB=24576 hbm=0 die=B0\n";
}
inline constexpr const char* kChip0 = "Ascend-000000A000000000000000000000000000000000";

class FakeDcmi {
 public:
  explicit FakeDcmi(std::string chips) {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-ascend-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    config_ = dir_ / "dcmi.conf";
    std::filesystem::create_directories(devRoot());
    for (const char* n : {"davinci0", "davinci1", "davinci4", "davinci_manager", "devmm_svm", "hisi_hdc"})
      std::ofstream(devRoot() / n).put('\n');
    write(std::move(chips));
    setenv("VGPU_FAKE_DCMI_CONFIG", config_.c_str(), 1);
  }
  ~FakeDcmi() {
    unsetenv("VGPU_FAKE_DCMI_CONFIG");
    std::filesystem::remove_all(dir_);
  }
  void write(std::string text) {
    text_ = std::move(text);
    std::ofstream(config_, std::ios::trunc) << text_ << "option devRoot=" << devRoot().string() << "\n";
  }
  void append(const std::string& line) { write(text_ + line + "\n"); }
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& config() const { return config_; }
  std::filesystem::path devRoot() const { return dir_ / "dev"; }
  std::filesystem::path stateDir() const { return dir_ / "agent-state"; }
  /// The vNPUs the fake driver holds, one "card device vdev template cores" line each.
  std::vector<std::string> vnpus() const {
    std::ifstream in(config_.string() + ".vnpus");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
    return out;
  }
  BackendParams params() const {
    BackendParams p;
    p.name = "ascend";
    p.settings.options = {{"libraryPath", VGPU_FAKE_DCMI_LIBRARY},
                          {"devRoot", devRoot().string()},
                          {"stateDir", stateDir().string()}};
    return p;
  }

 private:
  std::filesystem::path dir_, config_;
  std::string text_;
};

}  // namespace vgpu::ascend::testing
