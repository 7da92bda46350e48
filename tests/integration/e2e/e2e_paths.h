#pragma once
// Where the build put the real binaries, backends and fakes (CMakeLists.txt), and what every
// process of the end-to-end tests starts from. For the harness's sources only.

#include <map>
#include <string>

namespace vgpu::e2e {

namespace paths {
constexpr const char* kScheduler = VGPU_E2E_SCHEDULER;
constexpr const char* kAgent = VGPU_E2E_AGENT;
constexpr const char* kDraPlugin = VGPU_E2E_DRA_PLUGIN;
constexpr const char* kBackendDir = VGPU_E2E_BACKEND_DIR;
constexpr const char* kFakeGpuDir = VGPU_E2E_FAKE_GPU_DIR;  // libcuda.so.1 and libnvidia-ml.so.1
constexpr const char* kLibvgpu = VGPU_E2E_LIBVGPU;
}  // namespace paths

/// Where libvgpu.so appears in containers; the preload file names it.
constexpr const char* kLibvgpuInContainer = "/usr/local/vgpu/libvgpu.so";

/// Nothing is inherited: one test's fake-driver settings never leak into another process.
inline std::map<std::string, std::string> baseEnv() {
  return {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/tmp"}};
}

}  // namespace vgpu::e2e
