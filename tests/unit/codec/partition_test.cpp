// Partitions (vgpu/partition.h): the device attributes that make a device a partition of
// another, and the pod annotation with which a limiter reports the partitions it made.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vgpu/partition.h"
#include "vgpu/served_resource.h"

namespace vgpu {
namespace {

using ::testing::HasSubstr;

Partition migDevice() {
  return {"MIG-aaaa", "GPU-1111", "mig", "3g.20gb", "4:4", "2", "0"};
}

TEST(Partition, ADeviceWithAParentIsAPartitionAndItsAttributesSayWhatItIs) {
  Device d;
  d.id = "MIG-aaaa";
  setPartitionAttributes(migDevice(), d.attributes);
  EXPECT_EQ(d.attributes.at("partitionOf"), "GPU-1111");
  EXPECT_EQ(d.attributes.at("partitionPlacement"), "4:4");
  auto p = partitionOf(d);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, migDevice());

  Device whole;
  whole.id = "GPU-1111";
  whole.attributes["partitionProfile"] = "3g.20gb";  // a profile alone makes no partition
  EXPECT_FALSE(partitionOf(whole).has_value());
}

TEST(Partition, PlacementIsStartAndSize) {
  EXPECT_EQ(parsePlacement("4:4"), (std::pair<unsigned, unsigned>{4, 4}));
  EXPECT_EQ(parsePlacement("0:1"), (std::pair<unsigned, unsigned>{0, 1}));
  for (const char* bad : {"", "4", "4:", ":4", "a:1", "4:4:4", "-1:2"}) EXPECT_FALSE(parsePlacement(bad)) << bad;
}

TEST(Partition, MadePartitionsRoundTripUnderAKeyPerContainer) {
  EXPECT_EQ(madePartitionsKey(1), "vgpu.io/partitions-1");
  EXPECT_TRUE(isMadePartitionsKey(madePartitionsKey(12)));
  EXPECT_FALSE(isMadePartitionsKey("vgpu.io/partitions-"));
  EXPECT_FALSE(isMadePartitionsKey("vgpu.io/partitions-x"));
  EXPECT_FALSE(isMadePartitionsKey("vgpu.io/assignment"));

  Partition bare{"MIG-bbbb", "GPU-2222", "", "", "", "", ""};
  const std::vector<Partition> made{migDevice(), bare};
  const std::string text = encodePartitions(made);
  EXPECT_THAT(text, HasSubstr("\"partitionOf\":\"GPU-1111\""));
  auto back = decodePartitions(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, made);
}

TEST(Partition, MalformedAnnotationsAreRefusedNamingWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"not json", "partitions annotation"},
      {"{}", "expected a JSON array"},
      {"[1]", "[0] is not an object"},
      {"[{\"partitionOf\":\"GPU-1\"}]", "id"},
      {"[{\"id\":\"MIG-1\"}]", "partitionOf"},
      {"[{\"id\":\"MIG-1\",\"partitionOf\":\"GPU-1\",\"partitionProfile\":7}]", "partitionProfile"},
  };
  for (const auto& c : cases) {
    auto r = decodePartitions(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.error().message, HasSubstr(c.says)) << c.text;
  }
}

TEST(ServedResource, ADeviceNamingItsCountResourceIsServedUnderThatOneOnly) {
  Device gpu;
  EXPECT_TRUE(servedUnder(gpu, "nvidia.com/gpu"));
  EXPECT_TRUE(servedUnder(gpu, "nvidia.com/mig-1g.5gb"));
  Device mig;
  mig.attributes["countResource"] = "nvidia.com/mig-1g.5gb";
  EXPECT_EQ(countResourceOf(mig), "nvidia.com/mig-1g.5gb");
  EXPECT_TRUE(servedUnder(mig, "nvidia.com/mig-1g.5gb"));
  EXPECT_FALSE(servedUnder(mig, "nvidia.com/mig-2g.10gb"));
  EXPECT_FALSE(servedUnder(mig, "nvidia.com/gpu"));
}

}  // namespace
}  // namespace vgpu
