// HAMi's pod device lists, replayed as HAMi's scheduler writes them (shared/reference/
// hami.md section 2), so that vgpu-scheduler can count the devices of pods HAMi placed.
#include <gtest/gtest.h>

#include "vgpu/codec/hami_allocation.h"

namespace vgpu::hami {
namespace {

TEST(HamiDeviceList, TwoContainersSharingOneGpu) {
  auto list = decodeDeviceList("GPU-aaa,NVIDIA,3000,30:;GPU-aaa,NVIDIA,5000,0:;");
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], (std::vector<Device>{{"GPU-aaa", "NVIDIA", 3000, 30}}));
  EXPECT_EQ((*list)[1], (std::vector<Device>{{"GPU-aaa", "NVIDIA", 5000, 0}}));
}

TEST(HamiDeviceList, TwoGpusInOneContainerAndAnEmptyEntryKeepIndicesAligned) {
  auto list = decodeDeviceList(";GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;");
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE((*list)[0].empty());
  ASSERT_EQ((*list)[1].size(), 2u);
  EXPECT_EQ((*list)[1][0].uuid, "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448");
  EXPECT_EQ((*list)[1][1].uuid, "GPU-b");
}

TEST(HamiDeviceList, OtherVendorsAndExtraFieldsAsHamiReadsThem) {
  // Hygon and Cambricon write the same format under their own keys; fields past the
  // fourth are ignored.
  auto dcu = decodeDeviceList("DCU-12345,DCU,8192,50:;");
  ASSERT_TRUE(dcu.ok());
  EXPECT_EQ((*dcu)[0][0], (Device{"DCU-12345", "DCU", 8192, 50}));
  auto extra = decodeDeviceList("MLU-1,MLU,4096,20,extra,fields:;");
  ASSERT_TRUE(extra.ok()) << extra.error().message;
  EXPECT_EQ((*extra)[0][0], (Device{"MLU-1", "MLU", 4096, 20}));
  // Without the final ';' (a hand-written annotation) it reads the same.
  auto bare = decodeDeviceList("GPU-aaa,NVIDIA,3000,30:");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->size(), 1u);
}

TEST(HamiDeviceList, RoundTripsThroughTheEncoder) {
  const ContainerDevices written{{}, {{"GPU-a", "NVIDIA", 1024, 10}, {"GPU-b", "NVIDIA", 2048, 0}}, {}};
  EXPECT_EQ(encodeDeviceList(written), ";GPU-a,NVIDIA,1024,10:GPU-b,NVIDIA,2048,0:;;");
  auto back = decodeDeviceList(encodeDeviceList(written));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, written);
}

TEST(HamiDeviceList, MalformedListsAreRefusedWithWhereAndWhat) {
  struct Case {
    const char* text;
    const char* words;
  } cases[] = {
      {"GPU-a,NVIDIA,3000:;", "container 0, device 0: \"GPU-a,NVIDIA,3000\" has 3 comma-separated fields"},
      {";GPU-a,NVIDIA,lots,30:;", "container 1, device 0: memory \"lots\" is not a non-negative integer"},
      {"GPU-a,NVIDIA,3000,-5:;", "cores \"-5\" is not a non-negative integer"},
      {",NVIDIA,3000,30:;", "the device UUID is empty"},
      {"GPU-a,NVIDIA,99999999999999999999999,30:;", "memory"},
  };
  for (const auto& c : cases) {
    auto list = decodeDeviceList(c.text);
    ASSERT_FALSE(list.ok()) << c.text;
    EXPECT_NE(list.error().message.find(c.words), std::string::npos) << list.error().message;
  }
}

TEST(HamiDeviceList, KnowsTheAllocatedKeysOfEveryVendor) {
  for (const char* key : {"hami.io/vgpu-devices-allocated", "hami.io/cambricon-mlu-devices-allocated",
                          "hami.io/dcu-devices-allocated", "hami.io/metax-sgpu-devices-allocated"})
    EXPECT_TRUE(isAllocatedKey(key)) << key;
  for (const char* key : {"hami.io/vgpu-devices-to-allocate", "hami.io/vgpu-node", "vgpu.io/assignment",
                          "example.com/vgpu-devices-allocated", "hami.io/-devices-allocated"})
    EXPECT_FALSE(isAllocatedKey(key)) << key;
}

TEST(HamiMigAllocations, ReadsWhatTheSchedulerAndThePluginWrite) {
  auto m = decodeMigAllocations(
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-5c7e2f1a","profile":"2g.10gb","placement":{"start":0,"size":2}},)"
      R"({"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-5c7e2f1a","profile":"1g.5gb","placement":{"start":4,"size":1},)"
      R"("migUUID":"MIG-1d2e","gpuInstanceID":9,"computeInstanceID":0}])");
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0], (MigAllocation{0, 0, "GPU-5c7e2f1a", "2g.10gb", 0, 2}));
  EXPECT_EQ((*m)[1].placementStart, 4);
  auto bad = decodeMigAllocations(R"([{"containerIndex":0,"profile":"1g.5gb"}])");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("[0].gpuUUID"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(decodeMigAllocations("{}").ok());
}

}  // namespace
}  // namespace vgpu::hami
