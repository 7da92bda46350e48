// Issue 39 scenario (e), 1.37: vgpu-dra-plugin on the real node, prepared and unprepared by
// the real kubelet's DRA manager, claims from a ResourceClaimTemplate placed by kube-scheduler's allocator.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <iostream>

#include "real_cluster.h"
#include "real_node.h"
#include "scenario_support.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release (release_main.cpp)

namespace {
namespace json = boost::json;
namespace fs = std::filesystem;

constexpr const char* kDriver = "sim.vgpu.io";
constexpr const char* kNs = "dra-node";
/// The chart's CDI folder (dra.cdiDir), one of containerd 2's default CDI spec dirs.
constexpr const char* kCdiDir = "/var/run/cdi";

/// The chart with DRA on and the sim backend served by it (devices.sim.frontEnd: dra): one
/// 16 GiB device, four shares (the chart's splitCount), so two claims of 6000 MiB fit and
/// a third does not (18000 MiB).
std::string draChartValues() {
  return "devices:\n  nvidia:\n    enabled: false\n  sim:\n    enabled: true\n    frontEnd: dra\n"
         "dra:\n  enabled: true\n"
         "simDevices:\n  devices:\n"
         "    - {id: SIM-GPU-0, model: Sim-16G, memoryMiB: 16384, computeUnits: 100, numa: 0}\n";
}

class RealNodeDraTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // DRAConsumableCapacity is alpha (off) in 1.34 and its allocator fills only one shared
    // device (kubernetes#133705; dra_scenario_test.cpp): sharing by capacity needs 1.36+.
    if (gRelease != "1.37") return;
    cluster_ = new RealCluster({.release = gRelease,
                                .startVgpu = true,
                                .chartValues = draChartValues(),
                                .startControllerManager = true});
    node_ = new RealNode(*cluster_, {});
    startStatus_ = new Status(startAll());
  }
  static Status startAll() {
    if (auto s = cluster_->start(); !s.ok()) return s;
    if (auto s = node_->start(); !s.ok()) return s;
    // The plugin registers through the kubelet's plugins_registry (GetInfo,
    // NotifyRegistrationStatus) and publishes the node's pool.
    if (auto s = cluster_->startVgpuDraPlugin(node_->name(), node_->dir() + "/vgpu-state"); !s.ok())
      return makeError(s.error().message + "\nthe kubelet's log ends:\n" + node_->logTail("kubelet"));
    std::string last;
    if (!RealCluster::waitFor([&] {
          auto slices = cluster_->getObject("/apis/resource.k8s.io/v1/resourceslices");
          if (!slices.ok()) return false;
          for (const auto& s : slices->at("items").as_array())
            if (str(at(s.as_object(), {"spec", "nodeName"})) == node_->name() &&
                str(at(s.as_object(), {"spec", "driver"})) == kDriver) {
              last = json::serialize(s);
              const auto* devices = at(s.as_object(), {"spec", "devices"});
              return devices && devices->is_array() && devices->as_array().size() == 1;
            }
          return false;
        }))
      return makeError("no ResourceSlice of " + std::string(kDriver) + " with one device for " + node_->name() +
                       " (last: " + last + "); vgpu-dra-plugin's log ends:\n" +
                       cluster_->logTail("vgpu-dra-plugin@" + node_->name()));
    return {};
  }
  static void TearDownTestSuite() {
    // The plugin first, while its kubelet runs: the kubelet unregisters it.
    if (cluster_ && node_) cluster_->stopVgpuDraPlugin(node_->name());
    delete node_;
    delete cluster_;
    delete startStatus_;
    node_ = nullptr;
    cluster_ = nullptr;
    startStatus_ = nullptr;
  }
  void SetUp() override {
    if (gRelease != "1.37")
      GTEST_SKIP() << "scenario (e) runs on 1.37: sharing a device by capacity needs DRAConsumableCapacity (alpha, "
                      "off in "
                   << gRelease << ")";
    ASSERT_TRUE(startStatus_->ok()) << "the " << gRelease << " cluster with a real node and vgpu-dra-plugin did not start: "
                                    << startStatus_->error().message;
  }
  RealCluster& cluster() { return *cluster_; }
  RealNode& node() { return *node_; }

  /// A pod on the real node with its own claim from the template `gpu-6000`, printing what
  /// its container sees of the share (the sim limiter's env and region file), then sleeping.
  json::object claimPod(const std::string& name) {
    const std::string script =
        "test -f /var/run/vgpu-sim/region && echo \"$VGPU_SIM_VISIBLE_DEVICES $VGPU_SIM_MEMORY_LIMIT_0 "
        "$VGPU_SIM_CORE_LIMIT\"; exec sleep 3600";
    return json::object{
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"schedulerName", cluster().schedulerName()},
          {"hostNetwork", true},
          {"terminationGracePeriodSeconds", 1},
          {"resourceClaims", json::array{json::object{{"name", "gpu"}, {"resourceClaimTemplateName", "gpu-6000"}}}},
          {"containers", json::array{json::object{{"name", "main"},
                                                  {"image", kBusyboxImage},
                                                  {"imagePullPolicy", "Never"},
                                                  {"command", json::array{"/bin/sh", "-c", script.c_str()}},
                                                  {"resources", {{"claims", json::array{json::object{{"name", "gpu"}}}}}}}}}}}};
  }
  void create(const json::object& p) {
    auto r = cluster().api().post(std::string("/api/v1/namespaces/") + kNs + "/pods", json::serialize(p));
    ASSERT_EQ(r.status, 201) << r.describe();
  }
  json::object get(const std::string& name) {
    auto p = cluster().getObject(std::string("/api/v1/namespaces/") + kNs + "/pods/" + name);
    return p.ok() ? *p : json::object{};
  }
  std::string log(const std::string& name) {
    auto r = cluster().api().get(std::string("/api/v1/namespaces/") + kNs + "/pods/" + name + "/log?container=main");
    return r.status == 200 ? r.body : "(" + r.describe() + ")";
  }
  std::string diagnosis() {
    return "\nthe kubelet's log ends:\n" + node().logTail("kubelet", 30) + "\nvgpu-dra-plugin's log ends:\n" +
           cluster().logTail("vgpu-dra-plugin@" + node().name(), 30);
  }
  /// Running, and it printed its share: the device, 6000 MiB and 20 cores, as the CDI spec gave them.
  void expectRunsWithItsShare(const std::string& name) {
    json::object p;
    EXPECT_TRUE(RealCluster::waitFor([&] { return str(at(p = get(name), {"status", "phase"})) == "Running"; },
                                     std::chrono::seconds(90)))
        << name << ": " << json::serialize(p) << diagnosis();
    EXPECT_TRUE(str(at(p, {"status", "reason"})).empty()) << json::serialize(p);
    std::string seen;
    EXPECT_TRUE(RealCluster::waitFor([&] { return (seen = log(name)) == "SIM-GPU-0 6000m 20\n"; }))
        << name << " saw '" << seen << "'" << diagnosis();
  }
  /// The uid of the claim the ResourceClaim controller made for the pod from the template.
  std::string claimUid(const std::string& pod) {
    std::string claim;
    RealCluster::waitFor([&] {
      const json::object p = get(pod);
      const auto* statuses = at(p, {"status", "resourceClaimStatuses"});
      if (!statuses || !statuses->is_array() || statuses->as_array().empty()) return false;
      claim = str(at(statuses->as_array()[0].as_object(), {"resourceClaimName"}));
      return !claim.empty();
    });
    auto c = cluster().getObject(std::string("/apis/resource.k8s.io/v1/namespaces/") + kNs + "/resourceclaims/" + claim);
    return c.ok() ? str(at(*c, {"metadata", "uid"})) : "";
  }
  /// The CDI spec vgpu-dra-plugin wrote for the claim at NodePrepareResources.
  static std::string cdiSpec(const std::string& uid) {
    return std::string(kCdiDir) + "/" + kDriver + "-share_" + uid + ".json";
  }
  /// The claim's allocation on the node's device: (device, shareID).
  std::pair<std::string, std::string> allocation(const std::string& uid) {
    auto claims = cluster().getObject(std::string("/apis/resource.k8s.io/v1/namespaces/") + kNs + "/resourceclaims");
    if (!claims.ok()) return {};
    for (const auto& c : claims->at("items").as_array()) {
      if (str(at(c.as_object(), {"metadata", "uid"})) != uid) continue;
      const auto* results = at(c.as_object(), {"status", "allocation", "devices", "results"});
      if (!results || !results->is_array() || results->as_array().empty()) return {};
      const auto& r = results->as_array()[0].as_object();
      return {str(at(r, {"device"})), str(at(r, {"shareID"}))};
    }
    return {};
  }

  static RealCluster* cluster_;
  static RealNode* node_;
  static Status* startStatus_;
};

RealCluster* RealNodeDraTest::cluster_ = nullptr;
RealNode* RealNodeDraTest::node_ = nullptr;
Status* RealNodeDraTest::startStatus_ = nullptr;

TEST_F(RealNodeDraTest, TwoClaimsShareADeviceByCapacityAThirdWaitsAndGetsTheShareAPodsDeletionFreed) {
  ASSERT_TRUE(cluster().createNamespace(kNs).ok());
  const json::object tmpl{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", "gpu-6000"}}},
      {"spec", {{"spec", draClaimSpec(kDriver, "6000Mi", "20")}}}};
  auto r = cluster().api().post(std::string("/apis/resource.k8s.io/v1/namespaces/") + kNs + "/resourceclaimtemplates",
                                json::serialize(tmpl));
  ASSERT_EQ(r.status, 201) << r.describe();

  // Two pods: kube-scheduler's allocator puts both claims on the one device (12000 of
  // 16384 MiB), the kubelet asks vgpu-dra-plugin to prepare each (NodePrepareResources),
  // containerd applies the CDI spec it names, and each container sees its own share.
  create(claimPod("a"));
  create(claimPod("b"));
  expectRunsWithItsShare("a");
  expectRunsWithItsShare("b");
  if (HasFailure()) return;
  const std::string uidA = claimUid("a"), uidB = claimUid("b");
  ASSERT_FALSE(uidA.empty());
  ASSERT_FALSE(uidB.empty());
  const auto allocA = allocation(uidA), allocB = allocation(uidB);
  EXPECT_EQ(allocA.first, "sim-0");
  EXPECT_EQ(allocB.first, "sim-0");
  EXPECT_FALSE(allocA.second.empty()) << "claim a was given the device whole (no shareID)";
  EXPECT_NE(allocA.second, allocB.second) << "one shareID for two claims";
  EXPECT_TRUE(fs::exists(cdiSpec(uidA))) << cdiSpec(uidA);
  EXPECT_TRUE(fs::exists(cdiSpec(uidB))) << cdiSpec(uidB);

  // A third does not fit (18000 MiB on a 16384 MiB device) and stays pending.
  create(claimPod("c"));
  json::object c;
  EXPECT_TRUE(RealCluster::waitFor([&] { return unschedulable(c = get("c")); }, std::chrono::seconds(60)))
      << json::serialize(c);
  EXPECT_TRUE(nodeOf(get("c")).empty());

  // Deleting a: the kubelet stops its container and unprepares its claim
  // (NodeUnprepareResources: the CDI spec goes), the claim is deleted with its pod, and the
  // freed capacity goes to c, which runs with exactly its share beside b.
  const std::string pathA = std::string("/api/v1/namespaces/") + kNs + "/pods/a";
  ASSERT_EQ(cluster().api().del(pathA).status, 200);
  EXPECT_TRUE(RealCluster::waitFor([&] { return cluster().api().get(pathA).status == 404; }, std::chrono::seconds(60)))
      << diagnosis();
  EXPECT_TRUE(RealCluster::waitFor([&] { return !fs::exists(cdiSpec(uidA)); }))
      << cdiSpec(uidA) << " is still there: claim a was not unprepared" << diagnosis();
  EXPECT_TRUE(fs::exists(cdiSpec(uidB))) << "b's CDI spec went with a's";
  expectRunsWithItsShare("c");
  const std::string uidC = claimUid("c");
  EXPECT_EQ(allocation(uidC).first, "sim-0");
  EXPECT_TRUE(fs::exists(cdiSpec(uidC))) << cdiSpec(uidC);
  EXPECT_EQ(str(at(get("b"), {"status", "phase"})), "Running");
  std::cout << "[" << cluster().kubernetesVersion() << "] claims a, b, c: " << uidA << " " << uidB << " " << uidC
            << std::endl;

  for (const char* name : {"b", "c"}) {
    const std::string path = std::string("/api/v1/namespaces/") + kNs + "/pods/" + name;
    cluster().api().del(path);
    EXPECT_TRUE(RealCluster::waitFor([&] { return cluster().api().get(path).status == 404; }, std::chrono::seconds(60)));
  }
  EXPECT_TRUE(RealCluster::waitFor([&] { return !fs::exists(cdiSpec(uidB)) && !fs::exists(cdiSpec(uidC)); }))
      << "CDI specs left after the pods went" << diagnosis();
}

}  // namespace
}  // namespace vgpu::realk8s
