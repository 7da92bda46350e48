#pragma once
// Shared by the Cambricon tests: a temp folder, the fake libcndev.so's config, and params.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cambricon_backend.h"
#include "vgpu/backend_params.h"

namespace vgpu::cambricon::testing {

inline constexpr const char* kUuid0 = "0a1b2c3d-0000-4000-8000-000000000000";
inline constexpr const char* kUuid1 = "0a1b2c3d-0000-4000-8000-000000000001";
inline constexpr const char* kUuid2 = "0a1b2c3d-0000-4000-8000-000000000002";

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-cambricon-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The fake libcndev.so's cards and options, written to a temp file that
/// VGPU_FAKE_CNDEV_CONFIG names; the fake keeps its sMLU state beside it. The host's /dev
/// is a folder here too: the card and ipcm nodes of cards 0-2 exist, and the fake driver
/// makes each sMLU instance's node in it.
class FakeCndev {
 public:
  explicit FakeCndev(std::string cards) {
    config_ = dir_.path() / "cndev.conf";
    std::filesystem::create_directories(pluginDir());
    for (int i = 0; i < 3; ++i)
      for (const char* family : {"cambricon_dev", "cambricon_ipcm"}) addNode(family + std::to_string(i));
    write(std::move(cards));
    setenv("VGPU_FAKE_CNDEV_CONFIG", config_.c_str(), 1);
    unsetenv("VGPU_FAKE_CNDEV_STATE");
  }
  ~FakeCndev() { unsetenv("VGPU_FAKE_CNDEV_CONFIG"); }

  void write(std::string text) {
    text_ = std::move(text);
    std::ofstream(config_, std::ios::trunc) << text_ << "\noption devRoot=" << devRoot().string() << "\n";
  }
  void append(const std::string& line) { write(text_ + line + "\n"); }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path stateDir() const { return dir_.path() / "agent-state"; }
  /// The host's /dev as the backend sees it (options.devRoot).
  std::filesystem::path devRoot() const { return dir_.path() / "dev"; }
  /// The kubelet's device-plugin folder (options.kubeletPluginDir).
  std::filesystem::path pluginDir() const { return dir_.path() / "device-plugins"; }
  /// Makes /dev/<name> exist on the fake host.
  void addNode(const std::string& name) const {
    std::filesystem::create_directories((devRoot() / name).parent_path());
    std::ofstream(devRoot() / name).put('\0');
  }
  void removeNode(const std::string& name) const { std::filesystem::remove(devRoot() / name); }

  /// The fake driver's sMLU state lines of one kind ("profile" or "instance").
  std::vector<std::string> driverState(const std::string& kind) const {
    std::ifstream in(config_.string() + ".state");
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(kind + " ", 0) == 0) out.push_back(line);
    return out;
  }

  /// Params for a backend that uses this fake.
  BackendParams params(std::map<std::string, std::string> options = {}) const {
    BackendParams p;
    p.name = "cambricon";
    p.nodeName = "node-1";
    p.settings.options = std::move(options);
    p.settings.options.try_emplace("libraryPath", VGPU_FAKE_CNDEV_LIBRARY);
    p.settings.options.try_emplace("stateDir", stateDir().string());
    p.settings.options.try_emplace("devRoot", devRoot().string());
    p.settings.options.try_emplace("kubeletPluginDir", pluginDir().string());
    return p;
  }

 private:
  TempDir dir_;
  std::filesystem::path config_;
  std::string text_;
};

/// Three cards: 0 in sMLU mode on NUMA 0, 1 in sMLU mode with MLULink on NUMA 1, 2 whole-only.
inline std::string threeCards() {
  return std::string("card uuid=") + kUuid0 + " name=MLU370-X4 memoryMB=24576 numa=0 health=1 smlu=on\n" +
         "card uuid=" + kUuid1 + " name=MLU370-X8 memoryMB=49152 numa=1 health=1 smlu=on mlulink=4\n" +
         "card uuid=" + kUuid2 + " name=MLU590-H8 memoryMB=81920 numa=1 health=1 smlu=off\n";
}

inline std::string mluId(const char* uuid) { return std::string("MLU-") + uuid; }

/// A unix socket something listens on (a running device plugin), closed with the object;
/// the file stays, as a killed plugin's does.
class ListeningSocket {
 public:
  explicit ListeningSocket(const std::filesystem::path& path) {
    ::unlink(path.c_str());  // as a plugin does before it serves
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0) << path;
    EXPECT_EQ(::listen(fd_, 4), 0);
  }
  ~ListeningSocket() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

inline std::unique_ptr<CambriconBackend> makeBackend(const BackendParams& params) {
  auto created = CambriconBackend::create(params);
  if (!created.ok()) {
    ADD_FAILURE() << created.error().message;
    return nullptr;
  }
  return std::move(created).value();
}

}  // namespace vgpu::cambricon::testing
