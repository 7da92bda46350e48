// Dynamic MIG on the node: instances created at Allocate, destroyed at release, and what an
// agent killed between creating an instance and recording it leaves, reclaimed at start.
// Against the fake libnvidia-ml.so.1 with a shared state file, so instances outlive processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "mig_manager.h"
#include "mig_test_support.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia {
namespace {

using ::testing::HasSubstr;
using testing::readFile;
using testing::setEnv;
using testing::TempDir;

#ifdef VGPU_FAKE_NVML_LIBRARY
const std::string kGpu = "GPU-22222222-2222-2222-2222-222222222222";

class NvidiaMigManager : public ::testing::Test {
 protected:
  void SetUp() override {
    setEnv("VGPU_FAKE_GPU_CONFIG",
           dir_.write("machine.conf", "gpu uuid=" + kGpu +
                                          " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb\n")
               .string());
    setEnv("VGPU_FAKE_GPU_STATE", (dir_.path() / "gpu-state").string());
    state_ = (dir_.path() / "mig").string();
  }
  std::unique_ptr<NvmlSession> session() {
    auto s = NvmlSession::open(VGPU_FAKE_NVML_LIBRARY);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(s).value() : nullptr;
  }
  TempDir dir_;
  std::string state_;
};

TEST_F(NvidiaMigManager, CreatesTheSmallestInstanceAtAllocateAndDestroysItAtRelease) {
  auto nvml = session();
  ASSERT_TRUE(nvml);
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  MigManager manager(*nvml, state_, {});
  auto mig = manager.acquire("pod-a/main", kGpu, 3000);
  ASSERT_TRUE(mig.ok()) << mig.error().message;
  EXPECT_EQ(mig->profile, "1g.5gb");
  EXPECT_EQ(mig->start, 6u);
  EXPECT_EQ(mig->memoryMiB, 4864u);
  EXPECT_THAT(mig->uuid, ::testing::StartsWith("MIG-"));
  EXPECT_EQ(control.migDevices(0), 1u);
  EXPECT_THAT(readFile(state_ + "/" + kGpu + "@6.mig"), HasSubstr("state=created"));
  auto again = manager.acquire("pod-a/main", kGpu, 3000);  // Allocate retried
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->uuid, mig->uuid);
  EXPECT_EQ(control.migDevices(0), 1u);
  ASSERT_TRUE(manager.release("pod-a/main").ok());
  EXPECT_EQ(control.migDevices(0), 0u);
  EXPECT_FALSE(std::filesystem::exists(state_ + "/" + kGpu + "@6.mig"));
}

TEST_F(NvidiaMigManager, RefusesInWordsWhatTheHardwareWouldRefuse) {
  auto nvml = session();
  ASSERT_TRUE(nvml);
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  // The operator made a 1g.5gb on slice 5 by hand.
  ASSERT_EQ(control.partition(0, 19, 5, 1), NVML_SUCCESS);
  MigManager manager(*nvml, state_, {"3g.20gb"});
  auto first = manager.acquire("pod-a/main", kGpu, 15000);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->start, 0u);  // 4-7 is blocked by the operator's instance
  auto second = manager.acquire("pod-b/main", kGpu, 15000);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().message, "GPU " + kGpu +
                                        ": no free 3g.20gb placement: slices 0\u20133 hold a 3g.20gb; slices "
                                        "4\u20137 hold a 1g.5gb");
  // Reclaiming never touches an instance it did not record.
  ASSERT_TRUE(manager.reconcile({}).ok());
  EXPECT_EQ(control.migDevices(0), 1u);
}

TEST_F(NvidiaMigManager, AnAgentKilledBetweenCreateAndRecordIsReclaimedAtStart) {
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  ASSERT_TRUE(control.ok());
  // The completion record's temporary file is a FIFO: the agent blocks right after creating
  // the instance, where the test kills it.
  std::filesystem::create_directories(state_);
  const std::string blocker = state_ + "/" + kGpu + "@6.mig.created.new";
  ASSERT_EQ(mkfifo(blocker.c_str(), 0600), 0);
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    auto nvml = NvmlSession::open(VGPU_FAKE_NVML_LIBRARY);
    if (!nvml.ok()) _exit(2);
    MigManager manager(**nvml, state_, {});
    (void)manager.acquire("pod-a/main", kGpu, 3000);
    _exit(3);  // not reached: the FIFO blocks until the kill
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (control.migDevices(0) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(control.migDevices(0), 1u) << "the agent did not create the instance";
  kill(agent, SIGKILL);
  int status = 0;
  waitpid(agent, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_THAT(readFile(state_ + "/" + kGpu + "@6.mig"), HasSubstr("state=intent"));

  // The restarted agent: the container never got its device, the instance goes back.
  auto nvml = session();
  ASSERT_TRUE(nvml);
  MigManager restarted(*nvml, state_, {});
  ASSERT_TRUE(restarted.reconcile({"pod-a/main"}).ok());
  EXPECT_EQ(control.migDevices(0), 0u);
  EXPECT_FALSE(std::filesystem::exists(state_ + "/" + kGpu + "@6.mig"));
}

TEST_F(NvidiaMigManager, ReconcileKeepsLiveContainersAndReclaimsDeadOnes) {
  auto nvml = session();
  ASSERT_TRUE(nvml);
  testing::FakeMigControl control(VGPU_FAKE_NVML_LIBRARY);
  MigManager manager(*nvml, state_, {});
  ASSERT_TRUE(manager.acquire("pod-a/main", kGpu, 3000).ok());
  ASSERT_TRUE(manager.acquire("pod-b/main", kGpu, 3000).ok());
  MigManager restarted(*nvml, state_, {});
  ASSERT_TRUE(restarted.reconcile({"pod-b/main"}).ok());
  EXPECT_EQ(control.migDevices(0), 1u);
  auto left = restarted.occupants(kGpu);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].start, 5u);  // pod-b's, beside pod-a's former slice 6
}
#endif

}  // namespace
}  // namespace vgpu::nvidia
