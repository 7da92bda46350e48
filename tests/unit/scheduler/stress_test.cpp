// 1,000 pods scheduled through filter + bind concurrently onto 50 nodes, with a node-agent
// double acknowledging Allocate; then every device is checked against its capacity and
// every pod's annotations against its node.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>

#include "../http/test_http_client.h"
#include "scheduler_harness.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

/// Plays the node agent's part that the scheduler waits for: a pod bound "allocating"
/// becomes "success" (as after the kubelet's Allocate).
class AgentDouble {
 public:
  explicit AgentDouble(k8s::Client& client)
      : client_(client),
        informer_(client, k8s::kPods, {}, {[this](const k8s::ObjectPtr& p) { ack(*p); },
                                           [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { ack(*p); }, nullptr}) {
    informer_.start();
  }
  ~AgentDouble() { informer_.stop(); }

 private:
  void ack(const json::object& pod) {
    if (k8s::annotation(pod, keys::kPodBindPhase) != "allocating") return;
    k8s::MetadataPatch patch;
    patch.annotations[std::string(keys::kPodBindPhase)] = "success";
    (void)client_.patchMetadata(k8s::kPods, k8s::namespaceOf(pod), k8s::name(pod), patch);
  }
  k8s::Client& client_;
  k8s::Informer informer_;
};

TEST(SchedulerStress, ThousandPodsConcurrentlyOnFiftyNodesNeverOverCommit) {
  ServiceOptions options;
  options.http.threads = 16;
  options.extender.bindHoldTimeout = std::chrono::milliseconds(2000);
  SchedulerHarness h(options, NodePolicy::kSpread);
  constexpr int kNodes = 50, kGpus = 4, kPods = 1000, kThreads = 16;
  constexpr std::uint64_t kMemory = 40000;
  std::vector<std::string> nodeNames;
  for (int n = 0; n < kNodes; ++n) {
    nodeNames.push_back("node-" + std::to_string(n));
    h.createNode(nodeJson(nodeNames.back(), gpus(nodeNames.back(), kGpus, kMemory, 10)));
  }
  ASSERT_TRUE(h.awaitNodes(kNodes));
  AgentDouble agent(*h.client);

  // Requests sized so the cluster is nearly full at the end: 1000 pods of 1,000-6,000 MiB
  // (avg 3,500) against 50*4*40,000 = 8,000,000 MiB; cores 0-15% against 20,000%.
  std::mt19937 rng(7);
  std::vector<json::object> pods;
  for (int i = 0; i < kPods; ++i) {
    const int memory = 1000 + static_cast<int>(rng() % 5001);
    const int cores = static_cast<int>(rng() % 16);
    pods.push_back(h.createPod(gpuPod("p-" + std::to_string(i), memory, cores)));
  }

  std::atomic<int> next{0}, placed{0}, unplaced{0}, bindErrors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TestHttpClient http(h.service->port());
      std::mt19937 pick(static_cast<unsigned>(t));
      for (int i = next.fetch_add(1); i < kPods; i = next.fetch_add(1)) {
        bool done = false;
        for (int attempt = 0; attempt < 20 && !done; ++attempt) {
          auto f = http.post("/filter", extenderArgs(pods[i], nodeNames));
          if (f.status != 200) break;
          auto fit = json::parse(f.body).as_object().at("NodeNames").as_array();
          if (fit.empty()) break;
          // Several threads often race for the same node: the bind must sort that out.
          const std::string node(fit[pick() % std::min<size_t>(fit.size(), 3)].as_string());
          auto b = http.post("/bind", bindingArgs(pods[i], node));
          if (b.status == 200 && json::parse(b.body).as_object().at("Error") == "") done = true;
          else bindErrors.fetch_add(1);
        }
        (done ? placed : unplaced).fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(placed.load(), kPods) << unplaced.load() << " not placed, " << bindErrors.load() << " bind errors";

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
  EXPECT_EQ(bound, placed.load());
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
