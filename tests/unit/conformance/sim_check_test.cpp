// vgpu-backend-check against the simulation backend (its "vendor library" is the devices file).
#include "../nvidia/nvidia_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

TEST(ConformanceSim, PassesTheFullProfile) {
  nvidia::testing::TempDir dir;
  const auto devices = dir.write("devices.yaml",
                                 "devices:\n  - {id: SIM-0, model: Sim A100, memoryMiB: 40000, numa: 0}\n"
                                 "  - {id: SIM-1, model: Sim A100, memoryMiB: 40000, numa: 1}\n");
  const auto config = writeConfig(dir.path(), "sim", {{"devicesFile", devices.string()}}, "    splitCount: 4\n");
  const auto run = runCheck({"--config", config.string(), "--backend", "sim", "--backend-dir", VGPU_BACKEND_DIR,
                             "--missing-vendor", "devicesFile=" + (dir.path() / "missing.yaml").string(),
                             "--vanish-command", "sed -i /SIM-0/d " + devices.string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_NE(run.detail("allocator.fit_reads").find("whatever the id, index, numa_node, attributes"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
  EXPECT_EQ(run.status("discovery.split_count"), "PASS") << run.output;
  EXPECT_EQ(run.status("errors.vendor_missing"), "PASS") << run.output;
  EXPECT_EQ(run.status("limiter.concurrent_grants"), "PASS") << run.output;
  // The sim backend applies both scaling settings to what it discovers.
  EXPECT_NE(run.detail("create.memory_scaling").find("applied: SIM-0 memory 40000 -> 80000"), std::string::npos)
      << run.output;
  EXPECT_NE(run.detail("create.core_scaling").find("applied: SIM-0 compute units 100 -> 200"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
