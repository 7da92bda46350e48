// A backend built against the frozen ABI 1.0 header, loaded by today's loader: the 1.0
// paths work, the newer capabilities are absent and named. The same fixture, with a fault
// switched on, shows that vgpu-backend-check fails a backend that breaks the contract.
#include <algorithm>
#include <gmock/gmock.h>
#include <stdlib.h>

#include "check_runner.h"
#include "vgpu/backend_loader.h"

namespace vgpu::conformance {
namespace {

using ::testing::HasSubstr;

BackendParams abi10Params() {
  BackendParams p;
  p.name = "abi10";
  p.nodeName = "node-1";
  return p;
}

std::filesystem::path abi10Library() { return backendLibraryPath(VGPU_ABI10_BACKEND_DIR, "abi10"); }

TEST(AbiFixture10, LoadsInTodaysLoaderAndServesThe10Paths) {
  auto backend = loadBackend(abi10Library(), abi10Params());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  ASSERT_NE((*backend)->discovery(), nullptr);
  ASSERT_NE((*backend)->limiter(), nullptr);
  auto devices = (*backend)->discovery()->discover();
  ASSERT_TRUE(devices.ok()) << devices.error().message;
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[1].id, "ABI10-1");

  ContainerResources c;
  c.name = "main";
  c.limits = {{"example.com/abi10", 1}, {"example.com/abi10-memory", 1024}};
  auto request = (*backend)->allocator().parseRequest(c, {});
  ASSERT_TRUE(request.ok() && request->has_value());
  EXPECT_EQ((*request)->memoryMiB, 1024u);

  // Today's grant is longer than 1.0's (pod_uid) and says so; the old backend reads its part.
  ContainerGrant grant;
  grant.container = {"holder-1", "main"};
  grant.podUid = "uid-1";
  grant.devices = {{"abi10", "ABI10-0", 0, 1024, 0, 0, -1}, {"abi10", "ABI10-1", 1, 1024, 0, 0, -1}};
  auto spec = (*backend)->limiter()->containerSpec(grant);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env.at("ABI10_VISIBLE_DEVICES"), "ABI10-0,ABI10-1");
  EXPECT_TRUE((*backend)->limiter()->release(grant.container).ok());
}

TEST(AbiFixture10, HasNoneOfTheNewerCapabilities) {
  auto backend = loadBackend(abi10Library(), abi10Params());
  ASSERT_TRUE(backend.ok()) << backend.error().message;
  EXPECT_EQ((*backend)->usageReporter(), nullptr);
  EXPECT_EQ((*backend)->processReporter(), nullptr);
  EXPECT_TRUE((*backend)->allocator().protectedEnv().empty());
}

std::vector<std::string> checkArgs(const std::filesystem::path& dir) {
  const auto config = writeConfig(dir, "abi10", {});
  return {"--config", config.string(), "--backend", "abi10", "--library", abi10Library().string()};
}

class AbiFixture10Check : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "vgpu-abi10-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override {
    unsetenv("VGPU_ABI10_FAULT");
    std::filesystem::remove_all(dir_);
  }
  CheckRun runWithFault(const char* fault) {
    if (fault) setenv("VGPU_ABI10_FAULT", fault, 1);
    return runCheck(checkArgs(dir_));
  }
  std::filesystem::path dir_;
};

// Frozen before the scaling check: it accepts memoryScaling and coreScaling and ignores
// them, so those two checks, and only those, fail (a backend that ignores scaling).
TEST_F(AbiFixture10Check, PassesTheFullProfileButScalingAndNamesWhatItLacks) {
  const auto run = runWithFault(nullptr);
  EXPECT_EQ(run.exitCode, 1);
  const std::string failures = run.failures();
  EXPECT_EQ(std::count(failures.begin(), failures.end(), '\n'), 2) << failures;
  EXPECT_THAT(run.detail("create.memory_scaling"), HasSubstr("accepts memoryScaling: 2 but device"));
  EXPECT_THAT(run.detail("create.core_scaling"), HasSubstr("accepts coreScaling: 2 but device"));
  EXPECT_THAT(run.detail("create.core_scaling"), HasSubstr("or refuse coreScaling in create"));
  EXPECT_THAT(run.detail("abi.slots"), HasSubstr("container_usage (1.1): the table ends before it"));
  EXPECT_THAT(run.detail("abi.slots"), HasSubstr("protected_env (1.3): the table ends before it"));
  EXPECT_THAT(run.detail("abi.slots"), HasSubstr("device_processes (1.3): the table ends before it"));
  EXPECT_THAT(run.detail("abi.slots"), HasSubstr("fit_reads (1.5): the table ends before it"));
  EXPECT_EQ(run.status("allocator.fit_reads"), "SKIP");
}

// The checks can fail: each fault of the fixture fails the check that is about it.
TEST_F(AbiFixture10Check, FailsABackendThatPrintsOnStdout) {
  const auto run = runWithFault("stdout");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.status("stdout.clean"), "FAIL");
  EXPECT_THAT(run.detail("stdout.clean"), HasSubstr("abi10: discovering"));
}

TEST_F(AbiFixture10Check, FailsAnErrorWithoutWords) {
  const auto run = runWithFault("silent-error");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.status("discovery.discover"), "FAIL");
  EXPECT_THAT(run.detail("discovery.discover"), HasSubstr("no text in the error buffer"));
}

TEST_F(AbiFixture10Check, FailsIdsThatChangeBetweenCalls) {
  const auto run = runWithFault("unstable-ids");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.status("discovery.stable_ids"), "FAIL");
}

TEST_F(AbiFixture10Check, FailsABackendThatAcceptsUnknownOptions) {
  const auto run = runWithFault("accept-unknown-option");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.status("create.unknown_option"), "FAIL");
}

}  // namespace
}  // namespace vgpu::conformance
