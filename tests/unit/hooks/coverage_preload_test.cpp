// Driver entry points that take device memory beyond the everyday allocators (issue 36 item 5,
// issue 37 item 5), each run as a limited process: coverage_probe with LD_PRELOAD=libvgpu.so
// against the default fake driver, a 64 MiB limit and 8 MiB per context. What is charged for
// each and why the others need no hook: docs/limiter.md, "Coverage of the CUDA driver API".

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "probe_process.h"

namespace {

using Result = vgpu::test::ProbeResult;
using vgpu::test::libvgpuPath;

class LimiterCoverage : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "vgpu-coverage-test-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    std::ofstream(dir_ + "/gpus.conf") << "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"Fake H100\" "
                                       << "memory_mib=1024 sm_count=132 cc=9.0 context_mib=8\n";
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // Runs the probe with the limiter preloaded under `limit`; a timeout of 30 s.
  Result run(const std::vector<std::string>& args, const std::string& limit = "64m") {
    const std::map<std::string, std::string> env{
        {"PATH", "/usr/bin:/bin"},
        {"LD_LIBRARY_PATH", VGPU_FAKE_LIB_PATH},
        {"LD_PRELOAD", libvgpuPath()},
        {"VGPU_FAKE_GPU_CONFIG", dir_ + "/gpus.conf"},
        {"VGPU_FAKE_GPU_STATE", dir_ + "/fake-state"},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", dir_ + "/region"},
        {"CUDA_DEVICE_MEMORY_LIMIT", limit},
    };
    return vgpu::test::runProbe(VGPU_COVERAGE_PROBE, args, env, dir_, std::chrono::seconds(30));
  }

  std::string dir_;
};

// Issue 36 item 5: the 32-bit cuMemAllocPitch, still exported, was passed through uncounted
// (240 MiB under a 64 MiB limit).
TEST_F(LimiterCoverage, PitchV1FromDlsymIsChargedLikeV2AndGivenBackByCuMemFreeV1) {
  Result r = run({"pitch_v1", "dlsym"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

TEST_F(LimiterCoverage, PitchV1FromGetProcAddressIsChargedLikeV2) {
  Result r = run({"pitch_v1", "procaddr"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// Issue 36 item 5 / issue 37 item 5: a module's code and __device__ globals take device memory
// at load; every loader was passed through uncounted. Charged exactly, refused over the limit
// with nothing left on the device, given back by the unload.
class LimiterCodeLoading : public LimiterCoverage, public ::testing::WithParamInterface<const char*> {};

TEST_P(LimiterCodeLoading, IsChargedExactlyRefusedOverTheLimitAndGivenBackByTheUnload) {
  Result r = run({"load", GetParam()});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

INSTANTIATE_TEST_SUITE_P(Loaders, LimiterCodeLoading,
                         ::testing::Values("data", "dataex", "fatbinary", "file", "library", "libraryfile"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST_F(LimiterCoverage, AModulesChargeGoesWithItsContext) {
  Result r = run({"load_ctxdestroy"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// A green context retains the primary context inside the driver and has a context's state of
// its own; it was passed through uncounted.
TEST_F(LimiterCoverage, AGreenContextIsChargedLikeAContextAndGivenBackWhenDestroyed) {
  Result r = run({"greenctx"});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// The oldest ABIs of hooked functions, still exported: the 32-bit array descriptors were
// passed through uncounted (240 MiB under 64 MiB), and cuCtxDestroy v1 left what the context
// held charged until the process ended.
TEST_F(LimiterCoverage, ArraysOfThe32BitDescriptorsAreChargedLikeV2) {
  for (const char* how : {"dlsym", "procaddr"}) {
    for (const char* dims : {"2d", "3d"}) {
      Result r = run({"array_v1", how, dims});
      EXPECT_EQ(r.exitCode, 0) << how << " " << dims << ": " << r.err << r.out;
    }
  }
}

TEST_F(LimiterCoverage, CtxDestroyV1GivesBackWhatTheContextHeld) {
  for (const char* how : {"dlsym", "procaddr"}) {
    Result r = run({"ctxdestroy_v1", how});
    EXPECT_EQ(r.exitCode, 0) << how << ": " << r.err << r.out;
  }
}

// A memory allocation node added through the generic cuGraphAddNode was not seen: its graph
// launched past the limit and the graph allocator was never charged.
TEST_F(LimiterCoverage, AnAllocationNodeAddedByCuGraphAddNodeIsReservedAtLaunchAndCharged) {
  for (const char* variant : {"v1", "v2"}) {
    Result r = run({"graphnode", variant});
    EXPECT_EQ(r.exitCode, 0) << variant << ": " << r.err << r.out;
  }
}

// cuGraphUpload maps a graph's allocation memory before its launch; it was not counted until
// the launch (24 MiB on the device, none charged; 48 MiB more uploaded past the limit).
TEST_F(LimiterCoverage, AGraphUploadIsChargedAsItsLaunchWouldBeAndRefusedOverTheLimit) {
  for (const char* which : {"plain", "ptsz"}) {
    Result r = run({"graphupload", which});
    EXPECT_EQ(r.exitCode, 0) << which << ": " << r.err << r.out;
  }
}

// The pre-11.0 ABIs of the primary context's release and reset: what the context held stayed
// charged until the process ended.
TEST_F(LimiterCoverage, PrimaryContextReleaseAndResetV1GiveBackWhatTheContextHeld) {
  for (const char* how : {"dlsym", "procaddr"}) {
    for (const char* op : {"release", "reset"}) {
      Result r = run({"primary_v1", how, op});
      EXPECT_EQ(r.exitCode, 0) << how << " " << op << ": " << r.err << r.out;
    }
  }
}

}  // namespace
