// The apiserver double's resource.k8s.io/v1: served under /apis/, slices validated as the
// apiserver does, the DRAConsumableCapacity fields dropped when that gate is off, device
// taints defaulted, validated and dropped when DRADeviceTaints is off (unless in use).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "slice_publisher.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/k8s/client.h"

namespace vgpu::dra {
namespace {
namespace json = boost::json;

class ResourceApiDouble : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = fakes::FakeApiServer::start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    api = std::move(s).value();
    k8s::ClientConfig cfg;
    cfg.server = api->url();
    k8s::ClientOptions o;
    o.maxRetries = 0;
    auto c = k8s::Client::create(cfg, o);
    ASSERT_TRUE(c.ok()) << c.error().message;
    client = std::move(c).value();
  }

  static json::object device(bool shared, bool policy) {
    json::object cap{{"value", "100"}};
    if (policy) cap["requestPolicy"] = {{"default", "10"}, {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "5"}}}};
    json::object d{{"name", "gpu-0"}, {"capacity", {{"cores", cap}}}};
    if (shared) d["allowMultipleAllocations"] = true;
    return d;
  }
  static json::object slice(const std::string& name, json::array devices) {
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"driver", "sim.vgpu.io"},
              {"nodeName", "node-1"},
              {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
              {"devices", std::move(devices)}}}};
  }

  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<k8s::Client> client;
};

TEST_F(ResourceApiDouble, ServesResourceSlicesUnderTheirGroupWithTheirApiVersion) {
  auto made = client->create(kResourceSlices, "", slice("s1", {device(true, true)}));
  ASSERT_TRUE(made.ok()) << made.error().describe();
  EXPECT_EQ(made->at("apiVersion"), "resource.k8s.io/v1");
  auto got = client->get(kResourceSlices, "", "s1");
  ASSERT_TRUE(got.ok()) << got.error().describe();
  EXPECT_EQ(got->at("spec").at("devices").at(0).at("allowMultipleAllocations"), true);
  auto list = client->list(kResourceSlices, {});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), 1u);
  // The core path does not serve the group's kinds.
  const k8s::ResourceType wrong{"/api/v1", "resourceslices", "ResourceSlice", false};
  EXPECT_TRUE(client->get(wrong, "", "s1").error().isNotFound());
}

TEST_F(ResourceApiDouble, RefusesARequestPolicyOnAnExclusiveDevice) {
  auto made = client->create(kResourceSlices, "", slice("s1", {device(false, true)}));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().httpStatus, 422);
  EXPECT_NE(made.error().message.find("allowMultipleAllocations"), std::string::npos) << made.error().message;
}

TEST_F(ResourceApiDouble, RefusesPoliciesOffTheStepGridAndTooManyDevices) {
  auto d = device(true, true);
  d["capacity"].as_object()["cores"].as_object()["requestPolicy"].as_object()["default"] = "7";
  auto offGrid = client->create(kResourceSlices, "", slice("s1", {d}));
  ASSERT_FALSE(offGrid.ok());
  EXPECT_EQ(offGrid.error().httpStatus, 422);

  json::array many;
  for (int i = 0; i < 129; ++i) {
    auto x = device(true, false);
    x["name"] = "gpu-" + std::to_string(i);
    many.push_back(x);
  }
  auto tooMany = client->create(kResourceSlices, "", slice("s2", many));
  ASSERT_FALSE(tooMany.ok());
  EXPECT_NE(tooMany.error().message.find("at most 128"), std::string::npos) << tooMany.error().message;
}

TEST_F(ResourceApiDouble, WithoutTheConsumableCapacityGateTheSharingFieldsAreDroppedSilently) {
  api->setDraConsumableCapacity(false);
  auto made = client->create(kResourceSlices, "", slice("s1", {device(true, true)}));
  ASSERT_TRUE(made.ok()) << made.error().describe();
  const auto& d = made->at("spec").at("devices").at(0).as_object();
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
  EXPECT_FALSE(d.at("capacity").at("cores").as_object().contains("requestPolicy"));
  EXPECT_EQ(d.at("capacity").at("cores").at("value"), "100");
  // A merge patch is dropped the same way.
  json::object patch{{"spec", slice("s1", {device(true, true)}).at("spec")}};
  auto patched = client->mergePatch(kResourceSlices, "", "s1", patch);
  ASSERT_TRUE(patched.ok());
  EXPECT_FALSE(patched->at("spec").at("devices").at(0).as_object().contains("allowMultipleAllocations"));
}

json::object tainted(json::object device, const std::string& effect = "NoSchedule",
                     const std::string& key = "vgpu.io/unhealthy") {
  device["taints"] = json::array{json::object{{"key", key}, {"effect", effect}}};
  return device;
}

TEST_F(ResourceApiDouble, TaintsAreStoredWithTheTimeAddedAndValidated) {
  auto made = client->create(kResourceSlices, "", slice("s1", {tainted(device(true, true))}));
  ASSERT_TRUE(made.ok()) << made.error().describe();
  const auto& t = made->at("spec").at("devices").at(0).at("taints").at(0).as_object();
  EXPECT_EQ(t.at("key"), "vgpu.io/unhealthy");
  EXPECT_EQ(t.at("effect"), "NoSchedule");
  ASSERT_TRUE(t.contains("timeAdded"));  // defaulted by the apiserver when not sent
  EXPECT_EQ(t.at("timeAdded").as_string().size(), std::string("2026-12-03T13:00:00Z").size());

  auto badEffect = client->create(kResourceSlices, "", slice("s2", {tainted(device(true, true), "PreferNoSchedule")}));
  ASSERT_FALSE(badEffect.ok());
  EXPECT_EQ(badEffect.error().httpStatus, 422);
  EXPECT_NE(badEffect.error().message.find("taints[0].effect"), std::string::npos) << badEffect.error().message;
  auto badKey = client->create(kResourceSlices, "", slice("s3", {tainted(device(true, true), "NoSchedule", "a b")}));
  ASSERT_FALSE(badKey.ok());
  EXPECT_NE(badKey.error().message.find("taints[0].key"), std::string::npos) << badKey.error().message;
}

TEST_F(ResourceApiDouble, WithoutTheDeviceTaintsGateTaintsAreDroppedUnlessTheStoredSliceHasSome) {
  // s2 got its taints while the gate was on.
  ASSERT_TRUE(client->create(kResourceSlices, "", slice("s2", {tainted(device(true, true))})).ok());
  api->setDraDeviceTaints(false);
  auto made = client->create(kResourceSlices, "", slice("s1", {tainted(device(true, true))}));
  ASSERT_TRUE(made.ok()) << made.error().describe();
  EXPECT_FALSE(made->at("spec").at("devices").at(0).as_object().contains("taints"));
  // Invalid taints are not looked at either: they are gone before validation.
  EXPECT_TRUE(client->create(kResourceSlices, "", slice("s3", {tainted(device(true, true), "Bogus")})).ok());

  json::object patch{{"spec", slice("x", {tainted(device(true, true))}).at("spec")}};
  auto dropped = client->mergePatch(kResourceSlices, "", "s1", patch);
  ASSERT_TRUE(dropped.ok());
  EXPECT_FALSE(dropped->at("spec").at("devices").at(0).as_object().contains("taints"));
  // A slice that has taints keeps them: the apiserver does not drop a field in use.
  auto kept = client->mergePatch(kResourceSlices, "", "s2", patch);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->at("spec").at("devices").at(0).as_object().contains("taints"));
}

TEST_F(ResourceApiDouble, ServesNamespacedResourceClaims) {
  json::object c{{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaim"},
                 {"metadata", {{"name", "c1"}, {"namespace", "ns1"}}},
                 {"spec", {{"devices", {{"requests", json::array{}}}}}}};
  ASSERT_TRUE(client->create(kResourceClaims, "ns1", c).ok());
  auto got = client->get(kResourceClaims, "ns1", "c1");
  ASSERT_TRUE(got.ok()) << got.error().describe();
  EXPECT_EQ(got->at("kind"), "ResourceClaim");
  EXPECT_TRUE(client->get(kResourceClaims, "other", "c1").error().isNotFound());
}

}  // namespace
}  // namespace vgpu::dra
