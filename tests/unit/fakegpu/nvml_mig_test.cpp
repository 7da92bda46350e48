// The fake libnvidia-ml.so.1's MIG API: profiles and placements of an A100-40GB and an
// H100-80GB, the hardware's refusals, instances that outlive the process that made them.

#include <gtest/gtest.h>

#include "child.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

class FakeGpuNvmlMig : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = dir_.write("gpus.conf",
                       "gpu name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=on mig_profiles=a100-40gb\n"
                       "gpu name=\"NVIDIA H100 80GB HBM3\" memory_mib=81559 mig=on mig_profiles=h100-80gb\n"
                       "gpu name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960 mig=off mig_profiles=a100-40gb\n"
                       "gpu memory_mib=1024\n");
    state_ = dir_.path() + "/state";
  }
  std::map<std::string, std::string> env() const {
    return {{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", state_}};
  }
  TempDir dir_;
  std::string conf_, state_;
};

#define OPEN_MIG()                                                                          \
  void* nvml = test::openLib("libnvidia-ml.so.1");                                          \
  NVML_FN(nvml, nvmlInit_v2);                                                               \
  NVML_FN(nvml, nvmlDeviceGetHandleByIndex_v2);                                             \
  NVML_FN(nvml, nvmlDeviceCreateGpuInstanceWithPlacement);                                  \
  NVML_FN(nvml, nvmlDeviceCreateGpuInstance);                                               \
  NVML_FN(nvml, nvmlGpuInstanceCreateComputeInstance);                                      \
  NVML_FN(nvml, nvmlGpuInstanceDestroy);                                                    \
  NVML_FN(nvml, nvmlComputeInstanceDestroy);                                                \
  CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS);                                               \
  nvmlDevice_t a100 = nullptr, h100 = nullptr, a100Off = nullptr, plain = nullptr;          \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(0, &a100) == NVML_SUCCESS);                     \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(1, &h100) == NVML_SUCCESS);                     \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(2, &a100Off) == NVML_SUCCESS);                  \
  CHILD_CHECK(nvmlDeviceGetHandleByIndex_v2(3, &plain) == NVML_SUCCESS)

TEST_F(FakeGpuNvmlMig, ReportsTheProfilesOfEachProduct) {
  auto r = runChild(env(), [] {
    OPEN_MIG();
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceProfileInfo);
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceProfileInfoV);
    nvmlGpuInstanceProfileInfo_t info{};
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info) == NVML_SUCCESS);
    CHILD_CHECK(info.id == 9 && info.sliceCount == 3 && info.instanceCount == 2 && info.memorySizeMB == 19968);
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, &info) ==
                    NVML_SUCCESS &&
                info.id == 15 && info.memorySizeMB == 9856 && info.instanceCount == 4);
    // Not on these products, and past the last profile index.
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, NVML_GPU_INSTANCE_PROFILE_8_SLICE, &info) ==
                NVML_ERROR_NOT_SUPPORTED);
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, 0x12, &info) == NVML_ERROR_INVALID_ARGUMENT);
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfo(plain, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info) ==
                NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstanceProfileInfo_v2_t v2{};
    v2.version = nvmlGpuInstanceProfileInfo_v2;
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(h100, NVML_GPU_INSTANCE_PROFILE_7_SLICE, &v2) == NVML_SUCCESS);
    CHILD_CHECK(v2.id == 0 && v2.sliceCount == 7 && v2.memorySizeMB == 81152 && std::string(v2.name) == "MIG 7g.80gb");
    v2.version = 1;
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(h100, NVML_GPU_INSTANCE_PROFILE_7_SLICE, &v2) ==
                NVML_ERROR_INVALID_ARGUMENT);
    v2.version = nvmlGpuInstanceProfileInfo_v2;
    CHILD_CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100Off, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &v2) ==
                NVML_ERROR_NOT_SUPPORTED);  // MIG mode off
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvmlMig, ListsThePlacementsTheHardwareAllows) {
  auto r = runChild(env(), [] {
    OPEN_MIG();
    NVML_FN(nvml, nvmlDeviceGetGpuInstancePossiblePlacements_v2);
    unsigned n = 0;
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 19, nullptr, &n) == NVML_SUCCESS && n == 7);
    nvmlGpuInstancePlacement_t p[8]{};
    n = 1;
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 9, p, &n) == NVML_ERROR_INSUFFICIENT_SIZE && n == 2);
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 9, p, &n) == NVML_SUCCESS);
    CHILD_CHECK(n == 2 && p[0].start == 0 && p[0].size == 4 && p[1].start == 4 && p[1].size == 4);
    n = 8;
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(h100, 15, p, &n) == NVML_SUCCESS && n == 4);
    CHILD_CHECK(p[3].start == 6 && p[3].size == 2);
    // Also with MIG off, as the reference says; unknown profile ids are refused.
    n = 8;
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100Off, 0, p, &n) == NVML_SUCCESS && n == 1);
    CHILD_CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 77, p, &n) == NVML_ERROR_INVALID_ARGUMENT);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvmlMig, RefusesPlacementsTheHardwareWouldRefuse) {
  auto r = runChild(env(), [] {
    OPEN_MIG();
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceRemainingCapacity);
    nvmlGpuInstance_t gi = nullptr, other = nullptr;
    // A 1g.5gb on memory slice 5 ...
    nvmlGpuInstancePlacement_t at5{5, 1};
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 19, &at5, &gi) == NVML_SUCCESS);
    // ... leaves no room for a 3g.20gb on slices 4-7, but slices 0-3 are still free.
    nvmlGpuInstancePlacement_t at4{4, 4}, at0{0, 4};
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &at4, &other) == NVML_ERROR_INSUFFICIENT_RESOURCES);
    unsigned left = 0;
    CHILD_CHECK(nvmlDeviceGetGpuInstanceRemainingCapacity(a100, 9, &left) == NVML_SUCCESS && left == 1);
    // A start the profile does not allow, or a size not its own, is invalid.
    nvmlGpuInstancePlacement_t at1{1, 4}, wrongSize{0, 2};
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &at1, &other) == NVML_ERROR_INVALID_ARGUMENT);
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &wrongSize, &other) == NVML_ERROR_INVALID_ARGUMENT);
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &at0, &other) == NVML_SUCCESS);
    // The 4g.20gb sits only on slices 0-3: taken. The 7g.40gb needs all.
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(a100, 5, &other) == NVML_ERROR_INSUFFICIENT_RESOURCES);
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(a100, 0, &other) == NVML_ERROR_INSUFFICIENT_RESOURCES);
    // Without a placement the first free one is taken (slice 4: 5 is the 1g.5gb's).
    nvmlGpuInstance_t small = nullptr;
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(a100, 19, &small) == NVML_SUCCESS);
    // One media-extension instance at most.
    nvmlGpuInstance_t me = nullptr;
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(h100, 20, &me) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(h100, 20, &other) == NVML_ERROR_INSUFFICIENT_RESOURCES);
    // MIG off, or no MIG at all.
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(a100Off, 19, &other) == NVML_ERROR_NOT_SUPPORTED);
    CHILD_CHECK(nvmlDeviceCreateGpuInstance(plain, 19, &other) == NVML_ERROR_NOT_SUPPORTED);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvmlMig, ComputeInstancesBecomeMigDevices) {
  auto r = runChild(env(), [] {
    OPEN_MIG();
    NVML_FN(nvml, nvmlDeviceGetMaxMigDeviceCount);
    NVML_FN(nvml, nvmlDeviceGetMigDeviceHandleByIndex);
    NVML_FN(nvml, nvmlDeviceGetUUID);
    NVML_FN(nvml, nvmlDeviceGetMemoryInfo);
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceId);
    NVML_FN(nvml, nvmlDeviceGetComputeInstanceId);
    NVML_FN(nvml, nvmlDeviceIsMigDeviceHandle);
    NVML_FN(nvml, nvmlDeviceGetDeviceHandleFromMigDeviceHandle);
    NVML_FN(nvml, nvmlDeviceGetAttributes_v2);
    NVML_FN(nvml, nvmlGpuInstanceGetInfo);
    NVML_FN(nvml, nvmlComputeInstanceGetInfo_v2);
    NVML_FN(nvml, nvmlGpuInstanceGetComputeInstanceProfileInfo);
    unsigned n = 9;
    CHILD_CHECK(nvmlDeviceGetMaxMigDeviceCount(a100, &n) == NVML_SUCCESS && n == 7);
    CHILD_CHECK(nvmlDeviceGetMaxMigDeviceCount(a100Off, &n) == NVML_SUCCESS && n == 0);
    nvmlDevice_t mig = nullptr;
    CHILD_CHECK(nvmlDeviceGetMigDeviceHandleByIndex(h100, 0, &mig) == NVML_ERROR_NOT_FOUND);
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstancePlacement_t at4{4, 4};
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(h100, 9, &at4, &gi) == NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_t cip{};
    CHILD_CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                              NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                              &cip) == NVML_SUCCESS);
    CHILD_CHECK(cip.sliceCount == 3 && cip.instanceCount == 1);
    CHILD_CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
                                                              NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                              &cip) == NVML_ERROR_NOT_SUPPORTED);
    nvmlComputeInstance_t ci = nullptr;
    CHILD_CHECK(nvmlGpuInstanceCreateComputeInstance(gi, cip.id, &ci) == NVML_SUCCESS);
    CHILD_CHECK(nvmlGpuInstanceDestroy(gi) == NVML_ERROR_IN_USE);  // its compute instance is active
    CHILD_CHECK(nvmlDeviceGetMigDeviceHandleByIndex(h100, 0, &mig) == NVML_SUCCESS);
    unsigned isMig = 0;
    CHILD_CHECK(nvmlDeviceIsMigDeviceHandle(mig, &isMig) == NVML_SUCCESS && isMig == 1);
    CHILD_CHECK(nvmlDeviceIsMigDeviceHandle(h100, &isMig) == NVML_SUCCESS && isMig == 0);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    CHILD_CHECK(nvmlDeviceGetUUID(mig, uuid, sizeof uuid) == NVML_SUCCESS && std::string(uuid).rfind("MIG-", 0) == 0);
    nvmlMemory_t mem{};
    CHILD_CHECK(nvmlDeviceGetMemoryInfo(mig, &mem) == NVML_SUCCESS && mem.total == 40448ull << 20);
    nvmlGpuInstanceInfo_t gii{};
    CHILD_CHECK(nvmlGpuInstanceGetInfo(gi, &gii) == NVML_SUCCESS && gii.profileId == 9 && gii.placement.start == 4);
    nvmlComputeInstanceInfo_t cii{};
    CHILD_CHECK(nvmlComputeInstanceGetInfo_v2(ci, &cii) == NVML_SUCCESS && cii.gpuInstance == gi);
    unsigned id = 0;
    CHILD_CHECK(nvmlDeviceGetGpuInstanceId(mig, &id) == NVML_SUCCESS && id == gii.id);
    CHILD_CHECK(nvmlDeviceGetComputeInstanceId(mig, &id) == NVML_SUCCESS && id == cii.id);
    nvmlDevice_t parent = nullptr;
    CHILD_CHECK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent) == NVML_SUCCESS && parent == h100);
    nvmlDeviceAttributes_t a{};
    CHILD_CHECK(nvmlDeviceGetAttributes_v2(mig, &a) == NVML_SUCCESS);
    CHILD_CHECK(a.gpuInstanceSliceCount == 3 && a.computeInstanceSliceCount == 3 && a.memorySizeMB == 40448);
    // Destroyed: the MIG device and the instance handles go stale.
    CHILD_CHECK(nvmlComputeInstanceDestroy(ci) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetUUID(mig, uuid, sizeof uuid) == NVML_ERROR_INVALID_ARGUMENT);
    CHILD_CHECK(nvmlGpuInstanceDestroy(gi) == NVML_SUCCESS);
    CHILD_CHECK(nvmlGpuInstanceGetInfo(gi, &gii) == NVML_ERROR_INVALID_ARGUMENT);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuNvmlMig, InstancesOutliveTheProcessThatCreatedThem) {
  auto made = runChild(env(), [] {
    OPEN_MIG();
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    nvmlGpuInstancePlacement_t at2{2, 2};
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 14, &at2, &gi) == NVML_SUCCESS);
    CHILD_CHECK(nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &ci) == NVML_SUCCESS);
    _exit(0);  // no cleanup, as a killed agent
  });
  ASSERT_EQ(made.exitCode, 0) << made.stderrText;
  auto found = runChild(env(), [] {
    OPEN_MIG();
    NVML_FN(nvml, nvmlDeviceGetGpuInstances);
    NVML_FN(nvml, nvmlGpuInstanceGetComputeInstances);
    NVML_FN(nvml, nvmlDeviceGetGpuInstanceById);
    nvmlGpuInstance_t gis[4]{};
    unsigned n = 4;
    CHILD_CHECK(nvmlDeviceGetGpuInstances(a100, 14, gis, &n) == NVML_SUCCESS && n == 1);
    nvmlComputeInstance_t cis[4]{};
    unsigned m = 4;
    CHILD_CHECK(nvmlGpuInstanceGetComputeInstances(gis[0], NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, cis, &m) ==
                    NVML_SUCCESS &&
                m == 1);
    nvmlGpuInstancePlacement_t at2{2, 2};
    nvmlGpuInstance_t again = nullptr;
    CHILD_CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 14, &at2, &again) == NVML_ERROR_INSUFFICIENT_RESOURCES);
    CHILD_CHECK(nvmlComputeInstanceDestroy(cis[0]) == NVML_SUCCESS);
    CHILD_CHECK(nvmlGpuInstanceDestroy(gis[0]) == NVML_SUCCESS);
    CHILD_CHECK(nvmlDeviceGetGpuInstanceById(a100, 1, &again) == NVML_ERROR_NOT_FOUND);
    return 0;
  });
  EXPECT_EQ(found.exitCode, 0) << found.stderrText;
}

TEST_F(FakeGpuNvmlMig, AnUnknownProductIsAConfigError) {
  auto r = runChild({{"VGPU_FAKE_GPU_CONFIG", dir_.write("bad.conf", "gpu mig=on mig_profiles=a100-41gb\n")}}, [] {
    void* nvml = test::openLib("libnvidia-ml.so.1");
    NVML_FN(nvml, nvmlInit_v2);
    CHILD_CHECK(nvmlInit_v2() == NVML_ERROR_UNKNOWN);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  EXPECT_NE(r.stderrText.find("mig_profiles 'a100-41gb' is not one of a100-40gb, h100-80gb"), std::string::npos)
      << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
