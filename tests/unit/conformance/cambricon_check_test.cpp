// vgpu-backend-check against the Cambricon backend on the fake libcndev.so.
#include "../cambricon/cambricon_test_support.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

using namespace cambricon::testing;

TEST(ConformanceCambricon, PassesTheFullProfile) {
  FakeCndev fake(threeCards());
  const auto options = fake.params().settings.options;
  const auto config = writeConfig(fake.dir(), "cambricon", options);
  const auto run = runCheck({"--config", config.string(), "--backend", "cambricon", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", fake.devRoot().string(), "--allowed-root", fake.stateDir().string(),
                             "--missing-vendor", "libraryPath=/nonexistent/libcndev.so",
                             "--vanish-command", "sed -i /" + std::string(kUuid0) + "/d " +
                                                     (fake.dir() / "cndev.conf").string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
