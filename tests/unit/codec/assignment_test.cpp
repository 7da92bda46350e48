#include "vgpu/codec/assignment_codec.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace vgpu {
namespace {

Assignment sample() {
  Assignment a;
  a.node = "node-1";
  ContainerAssignment init;
  init.name = "setup";
  init.init = true;
  ContainerAssignment main;
  main.name = "main";
  main.devices.push_back(DeviceGrant{"nvidia", "GPU-aaa", 0, 4096, 30, 2, 1});
  main.devices.push_back(DeviceGrant{"nvidia", "GPU-bbb", 1, 8192, 100, -1});
  ContainerAssignment sidecar;
  sidecar.name = "sidecar";
  a.containers = {init, main, sidecar};
  return a;
}

std::string errorOf(std::string_view json) {
  auto r = decodeAssignment(json);
  return r.ok() ? "<decoded>" : r.error().message;
}

void expectError(std::string_view json, std::string_view part) {
  std::string message = errorOf(json);
  EXPECT_NE(message, "<decoded>") << json;
  EXPECT_NE(message.find(part), std::string::npos) << "input: " << json << "\nmessage: " << message;
}

TEST(CodecAssignment, EncodesTheDocumentedShape) {
  Assignment a;
  a.node = "n";
  a.containers.push_back({"c", false, {DeviceGrant{"sim", "sim-0", 0, 1024, 50, 3}}});
  EXPECT_EQ(encodeAssignment(a),
            R"({"version":1,"node":"n","containers":[{"name":"c","init":false,"devices":[{"backend":"sim",)"
            R"("id":"sim-0","index":0,"memoryMiB":1024,"compute":50,"slot":3}]}]})");
}

TEST(CodecAssignment, WritesPriorityOnlyWhenSet) {
  Assignment a;
  a.node = "n";
  a.containers.push_back({"c", false, {DeviceGrant{"sim", "sim-0", 0, 1024, 50, 3, 0}}});
  EXPECT_NE(encodeAssignment(a).find(R"("slot":3,"priority":0})"), std::string::npos) << encodeAssignment(a);
  expectError(R"({"version":1,"node":"n","containers":[{"name":"c","devices":[{"backend":"sim","id":"x",)"
              R"("index":0,"memoryMiB":1,"compute":1,"priority":-5}]}]})",
              "priority");
}

TEST(CodecAssignment, KeepsAPlacementAndReadsGrantsWithoutOne) {
  Assignment a;
  a.node = "n";
  a.containers.push_back({"c", false, {DeviceGrant{"nvidia", "GPU-a", 0, 19968, 42, 0, -1, "3g.20gb@0-3"}}});
  const std::string text = encodeAssignment(a);
  EXPECT_NE(text.find(R"("slot":0,"placement":"3g.20gb@0-3"})"), std::string::npos) << text;
  auto back = decodeAssignment(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, a);
  // Written before placements travelled with grants (backend ABI 1.6): none, and no field.
  auto old = decodeAssignment(R"({"version":1,"node":"n","containers":[{"name":"c","devices":[{"backend":"nvidia",)"
                              R"("id":"GPU-a","index":0,"memoryMiB":19968,"compute":42,"slot":0}]}]})");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->containers[0].devices[0].placement, "");
  a.containers[0].devices[0].placement.clear();
  EXPECT_EQ(encodeAssignment(a).find("placement"), std::string::npos);
  expectError(R"({"version":1,"node":"n","containers":[{"name":"c","devices":[{"backend":"nvidia","id":"x",)"
              R"("index":0,"memoryMiB":1,"compute":1,"placement":7}]}]})",
              "placement");
}

TEST(CodecAssignment, RoundTrips) {
  Assignment a = sample();
  auto back = decodeAssignment(encodeAssignment(a));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, a);
  ASSERT_NE(back->container("main"), nullptr);
  EXPECT_EQ(back->container("main")->devices.size(), 2u);
}

TEST(CodecAssignment, RandomAssignmentsRoundTrip) {
  std::mt19937_64 rng(777);
  auto text = [&rng] {
    static const char* kPieces[] = {"a", "-", "\"", "\\", "\n", "é", "\x7f", "0", "/"};
    std::string s;
    for (int n = static_cast<int>(rng() % 8); n > 0; --n) s += kPieces[rng() % 9];
    return s;
  };
  for (int round = 0; round < 300; ++round) {
    Assignment a;
    a.node = text();
    for (int c = static_cast<int>(rng() % 5); c > 0; --c) {
      ContainerAssignment ca;
      ca.name = "c" + std::to_string(c) + text();
      ca.init = rng() % 2 == 0;
      for (int g = static_cast<int>(rng() % 4); g > 0; --g) {
        DeviceGrant grant;
        grant.backend = "b" + text();
        grant.deviceId = "id" + std::to_string(g) + text();
        grant.deviceIndex = static_cast<int>(rng() % 0x7fffffff);
        grant.memoryMiB = rng() >> (rng() % 64);
        grant.compute = static_cast<std::uint32_t>(rng());
        grant.slot = static_cast<int>(rng() % 100) - 1;
        ca.devices.push_back(grant);
      }
      a.containers.push_back(ca);
    }
    std::string json = encodeAssignment(a);
    auto back = decodeAssignment(json);
    ASSERT_TRUE(back.ok()) << json << "\n" << back.error().message;
    ASSERT_EQ(*back, a) << json;
  }
}

TEST(CodecAssignment, EveryTruncationIsAnErrorNeverACrash) {
  std::string json = encodeAssignment(sample());
  for (std::size_t len = 0; len < json.size(); ++len) {
    EXPECT_FALSE(decodeAssignment(std::string_view(json).substr(0, len)).ok()) << json.substr(0, len);
  }
}

TEST(CodecAssignment, DocumentLevelErrors) {
  expectError("", "assignment annotation: empty");
  expectError("[1]", "expected a JSON object, got an array");
  expectError(R"({"version":3,"node":"n","containers":[]})", "unsupported version 3");
  expectError(R"({"node":"n","containers":[]})", "version: missing");
  expectError(R"({"version":1,"containers":[]})", "node: missing");
  expectError(R"({"version":1,"node":5,"containers":[]})", "node: expected a string");
  expectError(R"({"version":1,"node":"n"})", "containers: missing");
  expectError(R"({"version":1,"node":"n","containers":"x"})", "containers: expected an array");
  expectError(std::string(5000, '{'), "not valid JSON");
  EXPECT_EQ(errorOf(R"({"version":1,"node":"n","containers":[],"extra":{"a":[null]}})"), "<decoded>");
}

std::string withGrant(const std::string& grant) {
  return R"({"version":1,"node":"n","containers":[{"name":"c","devices":[{)" + grant + "}]}]}";
}

TEST(CodecAssignment, FieldErrorsNameThePath) {
  const std::string ok = R"("backend":"sim","id":"d","index":0,"memoryMiB":1,"compute":1)";
  EXPECT_EQ(errorOf(withGrant(ok)), "<decoded>");
  auto decoded = decodeAssignment(withGrant(ok));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->containers[0].devices[0].slot, -1);  // optional: unbound
  EXPECT_FALSE(decoded->containers[0].init);
  expectError(withGrant(R"("id":"d","index":0,"memoryMiB":1,"compute":1)"),
              "containers[0].devices[0].backend: missing");
  expectError(withGrant(R"("backend":"","id":"d","index":0,"memoryMiB":1,"compute":1)"),
              "containers[0].devices[0].backend: must not be empty");
  expectError(withGrant(R"("backend":"sim","index":0,"memoryMiB":1,"compute":1)"), "devices[0].id: missing");
  expectError(withGrant(R"("backend":"sim","id":"d","index":-3,"memoryMiB":1,"compute":1)"),
              "devices[0].index: expected an integer from 0");
  expectError(withGrant(R"("backend":"sim","id":"d","index":0,"memoryMiB":-1,"compute":1)"),
              "devices[0].memoryMiB");
  expectError(withGrant(R"("backend":"sim","id":"d","index":0,"memoryMiB":99999999999999999999,"compute":1)"),
              "devices[0].memoryMiB");
  expectError(withGrant(R"("backend":"sim","id":"d","index":0,"memoryMiB":1,"compute":0.5)"),
              "devices[0].compute: expected an integer from 0 to 4294967295, got the number");
  expectError(withGrant(ok + R"(,"slot":-2)"), "devices[0].slot: expected an integer from -1");
  expectError(withGrant(ok + R"(,"slot":"1")"), "devices[0].slot");
  expectError(R"({"version":1,"node":"n","containers":[{"devices":[]}]})", "containers[0].name: missing");
  expectError(R"({"version":1,"node":"n","containers":[{"name":"c","init":"yes","devices":[]}]})",
              "containers[0].init: expected true or false");
  expectError(R"({"version":1,"node":"n","containers":[{"name":"c"}]})", "containers[0].devices: missing");
  expectError(R"({"version":1,"node":"n","containers":[{"name":"c","devices":[[]]}]})",
              "containers[0].devices[0]: expected an object, got an array");
  expectError(R"({"version":1,"node":"n","containers":[null]})", "containers[0]: expected an object, got null");
}

TEST(CodecAssignment, DuplicatesAreErrors) {
  Assignment a = sample();
  a.containers[2].name = "main";
  expectError(encodeAssignment(a), "containers[2].name: duplicate container name \"main\"");
  a = sample();
  a.containers[1].devices[1].deviceId = "GPU-aaa";
  expectError(encodeAssignment(a), "containers[1].devices[1].id: device \"GPU-aaa\" of backend \"nvidia\" is "
                                   "granted twice");
  // Writers ask first (the agent: issue 43 defect 5), and get the decoder's words.
  ASSERT_FALSE(checkAssignment(a).ok());
  EXPECT_EQ(checkAssignment(a).error().message, errorOf(encodeAssignment(a)));
  EXPECT_TRUE(checkAssignment(sample()).ok());
  // The same device in two containers is sharing, not a duplicate.
  a = sample();
  a.containers[2].devices.push_back(a.containers[1].devices[0]);
  EXPECT_EQ(errorOf(encodeAssignment(a)), "<decoded>");
}

}  // namespace
}  // namespace vgpu
