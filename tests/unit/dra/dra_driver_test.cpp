// vgpu-dra-plugin against the kubelet's DRA double and the apiserver double, on the sim
// backend loaded from the build tree: registration, ResourceSlices, NodePrepareResources /
// NodeUnprepareResources and the DRAResourceHealth stream through the real protos,
// restarts, unhealthy devices tainted or withdrawn, and clusters without the
// consumable-capacity or device-taints gates.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "dra_agent.h"
#include "dra_test_options.h"
#include "promtool_check.h"
#include "region_support.h"
#include "temp_dir.h"
#include "vgpu/backend_loader.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/fakes/fake_dra_kubelet.h"

namespace vgpu::dra {
namespace {
namespace json = boost::json;
namespace fs = std::filesystem;
using deviceplugin::testing::TempDir;
using vgpu::testing::promtoolProblems;
using deviceplugin::testing::writeRegion;

constexpr const char* kDriver = "sim.vgpu.io";
constexpr const char* kNode = "node-1";

bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

json::object readJson(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str()).as_object();
}

std::map<std::string, std::string> cdiEnv(const json::object& spec) {
  std::map<std::string, std::string> env;
  for (const auto& e : spec.at("devices").at(0).at("containerEdits").at("env").as_array()) {
    const std::string kv(e.as_string());
    env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  return env;
}

class DraDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = fakes::FakeApiServer::start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    api = std::move(s).value();
    ASSERT_TRUE(api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}}).ok());
    writeDevices({true, true});
    dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n    splitCount: 4\n"
                                    "    frontEnd: dra\n    options:\n      devicesFile: " +
                                        (dir.path() / "devices.yaml").string() + "\n");
  }
  void TearDown() override {
    if (agent) agent->stop();
    if (kubelet) kubelet->stop();
  }

  void writeDevices(const std::vector<bool>& healthy) {
    std::string y = "devices:\n";
    for (std::size_t i = 0; i < healthy.size(); ++i)
      y += "  - id: GPU-" + std::to_string(i) + "\n    model: Sim GPU\n    memoryMiB: 16384\n    health: " +
           (healthy[i] ? "healthy" : "unhealthy") + "\n";
    dir.write("devices.yaml", y);
  }

  void startKubelet(std::vector<std::string> versions = {"v1.DRAPlugin", "v1beta1.DRAPlugin"}) {
    fakes::FakeDraKubeletOptions o;
    o.registrationDir = (dir.path() / "reg").string();
    o.versions = std::move(versions);
    startKubelet(std::move(o));
  }
  void startKubelet(fakes::FakeDraKubeletOptions o) {
    o.registrationDir = (dir.path() / "reg").string();
    auto k = fakes::FakeDraKubelet::start(o);
    ASSERT_TRUE(k.ok()) << k.error().message;
    kubelet = std::move(k).value();
  }

  DraAgentOptions options() const { return dra::testing::draTestOptions(dir.path(), api->url()); }

  void startAgent() { startAgent(options()); }
  void startAgent(DraAgentOptions o) {
    auto a = DraAgent::create(std::move(o));
    ASSERT_TRUE(a.ok()) << a.error().message;
    agent = std::move(a).value();
    auto s = agent->start();
    ASSERT_TRUE(s.ok()) << s.error().message;
  }

  /// Kubelet + driver, registered.
  void startNode() {
    startKubelet();
    startAgent();
    auto p = kubelet->waitForPlugin(kDriver, std::chrono::seconds(10));
    ASSERT_TRUE(p && p->accepted) << (p ? p->error : "not registered");
  }

  /// A claim as kube-scheduler leaves it allocated: one result per (device, share).
  struct Result_ {
    std::string request, device, shareId;
    std::string memory, cores;  // consumedCapacity; empty = none (exclusive)
  };
  fakes::DraClaim createClaim(const std::string& name, const std::vector<Result_>& results) {
    json::array rs;
    for (const auto& r : results) {
      json::object o{{"request", r.request}, {"driver", kDriver}, {"pool", kNode}, {"device", r.device}};
      if (!r.shareId.empty()) o["shareID"] = r.shareId;
      if (!r.memory.empty()) o["consumedCapacity"] = {{"memory", r.memory}, {"cores", r.cores}, {"shares", "1"}};
      rs.push_back(o);
    }
    json::object c{{"apiVersion", "resource.k8s.io/v1"},
                   {"kind", "ResourceClaim"},
                   {"metadata", {{"name", name}, {"namespace", "team-a"}}},
                   {"spec", {{"devices", {{"requests", json::array{}}}}}},
                   {"status", {{"allocation", {{"devices", {{"results", rs}}}}}}}};
    auto made = api->create("resourceclaims", c);
    EXPECT_TRUE(made.ok()) << (made.ok() ? "" : made.error().message);
    if (!made.ok()) return {};
    return {"team-a", std::string(made->at("metadata").at("uid").as_string()), name};
  }

  std::vector<json::object> slices() const { return api->list("resourceslices"); }
  fs::path cdiFile(const fakes::DraClaim& c) const { return dir.path() / "cdi" / ("sim.vgpu.io-share_" + c.uid + ".json"); }

  TempDir dir;
  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<fakes::FakeDraKubelet> kubelet;
  std::unique_ptr<DraAgent> agent;
};

TEST_F(DraDriver, RegistersWithTheKubeletAsADraPluginOfBothVersions) {
  startNode();
  const auto p = kubelet->plugin(kDriver);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->version, "v1.DRAPlugin");
  EXPECT_EQ(p->supportedVersions, (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                                            "v1alpha1.DRAResourceHealth"}));
  EXPECT_EQ(p->endpoint, (dir.path() / "plugins" / kDriver / "dra.sock").string());
  EXPECT_TRUE(fs::exists(dir.path() / "reg" / "sim.vgpu.io-reg.sock"));
  EXPECT_TRUE(waitFor([&] { return agent->status().at(0).registered; }));
}

TEST_F(DraDriver, PublishesOnePoolOfSharedDevicesAndTaintsAnUnhealthyOne) {
  startNode();
  auto s = slices();
  ASSERT_EQ(s.size(), 1u);
  const auto& spec = s[0].at("spec");
  EXPECT_EQ(spec.at("driver"), kDriver);
  EXPECT_EQ(spec.at("pool").at("name"), kNode);
  EXPECT_EQ(spec.at("pool").at("generation"), 1);
  ASSERT_EQ(spec.at("devices").as_array().size(), 2u);
  EXPECT_EQ(spec.at("devices").at(0).at("allowMultipleAllocations"), true);
  EXPECT_EQ(spec.at("devices").at(0).at("capacity").at("shares").at("value"), "4");
  EXPECT_FALSE(spec.at("devices").at(1).as_object().contains("taints"));
  EXPECT_TRUE(agent->status().at(0).sharingKept);

  // Nothing changed: no new generation.
  agent->resyncNow();
  EXPECT_EQ(slices().at(0).at("spec").at("pool").at("generation"), 1);

  writeDevices({true, false});
  agent->resyncNow();
  s = slices();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].at("spec").at("pool").at("generation"), 2);
  // Still in the pool, so claims allocated there stay valid; kube-scheduler places no new one.
  ASSERT_EQ(s[0].at("spec").at("devices").as_array().size(), 2u);
  const auto& dev = s[0].at("spec").at("devices").at(1).as_object();
  EXPECT_EQ(dev.at("name"), "sim-1");
  ASSERT_EQ(dev.at("taints").as_array().size(), 1u);
  const auto& taint = dev.at("taints").at(0).as_object();
  EXPECT_EQ(taint.at("key"), "vgpu.io/unhealthy");
  EXPECT_EQ(taint.at("effect"), "NoSchedule");
  const std::string since(taint.at("timeAdded").as_string());
  const auto st = agent->status().at(0);
  EXPECT_TRUE(st.taintsKept);
  EXPECT_EQ(st.unhealthyDevices, 1u);
  EXPECT_EQ(st.publishedDevices, 2u);

  // The taint keeps the time it was first added while the device stays unhealthy.
  writeDevices({false, false});
  agent->resyncNow();
  s = slices();
  EXPECT_EQ(s[0].at("spec").at("devices").at(1).at("taints").at(0).at("timeAdded").as_string(), since);
  EXPECT_TRUE(s[0].at("spec").at("devices").at(0).as_object().contains("taints"));
  writeDevices({true, true});
  agent->resyncNow();
  s = slices();
  for (const auto& d : s.at(0).at("spec").at("devices").as_array()) EXPECT_FALSE(d.as_object().contains("taints")) << d;
}

TEST_F(DraDriver, AClaimAllocatedBeforeItsDeviceTurnedUnhealthyStillPrepares) {
  startNode();
  const auto claim = createClaim("c1", {{"gpu", "sim-1", "share-1", "3000Mi", "30"}});
  writeDevices({true, false});
  agent->resyncNow();
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->at(claim.uid).error, "");
  EXPECT_EQ(got->at(claim.uid).devices.at(0).device, "sim-1");
}

TEST_F(DraDriver, WhereTheApiserverDropsTaintsAnUnhealthyDeviceIsWithdrawnAndThatIsSaidOnce) {
  api->setDraDeviceTaints(false);
  startNode();
  EXPECT_TRUE(agent->status().at(0).taintsKept);  // nothing tainted written yet
  auto taintEvents = [&] {
    int n = 0;
    for (const auto& e : api->list("events"))
      if (e.at("reason") == "DRADeviceTaintsDropped" && e.at("involvedObject").at("name") == kNode) ++n;
    return n;
  };
  writeDevices({true, false});
  agent->resyncNow();
  auto s = slices();
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].at("spec").at("devices").as_array().size(), 1u);
  EXPECT_EQ(s[0].at("spec").at("devices").at(0).at("name"), "sim-0");
  auto st = agent->status().at(0);
  EXPECT_FALSE(st.taintsKept);
  EXPECT_EQ(st.publishedDevices, 1u);
  EXPECT_EQ(st.unhealthyDevices, 1u);
  EXPECT_TRUE(st.sharingKept);
  EXPECT_NE(agent->renderMetrics().find("vgpu_dra_device_taints_kept{driver=\"sim.vgpu.io\"} 0"), std::string::npos);
  EXPECT_EQ(taintEvents(), 1);

  // Back and unhealthy again: withdrawn again, without a second warning.
  writeDevices({true, true});
  agent->resyncNow();
  EXPECT_EQ(slices().at(0).at("spec").at("devices").as_array().size(), 2u);
  writeDevices({false, true});
  agent->resyncNow();
  s = slices();
  ASSERT_EQ(s[0].at("spec").at("devices").as_array().size(), 1u);
  EXPECT_EQ(s[0].at("spec").at("devices").at(0).at("name"), "sim-1");
  EXPECT_EQ(taintEvents(), 1);
}

TEST_F(DraDriver, StreamsADeviceTurningUnhealthyAndBackToTheKubelet) {
  fakes::FakeDraKubeletOptions k;
  k.healthVersions = {"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};  // 1.37
  startKubelet(k);
  startAgent();
  auto p = kubelet->waitForPlugin(kDriver, std::chrono::seconds(10));
  ASSERT_TRUE(p && p->accepted);
  EXPECT_EQ(p->healthVersion, "v1.DRAResourceHealth");
  const auto before = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  auto h = kubelet->waitForHealth(kDriver, kNode, "sim-1", "Healthy", std::chrono::seconds(10));
  ASSERT_EQ(h.health, "Healthy");
  EXPECT_EQ(h.message, "");
  EXPECT_EQ(kubelet->deviceHealth(kDriver, kNode, "sim-0").health, "Healthy");

  // No resync by hand: the driver's health thread follows the backend's health events.
  writeDevices({true, false});
  h = kubelet->waitForHealth(kDriver, kNode, "sim-1", "Unhealthy", std::chrono::seconds(10));
  ASSERT_EQ(h.health, "Unhealthy");
  EXPECT_EQ(h.message, "devices file says unhealthy");
  EXPECT_GE(h.lastUpdatedTime, before - 1);
  EXPECT_LE(h.lastUpdatedTime, before + 60);
  EXPECT_EQ(h.timeoutSeconds, 30);  // three resend periods of 10 s
  EXPECT_EQ(kubelet->deviceHealth(kDriver, kNode, "sim-0").health, "Healthy");
  // ...and taints the device in the pool at once.
  EXPECT_TRUE(waitFor([&] {
    const auto s = slices();
    return s.size() == 1 && s[0].at("spec").at("devices").at(1).as_object().contains("taints");
  }));

  writeDevices({true, true});
  h = kubelet->waitForHealth(kDriver, kNode, "sim-1", "Healthy", std::chrono::seconds(10));
  EXPECT_EQ(h.health, "Healthy");
  EXPECT_EQ(h.message, "");
  EXPECT_EQ(kubelet->healthWatch(kDriver).streamsOpened, 1u);
}

TEST_F(DraDriver, TheHealthStreamOutlivesAnIdleDriver) {
  fakes::FakeDraKubeletOptions k;
  k.healthVersions = {"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};
  startKubelet(k);
  auto o = options();
  o.healthResend = std::chrono::milliseconds(200);  // the kubelet's timeout becomes 1 s
  startAgent(o);
  ASSERT_TRUE(kubelet->waitForPlugin(kDriver, std::chrono::seconds(10)));
  ASSERT_EQ(kubelet->waitForHealth(kDriver, kNode, "sim-0", "Healthy", std::chrono::seconds(10)).health, "Healthy");
  EXPECT_EQ(kubelet->deviceHealth(kDriver, kNode, "sim-0").timeoutSeconds, 1);
  // Nothing changes for several timeouts: the driver repeats itself, so the kubelet never
  // reads the devices as Unknown, on the stream it opened first.
  for (int i = 0; i < 25; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(kubelet->deviceHealth(kDriver, kNode, "sim-0").health, "Healthy") << "after " << (i + 1) * 100 << " ms";
  }
  const auto w = kubelet->healthWatch(kDriver);
  EXPECT_EQ(w.streamsOpened, 1u);
  EXPECT_EQ(w.lastEnd, "");
  EXPECT_GE(w.reports, 8u);
  // The open stream does not hold up the kubelet's other calls on the socket.
  const auto claim = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->at(claim.uid).error, "");
}

TEST_F(DraDriver, AKubeletOf134WithTheGateWatchesV1alpha1WithoutAsking) {
  fakes::FakeDraKubeletOptions k;
  k.healthVersions = {"v1alpha1.DRAResourceHealth"};
  k.healthNeedsAdvertisement = false;
  startKubelet(k);
  writeDevices({false, true});
  startAgent();
  auto p = kubelet->waitForPlugin(kDriver, std::chrono::seconds(10));
  ASSERT_TRUE(p && p->accepted);
  EXPECT_EQ(p->healthVersion, "v1alpha1.DRAResourceHealth");
  EXPECT_EQ(kubelet->waitForHealth(kDriver, kNode, "sim-0", "Unhealthy", std::chrono::seconds(10)).health, "Unhealthy");
  EXPECT_EQ(kubelet->deviceHealth(kDriver, kNode, "sim-1").health, "Healthy");
}

TEST_F(DraDriver, AKubeletWithoutTheHealthServiceRegistersAndPrepares) {
  startNode();  // no health versions: the gate off, or a kubelet that predates it
  const auto p = kubelet->plugin(kDriver);
  ASSERT_TRUE(p && p->accepted);
  EXPECT_EQ(p->version, "v1.DRAPlugin");
  EXPECT_EQ(p->healthVersion, "");
  const auto claim = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->at(claim.uid).error, "");
  EXPECT_EQ(kubelet->healthWatch(kDriver).streamsOpened, 0u);
}

TEST_F(DraDriver, RepublishesSlicesTheKubeletDeleted) {
  startNode();
  ASSERT_TRUE(api->remove("resourceslices", "", "node-1-sim.vgpu.io-0").ok());
  agent->resyncNow();
  auto s = slices();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].at("spec").at("pool").at("generation"), 2);
}

TEST_F(DraDriver, PrepareHandsTheLimiterTheConsumedShareAsTheDevicePluginPathWould) {
  startNode();
  const auto claim = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  const auto& a = got->at(claim.uid);
  ASSERT_EQ(a.error, "");
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices[0].pool, kNode);
  EXPECT_EQ(a.devices[0].device, "sim-0");
  EXPECT_EQ(a.devices[0].requestNames, std::vector<std::string>{"gpu"});
  EXPECT_EQ(a.devices[0].cdiDeviceIds, std::vector<std::string>{"sim.vgpu.io/share=" + claim.uid});
  EXPECT_EQ(a.devices[0].shareId, std::optional<std::string>("share-1"));

  ASSERT_TRUE(fs::exists(cdiFile(claim)));
  const auto spec = readJson(cdiFile(claim));
  EXPECT_EQ(spec.at("kind"), "sim.vgpu.io/share");
  EXPECT_EQ(spec.at("devices").at(0).at("name").as_string(), claim.uid);
  const auto env = cdiEnv(spec);

  // The device-plugin path asks the same limiter for a container granted 3000 MiB and 30 %
  // of GPU-0: the share's environment must be exactly that.
  auto config = loadDeviceConfig(dir.path() / "device-config.yaml");
  ASSERT_TRUE(config.ok());
  auto sim = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"),
                         backendParams(*config, *config->backend("sim"), kNode));
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  ContainerGrant g;
  g.container = {"dp-handout", "main"};
  g.devices = {DeviceGrant{"sim", "GPU-0", 0, 3000, 30, 0, -1}};
  auto dp = (*sim)->limiter()->containerSpec(g);
  ASSERT_TRUE(dp.ok()) << dp.error().message;
  EXPECT_EQ(env, dp->env);
  EXPECT_EQ(env.at("VGPU_SIM_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("VGPU_SIM_CORE_LIMIT"), "30");
}

TEST_F(DraDriver, TwoClaimsShareOneDeviceAndUnprepareReleasesOnlyItsOwn) {
  startNode();
  const auto c1 = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  const auto c2 = createClaim("c2", {{"gpu", "sim-0", "share-2", "5Gi", "50"}});
  auto got = kubelet->prepare(kDriver, {c1, c2});
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->at(c2.uid).devices.at(0).shareId, std::optional<std::string>("share-2"));
  EXPECT_EQ(cdiEnv(readJson(cdiFile(c1))).at("VGPU_SIM_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(cdiEnv(readJson(cdiFile(c2))).at("VGPU_SIM_MEMORY_LIMIT_0"), "5120m");
  EXPECT_EQ(agent->status().at(0).preparedClaims, 2u);

  auto un = kubelet->unprepare(kDriver, {c1});
  ASSERT_TRUE(un.ok()) << un.error().message;
  EXPECT_EQ(un->at(c1.uid), "");
  EXPECT_FALSE(fs::exists(cdiFile(c1)));
  EXPECT_TRUE(fs::exists(cdiFile(c2)));
  EXPECT_EQ(agent->status().at(0).preparedClaims, 1u);
  // Unprepare of a claim never prepared (or already unprepared) succeeds.
  un = kubelet->unprepare(kDriver, {c1, {"team-a", "never-seen", "x"}});
  ASSERT_TRUE(un.ok());
  EXPECT_EQ(un->at("never-seen"), "");
}

TEST_F(DraDriver, ServesTheDeviceFamiliesAndEachClaimsUsageFromItsRegion) {
  startNode();
  const auto c1 = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  auto got = kubelet->prepare(kDriver, {c1});
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->at(c1.uid).error, "");
  // What libvgpu.so in the claim's containers writes into the region the limiter made.
  const auto folder = dir.path() / "state" / "dra" / kDriver / "claims" / ("dra-" + c1.uid);
  writeRegion((folder / "region").string(), "GPU-0", 512ull << 20, 3000ull << 20, 30);

  const std::string text = agent->renderMetrics();
  EXPECT_EQ(promtoolProblems(text), "");
  const std::string dev = "{backend=\"sim\",device_id=\"GPU-0\",device_index=\"0\",model=\"Sim GPU\"}";
  EXPECT_NE(text.find("vgpu_device_memory_bytes" + dev + " 17179869184\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vgpu_device_healthy" + dev + " 1\n"), std::string::npos);
  EXPECT_NE(text.find("vgpu_device_split_slots" + dev + " 4\n"), std::string::npos);
  const std::string claim = "{namespace=\"team-a\",claim=\"c1\",device_uuid=\"GPU-0\",device_index=\"0\"}";
  EXPECT_NE(text.find("vgpu_claim_memory_used_bytes" + claim + " 536870912\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vgpu_claim_memory_limit_bytes" + claim + " 3145728000\n"), std::string::npos);
  EXPECT_NE(text.find("vgpu_claim_compute_limit_percent" + claim + " 30\n"), std::string::npos);
  EXPECT_NE(text.find("vgpu_claim_processes{namespace=\"team-a\",claim=\"c1\"} 1\n"), std::string::npos);

  // A restarted plugin finds the region again from the journal.
  agent->stop();
  agent.reset();
  startAgent();
  ASSERT_TRUE(waitFor([&] { return agent->renderMetrics().find("vgpu_claim_memory_used_bytes" + claim) != std::string::npos; }))
      << agent->renderMetrics();

  // Unprepared: its series go with it.
  auto un = kubelet->unprepare(kDriver, {c1});
  ASSERT_TRUE(un.ok()) << un.error().message;
  EXPECT_EQ(agent->renderMetrics().find("vgpu_claim_memory_used_bytes{"), std::string::npos);
}

TEST_F(DraDriver, ARestartedDriverAnswersTheSameAndUnpreparesAfterTheClaimIsGone) {
  startNode();
  const auto claim = createClaim("c1", {{"gpu", "sim-1", "share-9", "1024Mi", "10"}});
  auto first = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(first.ok()) << first.error().message;
  const auto before = readJson(cdiFile(claim));

  agent->stop();
  agent.reset();
  kubelet->restart();
  fs::remove(cdiFile(claim));  // a runtime folder on tmpfs, lost with a reboot
  startAgent();
  ASSERT_TRUE(kubelet->waitForPlugin(kDriver, std::chrono::seconds(10)));
  // The claim is gone from the apiserver: the answer comes from the checkpoint.
  ASSERT_TRUE(api->remove("resourceclaims", "team-a", "c1").ok());
  auto again = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->at(claim.uid).error, "");
  EXPECT_EQ(again->at(claim.uid).devices.at(0).cdiDeviceIds, first->at(claim.uid).devices.at(0).cdiDeviceIds);
  EXPECT_EQ(again->at(claim.uid).devices.at(0).shareId, std::optional<std::string>("share-9"));
  EXPECT_EQ(readJson(cdiFile(claim)), before);

  auto un = kubelet->unprepare(kDriver, {claim});
  ASSERT_TRUE(un.ok());
  EXPECT_EQ(un->at(claim.uid), "");
  EXPECT_FALSE(fs::exists(cdiFile(claim)));
  EXPECT_FALSE(fs::exists(dir.path() / "state" / "dra" / kDriver / "claims" / ("dra-" + claim.uid)));
}

TEST_F(DraDriver, AKubeletOfV1beta1OnlyGetsNoShareId) {
  startKubelet(std::vector<std::string>{"v1beta1.DRAPlugin"});
  startAgent();
  auto p = kubelet->waitForPlugin(kDriver, std::chrono::seconds(10));
  ASSERT_TRUE(p && p->accepted);
  EXPECT_EQ(p->version, "v1beta1.DRAPlugin");
  const auto claim = createClaim("c1", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->at(claim.uid).devices.size(), 1u);
  EXPECT_EQ(got->at(claim.uid).devices[0].shareId, std::nullopt);
  EXPECT_EQ(got->at(claim.uid).devices[0].cdiDeviceIds.size(), 1u);
}

TEST_F(DraDriver, ProblemsWithOneClaimAreThatClaimsErrorOnly) {
  startNode();
  const auto good = createClaim("good", {{"gpu", "sim-0", "share-1", "3000Mi", "30"}});
  const auto stale = fakes::DraClaim{"team-a", "not-the-uid", "good"};
  const auto missing = fakes::DraClaim{"team-a", "u-missing", "nope"};
  const auto wrongDevice = createClaim("wd", {{"gpu", "sim-7", "share-3", "1Gi", "10"}});
  auto got = kubelet->prepare(kDriver, {good, stale, missing, wrongDevice});
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->at(good.uid).error, "");
  EXPECT_NE(got->at("not-the-uid").error.find("not not-the-uid"), std::string::npos) << got->at("not-the-uid").error;
  EXPECT_NE(got->at("u-missing").error.find("404"), std::string::npos) << got->at("u-missing").error;
  EXPECT_NE(got->at(wrongDevice.uid).error.find("sim-7"), std::string::npos) << got->at(wrongDevice.uid).error;
  EXPECT_EQ(agent->status().at(0).preparedClaims, 1u);
}

TEST_F(DraDriver, AClusterWithoutConsumableCapacityIsToldInLogMetricsAndNodeEvent) {
  api->setDraConsumableCapacity(false);
  startNode();
  const auto st = agent->status().at(0);
  EXPECT_FALSE(st.sharingKept);
  ASSERT_FALSE(st.dropped.empty());
  EXPECT_EQ(st.dropped[0], "sim-0: allowMultipleAllocations");
  EXPECT_NE(agent->renderMetrics().find("vgpu_dra_sharing_kept{driver=\"sim.vgpu.io\"} 0"), std::string::npos);
  bool evented = false;
  for (const auto& e : api->list("events"))
    if (e.at("reason") == "DRASharingDropped" && e.at("involvedObject").at("name") == kNode) evented = true;
  EXPECT_TRUE(evented);

  // The scheduler then allocates the device whole: no consumedCapacity, the whole device.
  const auto claim = createClaim("c1", {{"gpu", "sim-0", "", "", ""}});
  auto got = kubelet->prepare(kDriver, {claim});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->at(claim.uid).error, "");
  EXPECT_EQ(got->at(claim.uid).devices.at(0).shareId, std::nullopt);
  const auto env = cdiEnv(readJson(cdiFile(claim)));
  EXPECT_EQ(env.at("VGPU_SIM_MEMORY_LIMIT_0"), "16384m");
  EXPECT_EQ(env.at("VGPU_SIM_CORE_LIMIT"), "100");
}

#ifdef VGPU_FAKE_NVML_LIBRARY
/// The limits file's settings (comment and the region's inode, which name the container
/// and its own region, left out).
std::vector<std::string> limitLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && line.rfind("VGPU_REGION_INODE", 0) != 0) out.push_back(line);
  return out;
}

TEST_F(DraDriver, OnTheFakeGpuAShareGetsTheDevicePluginPathsLimitsFileAndEnv) {
  constexpr const char* kGpu = "GPU-11111111-1111-1111-1111-111111111111";
  const auto machine =
      dir.write("machine.conf", std::string("gpu uuid=") + kGpu + " name=\"NVIDIA A100-SXM4-40GB\" memory_mib=40960\n");
  ::setenv("VGPU_FAKE_GPU_CONFIG", machine.c_str(), 1);
  dir.write("device-config.yaml", std::string("version: 1\nbackends:\n  nvidia:\n    enabled: true\n    splitCount: 4\n"
                                              "    frontEnd: dra\n    options:\n      discovery: nvml\n      nvmlLibrary: ") +
                                      VGPU_FAKE_NVML_LIBRARY + "\n      hostSysRoot: /nonexistent-sys\n"
                                      "      cdiKind: k8s.device-plugin.nvidia.com/gpu\n");
  startKubelet();
  startAgent();
  ASSERT_TRUE(kubelet->waitForPlugin("nvidia.vgpu.io", std::chrono::seconds(10)));
  const auto s = slices();
  ASSERT_EQ(s.size(), 1u);
  const auto& dev = s[0].at("spec").at("devices").at(0);
  EXPECT_EQ(dev.at("name"), "nvidia-0");
  EXPECT_EQ(dev.at("attributes").at("uuid").at("string"), kGpu);
  EXPECT_EQ(dev.at("capacity").at("memory").at("value"), "40960Mi");
  // What holds the shares to their memory, served as by the device-plugin front end.
  EXPECT_NE(agent->renderMetrics().find(std::string("vgpu_device_memory_enforcement{backend=\"nvidia\",device_id=\"") +
                                        kGpu + "\",device_index=\"0\",model=\"NVIDIA A100-SXM4-40GB\",mode=\""),
            std::string::npos)
      << agent->renderMetrics();

  json::object c{{"apiVersion", "resource.k8s.io/v1"},
                 {"kind", "ResourceClaim"},
                 {"metadata", {{"name", "c1"}, {"namespace", "team-a"}}},
                 {"status",
                  {{"allocation",
                    {{"devices",
                      {{"results", json::array{json::object{
                                       {"request", "gpu"}, {"driver", "nvidia.vgpu.io"}, {"pool", kNode},
                                       {"device", "nvidia-0"}, {"shareID", "s-1"},
                                       {"consumedCapacity", {{"memory", "3000Mi"}, {"cores", "30"}, {"shares", "1"}}}}}}}}}}}}};
  auto made = api->create("resourceclaims", c);
  ASSERT_TRUE(made.ok());
  const fakes::DraClaim claim{"team-a", std::string(made->at("metadata").at("uid").as_string()), "c1"};
  auto got = kubelet->prepare("nvidia.vgpu.io", {claim});
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->at(claim.uid).error, "");
  // The GPU's own CDI device (the toolkit's spec: device nodes, hooks), which the device-plugin
  // path names in an annotation, goes to the runtime beside the share's.
  EXPECT_EQ(got->at(claim.uid).devices.at(0).cdiDeviceIds,
            (std::vector<std::string>{"nvidia.vgpu.io/share=" + claim.uid,
                                      std::string("k8s.device-plugin.nvidia.com/gpu=") + kGpu}));
  const auto spec = readJson(dir.path() / "cdi" / ("nvidia.vgpu.io-share_" + claim.uid + ".json"));
  const auto draDir = dir.path() / "state" / "dra" / "nvidia.vgpu.io" / "claims" / ("dra-" + claim.uid);

  // The device-plugin path: the same limiter, a container granted 3000 MiB and 30 % of the GPU.
  auto config = loadDeviceConfig(dir.path() / "device-config.yaml");
  ASSERT_TRUE(config.ok());
  auto nvidia = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "nvidia"),
                            backendParams(*config, *config->backend("nvidia"), kNode));
  ASSERT_TRUE(nvidia.ok()) << nvidia.error().message;
  ASSERT_TRUE((*nvidia)->discovery()->discover().ok());
  ContainerGrant g;
  g.container = {"dp-handout", "main"};
  g.hostDir = (dir.path() / "dp-handout").string();
  fs::create_directories(g.hostDir);
  g.devices = {DeviceGrant{"nvidia", kGpu, 0, 3000, 30, 0, -1}};
  auto dp = (*nvidia)->limiter()->containerSpec(g);
  ASSERT_TRUE(dp.ok()) << dp.error().message;
  EXPECT_EQ(cdiEnv(spec), dp->env);
  EXPECT_EQ(limitLines(draDir / "limits.env"), limitLines(fs::path(g.hostDir) / "limits.env"));
  EXPECT_FALSE(limitLines(draDir / "limits.env").empty());
  // The same mounts, the per-share folder in place of the handout's.
  const auto& mounts = spec.at("devices").at(0).at("containerEdits").at("mounts").as_array();
  ASSERT_EQ(mounts.size(), dp->mounts.size());
  for (std::size_t i = 0; i < mounts.size(); ++i)
    EXPECT_EQ(mounts[i].at("containerPath").as_string(), dp->mounts[i].containerPath);
}
#endif

TEST_F(DraDriver, RefusesToStartWithoutABackendInDraMode) {
  dir.write("device-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n    options:\n      devicesFile: " +
                                      (dir.path() / "devices.yaml").string() + "\n");
  auto a = DraAgent::create(options());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("frontEnd: dra"), std::string::npos) << a.error().message;
}

}  // namespace
}  // namespace vgpu::dra
