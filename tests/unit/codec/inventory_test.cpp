#include "vgpu/codec/inventory.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace vgpu {
namespace {

Device sampleDevice(int index) {
  Device d;
  d.id = "GPU-" + std::to_string(index) + "-uuid";
  d.index = index;
  d.backend = "nvidia";
  d.model = "NVIDIA A100-SXM4-80GB";
  d.memoryMiB = 81920;
  d.computeUnits = 100;
  d.splitCount = 10;
  d.numaNode = index % 2;
  d.health = Health::kHealthy;
  d.attributes = {{"mig", "disabled"}, {"minor", std::to_string(index)}};
  return d;
}

std::string errorOf(std::string_view json) {
  auto r = decodeInventory(json, "nvidia");
  if (r.ok()) return "<decoded>";
  return r.error().message;
}

void expectError(std::string_view json, std::string_view part) {
  std::string message = errorOf(json);
  EXPECT_NE(message, "<decoded>") << json;
  EXPECT_NE(message.find(part), std::string::npos) << "input: " << json << "\nmessage: " << message;
}

TEST(CodecInventory, EncodesTheDocumentedShape) {
  Device d = sampleDevice(0);
  d.attributes = {{"mig", "disabled"}};
  EXPECT_EQ(encodeInventory({d}),
            R"({"version":1,"devices":[{"id":"GPU-0-uuid","index":0,"model":"NVIDIA A100-SXM4-80GB",)"
            R"("memoryMiB":81920,"computeUnits":100,"splitCount":10,"numa":0,"health":"healthy",)"
            R"("attributes":{"mig":"disabled"}}]})");
  EXPECT_EQ(encodeInventory({}), R"({"version":1,"devices":[]})");
}

TEST(CodecInventory, CarriesTheMemoryForeignProcessesHold) {
  Device d = sampleDevice(0);
  d.foreignUsedMiB = 1536;
  const std::string json = encodeInventory({d});
  EXPECT_NE(json.find(R"("foreignUsedMiB":1536)"), std::string::npos) << json;
  auto back = decodeInventory(json, "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ((*back)[0].foreignUsedMiB, 1536u);
}

TEST(CodecInventory, AnInventoryWithoutForeignMemoryDecodesAsNoneAndABadOneIsRefused) {
  // What agents before the watchdog wrote.
  auto old = decodeInventory(R"({"version":1,"devices":[{"id":"g","index":0,"memoryMiB":100,)"
                             R"("computeUnits":100,"splitCount":1,"health":"healthy"}]})",
                             "nvidia");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ((*old)[0].foreignUsedMiB, 0u);
  expectError(R"({"version":1,"devices":[{"id":"g","index":0,"memoryMiB":100,"computeUnits":100,)"
              R"("splitCount":1,"health":"healthy","foreignUsedMiB":-5}]})",
              "foreignUsedMiB");
}

TEST(CodecInventory, RoundTripsAndSetsTheBackend) {
  std::vector<Device> devices = {sampleDevice(0), sampleDevice(1), sampleDevice(2)};
  devices[1].health = Health::kUnhealthy;
  devices[2].health = Health::kUnknown;
  devices[2].numaNode = -1;
  devices[2].attributes.clear();
  std::string json = encodeInventory(devices);
  auto back = decodeInventory(json, "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, devices);
  auto other = decodeInventory(json, "sim");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0].backend, "sim");
}

std::string randomString(std::mt19937_64& rng) {
  // Quotes, backslashes, control bytes and multi-byte UTF-8 exercise the escaping.
  static const std::vector<std::string> kPieces = {"a", "Z", "0", "-", "\"", "\\", "\n", "\t", "\x01",
                                                   "/", " ", "é", "日本", "\u2028", "{", "}"};
  std::uniform_int_distribution<int> len(0, 12);
  std::uniform_int_distribution<std::size_t> pick(0, kPieces.size() - 1);
  std::string s;
  for (int n = len(rng); n > 0; --n) s += kPieces[pick(rng)];
  return s;
}

TEST(CodecInventory, RandomInventoriesRoundTrip) {
  std::mt19937_64 rng(424242);
  std::uniform_int_distribution<int> count(0, 8);
  for (int round = 0; round < 300; ++round) {
    std::vector<Device> devices;
    int n = count(rng);
    for (int i = 0; i < n; ++i) {
      Device d;
      d.id = "dev-" + std::to_string(i) + randomString(rng);
      d.index = i * 3 + static_cast<int>(rng() % 3);
      d.backend = "sim";
      d.model = randomString(rng);
      d.memoryMiB = rng() >> (rng() % 64);
      d.computeUnits = static_cast<std::uint32_t>(rng());
      d.splitCount = 1 + static_cast<std::uint32_t>(rng() % 0xfffffffe);
      d.numaNode = static_cast<int>(rng() % 9) - 1;
      d.health = static_cast<Health>(rng() % 3);
      for (int a = static_cast<int>(rng() % 4); a > 0; --a) d.attributes[randomString(rng)] = randomString(rng);
      devices.push_back(std::move(d));
    }
    std::string json = encodeInventory(devices);
    auto back = decodeInventory(json, "sim");
    ASSERT_TRUE(back.ok()) << json << "\n" << back.error().message;
    ASSERT_EQ(*back, devices) << json;
  }
}

TEST(CodecInventory, EveryTruncationIsAnErrorNeverACrash) {
  std::string json = encodeInventory({sampleDevice(0), sampleDevice(1)});
  for (std::size_t len = 0; len < json.size(); ++len) {
    auto r = decodeInventory(std::string_view(json).substr(0, len), "nvidia");
    EXPECT_FALSE(r.ok()) << "prefix of length " << len << " decoded: " << json.substr(0, len);
  }
}

TEST(CodecInventory, EmptyAndNonObjectDocumentsAreErrors) {
  expectError("", "empty");
  expectError("   ", "not valid JSON");
  expectError("null", "expected a JSON object, got null");
  expectError("[]", "expected a JSON object, got an array");
  expectError("\"x\"", "expected a JSON object");
  expectError("{} trailing", "not valid JSON");
  expectError("{\"version\":1,\"devices\":[]}\n{}", "not valid JSON");
}

TEST(CodecInventory, VersionMustBeAKnownMajor) {
  expectError(R"({"devices":[]})", "version: missing");
  expectError(R"({"version":2,"devices":[]})", "unsupported version 2");
  expectError(R"({"version":0,"devices":[]})", "version: expected an integer from 1");
  expectError(R"({"version":"1","devices":[]})", "version: expected an integer");
  expectError(R"({"version":1.0,"devices":[]})", "version: expected an integer");
  expectError(R"({"version":-1,"devices":[]})", "version: expected an integer");
  EXPECT_EQ(errorOf(R"({"version":1,"devices":[]})"), "<decoded>");
}

TEST(CodecInventory, UnknownFieldsAreIgnoredForForwardCompatibility) {
  auto r = decodeInventory(
      R"({"version":1,"future":{"x":[1,2]},"devices":[{"id":"a","index":0,"memoryMiB":1,"computeUnits":100,)"
      R"("splitCount":1,"health":"healthy","newField":true}]})",
      "sim");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "a");
  EXPECT_EQ((*r)[0].numaNode, -1);  // optional fields keep their defaults
  EXPECT_EQ((*r)[0].model, "");
}

TEST(CodecInventory, UnknownHealthWordsReadAsUnknown) {
  auto r = decodeInventory(
      R"({"version":1,"devices":[{"id":"a","index":0,"memoryMiB":1,"computeUnits":1,"splitCount":1,)"
      R"("health":"degraded"}]})",
      "sim");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)[0].health, Health::kUnknown);
}

std::string withDevice(const std::string& fields) {
  return R"({"version":1,"devices":[{)" + fields + "}]}";
}

const std::string kGood =
    R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")";

TEST(CodecInventory, WrongTypesAndRangesNameTheField) {
  struct Case {
    std::string fields;
    const char* part;
  };
  const std::vector<Case> cases = {
      {R"("index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")", "devices[0].id: missing"},
      {R"("id":"","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].id: must not be empty"},
      {R"("id":7,"index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].id: expected a string, got the number"},
      {R"("id":"a","index":-1,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].index: expected an integer from 0"},
      {R"("id":"a","index":"0","memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].index: expected an integer"},
      {R"("id":"a","index":2147483648,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].index"},
      {R"("id":"a","index":0,"memoryMiB":-1,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].memoryMiB: expected an integer from 0"},
      {R"("id":"a","index":0,"memoryMiB":1.5,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].memoryMiB"},
      {R"("id":"a","index":0,"memoryMiB":1e3,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].memoryMiB"},
      {R"("id":"a","index":0,"memoryMiB":18446744073709551616,"computeUnits":100,"splitCount":1,"health":"healthy")",
       "devices[0].memoryMiB"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":4294967296,"splitCount":1,"health":"healthy")",
       "devices[0].computeUnits: expected an integer from 0 to 4294967295"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":0,"health":"healthy")",
       "devices[0].splitCount: must be at least 1"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":true,"health":"healthy")",
       "devices[0].splitCount: expected an integer from 0 to 4294967295, got true"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":"healthy","numa":-2)",
       "devices[0].numa: expected an integer from -1"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1,"health":1)",
       "devices[0].health: expected a string"},
      {R"("id":"a","index":0,"memoryMiB":1,"computeUnits":100,"splitCount":1)", "devices[0].health: missing"},
      {kGood + R"(,"model":["x"])", "devices[0].model: expected a string, got an array"},
      {kGood + R"(,"attributes":[])", "devices[0].attributes: expected an object, got an array"},
      {kGood + R"(,"attributes":{"k":1})", "devices[0].attributes.k: expected a string"},
  };
  for (const Case& c : cases) expectError(withDevice(c.fields), c.part);
  expectError(R"({"version":1})", "devices: missing");
  expectError(R"({"version":1,"devices":{}})", "devices: expected an array, got an object");
  expectError(R"({"version":1,"devices":[1]})", "devices[0]: expected an object, got the number");
  EXPECT_EQ(errorOf(withDevice(kGood + R"(,"numa":-1,"model":null,"attributes":null)")), "<decoded>");
}

TEST(CodecInventory, DuplicateIdsAndIndicesAreErrors) {
  std::vector<Device> devices = {sampleDevice(0), sampleDevice(1)};
  devices[1].id = devices[0].id;
  expectError(encodeInventory(devices), "devices[1].id: duplicate device id \"GPU-0-uuid\"");
  devices[1].id = "other";
  devices[1].index = 0;
  expectError(encodeInventory(devices), "devices[1].index: duplicate device index 0");
}

TEST(CodecInventory, DeeplyNestedGarbageIsRefused) {
  std::string deep(100000, '[');
  expectError(deep, "not valid JSON");
  std::string nested = withDevice(kGood + R"(,"extra":)" + std::string(40, '[') + std::string(40, ']'));
  expectError(nested, "not valid JSON");
}

TEST(CodecInventory, InvalidUtf8IsRefused) {
  expectError(withDevice(std::string("\"id\":\"\xff\"")), "not valid JSON");
}

TEST(CodecInventory, InvalidUtf8FromAVendorIsReplacedSoTheOutputStillDecodes) {
  Device d = sampleDevice(0);
  d.model = "Caf\xe9 GPU";                      // Latin-1
  d.attributes = {{"k\xc0\xaf", "\xed\xa0\x80"}};  // overlong '/', a UTF-16 surrogate
  auto back = decodeInventory(encodeInventory({d}), "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ((*back)[0].model, "Caf\xef\xbf\xbd GPU");
  EXPECT_EQ((*back)[0].attributes.begin()->first, "k\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ((*back)[0].attributes.begin()->second, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  d.model = "日本 \xf0\x9f\x98\x80";  // valid multi-byte text is kept as is
  d.attributes.clear();
  back = decodeInventory(encodeInventory({d}), "nvidia");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].model, d.model);
}

}  // namespace
}  // namespace vgpu

namespace vgpu {
namespace {

std::vector<Device> linkedPair() {
  std::vector<Device> devices{sampleDevice(0), sampleDevice(1)};
  devices[0].links = {{devices[1].id, LinkClass::kDirect, 4, 200}};
  devices[1].links = {{devices[0].id, LinkClass::kDirect, 4, 200}};
  return devices;
}

TEST(CodecInventory, RoundTripsDeviceLinks) {
  const auto devices = linkedPair();
  const std::string text = encodeInventory(devices);
  EXPECT_NE(text.find(R"("links":[{"peer":"GPU-1-uuid","class":"direct","lanes":4,"rank":200}])"), std::string::npos)
      << text;
  auto back = decodeInventory(text, "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, devices);
}

TEST(CodecInventory, InventoryWithoutLinksStillDecodesAsUnknownTopology) {
  auto back = decodeInventory(encodeInventory({sampleDevice(0), sampleDevice(1)}), "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE((*back)[0].links.empty());
  EXPECT_EQ(encodeInventory(*back).find("links"), std::string::npos);
}

TEST(CodecInventory, ALinkClassFromANewerAgentReadsAsUnknownButKeepsItsRank) {
  std::string text = encodeInventory(linkedPair());
  text.replace(text.find("\"direct\""), 8, "\"photonic\"");
  auto back = decodeInventory(text, "nvidia");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ((*back)[0].links[0].linkClass, LinkClass::kUnknown);
  EXPECT_EQ((*back)[0].links[0].rank, 200u);
}

TEST(CodecInventory, RefusesBadLinksNamingThem) {
  const std::string text = encodeInventory(linkedPair());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expectError(with(R"("rank":200)", R"("rank":1001)"), "devices[0].links[0].rank");
  expectError(with(R"("peer":"GPU-1-uuid")", R"("peer":"GPU-9-uuid")"), "is not a device of this inventory");
  expectError(with(R"("peer":"GPU-1-uuid")", R"("peer":"GPU-0-uuid")"), "is the device itself");
  expectError(with(R"("links":[)", R"("links":[7,)"), "devices[0].links[0]: expected an object");
  expectError(with(R"("class":"direct",)", ""), "devices[0].links[0].class");
}

}  // namespace
}  // namespace vgpu
