// The machine-description format of the fake GPU driver (tests/fakes/gpu/README.md).

#include <gtest/gtest.h>

#include "child.h"
#include "src/config.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

TEST(FakeGpuConfig, ParsesEveryGpuKey) {
  MachineConfig c = parseMachineConfig(
      "# two GPUs\n"
      "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 "
      "sm_count=132 cc=9.0 pci_bus_id=00000000:17:00.0 minor=3 numa=1 mig=on context_mib=300  # trailing\n"
      "\n"
      "gpu memory_mib=1024\n",
      "test.conf");
  ASSERT_EQ(c.error, "");
  ASSERT_EQ(c.gpus.size(), 2u);
  const GpuSpec& g = c.gpus[0];
  EXPECT_EQ(g.uuid, "GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20");
  EXPECT_EQ(g.uuidBytes[0], 0x6b);
  EXPECT_EQ(g.uuidBytes[15], 0x20);
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.memoryMib, 81559u);
  EXPECT_EQ(g.smCount, 132);
  EXPECT_EQ(g.ccMajor, 9);
  EXPECT_EQ(g.ccMinor, 0);
  EXPECT_EQ(g.pciBusId, "00000000:17:00.0");
  EXPECT_EQ(g.pciBus, 0x17u);
  EXPECT_EQ(g.minor, 3u);
  EXPECT_EQ(g.numa, 1);
  EXPECT_TRUE(g.mig);
  EXPECT_EQ(g.contextMib, 300u);
  EXPECT_EQ(c.gpus[1].memoryMib, 1024u);
  EXPECT_NE(c.gpus[1].uuid, g.uuid);
  EXPECT_EQ(c.gpus[1].minor, 1u);
}

TEST(FakeGpuConfig, ParsesFaultLines) {
  MachineConfig c = parseMachineConfig(
      "gpu\ngpu\n"
      "nvml_init_error code=DRIVER_NOT_LOADED\n"
      "cuinit_error code=CUDA_ERROR_NO_DEVICE\n"
      "nvml_device_error gpu=1 code=NVML_ERROR_GPU_IS_LOST\n"
      "xid gpu=0 code=79 delay_ms=20\n"
      "xid gpu=1 code=48\n",
      "f.conf");
  ASSERT_EQ(c.error, "");
  EXPECT_EQ(c.nvmlInitError, NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(c.cuInitError, CUDA_ERROR_NO_DEVICE);
  EXPECT_EQ(c.gpus[0].nvmlError, 0);
  EXPECT_EQ(c.gpus[1].nvmlError, NVML_ERROR_GPU_IS_LOST);
  ASSERT_EQ(c.xids.size(), 2u);
  EXPECT_EQ(c.xids[0].code, 79u);
  EXPECT_EQ(c.xids[0].delayMs, 20u);
  EXPECT_EQ(c.xids[1].gpu, 1u);
}

struct BadCase {
  const char* what;
  const char* text;
  const char* expect;  // substring of the error, which always names file and line
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

class FakeGpuConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(FakeGpuConfigRejects, NamingTheLine) {
  MachineConfig c = parseMachineConfig(GetParam().text, "bad.conf");
  EXPECT_NE(c.error.find(GetParam().expect), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("bad.conf:"), std::string::npos) << c.error;
  EXPECT_TRUE(c.gpus.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FakeGpuConfigRejects,
    ::testing::Values(
        BadCase{"unknown kind", "gpu\nfoo bar=1\n", "bad.conf:2: unknown line kind 'foo'"},
        BadCase{"unknown key", "gpu colour=red\n", ":1: unknown gpu key 'colour'"},
        BadCase{"not key=value", "gpu memory_mib\n", "expected key=value"},
        BadCase{"bad number", "gpu memory_mib=12x\n", "memory_mib '12x'"},
        BadCase{"zero memory", "gpu memory_mib=0\n", "memory_mib '0'"},
        BadCase{"bad uuid", "gpu uuid=GPU-1234\n", "uuid 'GPU-1234'"},
        BadCase{"duplicate uuid",
                "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20\ngpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20\n",
                ":2: uuid GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 used twice"},
        BadCase{"bad cc", "gpu cc=9\n", "cc '9'"},
        BadCase{"bad pci", "gpu pci_bus_id=17:00\n", "pci_bus_id '17:00'"},
        BadCase{"bad mig", "gpu mig=yes\n", "mig 'yes'"},
        BadCase{"unterminated quote", "gpu name=\"A100\n", "unterminated quote"},
        BadCase{"key twice", "gpu sm_count=1 sm_count=2\n", "given twice"},
        BadCase{"unknown nvml code", "nvml_init_error code=BANANA\n", "code 'BANANA'"},
        BadCase{"unknown cuda code", "cuinit_error code=CUDA_ERROR_BANANA\n", "code 'CUDA_ERROR_BANANA'"},
        BadCase{"success is no fault", "cuinit_error code=0\n", "code '0'"},
        BadCase{"device error for missing gpu", "gpu\nnvml_device_error gpu=3 code=GPU_IS_LOST\n",
                ":2: nvml_device_error names gpu 3"},
        BadCase{"xid for missing gpu", "xid gpu=0 code=79\n", ":1: xid names gpu 0"},
        BadCase{"xid without code", "gpu\nxid gpu=0\n", "xid needs code"},
        BadCase{"too many gpus", "gpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\ngpu\n",
                ":17: more than 16 gpu lines"}),
    [](const auto& info) {
      std::string n = info.param.what;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(FakeGpuConfig, MalformedFileFailsCuInitAndNvmlInitNamingTheLine) {
  TempDir dir;
  std::string conf = dir.write("gpus.conf", "gpu memory_mib=1024\ngpu memory_mib=lots\n");
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}, {"VGPU_FAKE_GPU_STATE", ""}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    void* nvml = test::openLib("libnvidia-ml.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuDeviceGetCount);
    NVML_FN(nvml, nvmlInit_v2);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_UNKNOWN);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_UNKNOWN);  // remembered, as the real driver does
    int n = 0;
    CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
    CHILD_CHECK(nvmlInit_v2() == NVML_ERROR_UNKNOWN);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  EXPECT_NE(r.stderrText.find(conf + ":2: memory_mib 'lots'"), std::string::npos) << r.stderrText;
}

TEST(FakeGpuConfig, MissingFileIsAnError) {
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", "/nonexistent/gpus.conf"}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_UNKNOWN);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  EXPECT_NE(r.stderrText.find("/nonexistent/gpus.conf"), std::string::npos);
}

TEST(FakeGpuConfig, WithoutConfigThereIsOneDefaultGpu) {
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", ""}, {"VGPU_FAKE_GPU_STATE", ""}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuDeviceGetCount);
    CU_FN(cuda, cuDeviceTotalMem_v2);
    CU_FN(cuda, cuDeviceGetName);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    int n = 0;
    CHILD_CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 1);
    size_t total = 0;
    CHILD_CHECK(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS && total == (16384ull << 20));
    char name[64];
    CHILD_CHECK(cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS && std::string(name) == "NVIDIA Fake GPU");
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST(FakeGpuConfig, InjectedCuInitErrorIsReturned) {
  TempDir dir;
  std::string conf = dir.write("gpus.conf", "gpu\ncuinit_error code=CUDA_ERROR_NO_DEVICE\n");
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu

namespace vgpu::fakegpu {
namespace {

TEST(FakeGpuConfig, AMachineWithoutGpusHasNoDevice) {
  TempDir dir;
  std::string conf = dir.write("empty.conf", "# nothing here\n");
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    void* nvml = test::openLib("libnvidia-ml.so.1");
    CU_FN(cuda, cuInit);
    NVML_FN(nvml, nvmlInit_v2);
    NVML_FN(nvml, nvmlInitWithFlags);
    NVML_FN(nvml, nvmlDeviceGetCount_v2);
    CHILD_CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE);
    CHILD_CHECK(nvmlInit_v2() == NVML_ERROR_NOT_FOUND);
    CHILD_CHECK(nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) == NVML_SUCCESS);
    unsigned n = 7;
    CHILD_CHECK(nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS && n == 0);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST(FakeGpuConfig, AStateFileOfAnotherMachineIsRefusedWithAReason) {
  TempDir dir;
  std::string one = dir.write("one.conf", "gpu memory_mib=1024\n");
  std::string two = dir.write("two.conf", "gpu memory_mib=1024\ngpu memory_mib=1024\n");
  std::string state = dir.path() + "/state";
  auto init = [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CUresult rc = cuInit(0);
    return rc == CUDA_SUCCESS ? 0 : rc == CUDA_ERROR_UNKNOWN ? 1 : 2;  // exit codes are 8-bit
  };
  EXPECT_EQ(runChild({{"VGPU_FAKE_GPU_CONFIG", one}, {"VGPU_FAKE_GPU_STATE", state}}, init).exitCode, 0);
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", two}, {"VGPU_FAKE_GPU_STATE", state}}, init);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.stderrText.find("holds 1 devices but the config"), std::string::npos) << r.stderrText;
  std::string junk = dir.write("junk", "not a state file");
  r = runChild({{"VGPU_FAKE_GPU_CONFIG", one}, {"VGPU_FAKE_GPU_STATE", junk}}, init);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.stderrText.find("wrong size"), std::string::npos) << r.stderrText;
  r = runChild({{"VGPU_FAKE_GPU_CONFIG", one}, {"VGPU_FAKE_GPU_STATE", dir.path() + "/no/such/dir/state"}}, init);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.stderrText.find("cannot open VGPU_FAKE_GPU_STATE"), std::string::npos) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
