// The walk-through backend of docs/writing-a-backend.md passes the full profile on its fake.
#include "../nvidia/nvidia_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

TEST(ConformanceWalkthrough, QuokkaPassesTheFullProfile) {
  nvidia::testing::TempDir dir;
  const auto node = dir.write("quokka.conf", "QK-0001 Quokka-X1 16384 0 ok\nQK-0002 Quokka-X1 16384 1 ok\n");
  nvidia::testing::setEnv("VGPU_FAKE_QUOKKA_CONFIG", node.string());
  const auto config = writeConfig(dir.path(), "quokka",
                                  {{"libraryPath", VGPU_FAKE_QUOKKA_LIBRARY}, {"devRoot", (dir.path() / "dev").string()}});
  const auto run = runCheck({"--config", config.string(), "--backend", "quokka", "--backend-dir", VGPU_QUOKKA_BACKEND_DIR,
                             "--allowed-root", (dir.path() / "dev").string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libquokka.so.1",
                             "--vanish-command", "sed -i 's/^QK-0001 \\(.*\\) ok$/QK-0001 \\1 lost/' " + node.string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
  EXPECT_EQ(run.status("limiter.env_protected"), "PASS") << run.output;
  // The walk-through refuses scaling in create, naming the keys.
  EXPECT_NE(run.detail("create.memory_scaling").find("refused: backends.quokka: memoryScaling"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.status("create.core_scaling"), "PASS") << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
