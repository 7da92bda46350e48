// The whole flow with the real daemons: a Pod manifest goes through the admission webhook,
// kube-scheduler's extender calls and the kubelet's Allocate, then its CUDA program runs
// with what Allocate returned, libvgpu.so preloaded, against the fake driver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <boost/json.hpp>

#include "e2e_harness.h"
#include "vgpu/annotations.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::e2e {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;


std::string podYaml(const std::string& name, const std::string& limits) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\nspec:\n  containers:\n  - name: main\n    image: cuda-app\n    resources:\n      limits:\n" + limits;
}

/// Per container, the devices and the slices of them: what the engine decides (the slot
/// is chosen at bind).
void expectSamePlacement(const Assignment& actual, const Assignment& predicted) {
  ASSERT_EQ(actual.containers.size(), predicted.containers.size());
  for (size_t c = 0; c < actual.containers.size(); ++c) {
    const auto& a = actual.containers[c].devices;
    const auto& p = predicted.containers[c].devices;
    ASSERT_EQ(a.size(), p.size()) << "container " << actual.containers[c].name;
    for (size_t d = 0; d < a.size(); ++d) {
      EXPECT_EQ(a[d].backend, p[d].backend);
      EXPECT_EQ(a[d].deviceId, p[d].deviceId);
      EXPECT_EQ(a[d].memoryMiB, p[d].memoryMiB);
      EXPECT_EQ(a[d].compute, p[d].compute);
    }
  }
}

/// The virtual device IDs the assignment names for one container (DESIGN.md 6a).
std::vector<std::string> virtualIds(const Assignment& a, const std::string& container) {
  std::vector<std::string> ids;
  for (const auto& g : a.container(container)->devices) ids.push_back(formatVirtualDeviceId(g.deviceId, g.slot));
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// Creates the pod, asks the placement engine where it should go, then lets the cluster
/// place and admit it.
struct PredictedRun {
  Prediction prediction;
  Result<PodRun> run = makeError("not run");
};

PredictedRun createPredictAndRun(Cluster& c, const std::string& yaml) {
  PredictedRun out;
  auto created = c.createPod(yaml);
  EXPECT_TRUE(created.ok()) << created.error().message;
  if (!created.ok()) return out;
  auto predicted = c.predict(*created);
  EXPECT_TRUE(predicted.ok()) << predicted.error().message;
  if (predicted.ok()) out.prediction = *predicted;
  const std::string name(created->at("metadata").at("name").as_string());
  auto scheduled = c.schedulePod("default", name);
  if (!scheduled.ok() || !scheduled->bound()) {
    out.run = makeError(scheduled.ok() ? scheduled->error : scheduled.error().message);
    return out;
  }
  auto admitted = c.admitPod("default", name);
  if (!admitted.ok()) {
    out.run = std::move(admitted).error();
    return out;
  }
  PodRun run;
  run.pod = *c.pod("default", name);
  run.schedule = *scheduled;
  run.admission = *admitted;
  out.run = std::move(run);
  return out;
}

const std::string kGpuA0 = "GPU-a0000000-0000-4000-8000-000000000000";
const std::string kGpuA1 = "GPU-a1000000-0000-4000-8000-000000000000";
const std::string kGpuB0 = "GPU-b0000000-0000-4000-8000-000000000000";

TEST(E2EHappyPath, PodRunsOnThePredictedGpuWithExactlyItsMemoryAndFreesItForTheNextPod) {
  Cluster cluster;
  ASSERT_TRUE(cluster
                  .start({{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}, {.uuid = kGpuA1}}},
                          {.name = "gpu-b", .gpus = {{.uuid = kGpuB0, .memoryMiB = 16384}}}})
                  .ok());

  // 30000 MiB fits only the 40 GiB GPUs of gpu-a.
  constexpr std::uint64_t kLimitMiB = 30000;
  auto train = createPredictAndRun(
      cluster,
      podYaml("train",
              "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 30000\n        nvidia.com/gpucores: 30\n"));
  ASSERT_TRUE(train.run.ok()) << train.run.error().message << "\nscheduler log:\n" << cluster.schedulerLog();
  const PodRun& run = *train.run;
  EXPECT_EQ(run.schedule.node, train.prediction.node);
  EXPECT_EQ(train.prediction.node, "gpu-a") << "gpu-b: " << train.prediction.refusals["gpu-b"];
  ASSERT_TRUE(run.schedule.failedNodes.contains("gpu-b"));
  // kube-scheduler gets the category (issue 27 item 8); the numbers are vgpu-sim's and the
  // pod's FilteringFailed event's.
  EXPECT_EQ(run.schedule.failedNodes.at("gpu-b"), "vgpu: devices too small for the request (CardInsufficientMemory)");
  EXPECT_THAT(train.prediction.refusals["gpu-b"], HasSubstr("30000"));
  auto assigned = cluster.assignmentOf("default", "train");
  ASSERT_TRUE(assigned);
  expectSamePlacement(*assigned, train.prediction.assignment);

  // The kubelet was steered to exactly the assigned virtual devices, and the agent says so.
  ASSERT_EQ(run.admission.allocations.size(), 1u);
  auto got = run.admission.allocations[0].deviceIds;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, virtualIds(*assigned, "main"));
  EXPECT_TRUE(Cluster::waitUntil(
      [&] { return cluster.annotationOf("default", "train", std::string(keys::kPodBindPhase)) == "success"; }));

  // The limits reach the container twice: in its environment and in a read-only file
  // that wins over it.
  const ContainerSpec spec = run.specOf("main");
  EXPECT_EQ(spec.env.at("NVIDIA_VISIBLE_DEVICES"), assigned->containers[0].devices[0].deviceId);
  EXPECT_EQ(spec.env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_THAT(spec.mounts,
              ::testing::Contains(::testing::AllOf(::testing::Field(&Mount::containerPath, "/etc/vgpu/limits.env"),
                                                   ::testing::Field(&Mount::readOnly, true))));

  // "Start the container": the program gets its limit, not a byte more.
  const std::string gpu = assigned->containers[0].devices[0].deviceId;
  const std::uint64_t limit = kLimitMiB * kMiB;
  auto app = cluster.startContainer(run, "main", VGPU_E2E_CUDA_APP, {std::to_string(limit)});
  ASSERT_TRUE(app.ok()) << app.error().message;
  auto report = readReport(**app);
  ASSERT_EQ(report["info"], "0") << "the program's stderr:\n" << (*app)->log();
  EXPECT_EQ(report["total"], std::to_string(limit));
  EXPECT_EQ(report["free"], std::to_string(limit));
  EXPECT_EQ(report["alloc"], "0");
  EXPECT_EQ(report["extra"], std::to_string(kCudaOutOfMemory));

  // The agent reads the program's usage from the shared region in the pod's host folder.
  const std::string series =
      "vgpu_container_memory_used_bytes{namespace=\"default\",pod=\"train\",container=\"main\","
      "device_uuid=\"" +
      gpu + "\"";
  std::string metrics;
  EXPECT_TRUE(Cluster::waitUntil([&] {
    metrics = cluster.agentMetrics("gpu-a");
    return Cluster::metricValue(metrics, series) == static_cast<double>(limit);
  })) << metrics;
  (*app)->closeStdin();
  auto status = (*app)->waitExit(kWait);
  ASSERT_TRUE(status);
  EXPECT_EQ(exitCodeOf(*status), 0);

  // A second pod follows the engine too: binpack keeps it on the busier node, spread puts
  // it on the idle GPU there.
  auto infer =
      createPredictAndRun(cluster, podYaml("infer", "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 5000\n"));
  ASSERT_TRUE(infer.run.ok()) << infer.run.error().message;
  EXPECT_EQ(infer.run->schedule.node, infer.prediction.node);
  auto inferAssigned = cluster.assignmentOf("default", "infer");
  ASSERT_TRUE(inferAssigned);
  expectSamePlacement(*inferAssigned, infer.prediction.assignment);
  EXPECT_NE(inferAssigned->containers[0].devices[0].deviceId, gpu);

  // Two 20000 MiB GPUs on one node: gpu-a's first GPU is mostly taken, gpu-b has one GPU.
  const std::string bigLimits = "        nvidia.com/gpu: 2\n        nvidia.com/gpumem: 20000\n";
  auto big = cluster.createPod(podYaml("big", bigLimits));
  ASSERT_TRUE(big.ok()) << big.error().message;
  auto pending = cluster.schedulePod("default", "big");
  ASSERT_TRUE(pending.ok()) << pending.error().message;
  EXPECT_FALSE(pending->bound());
  auto nowhere = cluster.predict(*big);
  ASSERT_TRUE(nowhere.ok()) << nowhere.error().message;
  EXPECT_EQ(nowhere->node, "");

  // Deleting the pod gives the memory back: kube-scheduler's retry now places it.
  ASSERT_TRUE(cluster.deletePod("default", "train").ok());
  std::optional<ScheduleOutcome> placed;
  ASSERT_TRUE(Cluster::waitUntil([&] {
    auto again = cluster.schedulePod("default", "big");
    if (again.ok() && again->bound()) placed = *again;
    return placed.has_value();
  })) << pending->error;
  auto bigPrediction = cluster.predict(*big);
  ASSERT_TRUE(bigPrediction.ok());
  EXPECT_EQ(placed->node, "gpu-a");
  auto bigAssigned = cluster.assignmentOf("default", "big");
  ASSERT_TRUE(bigAssigned);
  expectSamePlacement(*bigAssigned, bigPrediction->assignment);
  auto admitted = cluster.admitPod("default", "big");
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_TRUE(admitted->admitted) << admitted->error;
}

/// A container limit as the pod stores it ("100", whether written as a string or a number).
std::string limitOf(const boost::json::object& pod, const std::string& resource) {
  const auto& limits = pod.at("spec").at("containers").at(0).at("resources").at("limits").as_object();
  const auto* v = limits.if_contains(resource);
  if (v == nullptr) return "";
  return v->is_string() ? std::string(v->as_string()) : boost::json::serialize(*v);
}

TEST(E2EAdmission, WebhookClaimsSharePodsAddsDefaultsAndRefusesWhatCannotWork) {
  Cluster cluster;
  ASSERT_TRUE(cluster.start({{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}}).ok());

  // A bare device count means the whole card: the webhook writes the cores down.
  auto whole = cluster.createPod(podYaml("whole", "        nvidia.com/gpu: 1\n"));
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(whole->at("spec").at("schedulerName").as_string(), kSchedulerName);
  EXPECT_EQ(limitOf(*whole, "nvidia.com/gpucores"), "100");

  // What the backend cannot honour never reaches the store.
  auto greedy = cluster.createPod(podYaml("greedy", "        nvidia.com/gpu: 1\n        nvidia.com/gpucores: 150\n"));
  ASSERT_FALSE(greedy.ok());
  EXPECT_THAT(greedy.error().message, HasSubstr("nvidia.com/gpucores"));
  EXPECT_FALSE(cluster.pod("default", "greedy"));

  // Pods without shares are not ours: untouched, left to the default scheduler.
  auto plain = cluster.createPod(podYaml("plain", "        cpu: 1\n"));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_FALSE(plain->at("spec").as_object().contains("schedulerName"));
}

#if defined(VGPU_E2E_FAKE_CNDEV) && defined(VGPU_E2E_FAKE_ROCM_DIR)
TEST(E2EMixedCluster, EachVendorsPodLandsOnItsNodeAndAllocatesWithThatBackendsSpec) {
  Cluster cluster;
  ASSERT_TRUE(cluster
                  .start({{.name = "gpu-node", .gpus = {{.uuid = kGpuA0}}},
                          {.name = "mlu-node",
                           .mlus = {{.uuid = "0a1b2c3d-0000-4000-8000-000000000000"},
                                    {.uuid = "0a1b2c3d-0000-4000-8000-000000000001"}}},
                          {.name = "dcu-node", .dcus = {{.serial = "S0"}, {.serial = "S1"}}}})
                  .ok());

  // MLU: 16 units of 256 MiB and 30% of a card, as an sMLU instance on the mlu node.
  auto mlu = createPredictAndRun(cluster, podYaml("mlu-job",
                                                  "        cambricon.com/vmlu: 1\n"
                                                  "        cambricon.com/mlu.smlu.vmemory: 16\n"
                                                  "        cambricon.com/mlu.smlu.vcore: 30\n"));
  ASSERT_TRUE(mlu.run.ok()) << mlu.run.error().message << "\nmlu-node agent:\n" << cluster.agentLog("mlu-node");
  EXPECT_EQ(mlu.prediction.node, "mlu-node");
  EXPECT_EQ(mlu.run->schedule.node, "mlu-node");
  auto mluAssigned = cluster.assignmentOf("default", "mlu-job");
  ASSERT_TRUE(mluAssigned);
  expectSamePlacement(*mluAssigned, mlu.prediction.assignment);
  const DeviceGrant& card = mluAssigned->containers[0].devices[0];
  EXPECT_EQ(card.memoryMiB, 16u * 256u);
  const ContainerSpec mluSpec = mlu.run->specOf("main");
  EXPECT_TRUE(hasDeviceNode(mluSpec, "/dev/cambricon_dev" + std::to_string(card.deviceIndex)))
      << mluSpec.devices.size();
  EXPECT_TRUE(mluSpec.env.contains("VIRTUAL_DEVICES"));
  auto instances = fakeCndevState(cluster.nodeDir("mlu-node"), "instance");
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_THAT(instances[0], HasSubstr("card=" + std::to_string(card.deviceIndex) + " "));
  EXPECT_THAT(fakeCndevState(cluster.nodeDir("mlu-node"), "profile").at(0), HasSubstr("quota=30 "));

  // DCU: 4000 MiB and 25% of the compute units, as a vDCU configuration file.
  auto dcu = createPredictAndRun(cluster, podYaml("dcu-job",
                                                  "        hygon.com/dcunum: 1\n"
                                                  "        hygon.com/dcumem: 4000\n"
                                                  "        hygon.com/dcucores: 25\n"));
  ASSERT_TRUE(dcu.run.ok()) << dcu.run.error().message << "\ndcu-node agent:\n" << cluster.agentLog("dcu-node");
  EXPECT_EQ(dcu.prediction.node, "dcu-node");
  EXPECT_EQ(dcu.run->schedule.node, "dcu-node");
  auto dcuAssigned = cluster.assignmentOf("default", "dcu-job");
  ASSERT_TRUE(dcuAssigned);
  expectSamePlacement(*dcuAssigned, dcu.prediction.assignment);
  const ContainerSpec dcuSpec = dcu.run->specOf("main");
  EXPECT_TRUE(hasDeviceNode(dcuSpec, "/dev/kfd"));
  const auto dcuIndex = dcuAssigned->containers[0].devices[0].deviceIndex;
  EXPECT_TRUE(hasDeviceNode(dcuSpec, "/dev/dri/card" + std::to_string(dcuIndex)));
  // The vDCU's configuration, written in the Hygon backend's per-pod folder (named as HAMi's
  // dcu-vgpu-device-plugin names them) and mounted read-only where the DCU runtime reads it.
  auto vdev = std::find_if(dcuSpec.mounts.begin(), dcuSpec.mounts.end(),
                           [](const Mount& m) { return m.containerPath == "/etc/vdev/docker"; });
  ASSERT_NE(vdev, dcuSpec.mounts.end());
  EXPECT_TRUE(vdev->readOnly);
  EXPECT_EQ(vdev->hostPath.rfind(cluster.nodeDir("dcu-node") + "/hygon/dcu/", 0), 0u) << vdev->hostPath;
  EXPECT_THAT(readText(fs::path(vdev->hostPath) / "vdev0.conf"), HasSubstr("mem: 4000 MiB"));

  // And the GPU pod goes to the only node with GPUs.
  auto gpu =
      createPredictAndRun(cluster, podYaml("gpu-job", "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 1000\n"));
  ASSERT_TRUE(gpu.run.ok()) << gpu.run.error().message;
  EXPECT_EQ(gpu.prediction.node, "gpu-node");
  EXPECT_EQ(gpu.run->schedule.node, "gpu-node");
  EXPECT_EQ(gpu.run->specOf("main").env.at("NVIDIA_VISIBLE_DEVICES"), kGpuA0);
}
#endif

#ifdef VGPU_E2E_FAKE_DCMI
TEST(E2EAscend, VnpuPodsGetTheirTemplatesSliceAndAWholeChipPodTheOtherChip) {
  Cluster cluster;
  ASSERT_TRUE(cluster
                  .start({{.name = "gpu-node", .gpus = {{.uuid = kGpuA0}}},
                          {.name = "npu-node", .npus = {{.die = "A0"}, {.die = "A1"}}}})
                  .ok());
  const std::string npuDir = cluster.nodeDir("npu-node");
  auto vnpus = [&] {
    std::vector<std::string> lines;
    std::istringstream in(readText(npuDir + "/dcmi.conf.vnpus"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  };

  // 2000 MiB rounds up to the 910B3's smallest template: 5 AI cores, 16 GiB, made at Allocate.
  auto small = createPredictAndRun(cluster, podYaml("npu-small", "        huawei.com/Ascend910B: 1\n"
                                                                 "        huawei.com/Ascend910B-memory: 2000\n"));
  ASSERT_TRUE(small.run.ok()) << small.run.error().message << "\nnpu-node agent:\n" << cluster.agentLog("npu-node");
  EXPECT_EQ(small.prediction.node, "npu-node");
  EXPECT_EQ(small.run->schedule.node, "npu-node");
  auto smallAssigned = cluster.assignmentOf("default", "npu-small");
  ASSERT_TRUE(smallAssigned);
  expectSamePlacement(*smallAssigned, small.prediction.assignment);
  const DeviceGrant& slice = smallAssigned->containers[0].devices[0];
  EXPECT_EQ(slice.placement, "vir05_1c_16g");
  EXPECT_EQ(slice.memoryMiB, 16384u);
  const ContainerSpec smallSpec = small.run->specOf("main");
  EXPECT_EQ(smallSpec.env.at("ASCEND_VISIBLE_DEVICES"), "100");
  EXPECT_EQ(smallSpec.env.at("ASCEND_RUNTIME_OPTIONS"), "VIRTUAL");
  EXPECT_TRUE(hasDeviceNode(smallSpec, "/dev/vdavinci100"));
  EXPECT_TRUE(hasDeviceNode(smallSpec, "/dev/davinci_manager"));
  EXPECT_EQ(vnpus(), (std::vector<std::string>{"0 " + std::to_string(slice.deviceIndex) + " 100 vir05_1c_16g 5"}));

  // A bare count is a whole chip: only the chip without a vNPU can take it.
  auto whole = createPredictAndRun(cluster, podYaml("npu-whole", "        huawei.com/Ascend910B: 1\n"));
  ASSERT_TRUE(whole.run.ok()) << whole.run.error().message << "\nnpu-node agent:\n" << cluster.agentLog("npu-node");
  auto wholeAssigned = cluster.assignmentOf("default", "npu-whole");
  ASSERT_TRUE(wholeAssigned);
  const DeviceGrant& chip = wholeAssigned->containers[0].devices[0];
  EXPECT_NE(chip.deviceId, slice.deviceId);
  EXPECT_EQ(chip.placement, "whole");
  const ContainerSpec wholeSpec = whole.run->specOf("main");
  EXPECT_EQ(wholeSpec.env.at("ASCEND_VISIBLE_DEVICES"), std::to_string(chip.deviceIndex));
  EXPECT_FALSE(wholeSpec.env.contains("ASCEND_RUNTIME_OPTIONS"));
  EXPECT_TRUE(hasDeviceNode(wholeSpec, "/dev/davinci" + std::to_string(chip.deviceIndex)));

  // A 10-core template still fits beside the 5-core one; the scheduler counted both.
  auto large = createPredictAndRun(cluster, podYaml("npu-large", "        huawei.com/Ascend910B: 1\n"
                                                                 "        huawei.com/Ascend910B-memory: 20000\n"));
  ASSERT_TRUE(large.run.ok()) << large.run.error().message << "\nnpu-node agent:\n" << cluster.agentLog("npu-node");
  auto largeAssigned = cluster.assignmentOf("default", "npu-large");
  ASSERT_TRUE(largeAssigned);
  EXPECT_EQ(largeAssigned->containers[0].devices[0].deviceId, slice.deviceId);
  EXPECT_EQ(largeAssigned->containers[0].devices[0].placement, "vir10_3c_32g");
  EXPECT_EQ(vnpus().size(), 2u);
}

TEST(E2EAscend, WithHamisFamilyNamesAPodGetsAChipOfItsFamily) {
  Cluster cluster(ClusterOptions{.ascendFamilies = "Ascend910B3,Ascend310P"});
  ASSERT_TRUE(cluster
                  .start({{.name = "npu-node",
                           .npus = {{.die = "A0"}, {.chip = "310P3", .aiCores = 8, .memoryMiB = 24576, .die = "B0"}}}})
                  .ok());
  auto infer = createPredictAndRun(cluster, podYaml("infer-310p", "        huawei.com/Ascend310P: 1\n"
                                                                  "        huawei.com/Ascend310P-memory: 3000\n"));
  ASSERT_TRUE(infer.run.ok()) << infer.run.error().message << "\nnpu-node agent:\n" << cluster.agentLog("npu-node");
  auto assigned = cluster.assignmentOf("default", "infer-310p");
  ASSERT_TRUE(assigned);
  const DeviceGrant& slice = assigned->containers[0].devices[0];
  EXPECT_EQ(slice.deviceIndex, 1);  // the 310P3, not the 910B3 beside it
  EXPECT_EQ(slice.placement, "vir01");
  const ContainerSpec spec = infer.run->specOf("main");
  EXPECT_EQ(spec.env.at("ASCEND_RUNTIME_OPTIONS"), "VIRTUAL");
  EXPECT_TRUE(hasDeviceNode(spec, "/dev/vdavinci100"));
}
#endif

#ifdef VGPU_E2E_FAKE_AMDSMI
// A whole MI300X shared by accounting (the runtime's heap set to the share) and one in QPX
// mode whose partitions are placed one per pod, each with its own render node.
TEST(E2EAmd, ASharePodGetsItsHeapAndBareCountPodsGetOnePartitionEach) {
  Cluster cluster;
  ASSERT_TRUE(cluster
                  .start({{.name = "gpu-node", .gpus = {{.uuid = kGpuA0}}},
                          {.name = "amd-node",
                           .amdGpus = {{.uuid = "AMD-W"}, {.uuid = "AMD-Q", .computePartition = "QPX", .partitions = 4}}}})
                  .ok());
  // 100000 MiB is more than a QPX partition holds (49152): only the whole GPU takes it.
  auto share = createPredictAndRun(cluster, podYaml("amd-share", "        amd.com/gpu: 1\n"
                                                                 "        amd.com/gpumem: 100000\n"));
  ASSERT_TRUE(share.run.ok()) << share.run.error().message << "\namd-node agent:\n" << cluster.agentLog("amd-node");
  EXPECT_EQ(share.prediction.node, "amd-node");
  auto shareAssigned = cluster.assignmentOf("default", "amd-share");
  ASSERT_TRUE(shareAssigned);
  expectSamePlacement(*shareAssigned, share.prediction.assignment);
  EXPECT_EQ(shareAssigned->containers[0].devices[0].deviceId, "AMD-W");
  EXPECT_EQ(shareAssigned->containers[0].devices[0].placement, "");
  const ContainerSpec shareSpec = share.run->specOf("main");
  EXPECT_EQ(shareSpec.env.at("GPU_MAX_HEAP_SIZE"), "50");
  EXPECT_TRUE(hasDeviceNode(shareSpec, "/dev/kfd"));
  EXPECT_TRUE(hasDeviceNode(shareSpec, "/dev/dri/renderD128"));

  // A bare count is a whole device: the shared GPU cannot take it, a free partition can.
  for (const char* name : {"amd-part-0", "amd-part-1"}) {
    auto part = createPredictAndRun(cluster, podYaml(name, "        amd.com/gpu: 1\n"));
    ASSERT_TRUE(part.run.ok()) << part.run.error().message << "\namd-node agent:\n" << cluster.agentLog("amd-node");
    auto assigned = cluster.assignmentOf("default", name);
    ASSERT_TRUE(assigned);
    expectSamePlacement(*assigned, part.prediction.assignment);
    const DeviceGrant& g = assigned->containers[0].devices[0];
    EXPECT_EQ(g.deviceId, "AMD-Q-0");
    const std::string n(1, name[9]);
    EXPECT_EQ(g.placement, "QPX@" + n);
    const ContainerSpec spec = part.run->specOf("main");
    EXPECT_TRUE(hasDeviceNode(spec, "/dev/dri/renderD" + std::to_string(129 + (name[9] - '0'))));
    EXPECT_FALSE(spec.env.contains("GPU_MAX_HEAP_SIZE"));
  }
}
#endif

}  // namespace
}  // namespace vgpu::e2e
