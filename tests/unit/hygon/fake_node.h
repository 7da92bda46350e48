#pragma once
// A DCU node in a temp dir for the tests: a fake /sys/class/drm and /dev tree, the config
// file of the fake ROCm-SMI/hydmi libraries ($VGPU_FAKE_ROCM_CONFIG), and the backend's
// options pointing at all of it.

#include <dlfcn.h>
#include <stdlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hygon_api.h"
#include "vgpu/backend_params.h"

namespace vgpu::hygon::fake {

namespace fs = std::filesystem;

struct FakeDcu {
  std::string serial{};
  std::string pciId = "54b7";  ///< Z100
  std::uint64_t vramMiB = 16368;
  int cus = 60;
  int numa = 0;
  int renderMinor = 128;  ///< < 0: ROCm-SMI does not report it
  int card = 0;
  std::string bdf{};
  std::string name{};
  bool lost = false;
  bool withNodes = true;  ///< false: no /dev/dri entries for it
  std::uint64_t vramUsedMiB = 0;  ///< what ROCm-SMI reports in use
  std::uint32_t busy = 0;         ///< rsmi_dev_busy_percent_get
};

inline std::string readText(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void writeText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << text;
}

class FakeNode {
 public:
  explicit FakeNode(std::vector<FakeDcu> dcus) : dcus_(std::move(dcus)) {
    std::string pattern = (fs::temp_directory_path() / "vgpu-hygon-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
    for (size_t i = 0; i < dcus_.size(); ++i) {
      auto& d = dcus_[i];
      if (d.bdf.empty()) d.bdf = "0000:" + hex2(0x10 + 0x10 * static_cast<int>(i)) + ":00.0";
      if (d.card == 0 && i > 0) d.card = static_cast<int>(i);
      if (d.renderMinor == 128 && i > 0) d.renderMinor = 128 + static_cast<int>(i);
      addPciNode(d.bdf, "0x1d94", "card" + std::to_string(d.card),
                 "renderD" + std::to_string(d.renderMinor < 0 ? 128 + static_cast<int>(i) : d.renderMinor), d.withNodes);
    }
    // Another vendor's GPU on the same node must never be picked.
    addPciNode("0000:f0:00.0", "0x1002", "card9", "renderD200", true);
    writeText(dev() / "kfd", "");
    writeText(dev() / "mkfd", "");
    writeConfig();
    setenv("VGPU_FAKE_ROCM_CONFIG", config().c_str(), 1);
  }
  ~FakeNode() {
    unsetenv("VGPU_FAKE_ROCM_CONFIG");
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeNode(const FakeNode&) = delete;
  FakeNode& operator=(const FakeNode&) = delete;

  const fs::path& root() const { return root_; }
  fs::path sys() const { return root_ / "sys"; }
  fs::path dev() const { return root_ / "dev"; }
  fs::path config() const { return root_ / "rocm.conf"; }
  fs::path stateDir() const { return root_ / "state"; }
  /// The host's /etc/vdev: hydmi writes its vdev<id>.conf here, vdev-file mode its copies.
  fs::path copyDir() const { return root_ / "etc-vdev"; }
  /// Where the backend puts the per-pod folders (its default, <stateDir>/dcu).
  fs::path confRoot() const { return stateDir() / "dcu"; }
  fs::path hostDir(const std::string& container) const { return root_ / "containers" / container; }
  std::vector<FakeDcu>& dcus() { return dcus_; }
  /// vDCUs hydmi allows per DCU (dmiGetMaxVDeviceCount); ids stay node-wide.
  int maxVdevsPerDcu = 16;

  /// Rewrites the fake libraries' config from dcus() plus `extra` lines ("fail ...").
  void writeConfig(const std::string& extra = "") {
    std::string text = "# fake DCUs\n";
    for (const auto& d : dcus_) {
      text += "device";
      if (!d.serial.empty()) text += " serial=" + d.serial;
      text += " pciId=" + d.pciId + " vramMiB=" + std::to_string(d.vramMiB) + " cus=" + std::to_string(d.cus) +
              " numa=" + std::to_string(d.numa) + " bdf=" + d.bdf;
      if (d.renderMinor >= 0) text += " renderMinor=" + std::to_string(d.renderMinor);
      if (!d.name.empty()) text += " name=" + d.name;
      if (d.lost) text += " state=lost";
      if (d.vramUsedMiB != 0) text += " vramUsedMiB=" + std::to_string(d.vramUsedMiB);
      if (d.busy != 0) text += " busy=" + std::to_string(d.busy);
      text += "\n";
    }
    text += "hydmi maxVdevs=" + std::to_string(maxVdevsPerDcu) + " vdevDir=" + copyDir().string() + "\n";
    writeText(config(), text + extra);
  }

  /// Options of a node agent on this fake node.
  BackendParams params(const std::string& enforcement = "vdev-file",
                       std::map<std::string, std::string> extra = {}) const {
    BackendParams p;
    p.name = "hygon";
    p.nodeName = "dcu-node";
    p.settings.options = {{"driverDir", VGPU_FAKE_ROCM_DIR},
                          {"sysfsRoot", sys().string()},
                          {"devRoot", dev().string()},
                          {"enforcement", enforcement},
                          {"stateDir", stateDir().string()},
                          {"vdevCopyDir", copyDir().string()},
                          {"hyhalDir", ""}};
    for (auto& [k, v] : extra) p.settings.options[k] = v;
    return p;
  }

  /// One vDCU as the fake driver describes it (dmiGetVDeviceInfo): {device, CUs, MiB};
  /// {-1, -1, -1} when it does not exist.
  std::array<long, 3> hydmiVdev(int vid) const {
    void* h = dlopen((std::string(VGPU_FAKE_ROCM_DIR) + "/libhydmi.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return {-1, -1, -1};
    auto fn = reinterpret_cast<dmiGetVDeviceInfo_fn>(dlsym(h, "dmiGetVDeviceInfo"));
    dmiDeviceInfo info{};
    std::array<long, 3> out{-1, -1, -1};
    if (fn != nullptr && fn(vid, &info) == DMI_STATUS_SUCCESS)
      out = {info.device_id, info.compute_unit_count, static_cast<long>(info.global_mem_size / (1024 * 1024))};
    dlclose(h);
    return out;
  }

  /// vDCUs the fake driver holds now, asked through the fake libhydmi.so's own API.
  int hydmiVdevCount() const {
    void* h = dlopen((std::string(VGPU_FAKE_ROCM_DIR) + "/libhydmi.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return -1;
    using Fn = int (*)(int*);
    auto fn = reinterpret_cast<Fn>(dlsym(h, "dmiGetVDeviceCount"));
    int n = -1;
    if (fn == nullptr || fn(&n) != 0) n = -1;
    dlclose(h);
    return n;
  }

 private:
  static std::string hex2(int v) {
    char b[8];
    std::snprintf(b, sizeof b, "%02x", v);
    return b;
  }
  void addPciNode(const std::string& bdf, const std::string& vendor, const std::string& card, const std::string& render,
                  bool devNodes) {
    const fs::path pci = sys() / "devices" / "pci0000:00" / bdf;
    writeText(pci / "vendor", vendor + "\n");
    for (const auto& n : {card, render}) {
      fs::create_directories(sys() / "class" / "drm" / n);
      fs::create_directory_symlink(fs::path("../../../devices/pci0000:00") / bdf, sys() / "class" / "drm" / n / "device");
      if (devNodes) writeText(dev() / "dri" / n, "");
    }
  }

  fs::path root_;
  std::vector<FakeDcu> dcus_;
};

}  // namespace vgpu::hygon::fake
