// The DRA front end's pieces without gRPC or an apiserver: the devices and slices it
// publishes, reading a claim's shares, CDI specs, the checkpoint and the frontEnd setting.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include <boost/json.hpp>

#include "cdi_spec.h"
#include "dra_agent.h"
#include "claim_shares.h"
#include "prepared_store.h"
#include "vgpu/dra/resource_slices.h"
#include "temp_dir.h"
#include "vgpu/config.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu::dra {
namespace {
namespace json = boost::json;
namespace fs = std::filesystem;
using deviceplugin::testing::TempDir;

/// An allocator with the standard request rules, as the sim and vendor backends use them.
class StandardAllocator : public Allocator {
 public:
  explicit StandardAllocator(sdk::StandardRequestRules rules) : rules_(std::move(rules)), names_(rules_.names.list()) {}
  const std::vector<ResourceName>& resources() const override { return names_; }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& c, const Annotations& a) const override {
    return sdk::parseStandardRequest(rules_, c, a);
  }
  void fit(const vgpu_device_request& r, const vgpu_device& d, const vgpu_device_usage& u,
           vgpu_fit_result& out) const override {
    sdk::standardFit(r, d, u, out);
  }
  std::string explain(const vgpu_fit_result&) const override { return ""; }
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources&,
                                                                const Annotations&) const override {
    return std::map<std::string, std::int64_t>{};
  }

 private:
  sdk::StandardRequestRules rules_;
  std::vector<ResourceName> names_;
};

sdk::StandardRequestRules rules() {
  sdk::StandardRequestRules r;
  r.backend = "sim";
  r.names = {"vgpu.io/sim", "vgpu.io/sim-memory", "vgpu.io/sim-memory-percentage", "vgpu.io/sim-cores", ""};
  return r;
}

Device gpu(int index, std::uint64_t memoryMiB = 16384, std::uint32_t split = 10) {
  Device d;
  d.id = "GPU-" + std::to_string(index);
  d.index = index;
  d.backend = "sim";
  d.model = "Sim GPU";
  d.memoryMiB = memoryMiB;
  d.splitCount = split;
  d.numaNode = 0;
  d.health = Health::kHealthy;
  d.attributes = {{"pciBusId", "0000:3b:00.0"}, {"healthReason", "ok"}, {"bad-key", "x"}};
  return d;
}

TEST(DraDevice, SharesWithPoliciesThatMatchTheDevicePluginDefaults) {
  // No defaults configured: a container naming no memory gets the whole device's memory,
  // one naming no cores gets 0 (no compute limit); memory comes in 1 MiB steps.
  auto d = draDevice(StandardAllocator(rules()), gpu(0));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->name, "sim-0");
  EXPECT_EQ(d->memory, (CapacityPolicy{16384, 1, 16384, 1, 16384, "Mi"}));
  EXPECT_EQ(d->cores, (CapacityPolicy{100, 0, 100, 1, 0, ""}));
  EXPECT_EQ(d->shares, 10u);
}

TEST(DraDevice, ConfiguredDefaultsAndMemoryUnitShapeThePolicy) {
  auto r = rules();
  r.memoryUnitMiB = 256;
  r.defaultMemoryMiB = 1000;
  r.defaultCores = 25;
  auto d = draDevice(StandardAllocator(r), gpu(1, 16000));
  ASSERT_TRUE(d.ok()) << d.error().message;
  // step = the unit; max and default on the unit grid (validation needs (x - min) % step == 0).
  EXPECT_EQ(d->memory.step, 256);
  EXPECT_EQ(d->memory.min, 256);
  EXPECT_EQ(d->memory.max, 256 + (16000 - 256) / 256 * 256);
  EXPECT_EQ(d->memory.defaultValue, 768);
  EXPECT_EQ(d->cores.defaultValue, 25);
}

/// Refuses a share that names no compute, as the Cambricon backend does (every sMLU
/// instance needs a quota) unless defaultCores is configured.
class NeedsCoresAllocator : public StandardAllocator {
 public:
  using StandardAllocator::StandardAllocator;
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& c, const Annotations& a) const override {
    if (!c.limits.contains("vgpu.io/sim-cores")) return makeError("vgpu.io/sim-cores must be at least 1 when shared");
    return StandardAllocator::parseRequest(c, a);
  }
};

TEST(DraDevice, ABackendThatNeedsCoresForAShareGetsWholeComputeByDefaultAndAtLeastOne) {
  // The device-plugin path refuses such a container; through DRA a claim naming no cores
  // still consumes the default, so it is the whole compute, and an explicit 0 becomes 1.
  auto d = draDevice(NeedsCoresAllocator(rules()), gpu(0));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->cores, (CapacityPolicy{100, 1, 100, 1, 100, ""}));
  EXPECT_EQ(d->memory, (CapacityPolicy{16384, 1, 16384, 1, 16384, "Mi"}));
}

TEST(DraDevice, RefusesABackendWithoutMemoryOrCoresResources) {
  auto r = rules();
  r.names.cores.clear();
  auto d = draDevice(StandardAllocator(r), gpu(0));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("no count, memory or cores"), std::string::npos) << d.error().message;
}

TEST(ResourceSlices, OnePoolSplitAtTheDeviceLimitWithGenerationAndCount) {
  std::vector<DraDevice> devices;
  for (int i = 0; i < 130; ++i) devices.push_back(*draDevice(StandardAllocator(rules()), gpu(i)));
  SliceParams p{"sim.vgpu.io", "node-1", "uid-1", 7, 128};
  const auto slices = buildResourceSlices(p, devices);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].at("spec").at("devices").as_array().size(), 128u);
  EXPECT_EQ(slices[1].at("spec").at("devices").as_array().size(), 2u);
  for (const auto& s : slices) {
    EXPECT_EQ(s.at("apiVersion"), "resource.k8s.io/v1");
    EXPECT_EQ(s.at("spec").at("nodeName"), "node-1");
    EXPECT_EQ(s.at("spec").at("pool").at("name"), "node-1");
    EXPECT_EQ(s.at("spec").at("pool").at("generation"), 7);
    EXPECT_EQ(s.at("spec").at("pool").at("resourceSliceCount"), 2);
    EXPECT_EQ(s.at("metadata").at("ownerReferences").at(0).at("uid"), "uid-1");
  }
  EXPECT_EQ(slices[1].at("metadata").at("name"), "node-1-sim.vgpu.io-1");
}

TEST(ResourceSlices, DeviceJsonHasSharingCapacitiesAndOnlyValidAttributes) {
  const auto slices = buildResourceSlices({"sim.vgpu.io", "n", "", 1, 128}, {*draDevice(StandardAllocator(rules()), gpu(3))});
  const auto& dev = slices.at(0).at("spec").at("devices").at(0).as_object();
  EXPECT_EQ(dev.at("allowMultipleAllocations"), true);
  EXPECT_EQ(dev.at("capacity").at("memory").at("value"), "16384Mi");
  EXPECT_EQ(dev.at("capacity").at("memory").at("requestPolicy").at("validRange").at("step"), "1Mi");
  EXPECT_EQ(dev.at("capacity").at("cores").at("requestPolicy").at("default"), "0");
  EXPECT_EQ(dev.at("capacity").at("shares").at("value"), "10");
  EXPECT_EQ(dev.at("capacity").at("shares").at("requestPolicy").at("validValues"), json::array{"1"});
  const auto& attrs = dev.at("attributes").as_object();
  EXPECT_EQ(attrs.at("index").at("int"), 3);
  EXPECT_EQ(attrs.at("uuid").at("string"), "GPU-3");
  EXPECT_EQ(attrs.at("pciBusId").at("string"), "0000:3b:00.0");
  EXPECT_FALSE(attrs.contains("bad-key"));       // not a C identifier
  EXPECT_FALSE(attrs.contains("healthReason"));  // changes with health: no new generation for it
}

TEST(ResourceSlices, NoDevicesStillPublishesAnEmptyPool) {
  const auto slices = buildResourceSlices({"sim.vgpu.io", "n", "", 2, 128}, {});
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_TRUE(slices[0].at("spec").at("devices").as_array().empty());
}

TEST(ResourceSlices, NamesTheDevicesWhoseSharingFieldsTheApiserverDropped) {
  const auto sent = buildResourceSlices({"sim.vgpu.io", "n", "", 1, 128},
                                        {*draDevice(StandardAllocator(rules()), gpu(0)),
                                         *draDevice(StandardAllocator(rules()), gpu(1))})[0];
  EXPECT_TRUE(droppedSharingFields(sent, sent).empty());
  json::object stored = sent;
  auto& d0 = stored["spec"].as_object()["devices"].as_array()[0].as_object();
  d0.erase("allowMultipleAllocations");
  d0["capacity"].as_object()["memory"].as_object().erase("requestPolicy");
  const auto dropped = droppedSharingFields(sent, stored);
  EXPECT_EQ(dropped, (std::vector<std::string>{"sim-0: allowMultipleAllocations", "sim-0: capacity memory requestPolicy"}));
}

TEST(ResourceSlices, AnUnhealthyDevicesTaintIsPublishedAndHalvesTheSliceLimit) {
  std::vector<DraDevice> devices;
  for (int i = 0; i < 100; ++i) devices.push_back(*draDevice(StandardAllocator(rules()), gpu(i)));
  devices[5].taints.push_back(unhealthyTaint("vgpu.io", "2026-12-03T13:00:00Z"));
  const auto slices = buildResourceSlices({"sim.vgpu.io", "n", "", 1, 128}, devices);
  // The apiserver takes at most 64 devices in a slice where any device has taints.
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].at("spec").at("devices").as_array().size(), 64u);
  const auto& taints = slices[0].at("spec").at("devices").at(5).at("taints").as_array();
  ASSERT_EQ(taints.size(), 1u);
  EXPECT_EQ(taints[0], (json::object{{"key", "vgpu.io/unhealthy"}, {"effect", "NoSchedule"},
                                     {"timeAdded", "2026-12-03T13:00:00Z"}}));
  EXPECT_FALSE(slices[0].at("spec").at("devices").at(4).as_object().contains("taints"));
  devices[5].taints.clear();
  EXPECT_EQ(buildResourceSlices({"sim.vgpu.io", "n", "", 1, 128}, devices).size(), 1u);
}

TEST(ResourceSlices, NamesTheDevicesWhoseTaintsTheApiserverDropped) {
  auto tainted = *draDevice(StandardAllocator(rules()), gpu(1));
  tainted.taints.push_back(unhealthyTaint("vgpu.io", ""));
  const auto sent =
      buildResourceSlices({"sim.vgpu.io", "n", "", 1, 128}, {*draDevice(StandardAllocator(rules()), gpu(0)), tainted})[0];
  json::object stored = sent;
  stored["spec"].as_object()["devices"].as_array()[1].as_object()["taints"].as_array()[0].as_object()["timeAdded"] =
      "2026-12-03T13:00:00Z";  // the apiserver's default
  EXPECT_TRUE(droppedTaints(sent, stored).empty());
  stored["spec"].as_object()["devices"].as_array()[1].as_object().erase("taints");
  EXPECT_EQ(droppedTaints(sent, stored), std::vector<std::string>{"sim-1"});
  EXPECT_TRUE(droppedSharingFields(sent, stored).empty());
}

json::object claim(const std::string& uid, json::array results) {
  return {{"metadata", {{"name", "c1"}, {"namespace", "ns1"}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", std::move(results)}}}}}}}};
}

TEST(ClaimShares, TakesOurResultsWithTheirConsumedCapacity) {
  json::array results{
      json::object{{"request", "gpu"}, {"driver", "sim.vgpu.io"}, {"pool", "node-1"}, {"device", "sim-0"},
                   {"shareID", "7e4c"}, {"consumedCapacity", {{"memory", "3000Mi"}, {"cores", "30"}, {"shares", "1"}}}},
      json::object{{"request", "nic"}, {"driver", "other.example.com"}, {"pool", "node-1"}, {"device", "x"}},
      json::object{{"request", "gpu2"}, {"driver", "sim.vgpu.io"}, {"pool", "node-1"}, {"device", "sim-1"},
                   {"consumedCapacity", {{"memory", "1G"}}}}};
  auto shares = claimShares(claim("u1", results), {"ns1", "u1", "c1"}, "sim.vgpu.io");
  ASSERT_TRUE(shares.ok()) << shares.error().message;
  ASSERT_EQ(shares->size(), 2u);
  EXPECT_EQ((*shares)[0], (ClaimShare{"gpu", "node-1", "sim-0", "7e4c", 3000, 30}));
  // 1G = 10^9 bytes: 954 MiB rounded up.
  EXPECT_EQ((*shares)[1].memoryMiB, std::optional<std::uint64_t>(954));
  EXPECT_EQ((*shares)[1].cores, std::nullopt);
  EXPECT_TRUE((*shares)[1].shareId.empty());
}

TEST(ClaimShares, RefusesAnotherObjectAnUnallocatedClaimAndBadQuantities) {
  auto other = claimShares(claim("u2", {}), {"ns1", "u1", "c1"}, "sim.vgpu.io");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("not u1"), std::string::npos) << other.error().message;

  json::object pending{{"metadata", {{"name", "c1"}, {"namespace", "ns1"}, {"uid", "u1"}}}};
  auto unallocated = claimShares(pending, {"ns1", "u1", "c1"}, "sim.vgpu.io");
  ASSERT_FALSE(unallocated.ok());
  EXPECT_NE(unallocated.error().message.find("not allocated"), std::string::npos);

  json::array bad{json::object{{"request", "gpu"}, {"driver", "sim.vgpu.io"}, {"pool", "p"}, {"device", "d"},
                               {"consumedCapacity", {{"memory", "lots"}}}}};
  auto malformed = claimShares(claim("u1", bad), {"ns1", "u1", "c1"}, "sim.vgpu.io");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.error().message.find("consumedCapacity.memory"), std::string::npos) << malformed.error().message;
}

TEST(CdiSpec, EnvMountsAndDeviceNodesAsContainerEdits) {
  ContainerSpec spec;
  spec.env = {{"A", "1"}, {"B", "x=y"}};
  spec.mounts = {{"/host/lib", "/usr/lib/x", true}, {"/host/dir", "/var/run/x", false}};
  spec.devices = {{"/dev/foo0", "/dev/foo0", "rw"}};
  const auto j = node::cdiSpec(node::cdiKind("sim.vgpu.io"), "uid-1", spec);
  EXPECT_EQ(j.at("cdiVersion"), "0.5.0");
  EXPECT_EQ(j.at("kind"), "sim.vgpu.io/share");
  const auto& edits = j.at("devices").at(0).at("containerEdits");
  EXPECT_EQ(j.at("devices").at(0).at("name"), "uid-1");
  EXPECT_EQ(edits.at("env"), (json::array{"A=1", "B=x=y"}));
  EXPECT_EQ(edits.at("mounts").at(0).at("options"), (json::array{"ro", "nosuid", "nodev", "bind"}));
  EXPECT_EQ(edits.at("mounts").at(1).at("options").at(0), "rw");
  EXPECT_EQ(edits.at("deviceNodes").at(0).at("hostPath"), "/dev/foo0");
  EXPECT_EQ(node::cdiDeviceId(node::cdiKind("sim.vgpu.io"), "uid-1"), "sim.vgpu.io/share=uid-1");
  EXPECT_EQ(node::cdiSpecFileName(node::cdiKind("sim.vgpu.io"), "uid-1"), "sim.vgpu.io-share_uid-1.json");
}

// A backend's OCI hook (vgpu-cdi-hook: the driver's memory cap, issue 40) goes into the
// claim's spec, which the runtime runs for every container of the claim.
TEST(CdiSpec, OciHooksAsContainerEdits) {
  ContainerSpec spec;
  spec.hooks = {{"createContainer", "/usr/local/vgpu/vgpu-cdi-hook", {"vgpu-cdi-hook", "memory-limits"}, {"A=1"}}};
  const auto j = node::cdiSpec(node::cdiKind("sim.vgpu.io"), "uid-1", spec);
  const auto& hooks = j.at("devices").at(0).at("containerEdits").at("hooks");
  ASSERT_EQ(hooks.as_array().size(), 1u);
  EXPECT_EQ(hooks.at(0).at("hookName"), "createContainer");
  EXPECT_EQ(hooks.at(0).at("path"), "/usr/local/vgpu/vgpu-cdi-hook");
  EXPECT_EQ(hooks.at(0).at("args"), (json::array{"vgpu-cdi-hook", "memory-limits"}));
  EXPECT_EQ(hooks.at(0).at("env"), (json::array{"A=1"}));
  EXPECT_FALSE(node::cdiSpec("sim.vgpu.io/share", "u", ContainerSpec{}).at("devices").at(0).at("containerEdits").as_object().contains("hooks"));
}

TEST(CdiSpec, CdiDevicesTheLimiterNamesInAnnotationsBecomeIdsNotSpecAnnotations) {
  ContainerSpec spec;
  spec.annotations = {{"cdi.k8s.io/vgpu-nvidia", "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b"},
                      {"example.com/note", "x"}};
  EXPECT_EQ(node::cdiDevicesFromAnnotations(spec.annotations),
            (std::vector<std::string>{"nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"}));
  const auto j = node::cdiSpec("sim.vgpu.io/share", "u", spec);
  EXPECT_EQ(j.at("cdiVersion"), "0.6.0");
  EXPECT_EQ(j.at("annotations"), (json::object{{"example.com/note", "x"}}));
  spec.annotations.erase("example.com/note");
  const auto plain = node::cdiSpec("sim.vgpu.io/share", "u", spec);
  EXPECT_EQ(plain.at("cdiVersion"), "0.5.0");
  EXPECT_FALSE(plain.contains("annotations"));
}

TEST(PreparedStore, SurvivesARestartAndRefusesACorruptFile) {
  TempDir dir;
  PreparedClaim c{{"ns", "u1", "c1"}, "dra-u1", {"k=u1", "nvidia.com/gpu=GPU-0"},
                  {{"gpu", "node-1", "sim-0", "s1", "GPU-0", 0, 3000, 30}}, {}};
  const fs::path journal = dir.path() / "handouts.journal";
  {
    PreparedStore store(journal, "sim.vgpu.io", "sim");
    ASSERT_TRUE(store.load().ok());
    ASSERT_TRUE(store.put(c).ok());
  }
  PreparedStore again(journal, "sim.vgpu.io", "sim");
  ASSERT_TRUE(again.load().ok());
  EXPECT_EQ(again.find("u1"), c);
  // Another driver's claims in the same journal are not this one's.
  PreparedStore other(journal, "other.vgpu.io", "other");
  ASSERT_TRUE(other.load().ok());
  EXPECT_TRUE(other.all().empty());
  ASSERT_TRUE(again.erase("u1").ok());
  ASSERT_TRUE(again.erase("never").ok());
  EXPECT_TRUE(again.all().empty());
  // Claims prepared and unprepared for a long time: the journal stays small.
  for (int i = 0; i < 200; ++i) {
    c.ref.uid = "u" + std::to_string(i);
    ASSERT_TRUE(again.put(c).ok());
    ASSERT_TRUE(again.erase(c.ref.uid).ok());
  }
  std::ifstream in(journal);
  const auto lines = std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  EXPECT_LE(lines, 66);

  // A checkpoint from before the journal that cannot be read: nothing is migrated, and the
  // error names it.
  dir.write("bad/prepared.json", "{\"claims\": [{\"uid\": 3}]}");
  PreparedStore bad(dir.path() / "bad" / "handouts.journal", "sim.vgpu.io", "sim", dir.path() / "bad" / "prepared.json");
  auto s = bad.load();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("prepared.json"), std::string::npos) << s.error().message;
  EXPECT_TRUE(fs::exists(dir.path() / "bad" / "prepared.json"));
}

TEST(FrontEndSetting, ChosenPerBackendAndOverriddenPerNode) {
  const std::string yaml =
      "version: 1\nbackends:\n  sim:\n    enabled: true\n    frontEnd: dra\n"
      "nodes:\n  - name: old-node\n    backends:\n      sim:\n        frontEnd: devicePlugin\n";
  auto c = parseDeviceConfig(yaml, "device-config.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->settingsFor("sim", "node-1").frontEnd, FrontEnd::kDra);
  EXPECT_EQ(c->settingsFor("sim", "old-node").frontEnd, FrontEnd::kDevicePlugin);

  auto bad = parseDeviceConfig("version: 1\nbackends:\n  sim:\n    frontEnd: csi\n", "device-config.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("backends.sim.frontEnd"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("devicePlugin or dra"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace vgpu::dra

namespace vgpu::dra {
namespace {

k8s::EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DraOptions, FlagsOverrideEnvironmentOverrideDefaults) {
  const char* argv[] = {"vgpu-dra-plugin", "--cdi-dir=/etc/cdi", "--resync-seconds=5"};
  auto p = parseDraAgentOptions(3, argv, envOf({{"NODE_NAME", "n1"}, {"VGPU_CDI_DIR", "/x"}, {"VGPU_CONFIG", "/c.yaml"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->options.nodeName, "n1");
  EXPECT_EQ(p->options.configPath, "/c.yaml");
  EXPECT_EQ(p->options.cdiDir, "/etc/cdi");
  EXPECT_EQ(p->options.resyncInterval, std::chrono::seconds(5));
  EXPECT_EQ(p->options.registrationDir, "/var/lib/kubelet/plugins_registry");
}

TEST(DraOptions, RegionTmpfsDefaultsToBestEffortAndRefusesOtherWords) {
  const char* plain[] = {"vgpu-dra-plugin"};
  auto p = parseDraAgentOptions(1, plain, envOf({{"NODE_NAME", "n1"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->options.regionTmpfs, deviceplugin::FolderTmpfs::kBestEffort);
  const char* required[] = {"vgpu-dra-plugin", "--region-tmpfs=required"};
  p = parseDraAgentOptions(2, required, envOf({{"NODE_NAME", "n1"}, {"VGPU_REGION_TMPFS", "off"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->options.regionTmpfs, deviceplugin::FolderTmpfs::kRequired);
  const char* bad[] = {"vgpu-dra-plugin", "--region-tmpfs=maybe"};
  p = parseDraAgentOptions(2, bad, envOf({{"NODE_NAME", "n1"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("--region-tmpfs: \"maybe\" is not one of required, best-effort, off"), std::string::npos)
      << p.error().message;
}

TEST(DraOptions, RefusesMissingNodeNameAndBadValuesClearly) {
  const char* none[] = {"vgpu-dra-plugin"};
  auto noNode = parseDraAgentOptions(1, none, envOf({}));
  ASSERT_FALSE(noNode.ok());
  EXPECT_NE(noNode.error().message.find("NODE_NAME"), std::string::npos);
  const char* bad[] = {"vgpu-dra-plugin", "--node-name=n", "--resync-seconds=0"};
  auto badResync = parseDraAgentOptions(3, bad, envOf({}));
  ASSERT_FALSE(badResync.ok());
  EXPECT_NE(badResync.error().message.find("--resync-seconds"), std::string::npos);
  const char* help[] = {"vgpu-dra-plugin", "--help"};
  auto h = parseDraAgentOptions(2, help, envOf({}));
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  EXPECT_NE(h->usage.find("--plugins-registry-dir"), std::string::npos);
  EXPECT_NE(h->usage.find("--node-name"), std::string::npos);
}

}  // namespace
}  // namespace vgpu::dra
