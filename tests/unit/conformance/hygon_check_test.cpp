// vgpu-backend-check against the Hygon backend on the fake ROCm-SMI and hydmi libraries.
#include "../hygon/fake_node.h"
#include "check_runner.h"

namespace vgpu::conformance {
namespace {

using hygon::fake::FakeDcu;
using hygon::fake::FakeNode;

TEST(ConformanceHygon, PassesTheFullProfile) {
  FakeNode node({FakeDcu{.serial = "DCU-SERIAL-0"}, FakeDcu{.serial = "DCU-SERIAL-1"}});
  const auto config = writeConfig(node.root(), "hygon", node.params().settings.options);
  const auto run = runCheck({"--config", config.string(), "--backend", "hygon", "--backend-dir", VGPU_BACKEND_DIR,
                             "--allowed-root", node.dev().string(), "--allowed-root", node.stateDir().string(),
                             "--allowed-root", node.copyDir().string(),
                             "--missing-vendor", "driverDir=/nonexistent/hygon",
                             "--vanish-command", "sed -i 's/serial=DCU-SERIAL-0 /serial=DCU-SERIAL-0 state=lost /' " +
                                                     node.config().string()});
  EXPECT_EQ(run.exitCode, 0) << run.failures();
  EXPECT_EQ(run.status("allocator.fit_reads"), "PASS") << run.output;
  EXPECT_EQ(run.status("errors.device_vanishes"), "PASS") << run.output;
}

}  // namespace
}  // namespace vgpu::conformance
