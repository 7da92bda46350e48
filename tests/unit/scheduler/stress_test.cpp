// 1,000 pods scheduled through filter + bind concurrently onto 50 nodes, with a node-agent
// double acknowledging Allocate; then every device is checked against its capacity and
// every pod's annotations against its node.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "cluster_builder.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

TEST(SchedulerStress, ThousandPodsConcurrentlyOnFiftyNodesNeverOverCommit) {
  ServiceOptions options;
  options.http.threads = 16;
  options.extender.bindHoldTimeout = std::chrono::milliseconds(2000);
  SchedulerHarness h(options, NodePolicy::kSpread);
  constexpr int kNodes = 50, kGpus = 4, kPods = 1000, kThreads = 16;
  constexpr std::uint64_t kMemory = 40000;
  const std::vector<std::string> nodeNames = addNodes(h, kNodes, kGpus, kMemory, 10);
  AgentDouble agent(h.api->url());

  // Requests sized so the cluster is nearly full at the end: 1000 pods of 1,000-6,000 MiB
  // (avg 3,500) against 50*4*40,000 = 8,000,000 MiB; cores 0-15% against 20,000%.
  std::mt19937 rng(7);
  std::vector<json::object> pods;
  for (int i = 0; i < kPods; ++i) {
    const int memory = 1000 + static_cast<int>(rng() % 5001);
    const int cores = static_cast<int>(rng() % 16);
    pods.push_back(h.createPod(gpuPod("p-" + std::to_string(i), memory, cores)));
  }

  // Several clients often race for the same node (each picks among the first 3): the bind
  // must sort that out.
  const ScheduleOutcome out = scheduleAll(h.service->extenderPort(), pods, nodeNames, {kThreads, 20, 3});
  EXPECT_EQ(out.placed, kPods) << out.unplaced << " not placed, " << out.bindErrors << " bind errors";

  // Let the informer catch up, then check what the apiserver holds.
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().reservations == 0; }, std::chrono::seconds(30)));
  struct Use {
    std::uint64_t memory = 0;
    std::uint32_t compute = 0, shares = 0;
    std::set<int> slots;
  };
  std::map<std::string, Use> perDevice;  // node/device
  int bound = 0;
  for (const auto& pod : h.api->list("pods")) {
    const std::string node(k8s::nodeName(pod));
    if (node.empty()) continue;
    ++bound;
    auto text = k8s::annotation(pod, keys::kPodAssignment);
    ASSERT_TRUE(text) << k8s::name(pod);
    auto a = decodeAssignment(*text);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->node, node) << k8s::name(pod);
    for (const auto& c : a->containers) {
      for (const auto& g : c.devices) {
        EXPECT_EQ(g.deviceId.rfind("GPU-" + node + "-", 0), 0u) << k8s::name(pod) << " got " << g.deviceId << " on " << node;
        Use& u = perDevice[node + "/" + g.deviceId];
        u.memory += g.memoryMiB;
        u.compute += g.compute;
        ++u.shares;
        EXPECT_TRUE(u.slots.insert(g.slot).second) << "slot " << g.slot << " of " << g.deviceId << " given twice";
        EXPECT_GE(g.slot, 0);
        EXPECT_LT(g.slot, 10);
      }
    }
  }
  EXPECT_EQ(bound, out.placed);
  for (const auto& [device, u] : perDevice) {
    EXPECT_LE(u.memory, kMemory) << device;
    EXPECT_LE(u.compute, 100u) << device;
    EXPECT_LE(u.shares, 10u) << device;
    // The cache agrees with the annotations.
    const auto slash = device.find('/');
    auto cached = h.service->cache().deviceUsage(device.substr(0, slash), device.substr(slash + 1));
    ASSERT_TRUE(cached);
    EXPECT_EQ(cached->memoryMiB, u.memory) << device;
    EXPECT_EQ(cached->shares, u.shares) << device;
  }
}

}  // namespace
}  // namespace vgpu::scheduler
