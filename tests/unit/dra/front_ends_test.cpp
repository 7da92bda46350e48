// Both front ends of the node agent on one node (issue 38): vgpu-device-plugin and
// vgpu-dra-plugin, each against its kubelet double, sharing the state folder and so the
// node's handout journal, with the same sim devices offered to both (their device configs
// disagree, as during a config change). Whichever hands a device out first keeps it: the
// other refuses with the device and the holder, in both orders and after either restarts.
#include <gmock/gmock.h>

#include "agent_fixture.h"
#include "dra_agent.h"
#include "dra_test_options.h"
#include "vgpu/fakes/fake_dra_kubelet.h"

namespace vgpu::deviceplugin::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kDriver = "sim.vgpu.io";

class DraAndDevicePluginOnOneNode : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = fakes::FakeApiServer::start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    api = std::move(s).value();
    ASSERT_TRUE(api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}}).ok());
    const auto devices = dir.write("devices.yaml", simDevicesYaml({{"GPU-0", 16384}, {"GPU-1", 16384}}));
    dir.write("dp-config.yaml", simConfigYaml(devices.string(), 4));
    dir.write("dra-config.yaml", "version: 1\nbackends:\n  sim:\n    enabled: true\n    splitCount: 4\n"
                                 "    frontEnd: dra\n    options:\n      devicesFile: " + devices.string() + "\n");
    fakes::FakeKubeletOptions ko;
    ko.devicePluginDir = (dir.path() / "dp").string();
    ko.podResourcesSocket = (dir.path() / "pr" / "kubelet.sock").string();
    auto k = fakes::FakeKubelet::start(ko);
    ASSERT_TRUE(k.ok()) << k.error().message;
    kubelet = std::move(k).value();
    fakes::FakeDraKubeletOptions dko;
    dko.registrationDir = (dir.path() / "reg").string();
    auto dk = fakes::FakeDraKubelet::start(dko);
    ASSERT_TRUE(dk.ok()) << dk.error().message;
    draKubelet = std::move(dk).value();
  }
  void TearDown() override {
    if (plugin) plugin->stop();
    if (draPlugin) draPlugin->stop();
    if (kubelet) kubelet->stop();
    if (draKubelet) draKubelet->stop();
  }

  void startDevicePlugin() {
    AgentOptions o = agentTestOptions(dir.path(), api->url(), "dp-config.yaml");
    o.podResourcesInterval = std::chrono::hours(1);  // passes by hand
    o.cleanupInterval = std::chrono::hours(1);
    const std::size_t lists = kubelet->listsReceived(kSimCount);
    auto a = Agent::create(std::move(o));
    ASSERT_TRUE(a.ok()) << a.error().message;
    plugin = std::move(a).value();
    auto s = plugin->start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(waitFor([&] { return kubelet->listsReceived(kSimCount) > lists; }));
    ASSERT_TRUE(waitFor([&] { return plugin->podsSynced(); }));
  }
  void restartDevicePlugin() {
    plugin->stop();
    plugin.reset();
    ASSERT_NO_FATAL_FAILURE(startDevicePlugin());
  }

  /// The first start registers with the kubelet; a restarted plugin serves the same socket,
  /// which the kubelet double (which registers a socket path once) keeps calling.
  void startDra(bool first = true) {
    auto a = dra::DraAgent::create(dra::testing::draTestOptions(dir.path(), api->url(), "dra-config.yaml"));
    ASSERT_TRUE(a.ok()) << a.error().message;
    draPlugin = std::move(a).value();
    auto s = draPlugin->start();
    ASSERT_TRUE(s.ok()) << s.error().message;
    if (!first) return;
    ASSERT_TRUE(waitFor([&] { return draPlugin->status().at(0).registered; }));
    ASSERT_TRUE(draKubelet->waitForPlugin(kDriver, std::chrono::seconds(10)));
  }
  void restartDra() {
    draPlugin->stop();
    draPlugin.reset();
    ASSERT_NO_FATAL_FAILURE(startDra(false));
  }

  /// A pod the scheduler extender placed on a share of `device` (sim index `index`), admitted
  /// by the kubelet: its Allocate goes to vgpu-device-plugin.
  fakes::AdmitResult admitPod(const std::string& name, const std::string& device, int index) {
    const PodSpec spec{name, {{"main", {{kSimCount, 1}, {kSimMemory, 2000}}, {grant(device, index, 2000, 0, 0)}}}};
    auto created = api->create("pods", podJson(spec));
    EXPECT_TRUE(created.ok());
    if (!created.ok()) return {};
    const std::string uid(created->at("metadata").at("uid").as_string());
    EXPECT_TRUE(waitFor([&] {
      for (const auto& p : plugin->tracker().pods())
        if (p.info.uid == uid) return true;
      return false;
    }));
    return kubelet->admit(kubeletPod(spec, uid));
  }

  /// A claim kube-scheduler allocated a share of DRA device `device` ("sim-<index>"), as the
  /// kubelet prepares it through vgpu-dra-plugin: "" or the claim's error.
  std::string prepareClaim(const std::string& name, const std::string& device) {
    boost::json::object result{{"request", "gpu"},
                               {"driver", kDriver},
                               {"pool", kNode},
                               {"device", device},
                               {"shareID", "share-" + name},
                               {"consumedCapacity", {{"memory", "2000Mi"}, {"cores", "10"}, {"shares", "1"}}}};
    boost::json::object c{{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", {{"name", name}, {"namespace", "team-a"}}},
                          {"spec", {{"devices", {{"requests", boost::json::array{}}}}}},
                          {"status", {{"allocation", {{"devices", {{"results", boost::json::array{result}}}}}}}}};
    auto made = api->create("resourceclaims", c);
    EXPECT_TRUE(made.ok());
    if (!made.ok()) return "not created";
    fakes::DraClaim claim{"team-a", std::string(made->at("metadata").at("uid").as_string()), name};
    claims[name] = claim;
    return prepareAgain(name);
  }
  std::string prepareAgain(const std::string& name) {
    auto got = draKubelet->prepare(kDriver, {claims.at(name)});
    if (!got.ok()) return got.error().message;
    return got->at(claims.at(name).uid).error;
  }

  TempDir dir;
  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  std::unique_ptr<fakes::FakeDraKubelet> draKubelet;
  std::unique_ptr<Agent> plugin;
  std::unique_ptr<dra::DraAgent> draPlugin;
  std::map<std::string, fakes::DraClaim> claims;
};

TEST_F(DraAndDevicePluginOnOneNode, APodsDeviceIsRefusedToAClaimAlsoAfterEitherRestarts) {
  ASSERT_NO_FATAL_FAILURE(startDevicePlugin());
  ASSERT_NO_FATAL_FAILURE(startDra());
  auto pod = admitPod("p0", "GPU-0", 0);
  ASSERT_TRUE(pod.admitted) << pod.error;
  const auto refusal = AllOf(HasSubstr("device GPU-0"), HasSubstr("vgpu-device-plugin"), HasSubstr("pod default/p0"));
  EXPECT_THAT(prepareClaim("c0", "sim-0"), refusal);
  EXPECT_EQ(prepareClaim("c1", "sim-1"), "");  // the other device is free

  ASSERT_NO_FATAL_FAILURE(restartDra());
  EXPECT_THAT(prepareAgain("c0"), refusal);
  EXPECT_EQ(prepareAgain("c1"), "");  // prepared before the restart: the same answer
  ASSERT_NO_FATAL_FAILURE(restartDevicePlugin());
  EXPECT_THAT(prepareClaim("c2", "sim-0"), refusal);
  // The device plugin, restarted, still refuses the claim's device too.
  auto late = admitPod("p1", "GPU-1", 1);
  EXPECT_FALSE(late.admitted);
  EXPECT_THAT(late.error, AllOf(HasSubstr("device GPU-1"), HasSubstr("ResourceClaim team-a/c1")));
}

TEST_F(DraAndDevicePluginOnOneNode, AClaimsDeviceIsRefusedToAPodAlsoAfterEitherRestartsUntilUnprepared) {
  ASSERT_NO_FATAL_FAILURE(startDra());
  ASSERT_NO_FATAL_FAILURE(startDevicePlugin());
  ASSERT_EQ(prepareClaim("c0", "sim-1"), "");
  const auto refusal = AllOf(HasSubstr("device GPU-1"), HasSubstr("vgpu-dra-plugin"), HasSubstr("ResourceClaim team-a/c0"));
  auto p0 = admitPod("p0", "GPU-1", 1);
  EXPECT_FALSE(p0.admitted);
  EXPECT_THAT(p0.error, refusal);
  auto other = admitPod("p1", "GPU-0", 0);
  EXPECT_TRUE(other.admitted) << other.error;

  ASSERT_NO_FATAL_FAILURE(restartDevicePlugin());
  auto p2 = admitPod("p2", "GPU-1", 1);
  EXPECT_FALSE(p2.admitted);
  EXPECT_THAT(p2.error, refusal);
  ASSERT_NO_FATAL_FAILURE(restartDra());
  auto p3 = admitPod("p3", "GPU-1", 1);
  EXPECT_FALSE(p3.admitted);
  EXPECT_THAT(p3.error, refusal);

  // Unprepared: the device is the device plugin's to hand out again.
  auto gone = draKubelet->unprepare(kDriver, {claims.at("c0")});
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->at(claims.at("c0").uid), "");
  auto p4 = admitPod("p4", "GPU-1", 1);
  EXPECT_TRUE(p4.admitted) << p4.error;
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
