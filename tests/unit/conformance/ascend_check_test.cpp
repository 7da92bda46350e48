// vgpu-backend-check against the Ascend backend on the fake libdcmi.so.
#include "../ascend/ascend_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

using namespace ascend::testing;

TEST(ConformanceAscend, PassesTheFullProfile) {
  FakeDcmi fake(twoTrainingOneInference());
  const auto options = fake.params().settings.options;
  const auto config = writeConfig(fake.dir(), "ascend", options);
  const auto run = runCheck({"--config", config.string(), "--backend", "ascend", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", fake.devRoot().string(), "--allowed-root", fake.stateDir().string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libdcmi.so",
                             "--vanish-command", "sed -i /die=A0/d " + fake.config().string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_EQ(run.status("allocator.fit_placed"), "PASS") << run.output;
  // The split count stated per model (ABI 1.10) is the one discovered: vNPUs per chip.
  EXPECT_EQ(run.status("discovery.split_count"), "PASS") << run.output;
  EXPECT_NE(run.detail("discovery.split_count").find("3 of 3 devices"), std::string::npos) << run.output;
  EXPECT_EQ(run.status("limiter.concurrent_grants"), "PASS") << run.output;
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
}

// HAMi's per-family names (options.families): each chip counted by its family's resource.
TEST(ConformanceAscend, PassesTheFullProfileWithChipFamilies) {
  FakeDcmi fake(twoTrainingOneInference());
  auto options = fake.params().settings.options;
  options["families"] = "Ascend910B3,Ascend310P";
  const auto config = writeConfig(fake.dir(), "ascend", options);
  const auto run = runCheck({"--config", config.string(), "--backend", "ascend", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", fake.devRoot().string(), "--allowed-root", fake.stateDir().string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libdcmi.so",
                             "--vanish-command", "sed -i /die=A0/d " + fake.config().string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
}

}  // namespace
}  // namespace vgpu::conformance
