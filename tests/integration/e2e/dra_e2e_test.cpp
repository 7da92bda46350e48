// A container prepared through DRA, end to end: the real vgpu-dra-plugin publishes the fake
// node's devices, a claim allocated as kube-scheduler does on a shared device (shareID,
// consumedCapacity) is prepared through the kubelet's DRA double, the CDI spec it wrote is
// applied as a CDI-aware runtime does (cdi_runtime.h), and a CUDA program runs with it,
// libvgpu.so preloaded, against the fake driver. The limiter must hold it exactly as it holds
// a container of the device-plugin path with the same memory and compute (e2e_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <boost/json.hpp>

#include "cdi_runtime.h"
#include "dra_node.h"
#include "e2e_harness.h"
#include "vgpu/limiter_contract.h"
#include "vgpu/shared_region.h"

namespace vgpu::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kGpu = "GPU-d0000000-0000-4000-8000-000000000000";

/// What the process published in its container's shared region for its device 0: the
/// limits libvgpu.so took from the limits file, and the memory it holds now.
struct RegionLimits {
  std::string uuid;
  std::uint64_t memoryLimit = 0;
  std::uint64_t memoryUsed = 0;
  std::uint32_t smLimit = 0;
};

/// The region on the host: the container's region file (CUDA_DEVICE_MEMORY_SHARED_CACHE) at
/// the host end of the mount that holds it (the file mounted alone, or a folder holding it).
Result<RegionLimits> regionOf(const ContainerSpec& spec) {
  auto env = spec.env.find(VGPU_ENV_SHARED_REGION);
  if (env == spec.env.end()) return makeError(std::string("the container has no ") + VGPU_ENV_SHARED_REGION);
  const fs::path inContainer(env->second);
  fs::path host;
  for (const auto& m : spec.mounts) {
    if (fs::path(m.containerPath) == inContainer) host = m.hostPath;
    if (fs::path(m.containerPath) == inContainer.parent_path()) host = fs::path(m.hostPath) / inContainer.filename();
  }
  if (host.empty()) return makeError("no mount holds " + env->second);
  const vgpu_region* r = nullptr;
  char err[256] = "";
  if (vgpu_region_open_readonly(host.c_str(), &r, err, sizeof err) != VGPU_REGION_OK)
    return makeError(host.string() + ": " + err);
  RegionLimits out{r->devices[0].uuid, r->devices[0].memory_limit, r->devices[0].memory_used, r->devices[0].sm_limit};
  vgpu_region_close(r);
  return out;
}

/// A claim on the one device of `backend`'s driver (kube-scheduler's allocator picks it from
/// the published pool), prepared through the kubelet: the claim and its CDI ids. The answer
/// must name that device and echo the allocation's shareID.
struct PreparedShare {
  fakes::DraClaim claim;
  std::vector<std::string> cdiIds;
};
Result<PreparedShare> prepareShare(DraNode& node, const std::string& backend, const std::string& name,
                                   const ShareRequest& share) {
  const std::string driver = draDriver(backend);
  const auto devices = node.publishedDevices(driver);
  if (devices.size() != 1) return makeError(driver + " published " + std::to_string(devices.size()) + " devices");
  const std::string device(devices[0].at("name").as_string());
  auto claim = node.createAllocatedClaim(name, driver, device, share);
  if (!claim.ok()) return std::move(claim).error();
  auto got = node.kubelet().prepare(driver, {*claim});
  if (!got.ok()) return std::move(got).error();
  const auto& answer = got->at(claim->uid);
  if (!answer.error.empty()) return makeError("prepare: " + answer.error + "\n" + node.pluginLog());
  if (answer.devices.size() != 1 || answer.devices[0].device != device)
    return makeError("prepare answered " + std::to_string(answer.devices.size()) + " devices, not " + device);
  if (answer.devices[0].shareId != node.shareIdOf(*claim))
    return makeError("prepare did not echo the shareID " + node.shareIdOf(*claim));
  return PreparedShare{*claim, answer.devices[0].cdiDeviceIds};
}

class E2EDra : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(node.start({.name = "dra-node", .gpus = {{.uuid = kGpu}}}).ok()) << node.pluginLog();
  }

  /// A claim of `memory` and `cores` on the GPU, prepared; its CDI ids.
  std::vector<std::string> preparedShare(const std::string& name, const ShareRequest& share, fakes::DraClaim& claim) {
    auto made = prepareShare(node, "nvidia", name, share);
    EXPECT_TRUE(made.ok()) << made.error().message;
    if (!made.ok()) return {};
    claim = made->claim;
    return made->cdiIds;
  }

  DraNode node;
  const std::string driver = draDriver("nvidia");
};

TEST_F(E2EDra, AShareIsHeldToItsMemoryAndComputeExactlyAsADevicePluginContainer) {
  constexpr std::uint64_t kLimitMiB = 3000;
  const std::uint64_t limit = kLimitMiB * kMiB;
  fakes::DraClaim claim;
  const auto cdiIds = preparedShare("train", {"3000Mi", "30"}, claim);
  ASSERT_EQ(cdiIds, std::vector<std::string>{driver + "/share=" + claim.uid});

  auto dra = node.containerSpec(cdiIds);
  ASSERT_TRUE(dra.ok()) << dra.error().message;
  // The device-plugin path: the same limiter asked for a container granted 3000 MiB and 30 %.
  ContainerGrant g;
  g.container = {"device-plugin-pod", "main"};
  g.devices = {DeviceGrant{"nvidia", kGpu, 0, kLimitMiB, 30, 0, -1}};
  auto dp = node.devicePluginSpec("nvidia", g);
  ASSERT_TRUE(dp.ok()) << dp.error().message;

  std::map<std::string, std::map<std::string, std::string>> reports;
  std::map<std::string, RegionLimits> regions;
  for (const auto& [path, spec] : {std::pair{"dra", *dra}, std::pair{"device-plugin", *dp}}) {
    auto app = node.startContainer(spec, VGPU_E2E_CUDA_APP, {std::to_string(limit)});
    ASSERT_TRUE(app.ok()) << path << ": " << app.error().message;
    auto report = readReport(**app);
    ASSERT_EQ(report["info"], "0") << path << ", the program's stderr:\n" << (*app)->log();
    // The program sees its share as the whole device and gets it, not a byte more.
    EXPECT_EQ(report["total"], std::to_string(limit)) << path;
    EXPECT_EQ(report["free"], std::to_string(limit)) << path;
    EXPECT_EQ(report["alloc"], "0") << path;
    EXPECT_EQ(report["extra"], std::to_string(kCudaOutOfMemory)) << path;
    // While it holds the memory: the limits libvgpu.so read in the container, as it
    // published them in the container's region, compute limit included.
    auto region = regionOf(spec);
    ASSERT_TRUE(region.ok()) << path << ": " << region.error().message;
    EXPECT_EQ(region->uuid, kGpu) << path;
    EXPECT_EQ(region->memoryLimit, limit) << path;
    EXPECT_EQ(region->memoryUsed, limit) << path;
    EXPECT_EQ(region->smLimit, 30u) << path;
    reports[path] = report;
    regions[path] = *region;
    (*app)->closeStdin();
    auto status = (*app)->waitExit(kWait);
    ASSERT_TRUE(status) << path;
    EXPECT_EQ(exitCodeOf(*status), 0) << path;
  }
  EXPECT_EQ(reports["dra"], reports["device-plugin"]);
  // The compute throttle is driven by the same settings on both paths (its accuracy is
  // measured by tests/unit/hooks LimiterCompute): the limiter's compute variables alike.
  for (const char* key : {VGPU_ENV_SM_LIMIT, VGPU_ENV_CORE_POLICY})
    EXPECT_EQ(dra->env[key], dp->env[key]) << key;
  EXPECT_EQ(dra->env.at(VGPU_ENV_SM_LIMIT), "30");
}

TEST_F(E2EDra, TwoSharesOfOneGpuAreEachHeldToTheirOwnAndUnprepareReleasesOnlyItsShare) {
  fakes::DraClaim a, b;
  const auto idsA = preparedShare("share-a", {"3000Mi", "30"}, a);
  const auto idsB = preparedShare("share-b", {"5Gi", "50"}, b);
  ASSERT_FALSE(idsA.empty());
  ASSERT_FALSE(idsB.empty());
  EXPECT_NE(node.shareIdOf(a), node.shareIdOf(b));

  // Both run at once on the one GPU, each asking exactly its own share.
  struct Tenant {
    std::vector<std::string> ids;
    std::uint64_t limit;
    std::uint32_t cores;
    std::unique_ptr<ChildProcess> app;
  };
  std::vector<Tenant> tenants;
  tenants.push_back({idsA, 3000 * kMiB, 30, nullptr});
  tenants.push_back({idsB, 5120 * kMiB, 50, nullptr});
  for (auto& t : tenants) {
    auto app = node.startContainer(t.ids, VGPU_E2E_CUDA_APP, {std::to_string(t.limit)});
    ASSERT_TRUE(app.ok()) << app.error().message;
    t.app = std::move(app).value();
    auto report = readReport(*t.app);
    ASSERT_EQ(report["info"], "0") << t.app->log();
    EXPECT_EQ(report["total"], std::to_string(t.limit));
    EXPECT_EQ(report["alloc"], "0");
    EXPECT_EQ(report["extra"], std::to_string(kCudaOutOfMemory));
  }
  for (auto& t : tenants) {
    auto region = regionOf(*node.containerSpec(t.ids));
    ASSERT_TRUE(region.ok()) << region.error().message;
    EXPECT_EQ(region->memoryLimit, t.limit);
    EXPECT_EQ(region->memoryUsed, t.limit);
    EXPECT_EQ(region->smLimit, t.cores);
  }
  // Share A, empty again, cannot take share B's amount while B holds it.
  tenants[0].app->closeStdin();
  ASSERT_TRUE(tenants[0].app->waitExit(kWait));
  auto greedy = node.startContainer(idsA, VGPU_E2E_CUDA_APP, {std::to_string(tenants[1].limit)});
  ASSERT_TRUE(greedy.ok()) << greedy.error().message;
  auto refused = readReport(**greedy);
  EXPECT_EQ(refused["total"], std::to_string(tenants[0].limit));
  EXPECT_EQ(refused["alloc"], std::to_string(kCudaOutOfMemory));
  (*greedy)->closeStdin();
  ASSERT_TRUE((*greedy)->waitExit(kWait));

  // The kubelet unprepares A once its containers are gone.
  const auto specA = node.containerSpec(idsA);
  ASSERT_TRUE(specA.ok());
  auto un = node.kubelet().unprepare(driver, {a});
  ASSERT_TRUE(un.ok()) << un.error().message;
  EXPECT_EQ(un->at(a.uid), "");
  // Its CDI device is gone: a runtime cannot start a container with it any more; its limits
  // and region went with it.
  auto again = node.containerSpec(idsA);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("unresolvable CDI devices " + idsA[0]));
  EXPECT_FALSE(regionOf(*specA).ok());
  for (const auto& m : specA->mounts) {
    if (m.containerPath == VGPU_LIMITS_FILE_PATH) {
      EXPECT_FALSE(fs::exists(m.hostPath)) << m.hostPath;
    }
  }

  // B is untouched: still running within its share, and its spec still applies.
  auto regionB = regionOf(*node.containerSpec(idsB));
  ASSERT_TRUE(regionB.ok()) << regionB.error().message;
  EXPECT_EQ(regionB->memoryUsed, tenants[1].limit);
  tenants[1].app->closeStdin();
  auto status = tenants[1].app->waitExit(kWait);
  ASSERT_TRUE(status);
  EXPECT_EQ(exitCodeOf(*status), 0);
}

#if defined(VGPU_E2E_FAKE_CNDEV) && defined(VGPU_E2E_FAKE_ROCM_DIR)
// As E2EMixedCluster does for the device-plugin path (no workload runs on the fake MLU and
// DCU drivers): the driver-level partition is made for the share's amounts, reaches the
// container through the CDI spec, and is undone by Unprepare.
TEST(E2EDraPartitions, MluAndDcuSharesGetTheirDriverPartitionAndUnprepareUndoesIt) {
  DraNode node;
  ASSERT_TRUE(node.start({.name = "accel-node",
                          .mlus = {{.uuid = "0a1b2c3d-0000-4000-8000-000000000000"}},
                          .dcus = {{.serial = "S0"}}})
                  .ok())
      << node.pluginLog();

  // MLU: 4 GiB (16 units of 256 MiB) and 30 % of the card, as an sMLU instance.
  auto mlu = prepareShare(node, "cambricon", "mlu-job", {"4Gi", "30"});
  ASSERT_TRUE(mlu.ok()) << mlu.error().message;
  auto mluSpec = node.containerSpec(mlu->cdiIds);
  ASSERT_TRUE(mluSpec.ok()) << mluSpec.error().message;
  EXPECT_TRUE(hasDeviceNode(*mluSpec, "/dev/cambricon_dev0"));
  EXPECT_TRUE(mluSpec->env.contains("VIRTUAL_DEVICES"));
  auto instances = fakeCndevState(node.dir(), "instance");
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_THAT(instances[0], HasSubstr("card=0 "));
  ASSERT_FALSE(fakeCndevState(node.dir(), "profile").empty());
  EXPECT_THAT(fakeCndevState(node.dir(), "profile")[0], HasSubstr("quota=30 "));

  // DCU: 4000 MiB and 25 % of the compute units, as a vDCU configuration file.
  auto dcu = prepareShare(node, "hygon", "dcu-job", {"4000Mi", "25"});
  ASSERT_TRUE(dcu.ok()) << dcu.error().message;
  auto dcuSpec = node.containerSpec(dcu->cdiIds);
  ASSERT_TRUE(dcuSpec.ok()) << dcuSpec.error().message;
  EXPECT_TRUE(hasDeviceNode(*dcuSpec, "/dev/kfd"));
  EXPECT_TRUE(hasDeviceNode(*dcuSpec, "/dev/dri/card0"));
  auto vdev = std::find_if(dcuSpec->mounts.begin(), dcuSpec->mounts.end(),
                           [](const Mount& m) { return m.containerPath == "/etc/vdev/docker"; });
  ASSERT_NE(vdev, dcuSpec->mounts.end());
  EXPECT_TRUE(vdev->readOnly);
  EXPECT_THAT(readText(fs::path(vdev->hostPath) / "vdev0.conf"), HasSubstr("mem: 4000 MiB"));

  auto un = node.kubelet().unprepare(draDriver("cambricon"), {mlu->claim});
  ASSERT_TRUE(un.ok()) << un.error().message;
  EXPECT_EQ(un->at(mlu->claim.uid), "");
  EXPECT_TRUE(fakeCndevState(node.dir(), "instance").empty());
  un = node.kubelet().unprepare(draDriver("hygon"), {dcu->claim});
  ASSERT_TRUE(un.ok()) << un.error().message;
  EXPECT_EQ(un->at(dcu->claim.uid), "");
  EXPECT_FALSE(fs::exists(fs::path(vdev->hostPath) / "vdev0.conf"));
  EXPECT_FALSE(node.containerSpec(dcu->cdiIds).ok());
}
#endif

// ---- the test runtime's CDI, against what the CDI specification says ----

class E2ECdiRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/vcdi-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override { removeTree(dir); }
  void write(const std::string& folder, const std::string& file, const std::string& json) {
    ASSERT_TRUE(writeText(dir / folder / file, json).ok());
  }
  Result<ContainerSpec> apply(const std::vector<std::string>& ids) {
    return applyCdiDevices({dir / "etc", dir / "run"}, ids);
  }
  fs::path dir;
};

TEST_F(E2ECdiRuntime, AppliesTheSpecsEditsOnceThenEachDevicesAndLaterValuesWin) {
  write("run", "v.json",
        R"({"cdiVersion":"0.5.0","kind":"v.io/share","containerEdits":{"env":["A=spec","B=spec"]},)"
        R"("devices":[{"name":"x","containerEdits":{"env":["A=x"],"deviceNodes":[{"path":"/dev/x"}],)"
        R"("mounts":[{"hostPath":"/h/deep","containerPath":"/c/d/e","options":["ro","bind"]},)"
        R"({"hostPath":"/h","containerPath":"/c","options":["rw","bind"]}]}},)"
        R"({"name":"y","containerEdits":{"env":["B=y"]}}]})");
  auto spec = apply({"v.io/share=x", "v.io/share=y"});
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->env, (std::map<std::string, std::string>{{"A", "x"}, {"B", "y"}}));
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0], (DeviceNode{"/dev/x", "/dev/x", "rwm"}));
  ASSERT_EQ(spec->mounts.size(), 2u);
  EXPECT_EQ(spec->mounts[0], (Mount{"/h", "/c", false}));  // shallower first
  EXPECT_EQ(spec->mounts[1], (Mount{"/h/deep", "/c/d/e", true}));
}

TEST_F(E2ECdiRuntime, RefusesWhatARuntimeRefusesAndWhatItCannotModel) {
  write("run", "a.json", R"({"cdiVersion":"0.5.0","kind":"v.io/share","devices":[{"name":"ok"}]})");
  auto missing = apply({"v.io/share=ok", "v.io/share=gone"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("unresolvable CDI devices v.io/share=gone"));

  write("run", "b.json", R"({"cdiVersion":"0.4.0","kind":"v.io/old","devices":[{"name":"n","containerEdits":)"
                         R"({"deviceNodes":[{"path":"/dev/n","hostPath":"/dev/m"}]}}]})");
  auto old = apply({"v.io/share=ok"});
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.error().message, HasSubstr("hostPath needs cdiVersion 0.5.0"));
  fs::remove(dir / "run" / "b.json");

  write("run", "c.json", R"({"cdiVersion":"0.6.0","kind":"v.io/hook","devices":[{"name":"h","containerEdits":)"
                         R"({"hooks":[{"hookName":"createContainer","path":"/bin/true"}]}}]})");
  auto hooked = apply({"v.io/hook=h"});
  ASSERT_FALSE(hooked.ok());
  EXPECT_THAT(hooked.error().message, HasSubstr("hooks"));

  // /var/run/cdi shadows /etc/cdi; one folder defining a device twice is a conflict.
  const auto dup = [](const std::string& value) {
    return R"({"cdiVersion":"0.5.0","kind":"v.io/dup","devices":[{"name":"d","containerEdits":{"env":["W=)" + value +
           R"("]}}]})";
  };
  write("etc", "d.json", dup("etc"));
  write("run", "d.json", dup("run"));
  auto shadowed = apply({"v.io/dup=d"});
  ASSERT_TRUE(shadowed.ok()) << shadowed.error().message;
  EXPECT_EQ(shadowed->env.at("W"), "run");
  write("run", "e.json", R"({"cdiVersion":"0.5.0","kind":"v.io/dup","devices":[{"name":"d"}]})");
  auto twice = apply({"v.io/dup=d"});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.error().message, HasSubstr("defined twice"));
}

}  // namespace
}  // namespace vgpu::e2e
