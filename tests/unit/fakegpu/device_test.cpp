// Device queries and the exported symbol set of the fake libcuda.so.1.

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "child.h"
#include "vgpu/cuda/per_thread_twins.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

TEST(FakeGpuDevice, QueriesFollowTheConfig) {
  TempDir dir;
  std::string conf = dir.write("gpus.conf",
                               "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"NVIDIA H100 80GB HBM3\" "
                               "memory_mib=81559 sm_count=132 cc=9.0 pci_bus_id=00000000:3B:00.0 numa=1\n"
                               "gpu memory_mib=4096 sm_count=40 cc=7.5\n");
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", conf}}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuDriverGetVersion);
    CU_FN(cuda, cuDeviceGet);
    CU_FN(cuda, cuDeviceGetCount);
    CU_FN(cuda, cuDeviceGetName);
    CU_FN(cuda, cuDeviceTotalMem_v2);
    CU_FN(cuda, cuDeviceGetUuid_v2);
    CU_FN(cuda, cuDeviceGetAttribute);
    CU_FN(cuda, cuDeviceGetPCIBusId);
    CU_FN(cuda, cuDeviceGetByPCIBusId);
    int v = 0;
    CHILD_CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 13000);  // also before cuInit
    CHILD_CHECK(cuDeviceGetCount(&v) == CUDA_ERROR_NOT_INITIALIZED);
    CHILD_CHECK(cuInit(1) == CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuDeviceGetCount(&v) == CUDA_SUCCESS && v == 2);
    CUdevice d = -1;
    CHILD_CHECK(cuDeviceGet(&d, 1) == CUDA_SUCCESS && d == 1);
    CHILD_CHECK(cuDeviceGet(&d, 2) == CUDA_ERROR_INVALID_DEVICE);
    char name[128];
    CHILD_CHECK(cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS && std::string(name) == "NVIDIA H100 80GB HBM3");
    CHILD_CHECK(cuDeviceGetName(name, 7, 0) == CUDA_SUCCESS && std::string(name) == "NVIDIA");  // truncated
    size_t total = 0;
    CHILD_CHECK(cuDeviceTotalMem_v2(&total, 1) == CUDA_SUCCESS && total == 4096ull << 20);
    CUuuid u{};
    CHILD_CHECK(cuDeviceGetUuid_v2(&u, 0) == CUDA_SUCCESS);
    CHILD_CHECK(static_cast<unsigned char>(u.bytes[0]) == 0x6b && static_cast<unsigned char>(u.bytes[15]) == 0x20);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS && v == 132);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1) == CUDA_SUCCESS && v == 40);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1) == CUDA_SUCCESS && v == 7);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 1) == CUDA_SUCCESS && v == 5);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0) == CUDA_SUCCESS && v == 0x3b);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_NUMA_ID, 0) == CUDA_SUCCESS && v == 1);
    CHILD_CHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0) == CUDA_ERROR_INVALID_VALUE);
    char bus[32];
    CHILD_CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, 0) == CUDA_SUCCESS && std::string(bus) == "0000:3B:00.0");
    CHILD_CHECK(cuDeviceGetByPCIBusId(&d, "0000:3b:00.0") == CUDA_SUCCESS && d == 0);
    CHILD_CHECK(cuDeviceGetByPCIBusId(&d, "garbage") == CUDA_ERROR_INVALID_VALUE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// Wherever the driver API has a per-thread-default-stream twin (_ptsz/_ptds) of a function the
// fake exports, the fake exports that twin too (the pairs: vgpu/cuda/per_thread_twins.h).
TEST(FakeGpuDevice, ExportsEveryPerThreadVariantOfWhatItImplements) {
  std::set<std::pair<std::string, std::string>> variants;
#define VGPU_ADD_TWIN(base, twin) variants.insert({#base, #twin});
  VGPU_CU_PER_THREAD_TWINS(VGPU_ADD_TWIN)
#undef VGPU_ADD_TWIN
  ASSERT_GT(variants.size(), 40u);
  auto r = runChild({}, [&variants] {
    void* cuda = test::openLib("libcuda.so.1");
    int missing = 0, covered = 0;
    for (const auto& [base, variant] : variants) {
      if (dlsym(cuda, base.c_str()) == nullptr) continue;
      ++covered;
      if (dlsym(cuda, variant.c_str()) == nullptr) {
        std::fprintf(stderr, "exports %s but not %s\n", base.c_str(), variant.c_str());
        ++missing;
      }
    }
    CHILD_CHECK(covered >= 15);
    return missing;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
