// vgpu-sim's DRA path: reading ResourceClaims, templates and DeviceClasses as users write
// them, the request-policy rounding and the first-fit allocation of kube-scheduler's
// structured allocator over the ResourceSlices vgpu-dra-plugin's own builder makes, and the
// example under examples/dra-sharing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <array>
#include <map>

#include "dra_allocator.h"
#include "dra_objects.h"
#include "vgpu/dra/resource_slices.h"
#include "sim_run.h"
#include "test_support.h"
#include "vgpu/yaml_json.h"

namespace vgpu::simulator {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

constexpr std::int64_t kMi = 1024 * 1024;

json::object yaml(const std::string& text) {
  auto docs = yamlDocumentsToJson(text, "test.yaml");
  EXPECT_TRUE(docs.ok()) << (docs.ok() ? "" : docs.error().message);
  return docs->front().as_object();
}

const std::string kClaimHead = R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec:
  devices:
    requests:
)";

Result<ClaimSpec> claimWithRequest(const std::string& request) { return parseResourceClaim(yaml(kClaimHead + request)); }

TEST(VgpuSimDraObjects, ReadsATemplateAsUsersWriteIt) {
  auto t = parseResourceClaimTemplate(yaml(R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-3000mi-30}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: nvidia.vgpu.io
            allocationMode: ExactCount
            capacity:
              requests:
                memory: 3000Mi
                cores: "30"
            selectors:
              - cel: {expression: 'device.attributes["nvidia.vgpu.io"].model == "A100" && device.driver == "nvidia.vgpu.io"'}
)"));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->key(), "default/gpu-3000mi-30");
  ASSERT_EQ(t->requests.size(), 1u);
  const ClaimRequest& r = t->requests[0];
  EXPECT_EQ(r.deviceClassName, "nvidia.vgpu.io");
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.capacity.at("memory").amount, 3000 * kMi);
  EXPECT_EQ(r.capacity.at("cores").amount, 30);
  ASSERT_EQ(r.selectors.size(), 1u);
  EXPECT_EQ(r.selectors[0].terms.size(), 2u);
}

TEST(VgpuSimDraObjects, RefusesBadClaimsNamingTheField) {
  struct Case {
    const char* what;
    std::string request;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"no exactly", "      - name: gpu\n", "spec.devices.requests[0].exactly: is required"},
      {"no class", "      - name: gpu\n        exactly: {count: 1}\n", "exactly.deviceClassName: is required"},
      {"no name", "      - exactly: {deviceClassName: x}\n", "spec.devices.requests[0].name: is required"},
      {"count 0", "      - name: gpu\n        exactly: {deviceClassName: x, count: 0}\n", "exactly.count"},
      {"count text", "      - name: gpu\n        exactly: {deviceClassName: x, count: two}\n", "exactly.count"},
      {"memory not a quantity",
       "      - name: gpu\n        exactly: {deviceClassName: x, capacity: {requests: {memory: lots}}}\n",
       "exactly.capacity.requests.memory"},
      {"negative cores", "      - name: gpu\n        exactly: {deviceClassName: x, capacity: {requests: {cores: \"-5\"}}}\n",
       "exactly.capacity.requests.cores: \"-5\" is negative"},
      {"All mode", "      - name: gpu\n        exactly: {deviceClassName: x, allocationMode: All}\n",
       "exactly.allocationMode: vgpu-sim models ExactCount only"},
      {"admin access", "      - name: gpu\n        exactly: {deviceClassName: x, adminAccess: true}\n",
       "exactly.adminAccess"},
      {"unknown field", "      - name: gpu\n        exactly: {deviceClassName: x, cuont: 2}\n",
       "exactly.cuont: unknown field"},
      {"v1beta1 shape", "      - name: gpu\n        deviceClassName: x\n", "requests[0].deviceClassName: in resource.k8s.io/v1"},
      {"prioritized list", "      - name: gpu\n        firstAvailable: [{name: a, deviceClassName: x}]\n",
       "requests[0].firstAvailable"},
      {"CEL beyond the subset",
       "      - name: gpu\n        exactly:\n          deviceClassName: x\n          selectors:\n"
       "            - cel: {expression: 'device.capacity[\"x\"].memory.compareTo(quantity(\"1Gi\")) >= 0'}\n",
       "exactly.selectors[0].cel.expression: CEL expression"},
      {"CEL or", "      - name: gpu\n        exactly:\n          deviceClassName: x\n          selectors:\n"
                 "            - cel: {expression: 'device.driver == \"a\" || device.driver == \"b\"'}\n",
       "cannot evaluate \"|| device.driver"},
      {"duplicate request",
       "      - {name: gpu, exactly: {deviceClassName: x}}\n      - {name: gpu, exactly: {deviceClassName: x}}\n",
       "requests[1].name: duplicate request \"gpu\""},
  };
  for (const auto& c : cases) {
    auto claim = claimWithRequest(c.request);
    ASSERT_FALSE(claim.ok()) << c.what;
    EXPECT_THAT(claim.error().message, HasSubstr("ResourceClaim ns/c: ")) << c.what;
    EXPECT_THAT(claim.error().message, HasSubstr(c.field)) << c.what;
  }
  auto beta = parseResourceClaim(yaml("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\n"));
  ASSERT_FALSE(beta.ok());
  EXPECT_THAT(beta.error().message, HasSubstr("apiVersion \"resource.k8s.io/v1beta1\""));
  auto unqualified = parseResourceClaim(yaml(kClaimHead + "      - {name: a, exactly: {deviceClassName: x}}\n"
                                                          "    constraints: [{matchAttribute: model}]\n"));
  ASSERT_FALSE(unqualified.ok());
  EXPECT_THAT(unqualified.error().message,
              HasSubstr("spec.devices.constraints[0].matchAttribute: \"model\" is not a fully qualified name"));
  auto stranger = parseResourceClaim(yaml(kClaimHead + "      - {name: a, exactly: {deviceClassName: x}}\n"
                                                       "    constraints: [{requests: [b], distinctAttribute: x.io/y}]\n"));
  ASSERT_FALSE(stranger.ok());
  EXPECT_THAT(stranger.error().message, HasSubstr("spec.devices.constraints[0].requests: \"b\" is not a request"));
}

TEST(VgpuSimDraObjects, PodReferencesNameOneClaimOrOneTemplate) {
  auto ok = parsePodClaims(yaml("spec: {resourceClaims: [{name: a, resourceClaimName: x}, {name: b, "
                                "resourceClaimTemplateName: t}]}"));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].templateName, "t");
  auto both = parsePodClaims(yaml("spec: {resourceClaims: [{name: a, resourceClaimName: x, resourceClaimTemplateName: t}]}"));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.error().message, HasSubstr("spec.resourceClaims[0]: needs exactly one"));
}

TEST(VgpuSimDraSelector, MatchesDriverAndAttributesOfThePublishedDevice) {
  const json::object device = yaml(R"(attributes:
  model: {string: A100}
  index: {int: 1}
  other.io/flag: {bool: true}
)");
  auto sel = parseDeviceSelector(
      R"(device.driver == "sim.vgpu.io" && device.attributes["sim.vgpu.io"].model == 'A100' && device.attributes["sim.vgpu.io"]["index"] == 1)");
  ASSERT_TRUE(sel.ok()) << sel.error().message;
  EXPECT_TRUE(selectorMatches(*sel, "sim.vgpu.io", device));
  EXPECT_FALSE(selectorMatches(*sel, "nvidia.vgpu.io", device));
  auto flag = parseDeviceSelector(R"(device.attributes["other.io"].flag == true)");
  ASSERT_TRUE(flag.ok());
  EXPECT_TRUE(selectorMatches(*flag, "sim.vgpu.io", device));
  auto missing = parseDeviceSelector(R"(device.attributes["sim.vgpu.io"].uuid == "x")");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(selectorMatches(*missing, "sim.vgpu.io", device));
  EXPECT_FALSE(parseDeviceSelector("device.attributes[\"d\"].n > 1").ok());
  EXPECT_FALSE(parseDeviceSelector("device.driver == 3").ok());
}

// The rounding kube-scheduler applies (consumable_capacity.go, v0.37): default when not
// asked, min when below it, up to min + k*step, first validValue at or above.
TEST(VgpuSimDraPolicy, RoundsARequestByTheCapacitysRequestPolicy) {
  DraCapacity memory;  // Cambricon-like: 256 MiB units
  memory.value = 16384 * kMi;
  memory.hasPolicy = true;
  memory.defaultValue = 16384 * kMi;
  memory.min = 256 * kMi;
  memory.max = 16384 * kMi;
  memory.step = 256 * kMi;
  memory.binary = true;
  EXPECT_EQ(*consumedAmount(std::nullopt, memory), 16384 * kMi);
  EXPECT_EQ(*consumedAmount(3000 * kMi, memory), 3072 * kMi);
  EXPECT_EQ(*consumedAmount(3072 * kMi, memory), 3072 * kMi);
  EXPECT_EQ(*consumedAmount(1, memory), 256 * kMi);
  EXPECT_EQ(*consumedAmount(1'000'000'000, memory), 1024 * kMi);  // "1G"
  EXPECT_EQ(formatAmount(3072 * kMi, memory), "3072Mi");
  EXPECT_FALSE(violatesPolicy(3072 * kMi, memory));
  EXPECT_TRUE(violatesPolicy(16640 * kMi, memory));   // above max
  EXPECT_TRUE(violatesPolicy(3000 * kMi, memory));    // off the step
  EXPECT_FALSE(consumedAmount(INT64_MAX - 10, memory).ok());  // rounding passes 64 bits

  DraCapacity cores{100, false, true, 0, 0, 100, 1, {}};
  EXPECT_EQ(*consumedAmount(std::nullopt, cores), 0);
  EXPECT_EQ(*consumedAmount(30, cores), 30);

  DraCapacity shares{4, false, true, 1, std::nullopt, std::nullopt, std::nullopt, {1}};
  EXPECT_EQ(*consumedAmount(std::nullopt, shares), 1);
  EXPECT_EQ(*consumedAmount(1, shares), 1);
  EXPECT_EQ(*consumedAmount(2, shares), 2);  // no valid value at or above: as asked...
  EXPECT_TRUE(violatesPolicy(2, shares));    // ...which the policy refuses

  DraCapacity noPolicy{40, false, false, std::nullopt, std::nullopt, std::nullopt, std::nullopt, {}};
  EXPECT_EQ(*consumedAmount(std::nullopt, noPolicy), 40);  // not asked: the whole value
  EXPECT_EQ(*consumedAmount(7, noPolicy), 7);
}

/// A device as vgpu-dra-plugin derives it for the sim backend without defaults.
dra::DraDevice gpu(int index, std::int64_t mib, std::uint32_t shares) {
  dra::DraDevice d;
  d.device.id = "GPU-" + std::to_string(index);
  d.device.index = index;
  d.device.backend = "sim";
  d.device.model = "Sim GPU";
  d.device.memoryMiB = static_cast<std::uint64_t>(mib);
  d.name = dra::draDeviceName(d.device);
  d.memory = {mib, 1, mib, 1, mib, "Mi"};
  d.cores = {100, 0, 100, 1, 0, ""};
  d.shares = shares;
  return d;
}

DraNode node(const std::vector<dra::DraDevice>& devices, std::size_t perSlice = 128) {
  auto pool = poolDevices(dra::buildResourceSlices({"sim.vgpu.io", "n1", "", 1, perSlice}, devices));
  EXPECT_TRUE(pool.ok()) << pool.error().message;
  return DraNode("n1", std::move(pool).value(), "none");
}

ClaimSpec claim(const std::string& name, std::int64_t memoryMiB, std::int64_t cores, std::int64_t count = 1,
                const std::string& cls = "sim.vgpu.io") {
  ClaimRequest r;
  r.name = "gpu";
  r.deviceClassName = cls;
  r.count = count;
  if (memoryMiB >= 0) r.capacity["memory"] = {memoryMiB * kMi, std::to_string(memoryMiB) + "Mi"};
  if (cores >= 0) r.capacity["cores"] = {cores, std::to_string(cores)};
  ClaimSpec c;
  c.name = name;
  c.requests.push_back(r);
  return c;
}

const std::map<std::string, DeviceClass> kClasses = {{"sim.vgpu.io", chartDeviceClass("sim.vgpu.io")},
                                                     {"other.vgpu.io", chartDeviceClass("other.vgpu.io")}};

TEST(VgpuSimDraAllocator, PacksClaimsFirstFitNeverAboveCapacity) {
  DraNode n = node({gpu(0, 16384, 4), gpu(1, 16384, 4), gpu(2, 8192, 4)});
  const std::vector<std::pair<std::int64_t, std::int64_t>> asks = {
      {6000, 20}, {6000, 20}, {6000, 20}, {1000, 70}, {3000, 30}, {8000, 0}, {500, 10}, {9000, 5},
      {4000, 50}, {100, 1},   {7000, 0},  {2000, 25}, {100, 100}, {16384, 0}, {300, 3}, {1, 1}};
  // The oracle: each claim takes the lowest device with room for all three capacities.
  std::vector<std::array<std::int64_t, 3>> left = {{16384, 100, 4}, {16384, 100, 4}, {8192, 100, 4}};
  int placed = 0;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const ClaimSpec c = claim("c" + std::to_string(i), asks[i].first, asks[i].second);
    std::optional<std::size_t> expected;
    for (std::size_t d = 0; d < left.size() && !expected; ++d)
      if (left[d][0] >= asks[i].first && left[d][1] >= asks[i].second && left[d][2] >= 1) expected = d;
    auto shares = n.allocate({&c}, kClasses);
    ASSERT_EQ(shares.ok(), expected.has_value()) << "claim " << i << (shares.ok() ? "" : ": " + shares.error().message);
    if (!expected) continue;
    ASSERT_EQ(shares->size(), 1u);
    EXPECT_EQ((*shares)[0].device, *expected) << "claim " << i;
    EXPECT_EQ((*shares)[0].consumed.at("memory"), asks[i].first * kMi);
    EXPECT_EQ((*shares)[0].consumed.at("shares"), 1);
    n.commit(*shares);
    left[*expected][0] -= asks[i].first;
    left[*expected][1] -= asks[i].second;
    left[*expected][2] -= 1;
    ++placed;
  }
  EXPECT_GT(placed, 8);
  EXPECT_LT(placed, static_cast<int>(asks.size()));
  for (std::size_t d = 0; d < n.devices().size(); ++d)
    for (const auto& [name, cap] : n.devices()[d].capacity) {
      const auto used = n.used()[d].find(name);
      EXPECT_LE(used == n.used()[d].end() ? 0 : used->second, cap.value) << n.devices()[d].name << " " << name;
    }
}

// The slice order, not the device order: more devices than fit one slice are split into
// slices whose names sort as text ("-10" before "-2"), and the allocator goes by name.
TEST(VgpuSimDraAllocator, TriesDevicesInTheAllocatorsSliceOrder) {
  std::vector<dra::DraDevice> devices;
  for (int i = 0; i < 12; ++i) devices.push_back(gpu(i, 1024, 1));
  DraNode n = node(devices, 1);
  EXPECT_EQ(n.devices()[0].name, "sim-0");
  EXPECT_EQ(n.devices()[1].name, "sim-1");
  EXPECT_EQ(n.devices()[2].name, "sim-10");
  EXPECT_EQ(n.devices()[3].name, "sim-11");
  EXPECT_EQ(n.devices()[4].name, "sim-2");
}

TEST(VgpuSimDraAllocator, GivesARequestDistinctDevicesAndTwoRequestsSharesOfOne) {
  DraNode n = node({gpu(0, 16384, 4), gpu(1, 16384, 4)});
  const ClaimSpec two = claim("two", 1000, 10, 2);
  auto shares = n.allocate({&two}, kClasses);
  ASSERT_TRUE(shares.ok()) << shares.error().message;
  ASSERT_EQ(shares->size(), 2u);
  EXPECT_NE((*shares)[0].device, (*shares)[1].device);

  ClaimSpec pair = claim("pair", 1000, 10);
  pair.requests.push_back(pair.requests[0]);
  pair.requests[1].name = "second";
  shares = n.allocate({&pair}, kClasses);
  ASSERT_TRUE(shares.ok()) << shares.error().message;
  EXPECT_EQ((*shares)[0].device, 0u);
  EXPECT_EQ((*shares)[1].device, 0u);  // a second share of the same device

  const ClaimSpec three = claim("three", 1000, 10, 3);
  shares = n.allocate({&three}, kClasses);
  ASSERT_FALSE(shares.ok());
  EXPECT_THAT(shares.error().message, HasSubstr("asks 3 devices; only 2 here can hold its share"));
}

TEST(VgpuSimDraAllocator, SaysWhyAClaimDoesNotFit) {
  DraNode n = node({gpu(0, 16384, 2), gpu(1, 16384, 2)});
  const ClaimSpec big = claim("big", 20000, 10);
  auto r = n.allocate({&big}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("claim default/big request gpu: asks memory 20000Mi, which consumes 20000Mi "
                                           "after the device's request policy; sim-0 allows at most 16384Mi"));

  ClaimSpec twoShares = claim("two-shares", 10, 10);
  twoShares.requests[0].capacity["shares"] = {2, "2"};
  r = n.allocate({&twoShares}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("asks shares 2, which consumes 2 after the device's request policy; sim-0 "
                                           "allows only 1"));

  const ClaimSpec unknown = claim("unknown", 10, 10, 1, "gpu.example.com");
  r = n.allocate({&unknown}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("DeviceClass \"gpu.example.com\" does not exist"));

  const ClaimSpec other = claim("other", 10, 10, 1, "other.vgpu.io");
  r = n.allocate({&other}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("no device here is of class other.vgpu.io"));

  ClaimSpec oddCapacity = claim("odd", -1, -1);
  oddCapacity.requests[0].capacity["gpumem"] = {3000, "3000"};
  r = n.allocate({&oddCapacity}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("asks capacity \"gpumem\", which the devices here do not have (they have "
                                           "cores, memory, shares)"));

  for (int i = 0; i < 2; ++i) {
    const ClaimSpec c = claim("fill" + std::to_string(i), 10000, 60);
    auto s = n.allocate({&c}, kClasses);
    ASSERT_TRUE(s.ok()) << s.error().message;
    n.commit(*s);
  }
  const ClaimSpec more = claim("more", 8000, 50);
  r = n.allocate({&more}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message,
              HasSubstr("asks 1 device with cores 50, memory 8000Mi, shares 1 each; 0 here have room (sim-0: cores 40 "
                        "of 100 left, memory 6384Mi of 16384Mi left; sim-1: cores 40 of 100 left, memory 6384Mi of "
                        "16384Mi left)"));
}

// An unhealthy device is published with the NoSchedule taint (as vgpu-dra-plugin does where
// the apiserver keeps taints): no claim goes there unless its request tolerates the taint.
TEST(VgpuSimDraAllocator, PlacesOnATaintedDeviceOnlyWhatToleratesItsTaint) {
  std::vector<dra::DraDevice> devices = {gpu(0, 16384, 4), gpu(1, 16384, 4)};
  devices[0].taints.push_back(dra::unhealthyTaint("sim.vgpu.io", ""));
  DraNode n = node(devices);
  const ClaimSpec first = claim("first", 10000, 10);
  auto r = n.allocate({&first}, kClasses);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(n.devices()[r->at(0).device].name, "sim-1");  // sim-0 comes first but is tainted
  n.commit(*r);

  const ClaimSpec second = claim("second", 10000, 10);
  r = n.allocate({&second}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("0 here have room (sim-1: memory 6384Mi of 16384Mi left); tainted, not "
                                           "tolerated: sim-0"));

  for (const auto& [tolerations, placed] : std::vector<std::pair<std::vector<DeviceToleration>, bool>>{
           {{{"sim.vgpu.io/unhealthy", true, "", ""}}, true},               // Exists on the key
           {{{"", true, "", "NoSchedule"}}, true},                          // Exists on every key
           {{{"sim.vgpu.io/unhealthy", false, "", "NoSchedule"}}, true},    // Equal, no value
           {{{"sim.vgpu.io/unhealthy", false, "x", ""}}, false},            // another value
           {{{"sim.vgpu.io/unhealthy", true, "", "NoExecute"}}, false},     // another effect
           {{{"vgpu.io/other", true, "", ""}}, false}}) {                   // another key
    ClaimSpec tolerant = claim("tolerant", 10000, 10);
    tolerant.requests[0].tolerations = tolerations;
    r = n.allocate({&tolerant}, kClasses);
    EXPECT_EQ(r.ok(), placed) << tolerations[0].key << " " << tolerations[0].effect;
    if (r.ok()) {
      EXPECT_EQ(n.devices()[r->at(0).device].name, "sim-0");
    }
  }
}

TEST(VgpuSimDraObjects, ReadsTolerationsAndRefusesBadOnesNamingTheField) {
  auto c = claimWithRequest(R"(      - name: gpu
        exactly:
          deviceClassName: sim.vgpu.io
          tolerations:
            - {key: vgpu.io/unhealthy, operator: Exists, effect: NoSchedule}
            - {key: team, value: a}
)");
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->requests[0].tolerations.size(), 2u);
  EXPECT_TRUE(c->requests[0].tolerations[0].exists);
  EXPECT_EQ(c->requests[0].tolerations[1].value, "a");
  EXPECT_FALSE(c->requests[0].tolerations[1].exists);
  for (const auto& [entry, field] : std::vector<std::pair<std::string, std::string>>{
           {"{key: a, operator: Maybe}", "tolerations[0].operator"},
           {"{key: a, operator: Exists, value: b}", "tolerations[0].value"},
           {"{operator: Equal, value: b}", "tolerations[0].key"},
           {"{key: a, effect: Evict}", "tolerations[0].effect"},
           {"{key: a, colour: red}", "tolerations[0].colour"}}) {
    auto bad = claimWithRequest("      - name: gpu\n        exactly:\n          deviceClassName: sim.vgpu.io\n"
                                "          tolerations: [" + entry + "]\n");
    ASSERT_FALSE(bad.ok()) << entry;
    EXPECT_THAT(bad.error().message, HasSubstr(field)) << entry;
  }
}

// matchAttribute / distinctAttribute (constraint.go): the first device sets the value, the
// others must share it (or all differ); the search backtracks past first fits to satisfy it.
TEST(VgpuSimDraAllocator, KeepsAClaimsConstraints) {
  std::vector<dra::DraDevice> devices = {gpu(0, 16384, 4), gpu(1, 16384, 4), gpu(2, 16384, 4)};
  devices[0].device.numaNode = 0;
  devices[1].device.numaNode = 1;
  devices[2].device.numaNode = 1;
  DraNode n = node(devices);
  auto withConstraint = [](std::int64_t count, bool distinct) {
    ClaimSpec c = claim("pair", 1000, 10, count);
    c.constraints.push_back({{}, "sim.vgpu.io/numaNode", distinct});
    return c;
  };
  auto devicesOf = [](const std::vector<DraShare>& shares) {
    std::vector<std::size_t> out;
    for (const auto& s : shares) out.push_back(s.device);
    return out;
  };
  const ClaimSpec same = withConstraint(2, false);
  auto r = n.allocate({&same}, kClasses);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(devicesOf(*r), (std::vector<std::size_t>{1, 2}));
  const ClaimSpec apart = withConstraint(2, true);
  r = n.allocate({&apart}, kClasses);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(devicesOf(*r), (std::vector<std::size_t>{0, 1}));
  const ClaimSpec three = withConstraint(3, false);
  r = n.allocate({&three}, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("with the claims' constraints (matching sim.vgpu.io/numaNode)"));
}

// tests/realk8s/dra_scenario_test.cpp, DraClaimsArePackedOntoVgpuSlicesByKubeSchedulerWithinCapacity:
// on 1.37 kube-scheduler allocated 4 of 5 claims of 6000Mi/20 cores on two 16384Mi devices
// with 4 shares, two per device, and left the fifth pending. The sim predicts the same.
TEST(VgpuSimDraAllocator, PredictsWhatKubeScheduler137DidInTheRealClusterSuite) {
  DraNode n = node({gpu(0, 16384, 4), gpu(1, 16384, 4)});
  std::map<std::size_t, int> perDevice;
  int pending = 0;
  for (int i = 0; i < 5; ++i) {
    const ClaimSpec c = claim("claim-" + std::to_string(i), 6000, 20);
    auto s = n.allocate({&c}, kClasses);
    if (!s.ok()) {
      ++pending;
      continue;
    }
    ++perDevice[(*s)[0].device];
    n.commit(*s);
  }
  EXPECT_EQ(pending, 1);
  EXPECT_EQ(perDevice, (std::map<std::size_t, int>{{0, 2}, {1, 2}}));
}

using testing::runSim;
using testing::SimRun;

const std::string kExample = std::string("--cluster ") + VGPU_EXAMPLES_DIR + "/dra-sharing/cluster.yaml --pods " +
                             VGPU_EXAMPLES_DIR + "/dra-sharing/workload.yaml";

TEST(VgpuSimDra, PlacesTheExamplesClaimsAndPodsByFrontEnd) {
  const SimRun run = runSim(kExample + " --output json");
  ASSERT_EQ(run.exitCode, 0) << run.out;
  const auto doc = json::parse(run.out).as_object();
  std::map<std::string, json::object> claims;
  for (const auto& c : doc.at("claims").as_array()) claims[std::string(c.at("claim").as_string())] = c.as_object();
  auto where = [&](const std::string& key) {
    const auto& c = claims.at(key);
    if (c.at("status") != "allocated") return std::string(c.at("status").as_string());
    std::string out = std::string(c.at("node").as_string());
    for (const auto& d : c.at("devices").as_array()) out += " " + std::string(d.at("device").as_string());
    return out;
  };
  EXPECT_EQ(where("inference/llm-0-gpu"), "gpu-dra-1 sim-0");
  EXPECT_EQ(where("inference/llm-2-gpu"), "gpu-dra-1 sim-0");
  EXPECT_EQ(where("inference/llm-3-gpu"), "gpu-dra-1 sim-1");  // sim-0 has 10 cores left
  EXPECT_EQ(where("research/train-2gpu"), "gpu-dra-1 sim-0 sim-1");
  EXPECT_EQ(where("team-a/notebook-gpu"), "gpu-dra-1 sim-1");   // sim-0's 4 shares are taken
  EXPECT_EQ(where("research/exclusive-0-gpu"), "gpu-dra-2 sim-0");  // gpu-dra-2's sim-1 is unhealthy
  EXPECT_EQ(where("research/exclusive-1-gpu"), "pending");
  EXPECT_EQ(where("research/too-big"), "pending");
  EXPECT_EQ(where("team-b/reserved"), "gpu-dra-1 sim-1");
  EXPECT_EQ(claims.at("team-a/notebook-gpu").at("pods").as_array().size(), 2u);
  EXPECT_EQ(claims.at("team-a/notebook-gpu").at("devices").as_array()[0].at("consumed"),
            json::parse(R"({"cores": "1", "memory": "954Mi", "shares": "1"})"));

  std::map<std::string, std::string> pods;
  for (const auto& p : doc.at("pods").as_array())
    pods[std::string(p.at("pod").as_string())] =
        std::string(p.at("status").as_string()) + (p.as_object().contains("node") ? " " + std::string(p.at("node").as_string()) : "");
  EXPECT_EQ(pods["research/batch-0"], "placed gpu-dp-1");  // the only node advertising nvidia.com/gpu
  EXPECT_EQ(pods["research/too-big"], "pending");
  EXPECT_EQ(pods["team-a/notebook-sidecar"], "placed gpu-dra-1");

  for (const auto& d : doc.at("draDevices").as_array())
    for (const auto& [name, cap] : d.at("capacity").as_object())
      EXPECT_LE(cap.at("used").as_int64(), cap.at("value").as_int64()) << d.at("node") << " " << d.at("device") << " " << name;
  EXPECT_EQ(doc.at("draDevices").as_array().size(), 4u);  // gpu-dra-2's unhealthy GPU is published tainted
}

TEST(VgpuSimDra, TextReportGivesEachPendingClaimsReasonPerNode) {
  const SimRun run = runSim(kExample);
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("research/too-big: no node fits\n"
                                 "  kube-scheduler says: 0/3 nodes are available: 3 cannot allocate all claims.\n"
                                 "  gpu-dp-1: no ResourceSlices: its devices are served by vgpu-device-plugin "
                                 "(frontEnd: devicePlugin)\n"
                                 "  gpu-dra-1: claim research/too-big request gpu: asks memory 48Gi, which consumes "
                                 "49152Mi after the device's request policy; sim-0 allows at most 40960Mi\n"));
  EXPECT_THAT(run.out, HasSubstr("gpu-dra-2: claim research/exclusive-1-gpu request gpu: asks 1 device with cores 100, "
                                 "memory 40960Mi, shares 1 each; 0 here have room (sim-0: cores 0 of 100 left, memory "
                                 "0Mi of 40960Mi left)"));
  EXPECT_THAT(run.out, HasSubstr("gpu-dra-1  sim-0 (sim.vgpu.io)  NVIDIA A100-SXM4-40GB  29480Mi/40960Mi  90/100   4/4"));
  EXPECT_THAT(run.out, HasSubstr("9 placed, 2 pending, 0 invalid, 0 without device requests; 8 of 10 ResourceClaims "
                                 "allocated"));
}

/// vgpu-sim on the example's cluster with `workload` as the --pods file (stderr captured too).
SimRun runOnExampleCluster(const std::string& workload) {
  testing::TempDir dir;
  const auto path = dir.write("workload.yaml", workload);
  return runSim(std::string("--cluster ") + VGPU_EXAMPLES_DIR + "/dra-sharing/cluster.yaml --pods " + path.string() +
                " 2>&1");
}

TEST(VgpuSimDra, SaysPreemptionForClaimsIsNotModelled) {
  const SimRun run = runSim(kExample + " --explain-preemption research/too-big 2>&1");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_THAT(run.out, HasSubstr("research/too-big uses ResourceClaims; vgpu-sim does not model preemption for claims"));
}

TEST(VgpuSimDra, RefusesABadClaimFileNamingTheDocumentAndField) {
  const SimRun run = runOnExampleCluster("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\n" +
                                         kClaimHead + "      - {name: gpu, exactly: {deviceClassName: x, count: -1}}\n");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_THAT(run.out, HasSubstr("workload.yaml: document 2: ResourceClaim ns/c: spec.devices.requests[0].exactly.count: "
                                 "expected a whole number of at least 1, got -1"));
}

TEST(VgpuSimDra, SaysWhichClaimOrClassIsMissing) {
  const SimRun run = runOnExampleCluster("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: "
                                         "[{name: g, resourceClaimName: nope}]\n  containers: [{name: c}]\n---\n" +
                                         kClaimHead + "      - {name: gpu, exactly: {deviceClassName: nvidia.vgpu.io}}\n");
  EXPECT_EQ(run.exitCode, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("default/p: invalid request: spec.resourceClaims[0] (g): no ResourceClaim default/nope "
                                 "in the input"));
  EXPECT_THAT(run.out, HasSubstr("claim ns/c: invalid: ResourceClaim ns/c request gpu: DeviceClass \"nvidia.vgpu.io\" "
                                 "does not exist (known: sim.vgpu.io; add a DeviceClass document to the input)"));
}

// One node with a backend on each front end: a pod asking both a device-plugin resource
// and a claim goes where both fit; once its claim is allocated, the claim's node is the
// only one for the next pod using it.
TEST(VgpuSimDra, PlacesAPodAskingBothPathsWhereBothFit) {
  testing::TempDir dir;
  dir.write("device-config.yaml", R"(version: 1
backends:
  sim:
    enabled: true
    resources: {count: vgpu.io/sim, memory: vgpu.io/sim-memory, cores: vgpu.io/sim-cores}
  nvidia:
    enabled: true
    frontEnd: dra
)");
  const auto cluster = dir.write("cluster.yaml", R"(nodes:
  - name: n1
    devices:
      - {backend: sim, memoryMiB: 16384}
  - name: n2
    devices:
      - {backend: sim, memoryMiB: 16384}
      - {backend: nvidia, model: A100, memoryMiB: 40960}
  - name: n3
    devices:
      - {backend: sim, memoryMiB: 32768}
      - {backend: nvidia, model: A100, memoryMiB: 40960}
)");
  // A pod asking `mib` of a sim GPU through the device plugin and the claim g.
  auto pod = [](const std::string& name, int mib) {
    return "---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
           "}\nspec:\n  resourceClaims: [{name: g, resourceClaimName: g}]\n  containers: [{name: c, resources: "
           "{limits: {vgpu.io/sim: 1, vgpu.io/sim-memory: " +
           std::to_string(mib) + "}, claims: [{name: g}]}}]\n";
  };
  const auto pods = dir.write("pods.yaml", R"(apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: g}
spec:
  devices:
    requests:
      - {name: gpu, exactly: {deviceClassName: nvidia.vgpu.io, capacity: {requests: {memory: 1Gi}}}}
)" + pod("both", 1000) + pod("bigger", 20000));
  const SimRun run = runSim("--cluster " + cluster.string() + " --pods " + pods.string());
  ASSERT_EQ(run.exitCode, 0) << run.out;
  // n1 publishes no slices; binpack prefers the fuller of n2 and n3 (equal: the first).
  EXPECT_THAT(run.out, HasSubstr("default/both  n2    c"));
  EXPECT_THAT(run.out, HasSubstr("default/g  default/both  n2    gpu      nvidia-0 (nvidia.vgpu.io)  1024Mi"));
  EXPECT_THAT(run.out, HasSubstr("default/bigger: no node fits\n"
                                 "  kube-scheduler says: 0/3 nodes are available: 1 vgpu: devices too small for the "
                                 "request (CardInsufficientMemory), 2 resourceclaim not available on the node.\n"
                                 "  n1: its claim default/g is allocated on node n2\n"));
  EXPECT_THAT(run.out, HasSubstr("  n3: its claim default/g is allocated on node n2\n"));
}

}  // namespace
}  // namespace vgpu::simulator
