// The DRA front end against the real control plane: vgpu's ResourceSlices as the real
// kube-apiserver stores them (sharing fields kept with DRAConsumableCapacity, dropped
// without it), and claims placed on them by kube-scheduler's own allocator, the sum on a
// device never above its capacity, what does not fit left pending; the allocation results
// read back as the driver's prepare reads them; an unhealthy device's NoSchedule taint kept
// by the apiserver (DRADeviceTaints) and honoured by the allocator, or dropped without the gate.
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <boost/json.hpp>

#include "claim_shares.h"
#include "realk8s_fixture.h"
#include "slice_publisher.h"

namespace vgpu::realk8s {
namespace {
namespace json = boost::json;

constexpr const char* kDriver = "sim.vgpu.io";
constexpr std::int64_t kDeviceMiB = 16384;

dra::DraDevice simDevice(int index) {
  dra::DraDevice d;
  d.device.id = "DRA-GPU-" + std::to_string(index);
  d.device.index = index;
  d.device.backend = "sim";
  d.device.model = "Sim GPU";
  d.device.memoryMiB = kDeviceMiB;
  d.name = dra::draDeviceName(d.device);
  // The policies draDevice derives for the sim backend with no defaults configured.
  d.memory = {kDeviceMiB, 1, kDeviceMiB, 1, kDeviceMiB, "Mi"};
  d.cores = {100, 0, 100, 1, 0, ""};
  d.shares = 4;
  return d;
}

json::object claimObject(const std::string& name) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}}},
          {"spec", draClaimSpec(kDriver, "6000Mi", "20")}};
}

json::object deviceClass() {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", kDriver}}},
          {"spec",
           {{"selectors",
             json::array{json::object{{"cel", {{"expression", "device.driver == \"sim.vgpu.io\""}}}}}}}}};
}

json::object podObject(const std::string& name, const std::string& claim, const std::string& schedulerName) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"schedulerName", schedulerName},
            {"nodeSelector", {{kGroupLabel, "dra"}}},
            {"resourceClaims", json::array{json::object{{"name", "gpu"}, {"resourceClaimName", claim}}}},
            {"containers",
             json::array{json::object{{"name", "main"},
                                      {"image", "busybox"},
                                      {"resources", {{"claims", json::array{json::object{{"name", "gpu"}}}}}}}}}}}};
}

/// For a failure message: the claims' allocations and the pending pods' last events.
std::string whatHappened(RealCluster& c, const std::string& ns) {
  std::string out;
  auto claims = c.getObject("/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims");
  if (claims.ok())
    for (const auto& cl : claims->at("items").as_array())
      out += "\n" + str(at(cl.as_object(), {"metadata", "name"})) + ": " +
             (at(cl.as_object(), {"status", "allocation"}) ? json::serialize(*at(cl.as_object(), {"status", "allocation"}))
                                                           : std::string("not allocated"));
  auto pods = listPods(c, ns);
  if (pods.ok())
    for (const auto& p : *pods)
      if (nodeOf(p).empty())
        for (const auto& e : podEvents(c, ns, str(at(p, {"metadata", "name"}))))
          out += "\n" + str(at(p, {"metadata", "name"})) + ": " + str(at(e, {"message"}));
  return out;
}

/// A node of the cluster in namespace `ns`, with the driver's own publisher of its slices
/// (through vgpu's client).
struct DraNode {
  std::string ns, name;
  std::unique_ptr<k8s::Client> client;
  std::unique_ptr<dra::SlicePublisher> publisher;
};

void startDraNode(RealCluster& c, DraNode& n) {
  ASSERT_TRUE(c.createNamespace(n.ns).ok());
  ASSERT_TRUE(c.createNode(n.name, {}, {{kGroupLabel, "dra"}}).ok());
  auto node = c.getObject("/api/v1/nodes/" + n.name);
  ASSERT_TRUE(node.ok()) << node.error().message;
  auto config = k8s::loadKubeconfig(c.adminKubeconfig());
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto client = k8s::Client::create(*config);
  ASSERT_TRUE(client.ok()) << client.error().message;
  n.client = std::move(client).value();
  n.publisher = std::make_unique<dra::SlicePublisher>(
      *n.client, dra::SliceParams{kDriver, n.name, str(at(*node, {"metadata", "uid"})), 0, 128});
}

/// The DeviceClass and `count` claims of 6000 MiB and 20 cores ("claim-<i>"), each with a pod.
void submitClaims(RealCluster& c, const std::string& ns, int count) {
  auto dc = c.api().post("/apis/resource.k8s.io/v1/deviceclasses", json::serialize(deviceClass()));
  ASSERT_TRUE(dc.status == 201 || dc.status == 409) << dc.describe();  // 409: left by an earlier test
  for (int i = 0; i < count; ++i) {
    const std::string claim = "claim-" + std::to_string(i);
    auto r = c.api().post("/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims",
                          json::serialize(claimObject(claim)));
    ASSERT_EQ(r.status, 201) << r.describe();
    auto p = c.api().post("/api/v1/namespaces/" + ns + "/pods",
                          json::serialize(podObject("pod-" + std::to_string(i), claim, c.schedulerName())));
    ASSERT_EQ(p.status, 201) << p.describe();
  }
}

/// Waits until kube-scheduler bound `wantBound` of the `count` pods and refused the rest.
void expectPlacement(RealCluster& c, const std::string& ns, int count, int wantBound) {
  int bound = 0, pending = 0;
  ASSERT_TRUE(RealCluster::waitFor(
      [&] {
        auto pods = listPods(c, ns);
        if (!pods.ok()) return false;
        bound = pending = 0;
        for (const auto& p : *pods) {
          if (!nodeOf(p).empty()) ++bound;
          else if (unschedulable(p)) ++pending;
        }
        return bound == wantBound && pending == count - wantBound;
      },
      std::chrono::seconds(60)))
      << bound << " pods bound and " << pending << " refused; expected " << wantBound << " and " << count - wantBound
      << whatHappened(c, ns);
}

/// The shares of every allocated claim, read as the driver's prepare reads them.
void allocatedShares(RealCluster& c, const std::string& ns, int count, std::vector<dra::ClaimShare>& out) {
  for (int i = 0; i < count; ++i) {
    const std::string name = "claim-" + std::to_string(i);
    auto claim = c.getObject("/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name);
    ASSERT_TRUE(claim.ok()) << claim.error().message;
    if (!at(*claim, {"status", "allocation"})) continue;
    auto shares = dra::claimShares(*claim, {ns, str(at(*claim, {"metadata", "uid"})), name}, kDriver);
    ASSERT_TRUE(shares.ok()) << shares.error().message;
    ASSERT_EQ(shares->size(), 1u);
    out.push_back(shares->front());
  }
}

void tearDownDraNode(RealCluster& c, DraNode& n, int claims) {
  ASSERT_TRUE(cleanUp(c, n.ns).ok());
  for (int i = 0; i < claims; ++i)
    c.api().del("/apis/resource.k8s.io/v1/namespaces/" + n.ns + "/resourceclaims/claim-" + std::to_string(i));
  c.api().del(std::string("/apis/resource.k8s.io/v1/deviceclasses/") + kDriver);
  EXPECT_TRUE(n.publisher->withdraw().ok());
  c.api().del("/api/v1/nodes/" + n.name);
}

/// vgpu's slices for two devices on a new node of `c`, five claims with a pod each; with
/// `sharing` (DRAConsumableCapacity on) at most two claims per device, else one. `wantBound`:
/// how many pods kube-scheduler places (the rest must be refused).
void packClaims(RealCluster& c, bool sharing, int wantBound) {
  DraNode n{"dra", "dra-node", nullptr, nullptr};
  startDraNode(c, n);
  if (::testing::Test::HasFatalFailure()) return;
  auto published = n.publisher->publish({simDevice(0), simDevice(1)});
  ASSERT_TRUE(published.ok()) << published.error().message;
  std::string dropped;
  for (const auto& d : published->dropped) dropped += d + "; ";
  std::cout << "[" << c.kubernetesVersion() << "] sharing fields dropped by the apiserver: "
            << (dropped.empty() ? "none" : dropped) << std::endl;
  EXPECT_EQ(published->dropped.empty(), sharing) << dropped;

  // Five claims of 6000 MiB and 20 cores for two devices of 16384 MiB: two per device fit
  // when shared (a third would need 18000 MiB), one per device when exclusive.
  constexpr int kClaims = 5;
  submitClaims(c, n.ns, kClaims);
  if (::testing::Test::HasFatalFailure()) return;
  expectPlacement(c, n.ns, kClaims, wantBound);
  if (::testing::Test::HasFatalFailure()) return;

  // The allocations as kube-scheduler wrote them, read as the driver's prepare reads them.
  std::vector<dra::ClaimShare> shares;
  allocatedShares(c, n.ns, kClaims, shares);
  if (::testing::Test::HasFatalFailure()) return;
  std::map<std::string, std::uint64_t> memoryOn;
  std::map<std::string, int> claimsOn;
  std::set<std::string> shareIds;
  for (const auto& s : shares) {
    EXPECT_EQ(s.pool, n.name);
    ++claimsOn[s.device];
    if (sharing) {
      EXPECT_FALSE(s.shareId.empty());
      EXPECT_TRUE(shareIds.insert(s.shareId).second) << "shareID " << s.shareId << " given twice";
      EXPECT_EQ(s.memoryMiB, std::optional<std::uint64_t>(6000));
      EXPECT_EQ(s.cores, std::optional<std::uint32_t>(20));
      memoryOn[s.device] += s.memoryMiB.value_or(0);
    } else {
      EXPECT_TRUE(s.shareId.empty());  // exclusive: no share, the prepare gives the whole device
      EXPECT_EQ(s.memoryMiB, std::nullopt);
    }
  }
  int allocated = 0;
  for (const auto& [device, count] : claimsOn) {
    EXPECT_EQ(count, sharing ? 2 : 1) << device;
    allocated += count;
  }
  EXPECT_EQ(allocated, wantBound);
  for (const auto& [device, mib] : memoryOn) EXPECT_LE(mib, static_cast<std::uint64_t>(kDeviceMiB)) << device;
  tearDownDraNode(c, n, kClaims);
}

TEST_F(RealK8s, DraClaimsArePackedOntoVgpuSlicesByKubeSchedulerWithinCapacity) {
  // DRAConsumableCapacity: alpha (off) in 1.34, beta (on) from 1.36.
  const bool sharing = cluster().release() != "1.34";
  packClaims(cluster(), sharing, sharing ? 4 : 2);
}

// An unhealthy device as vgpu-dra-plugin publishes it: in the pool with a NoSchedule taint.
// 1.37 (DRADeviceTaints GA) keeps the taint and kube-scheduler gives the device no new claim:
// three claims of 6000 MiB fit two on the healthy device and the third stays pending although
// the tainted device is free. 1.34 (the gate alpha, off) drops the taint, which the driver
// sees and answers by withdrawing the device.
TEST_F(RealK8s, AnUnhealthyDevicesTaintKeepsNewClaimsOffIt) {
  RealCluster& c = cluster();
  DraNode n{"dra-taint", "dra-taint-node", nullptr, nullptr};
  startDraNode(c, n);
  if (HasFatalFailure()) return;
  auto unhealthy = simDevice(1);
  unhealthy.taints.push_back(dra::unhealthyTaint("vgpu.io", k8s::rfc3339Now()));
  auto published = n.publisher->publish({simDevice(0), unhealthy});
  ASSERT_TRUE(published.ok()) << published.error().message;
  std::cout << "[" << c.kubernetesVersion() << "] taints dropped by the apiserver: "
            << (published->droppedTaints.empty() ? "none" : published->droppedTaints.front()) << std::endl;
  if (c.release() == "1.34") {
    EXPECT_EQ(published->droppedTaints, std::vector<std::string>{"sim-1"});
    tearDownDraNode(c, n, 0);
    return;
  }
  ASSERT_TRUE(published->droppedTaints.empty());
  ASSERT_TRUE(published->dropped.empty());

  constexpr int kClaims = 3;
  submitClaims(c, n.ns, kClaims);
  if (HasFatalFailure()) return;
  expectPlacement(c, n.ns, kClaims, 2);
  if (HasFatalFailure()) return;
  std::vector<dra::ClaimShare> shares;
  allocatedShares(c, n.ns, kClaims, shares);
  for (const auto& sh : shares) EXPECT_EQ(sh.device, "sim-0") << "a claim was placed on the tainted device";
  tearDownDraNode(c, n, kClaims);
}

// 1.34 with the gate switched on in kube-apiserver and kube-scheduler (the kubelet's part is
// the driver's): a control plane of its own, as the suite's runs with the defaults. Its
// allocator shares the first device and then stops: "cannot allocate all claims" for the
// third claim although the second device is free (kubernetes/kubernetes#133705, fixed by
// #133706; v1.34.4 still has it, 1.37.2 shares both devices). So two pods, both on one device.
TEST_F(RealK8s, DraClaimsShareDevicesOn134WithTheConsumableCapacityGateOn) {
  if (cluster().release() != "1.34") GTEST_SKIP() << "the gate is on by default from 1.36";
  RealCluster gated({.release = "1.34", .chartValues = suiteChartValues(), .featureGates = "DRAConsumableCapacity=true"});
  auto started = gated.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  packClaims(gated, true, 2);
}

}  // namespace
}  // namespace vgpu::realk8s
