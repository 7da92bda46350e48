// Enforcement: vDCUs made at Allocate (vdev configuration file or hydmi), device nodes and
// mounts, CU masks without overlap, reclaiming (release, reconcile, after a restart) and
// failures half way that leave nothing behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <set>

#include "fake_node.h"
#include "hygon_backend.h"

namespace vgpu::hygon {
namespace {

namespace fs = std::filesystem;
using fake::FakeNode;
using fake::readText;
using ::testing::HasSubstr;

std::unique_ptr<HygonBackend> agent(const BackendParams& p) {
  auto b = HygonBackend::create(p);
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error().message);
  auto out = std::move(*b);
  auto devices = out->discover();
  EXPECT_TRUE(devices.ok()) << (devices.ok() ? "" : devices.error().message);
  return out;
}

ContainerGrant grant(const FakeNode& node, const std::string& container, std::vector<DeviceGrant> devices) {
  ContainerGrant g;
  g.container = {"pod-" + container, container};
  g.podNamespace = "default";
  g.podName = "pod-" + container;
  g.podUid = "uid-" + container;
  g.devices = std::move(devices);
  g.hostDir = node.hostDir(container).string();
  fs::create_directories(g.hostDir);
  return g;
}

/// The folder with the container's vdev0.conf, as the backend recorded it ("" if none).
fs::path confDirOf(HygonBackend& b, const std::string& container) {
  auto held = b.holdings();
  if (!held.ok()) return {};
  for (const auto& h : *held)
    if (h.container.containerName == container) return h.confDir;
  return {};
}

/// The per-pod folders under the backend's folder.
std::vector<std::string> confDirs(const FakeNode& node) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(node.confRoot(), ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

DeviceGrant slice(const std::string& id, int index, std::uint64_t memory, std::uint32_t compute) {
  return {"hygon", id, index, memory, compute, 0};
}

std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  return out;
}

void expectDisjointPerDevice(const std::vector<Holding>& holdings) {
  for (size_t i = 0; i < holdings.size(); ++i)
    for (size_t j = i + 1; j < holdings.size(); ++j) {
      if (holdings[i].deviceId != holdings[j].deviceId) continue;
      ASSERT_FALSE(holdings[i].mask.overlaps(holdings[j].mask))
          << holdings[i].container.containerName << " and " << holdings[j].container.containerName;
    }
}

TEST(HygonLimiter, ASliceGetsItsVdevFileMountsAndDeviceNodes) {
  FakeNode node({{.serial = "A", .bdf = "0000:03:00.0"}, {.serial = "B"}});
  auto b = agent(node.params());
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 4000, 25)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;

  // The per-pod folder is named as HAMi's plugin names it: <podUID>_<ctr>_<devIdx>_<pipe>_<vdev>_<masks>.
  const fs::path dir = node.confRoot() / "uid-app_app_0_0_0_0x0000000000007fff_0x0000000000000000";
  EXPECT_EQ(confDirOf(*b, "app"), dir);
  const auto conf = dir / "vdev0.conf";
  EXPECT_EQ(readText(conf),
            "PciBusId: 0000:03:00.0\n"
            "cu_mask: 0x0000000000007fff\n"
            "cu_mask: 0x0000000000000000\n"
            "cu_count: 15\n"
            "mem: 4000 MiB\n"
            "device_id: 0\n"
            "vdev_id: 0\n"
            "pipe_id: 0\n"
            "enable: 1\n");
  EXPECT_EQ(readText(node.copyDir() / "vdev0.conf"), readText(conf));
  EXPECT_EQ(spec->mounts, (std::vector<Mount>{{dir.string(), "/etc/vdev/docker", true}}));
  EXPECT_EQ(spec->devices, (std::vector<DeviceNode>{{(node.dev() / "kfd").string(), "/dev/kfd", "rwm"},
                                                    {(node.dev() / "mkfd").string(), "/dev/mkfd", "rwm"},
                                                    {(node.dev() / "dri/card0").string(), "/dev/dri/card0", "rwm"},
                                                    {(node.dev() / "dri/renderD128").string(), "/dev/dri/renderD128", "rwm"}}));
  EXPECT_EQ(spec->annotations.at("hygon.com/dcu-ids"), "DCU-A");
}

TEST(HygonLimiter, HyhalIsMountedReadOnlyWhenPresent) {
  FakeNode node({{.serial = "A"}});
  const auto hyhal = node.root() / "opt-hyhal";
  const auto driver = node.root() / "hygondriver";
  fs::create_directories(hyhal);
  fs::create_directories(driver);
  auto b = agent(node.params("vdev-file", {{"hyhalDir", hyhal.string()}, {"driverMountDir", driver.string()}}));
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 1000, 10)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(spec->mounts, ::testing::Contains(Mount{hyhal.string(), "/opt/hyhal", true}));
  EXPECT_THAT(spec->mounts, ::testing::Contains(Mount{driver.string(), "/opt/hygondriver", true}));
  fs::remove_all(hyhal);  // a folder that is not there is not mounted (the container would not start)
  auto without = b->containerSpec(grant(node, "other", {slice("DCU-A", 0, 1000, 10)}));
  ASSERT_TRUE(without.ok()) << without.error().message;
  EXPECT_THAT(without->mounts, ::testing::Not(::testing::Contains(Mount{hyhal.string(), "/opt/hyhal", true})));
}

TEST(HygonLimiter, WholeDcusNeedNoVdevButBlockSlices) {
  FakeNode node({{.serial = "A"}, {.serial = "B"}});
  auto b = agent(node.params());
  auto spec = b->containerSpec(grant(node, "train", {slice("DCU-A", 0, 16368, 100), slice("DCU-B", 1, 16368, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->mounts.empty());
  EXPECT_EQ(spec->devices.size(), 6u);  // kfd, mkfd, two nodes per DCU
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
  auto sliced = b->containerSpec(grant(node, "late", {slice("DCU-A", 0, 1000, 10)}));
  ASSERT_FALSE(sliced.ok());
  EXPECT_THAT(sliced.error().message, HasSubstr("free compute units"));
  ASSERT_TRUE(b->release({"pod-train", "train"}).ok());
  EXPECT_TRUE(b->containerSpec(grant(node, "late", {slice("DCU-A", 0, 1000, 10)})).ok());
  auto whole = b->containerSpec(grant(node, "greedy", {slice("DCU-A", 0, 16368, 100)}));
  ASSERT_FALSE(whole.ok());
  EXPECT_THAT(whole.error().message, HasSubstr("holds part of it"));
}

TEST(HygonLimiter, RefusesGrantsItCannotHonour) {
  FakeNode node({{.serial = "A"}, {.serial = "B"}, {.serial = "SICK", .lost = true}});
  auto b = agent(node.params());
  struct Case {
    const char* description;
    ContainerGrant grant;
    const char* error;
  } cases[] = {
      {"no devices", grant(node, "c1", {}), "granted no DCUs"},
      {"unknown DCU", grant(node, "c2", {slice("DCU-NOPE", 5, 1000, 10)}), "DCU-NOPE is not on this node"},
      {"unhealthy DCU", grant(node, "c3", {slice("DCU-SICK", 2, 1000, 10)}), "DCU-SICK is unhealthy"},
      {"two slices", grant(node, "c4", {slice("DCU-A", 0, 1000, 10), slice("DCU-B", 1, 1000, 10)}),
       "at most one vDCU"},
      {"the same DCU twice", grant(node, "c6", {slice("DCU-A", 0, 16368, 100), slice("DCU-A", 0, 16368, 100)}),
       "granted twice"},
      {"more memory than is left", grant(node, "c5", {slice("DCU-A", 0, 20000, 10)}), "MiB not given to other vDCUs"},
  };
  for (auto& c : cases) {
    auto spec = b->containerSpec(c.grant);
    ASSERT_FALSE(spec.ok()) << c.description;
    EXPECT_THAT(spec.error().message, HasSubstr(c.error)) << c.description;
    EXPECT_THAT(spec.error().message, HasSubstr(c.grant.container.containerName)) << c.description;
  }
  auto held = b->holdings();
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty());
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
}

TEST(HygonLimiter, ManyContainersComeAndGoWithoutOverlapOrLeaks) {
  FakeNode node({{.serial = "A", .cus = 60}, {.serial = "B", .pciId = "6210", .vramMiB = 65520, .cus = 120}});
  auto params = node.params();
  params.settings.splitCount = 20;
  auto b = agent(params);
  const std::uint32_t cusOf[] = {60, 120};
  std::mt19937 rng(424242);
  std::map<std::string, int> live;  // container -> device index
  std::uint32_t bookedPercent[2] = {0, 0};
  std::map<std::string, std::uint32_t> booking;
  int next = 0, made = 0;
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      auto it = std::next(live.begin(), std::uniform_int_distribution<long>(0, static_cast<long>(live.size()) - 1)(rng));
      ASSERT_TRUE(b->release({"pod-" + it->first, it->first}).ok());
      bookedPercent[it->second] -= booking[it->first];
      live.erase(it);
    } else {
      const int dev = std::uniform_int_distribution<int>(0, 1)(rng);
      const std::uint32_t pct = std::uniform_int_distribution<std::uint32_t>(1, 30)(rng);
      const std::uint32_t cus = computeUnitsFor(pct, cusOf[dev]);
      const std::uint32_t booked = percentFor(cus, cusOf[dev]);
      if (bookedPercent[dev] + booked > 100 || live.size() >= 15) continue;  // the scheduler would not send it
      const std::string name = "c" + std::to_string(next++);
      auto spec = b->containerSpec(grant(node, name, {slice(dev == 0 ? "DCU-A" : "DCU-B", dev, 100, booked)}));
      ASSERT_TRUE(spec.ok()) << "step " << step << ": " << spec.error().message;
      ++made;
      live[name] = dev;
      booking[name] = booked;
      bookedPercent[dev] += booked;
    }
    auto held = b->holdings();
    ASSERT_TRUE(held.ok());
    ASSERT_EQ(held->size(), live.size());
    expectDisjointPerDevice(*held);
    std::set<int> vdevIds;
    for (const auto& h : *held) {
      ASSERT_TRUE(vdevIds.insert(h.vdevId).second) << "vdev id " << h.vdevId << " given twice";
      ASSERT_TRUE(fs::exists(fs::path(h.confDir) / "vdev0.conf"));
      ASSERT_EQ(fs::path(h.confDir).parent_path(), node.confRoot());
      ASSERT_TRUE(fs::exists(h.copyPath));
    }
    ASSERT_EQ(filesIn(node.copyDir()).size(), live.size()) << "step " << step;
  }
  EXPECT_GT(made, 50);
  ASSERT_TRUE(b->reconcile({}).ok());
  auto held = b->holdings();
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty());
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
  EXPECT_TRUE(confDirs(node).empty());
  // Every CU came back: each DCU can be given whole again.
  EXPECT_TRUE(b->containerSpec(grant(node, "after-a", {slice("DCU-A", 0, 16368, 100)})).ok());
  EXPECT_TRUE(b->containerSpec(grant(node, "after-b", {slice("DCU-B", 1, 65520, 100)})).ok());
}

TEST(HygonLimiter, HydmiModeGivesTheContainerHydmisMasksAndPipeAndLeavesHydmisFilesAlone) {
  FakeNode node({{.serial = "A"}, {.serial = "B", .bdf = "0000:43:00.0"}});
  auto b = agent(node.params("hydmi"));
  auto first = b->containerSpec(grant(node, "one", {slice("DCU-B", 1, 3000, 50)}));
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = b->containerSpec(grant(node, "two", {slice("DCU-B", 1, 3000, 50)}));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(node.hydmiVdevCount(), 2);
  EXPECT_EQ(node.hydmiVdev(0), (std::array<long, 3>{1, 30, 3000}));  // on DCU 1: 30 of 60 CUs, 3000 MiB
  EXPECT_EQ(node.hydmiVdev(1), (std::array<long, 3>{1, 30, 3000}));
  // hydmi placed the second vDCU on CUs 30-59 and pipe 1, and wrote its own file.
  const std::string hydmis =
      "PciBusId: 0000:43:00.0\n"
      "cu_mask: 0x0fffffffc0000000\n"
      "cu_mask: 0x0000000000000000\n"
      "cu_count: 30\n"
      "mem: 3000 MiB\n"
      "device_id: 1\n"
      "vdev_id: 1\n"
      "pipe_id: 1\n"
      "enable: 1\n";
  EXPECT_EQ(readText(node.copyDir() / "vdev1.conf"), hydmis);  // never overwritten
  // The container's file has every line of it, seen from inside: its one vDCU is device 0.
  const fs::path dir = node.confRoot() / "uid-two_two_1_1_1_0x0fffffffc0000000_0x0000000000000000";
  EXPECT_EQ(confDirOf(*b, "two"), dir);
  EXPECT_EQ(readText(dir / "vdev0.conf"),
            "PciBusId: 0000:43:00.0\n"
            "cu_mask: 0x0fffffffc0000000\n"
            "cu_mask: 0x0000000000000000\n"
            "cu_count: 30\n"
            "mem: 3000 MiB\n"
            "device_id: 0\n"
            "vdev_id: 1\n"
            "pipe_id: 1\n"
            "enable: 1\n");
  EXPECT_EQ(second->mounts, (std::vector<Mount>{{dir.string(), "/etc/vdev/docker", true}}));
  ASSERT_TRUE(b->release({"pod-one", "one"}).ok());
  EXPECT_EQ(node.hydmiVdevCount(), 1);
  EXPECT_FALSE(fs::exists(node.copyDir() / "vdev0.conf"));  // hydmi removed its own with the vDCU
  EXPECT_EQ(readText(node.copyDir() / "vdev1.conf"), hydmis);
  ASSERT_TRUE(b->reconcile({}).ok());
  EXPECT_EQ(node.hydmiVdevCount(), 0);
  EXPECT_TRUE(confDirs(node).empty());
}

TEST(HygonLimiter, HydmiVdevIdsAreNodeWideSoVdevsOnLaterDcusAreFound) {
  // hydmi allows 2 vDCUs per DCU, but numbers them across the node: the first vDCU of the
  // second DCU is id 2, past the per-DCU maximum.
  FakeNode node({{.serial = "A"}, {.serial = "B"}});
  node.maxVdevsPerDcu = 2;
  node.writeConfig();
  auto b = agent(node.params("hydmi"));
  ASSERT_TRUE(b->containerSpec(grant(node, "a1", {slice("DCU-A", 0, 1000, 20)})).ok());
  ASSERT_TRUE(b->containerSpec(grant(node, "a2", {slice("DCU-A", 0, 1000, 20)})).ok());
  auto spec = b->containerSpec(grant(node, "b1", {slice("DCU-B", 1, 1000, 20)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(node.hydmiVdev(2), (std::array<long, 3>{1, 12, 1000}));
  auto held = b->holdings();
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 3u);
  EXPECT_EQ(held->back().vdevId, 2);
  EXPECT_THAT(readText(confDirOf(*b, "b1") / "vdev0.conf"), HasSubstr("vdev_id: 2\n"));
  ASSERT_TRUE(b->release({"pod-b1", "b1"}).ok());
  EXPECT_EQ(node.hydmiVdev(2), (std::array<long, 3>{-1, -1, -1}));
}

TEST(HygonLimiter, VdevFileModeNeverOverwritesAVdevFileItDidNotWrite) {
  FakeNode node({{.serial = "A"}});
  fake::writeText(node.copyDir() / "vdev0.conf", "made by hy-smi\n");
  auto b = agent(node.params());
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 1000, 10)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(readText(node.copyDir() / "vdev0.conf"), "made by hy-smi\n");
  ASSERT_EQ(b->holdings()->size(), 1u);
  EXPECT_EQ(b->holdings()->front().vdevId, 1);
  EXPECT_THAT(readText(node.copyDir() / "vdev1.conf"), HasSubstr("vdev_id: 1\n"));
  ASSERT_TRUE(b->release({"pod-app", "app"}).ok());
  EXPECT_EQ(readText(node.copyDir() / "vdev0.conf"), "made by hy-smi\n");
  EXPECT_FALSE(fs::exists(node.copyDir() / "vdev1.conf"));
}

TEST(HygonLimiter, ReconcileRemovesPerPodFoldersOfPodsThatAreGone) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params());
  ASSERT_TRUE(b->containerSpec(grant(node, "stays", {slice("DCU-A", 0, 1000, 10)})).ok());
  const std::string own = confDirOf(*b, "stays").filename().string();
  // Left by an agent killed half way: a folder of a pod that is gone, one of a live pod that
  // no record names, and something that is not ours at all.
  const std::string gone = "uid-gone_c_0_3_7_0x0000000000000001_0x0000000000000000";
  const std::string sibling = "uid-stays_other_0_4_8_0x0000000000000002_0x0000000000000000";
  fake::writeText(node.confRoot() / gone / "vdev0.conf", "x");
  fake::writeText(node.confRoot() / sibling / "vdev0.conf", "x");
  fake::writeText(node.confRoot() / "notes" / "keep.txt", "x");
  ASSERT_TRUE(b->reconcile({{"pod-stays", "stays"}}).ok());
  EXPECT_EQ(confDirs(node), (std::vector<std::string>{"notes", sibling, own}));
  ASSERT_TRUE(b->reconcile({}).ok());
  EXPECT_EQ(confDirs(node), (std::vector<std::string>{"notes"}));
}

TEST(HygonLimiter, HydmiCreationFailureLeavesNothingBehind) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params("hydmi"));
  node.writeConfig("fail dmiCreateVDevices 11\n");
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 3000, 50)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("dmiCreateVDevices(0) failed: status 11 (out of resources)"));
  EXPECT_EQ(node.hydmiVdevCount(), 0);
  EXPECT_TRUE(b->holdings()->empty());
  EXPECT_TRUE(confDirs(node).empty());
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
}

TEST(HygonLimiter, TheFakeDriverEnforcesRemainingCus) {
  // Not the limiter's own check: hydmi refuses what the device cannot hold.
  FakeNode node({{.serial = "A", .cus = 60}});
  auto b = agent(node.params("hydmi"));
  ASSERT_TRUE(b->containerSpec(grant(node, "one", {slice("DCU-A", 0, 1000, 50)})).ok());
  node.dcus()[0].cus = 40;  // the driver now sees fewer CUs than the scheduler booked
  node.writeConfig();
  auto spec = b->containerSpec(grant(node, "two", {slice("DCU-A", 0, 1000, 50)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("out of resources"));
  EXPECT_THAT(spec.error().message, HasSubstr("the driver has 10 compute units"));
  EXPECT_EQ(node.hydmiVdevCount(), 1);
}

TEST(HygonLimiter, AFailureAfterTheVdevIsMadeDestroysIt) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params("hydmi"));
  // The copy folder is a file: writing the exporter's copy fails after hydmi made the vDCU.
  fake::writeText(node.copyDir(), "not a folder");
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 3000, 50)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr(node.copyDir().string()));
  EXPECT_EQ(node.hydmiVdevCount(), 0);
  EXPECT_TRUE(confDirs(node).empty());
  EXPECT_TRUE(b->holdings()->empty());
}

TEST(HygonLimiter, AStateFileThatCannotBeWrittenUndoesTheVdev) {
  FakeNode node({{.serial = "A"}});
  const fs::path confs = node.root() / "confs";  // per-pod folders outside the broken state dir
  auto b = agent(node.params("hydmi", {{"containerConfDir", confs.string()}}));
  ASSERT_TRUE(b->holdings().ok());  // state loaded (empty) before the folder turns into a file
  fake::writeText(node.stateDir(), "not a folder");
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 3000, 50)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("recording its vDCU"));
  EXPECT_EQ(node.hydmiVdevCount(), 0);
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
  EXPECT_TRUE(filesIn(confs).empty());
}

TEST(HygonLimiter, ARestartedAgentReclaimsWhatItsPredecessorMade) {
  FakeNode node({{.serial = "A"}, {.serial = "B"}});
  {
    auto before = agent(node.params("hydmi"));
    ASSERT_TRUE(before->containerSpec(grant(node, "stays", {slice("DCU-A", 0, 2000, 20)})).ok());
    ASSERT_TRUE(before->containerSpec(grant(node, "goes", {slice("DCU-A", 0, 2000, 20)})).ok());
    ASSERT_TRUE(before->containerSpec(grant(node, "whole", {slice("DCU-B", 1, 16368, 100)})).ok());
  }
  EXPECT_EQ(node.hydmiVdevCount(), 2);
  auto after = agent(node.params("hydmi"));
  ASSERT_TRUE(after->reconcile({{"pod-stays", "stays"}}).ok());
  EXPECT_EQ(node.hydmiVdevCount(), 1);
  auto held = after->holdings();
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].container.containerName, "stays");
  EXPECT_EQ(confDirs(node).size(), 1u);
  EXPECT_TRUE(fs::exists(confDirOf(*after, "stays") / "vdev0.conf"));
  // The new agent knows which CUs are taken: a new slice does not overlap the survivor.
  ASSERT_TRUE(after->containerSpec(grant(node, "new", {slice("DCU-A", 0, 2000, 20)})).ok());
  expectDisjointPerDevice(*after->holdings());
}

TEST(HygonLimiter, RetryingAllocateForAContainerReplacesItsVdev) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params());
  ASSERT_TRUE(b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 2000, 20)})).ok());
  ASSERT_TRUE(b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 2000, 20)})).ok());
  auto held = b->holdings();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->size(), 1u);
  EXPECT_EQ(filesIn(node.copyDir()).size(), 1u);
}

TEST(HygonLimiter, ACorruptStateFileIsReportedNotTrusted) {
  FakeNode node({{.serial = "A"}});
  fake::writeText(node.stateDir() / "holdings.json", "{\"version\":1,\"holdings\":[{\"holder\":7}]}");
  auto b = agent(node.params());
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 2000, 20)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("holdings.json: holdings[0].holder: expected a string"));
  auto rec = b->reconcile({});
  ASSERT_FALSE(rec.ok());
  // An entry pointing release at a folder that is not ours is refused, not followed.
  const std::string evil =
      "{\"version\":1,\"holdings\":[{\"holder\":\"p\",\"container\":\"c\",\"deviceId\":\"DCU-A\","
      "\"deviceIndex\":0,\"whole\":false,\"cuMask\":[\"0x1\",\"0x0\"],\"memoryMiB\":1,\"vdevId\":0,"
      "\"pipeId\":0,\"hydmi\":false,\"confDir\":\"" + node.root().string() + "\",\"copyPath\":\"\"}]}";
  fake::writeText(node.stateDir() / "holdings.json", evil);
  auto guarded = agent(node.params())->reconcile({});
  ASSERT_FALSE(guarded.ok());
  EXPECT_THAT(guarded.error().message, HasSubstr("holdings[0].confDir"));
  EXPECT_TRUE(fs::exists(node.config()));
  fake::writeText(node.stateDir() / "holdings.json", "not json");
  auto fresh = agent(node.params());
  auto rel = fresh->release({"p", "c"});
  ASSERT_FALSE(rel.ok());
  EXPECT_THAT(rel.error().message, HasSubstr("not valid JSON"));
}

TEST(HygonLimiter, PipeIdsOfOneDcuRunOutWithAClearError) {
  FakeNode node({{.serial = "A", .cus = 60}});
  auto b = agent(node.params());
  for (int i = 0; i < kMaxPipeIds; ++i)
    ASSERT_TRUE(b->containerSpec(grant(node, "c" + std::to_string(i), {slice("DCU-A", 0, 100, 2)})).ok()) << i;
  auto spec = b->containerSpec(grant(node, "one-too-many", {slice("DCU-A", 0, 100, 2)}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.error().message, HasSubstr("all 20 pipe ids of DCU DCU-A are in use"));
  EXPECT_EQ(b->holdings()->size(), static_cast<size_t>(kMaxPipeIds));
  EXPECT_EQ(confDirs(node).size(), static_cast<size_t>(kMaxPipeIds));
}

TEST(HygonLimiter, ReleasingAnUnknownContainerIsFine) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params());
  EXPECT_TRUE(b->release({"no-such-pod", "c"}).ok());
  EXPECT_TRUE(b->reconcile({{"no-such-pod", "c"}}).ok());
}

TEST(HygonLimiter, AVdevThatCannotBeDestroyedStaysRecordedForTheNextTry) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params("hydmi"));
  ASSERT_TRUE(b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 1000, 20)})).ok());
  node.writeConfig("fail dmiDestroySingleVDevice 9\n");
  auto failed = b->release({"pod-app", "app"});
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.error().message, HasSubstr("dmiDestroySingleVDevice(0) failed: status 9"));
  EXPECT_EQ(b->holdings()->size(), 1u);
  EXPECT_EQ(node.hydmiVdevCount(), 1);
  node.writeConfig();
  ASSERT_TRUE(b->reconcile({}).ok());
  EXPECT_TRUE(b->holdings()->empty());
  EXPECT_EQ(node.hydmiVdevCount(), 0);
}

TEST(HygonLimiter, ContainersAllocatedFromManyThreadsNeverShareACu) {
  FakeNode node({{.serial = "A", .cus = 60}, {.serial = "B", .cus = 60}});
  auto b = agent(node.params());
  std::vector<ContainerGrant> grants;
  for (int i = 0; i < 32; ++i)
    grants.push_back(grant(node, "t" + std::to_string(i), {slice(i % 2 ? "DCU-B" : "DCU-A", i % 2, 100, 5)}));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 32; i += 4)
        if (!b->containerSpec(grants[static_cast<size_t>(i)]).ok()) ++failures;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto held = b->holdings();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->size(), 32u);
  expectDisjointPerDevice(*held);
}

TEST(HygonLimiter, ADcuThatRecoveredSinceDiscoveryCanBeGranted) {
  FakeNode node({{.serial = "A"}, {.serial = "B", .lost = true}});
  auto b = agent(node.params());
  node.dcus()[1].lost = false;
  node.writeConfig();
  auto spec = b->containerSpec(grant(node, "both", {slice("DCU-A", 0, 16368, 100), slice("DCU-B", 1, 16368, 100)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_THAT(spec->devices, ::testing::Contains(DeviceNode{(node.dev() / "dri/card0").string(), "/dev/dri/card0", "rwm"}));
  EXPECT_THAT(spec->devices, ::testing::Contains(DeviceNode{(node.dev() / "dri/card1").string(), "/dev/dri/card1", "rwm"}));
}

TEST(HygonLimiter, NoneEnforcementOnlyPassesDeviceNodes) {
  FakeNode node({{.serial = "A"}});
  auto b = agent(node.params("none"));
  auto spec = b->containerSpec(grant(node, "app", {slice("DCU-A", 0, 2000, 20)}));
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_TRUE(spec->mounts.empty());
  EXPECT_EQ(spec->devices.size(), 4u);
  EXPECT_TRUE(filesIn(node.copyDir()).empty());
  EXPECT_EQ(b->holdings()->size(), 1u);  // still booked, so a whole-DCU grant is refused
}

}  // namespace
}  // namespace vgpu::hygon
