// vgpu-backend-check against the AMD backend on the fake libamd_smi.so.
#include "../amd/amd_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

using namespace amd::testing;

// The target device is the whole MI300X (shared by accounting); the CPX GPU is placed.
TEST(ConformanceAmd, PassesTheFullProfile) {
  FakeAmdSmi fake(wholeCpxAndMi210());
  const auto config = writeConfig(fake.dir(), "amd", fake.params().settings.options);
  const auto run = runCheck({"--config", config.string(), "--backend", "amd", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", fake.devRoot().string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libamd_smi.so",
                             "--vanish-command", "sed -i /uuid=AMD-A/d " + fake.config().string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("create.memory_scaling"), "PASS") << run.output;
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_EQ(run.status("limiter.concurrent_grants"), "PASS") << run.output;
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
  // The split count is stated for the MI210 alone: an MI300X's depends on its partition mode.
  EXPECT_EQ(run.status("discovery.split_count"), "PASS") << run.output;
  EXPECT_NE(run.detail("discovery.split_count").find("1 of 3 devices"), std::string::npos) << run.output;
}

// Only partitioned GPUs: the checker's target device is placed (allocator.fit_placed).
TEST(ConformanceAmd, PassesTheFullProfileOnACpxGpu) {
  std::string cpx = wholeCpxAndMi210();
  cpx.erase(0, cpx.find('\n') + 1);
  cpx.erase(cpx.rfind("gpu uuid=AMD-C"));
  FakeAmdSmi fake(cpx);
  const auto config = writeConfig(fake.dir(), "amd", fake.params().settings.options);
  const auto run = runCheck({"--config", config.string(), "--backend", "amd", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", fake.devRoot().string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libamd_smi.so",
                             "--vanish-command", "sed -i /uuid=AMD-B/d " + fake.config().string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_placed"), "PASS") << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
