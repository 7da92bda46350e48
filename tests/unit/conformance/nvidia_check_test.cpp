// vgpu-backend-check against the NVIDIA backend on the fake NVML and the fake nvidia-smi.
#include "../nvidia/nvidia_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

constexpr const char* kMachine =
    "gpu uuid=GPU-11111111-1111-1111-1111-111111111111 name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559\n"
    "gpu uuid=GPU-22222222-2222-2222-2222-222222222222 name=\"NVIDIA A100-SXM4-80GB\" memory_mib=81920\n";

std::vector<std::string> args(const std::filesystem::path& config) {
  // The limiter mounts libvgpu.so from its default host folder.
  return {"--config", config.string(), "--backend", "nvidia", "--backend-dir", VGPU_BACKEND_DIR,
          "--allowed-root", "/usr/local/vgpu"};
}

TEST(ConformanceNvidia, PassesTheFullProfileThroughNvml) {
  nvidia::testing::TempDir dir;
  nvidia::testing::setEnv("VGPU_FAKE_GPU_CONFIG", dir.write("machine.conf", kMachine).string());
  const auto config = writeConfig(dir.path(), "nvidia",
                                  {{"nvmlLibrary", VGPU_FAKE_NVML_LIBRARY}, {"nvidiaSmiPath", "/nonexistent/nvidia-smi"}});
  auto a = args(config);
  a.insert(a.end(), {"--missing-vendor", "nvmlLibrary=/nonexistent/libnvidia-ml.so.1"});
  const auto run = runCheck(a);
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_NE(run.detail("allocator.fit_reads").find("whatever the id, index, numa_node"), std::string::npos) << run.output;
  EXPECT_EQ(run.status("errors.vendor_missing"), "PASS") << run.output;
}

// Dynamic MIG: the checked GPU is one whose instances the backend places (backend ABI 1.6).
TEST(ConformanceNvidia, PassesTheFullProfileWithDynamicMig) {
  nvidia::testing::TempDir dir;
  nvidia::testing::setEnv("VGPU_FAKE_GPU_CONFIG",
                          dir.write("machine.conf", "gpu uuid=GPU-22222222-2222-2222-2222-222222222222 name=\"NVIDIA "
                                                    "A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb\n")
                              .string());
  nvidia::testing::setEnv("VGPU_FAKE_GPU_STATE", (dir.path() / "gpu-state").string());
  const auto config = writeConfig(dir.path(), "nvidia",
                                  {{"nvmlLibrary", VGPU_FAKE_NVML_LIBRARY},
                                   {"nvidiaSmiPath", "/nonexistent/nvidia-smi"},
                                   {"migManaged", "all"},
                                   {"migStateDir", (dir.path() / "mig").string()}});
  // Concurrent Allocates on the one GPU: each gets its own instance (a 1g.5gb; the GPU has 7).
  auto a = args(config);
  a.insert(a.end(), {"--threads", "6"});
  const auto run = runCheck(a);
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("limiter.concurrent_grants"), "PASS") << run.output;
  EXPECT_EQ(run.status("allocator.fit_placed"), "PASS") << run.output;
  EXPECT_NE(run.detail("allocator.fit_placed").find("7 placed grants"), std::string::npos) << run.output;
  EXPECT_NE(run.detail("abi.slots").find("places fit_placed"), std::string::npos) << run.output;
}

// nvidia-smi runs anew for each discovery, so a GPU can fall off the bus between two calls.
TEST(ConformanceNvidia, PassesTheFullProfileThroughNvidiaSmi) {
  nvidia::testing::TempDir dir;
  const auto machine = dir.write("machine.conf", kMachine);
  nvidia::testing::setEnv("VGPU_FAKE_GPU_CONFIG", machine.string());
  const auto config = writeConfig(dir.path(), "nvidia",
                                  {{"nvmlLibrary", "/nonexistent/libnvidia-ml.so.1"}, {"nvidiaSmiPath", VGPU_FAKE_NVIDIA_SMI}});
  auto a = args(config);
  a.insert(a.end(), {"--missing-vendor", "nvidiaSmiPath=/nonexistent/nvidia-smi", "--vanish-command",
                     "sed -i /GPU-1111/d " + machine.string()});
  const auto run = runCheck(a);
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
