// Placing one pod over N nodes of 8 devices each, through the real sim backend loaded with
// dlopen: the per-device fit crosses the C ABI exactly as in the scheduler.
#include <benchmark/benchmark.h>

#include <random>

#include "declaring_backend.h"
#include "vgpu/backend_loader.h"
#include "vgpu/placement.h"
#include "vgpu/preemption.h"

namespace vgpu {
namespace {

/// The sim backend (dlopen, the C ABI) answering to NVIDIA's resource names.
std::unique_ptr<Backend> loadSimAsNvidia() {
  BackendParams params;
  params.name = "sim";
  params.resources.count = "nvidia.com/gpu";
  params.resources.memory = "nvidia.com/gpumem";
  params.resources.cores = "nvidia.com/gpucores";
  auto sim = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  if (!sim.ok()) throw std::runtime_error(sim.error().message);
  return std::move(sim).value();
}

struct Cluster {
  BackendSet backends;
  std::vector<NodeState> nodes;
};

/// N nodes of 8 x 80 GiB devices, each device already partly used (fixed seed), so most
/// nodes fit and the engine does its full work on every node. Devices 0-3 and 4-7 are two
/// islands of direct links (4 lanes a pair), the islands joined across the sockets; only the
/// topology policy reads the links.
Cluster& cluster(size_t nodes) {
  static std::map<size_t, std::unique_ptr<Cluster>> cache;
  auto& slot = cache[nodes];
  if (slot) return *slot;
  slot = std::make_unique<Cluster>();
  (void)slot->backends.add(loadSimAsNvidia());
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> shares(0, 6);
  for (size_t n = 0; n < nodes; ++n) {
    std::vector<Device> devices;
    const std::string name = "node-" + std::to_string(n);
    for (int i = 0; i < 8; ++i) {
      Device d;
      d.id = "GPU-" + std::to_string(n) + "-" + std::to_string(i);
      d.index = i;
      d.backend = "sim";
      d.model = i % 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB";
      d.memoryMiB = 81920;
      d.splitCount = 10;
      d.numaNode = i / 4;
      d.health = Health::kHealthy;
      for (int p = 0; p < 8; ++p) {
        if (p == i) continue;
        const LinkClass c = p / 4 == i / 4 ? LinkClass::kDirect : LinkClass::kCrossNuma;
        const std::uint32_t lanes = c == LinkClass::kDirect ? 4 : 0;
        d.links.push_back({"GPU-" + std::to_string(n) + "-" + std::to_string(p), c, lanes, standardLinkRank(c, lanes)});
      }
      devices.push_back(std::move(d));
    }
    NodeState state(name, std::make_shared<const NodeInventory>(std::move(devices), slot->backends));
    for (auto& u : state.usage) {
      const auto k = static_cast<std::uint32_t>(shares(rng));
      u = {k, k * 8000ull, k * 10};
    }
    slot->nodes.push_back(std::move(state));
  }
  return *slot;
}

/// `gpus` GPUs of 10,000 MiB and 20 percent each; the configured device policy unless
/// `devicePolicy` names one.
PreparedPod gpuPod(const BackendSet& backends, std::int64_t gpus = 1, const char* devicePolicy = nullptr) {
  ContainerResources c{"main", false, {{"nvidia.com/gpu", gpus}, {"nvidia.com/gpumem", 10000}, {"nvidia.com/gpucores", 20}}};
  Annotations annotations;
  if (devicePolicy) annotations["vgpu.io/device-scheduler-policy"] = devicePolicy;
  auto request = buildPodRequest(backends, "default", "bench", {c}, annotations);
  return std::move(PreparedPod::prepare(*request, backends)).value();
}

PreparedPod singleGpuPod(const BackendSet& backends) { return gpuPod(backends); }

/// Places `pod` over the whole cluster once per iteration.
void placeEachIteration(benchmark::State& state, const Cluster& c, const PreparedPod& pod) {
  const PlacementEngine engine;
  benchmark::IterationCount placed = 0;
  for (auto _ : state) {
    Placement p = engine.place(pod, c.nodes);
    placed += p.chosen.has_value();
    benchmark::DoNotOptimize(p);
  }
  if (placed != state.iterations()) state.SkipWithError("pod did not fit");
}

void BM_PlaceSingleGpuPod(benchmark::State& state) {
  Cluster& c = cluster(static_cast<size_t>(state.range(0)));
  placeEachIteration(state, c, singleGpuPod(c.backends));
  state.SetComplexityN(state.range(0));
  state.counters["devices"] = static_cast<double>(state.range(0) * 8);
}
BENCHMARK(BM_PlaceSingleGpuPod)->Arg(100)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond)->Complexity(benchmark::oN);

/// A pod of range(1) GPUs over 5,000 nodes, device policy spread (range(2) = 0) or topology
/// (1): the difference is the topology policy's cost per pod (docs/placement.md).
void BM_PlaceMultiGpuPod(benchmark::State& state) {
  Cluster& c = cluster(5000);
  placeEachIteration(state, c, gpuPod(c.backends, state.range(1), state.range(2) ? "topology" : "spread"));
}
BENCHMARK(BM_PlaceMultiGpuPod)
    ->ArgNames({"nodes", "gpus", "topology"})
    ->ArgsProduct({{5000}, {1, 2, 4, 8}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

/// Evaluation alone (what the extender's filter does per node), without the assignment.
void BM_EvaluateNode(benchmark::State& state) {
  Cluster& c = cluster(1000);
  const PreparedPod pod = singleGpuPod(c.backends);
  const PlacementEngine engine;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(engine.evaluate(pod, c.nodes[i++ % c.nodes.size()]));
  }
}
BENCHMARK(BM_EvaluateNode)->Unit(benchmark::kNanosecond);

/// What /filter asks the engine on issue 19's loaded cluster: 5,000 nodes of 8 alike 80 GiB
/// GPUs with 50,000 pods of 8,000 MiB and 10 percent placed (round-robin over the nodes,
/// then over each node's devices: two devices of each node hold two pods, six hold one),
/// each node checked once per iteration for a pod of 10,000 MiB and 20 percent (fits:1,
/// every node fits) or 100,000 MiB (fits:0, no device can ever take it). declared:0 is the
/// per-device path (the backend declares that fit reads everything, as one without the ABI
/// 1.5 fit_reads slot); declared:1 the sim's own declaration. Both through the same
/// counting wrapper, so the difference is the shortcut alone.
void BM_CheckLoadedCluster(benchmark::State& state) {
  constexpr int kNodes = 5000, kPods = 50000;
  const bool fits = state.range(0) != 0;
  auto sim = loadSimAsNvidia();
  const std::uint32_t reads = state.range(1) ? sim->allocator().fitReads() : VGPU_FIT_READS_ALL;
  auto declaring = std::make_unique<testing::DeclaringBackend>(std::move(sim), reads);
  const testing::DeclaringBackend& backend = *declaring;
  BackendSet backends;
  (void)backends.add(std::move(declaring));
  std::vector<NodeState> nodes;
  for (int n = 0; n < kNodes; ++n) {
    std::vector<Device> devices;
    for (int i = 0; i < 8; ++i) {
      Device d;
      d.id = "GPU-" + std::to_string(n) + "-" + std::to_string(i);
      d.index = i;
      d.backend = "sim";
      d.model = "NVIDIA A100-SXM4-80GB";
      d.memoryMiB = 81920;
      d.splitCount = 10;
      d.numaNode = i / 4;
      d.health = Health::kHealthy;
      devices.push_back(std::move(d));
    }
    nodes.emplace_back("node-" + std::to_string(n), std::make_shared<const NodeInventory>(std::move(devices), backends));
  }
  for (int p = 0; p < kPods; ++p) nodes[static_cast<size_t>(p % kNodes)].usage[static_cast<size_t>(p / kNodes % 8)] += {1, 8000, 10};
  ContainerResources c{"main", false, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", fits ? 10000 : 100000}, {"nvidia.com/gpucores", 20}}};
  auto request = buildPodRequest(backends, "default", "bench", {c}, {});
  const PreparedPod pod = std::move(PreparedPod::prepare(*request, backends)).value();
  const PlacementEngine engine;
  const long callsBefore = backend.fitCalls;
  std::size_t fitting = 0;
  for (auto _ : state) {
    for (const NodeState& node : nodes) fitting += engine.check(pod, node).fits;
  }
  if (fitting != (fits ? static_cast<std::size_t>(kNodes) * state.iterations() : 0)) state.SkipWithError("unexpected fits");
  state.counters["fit_calls"] = static_cast<double>(backend.fitCalls - callsBefore) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_CheckLoadedCluster)
    ->ArgNames({"fits", "declared"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

/// The preempt verb's work per candidate node: 8 devices, each full of `pods per device` x
/// (100 / that) % pods of a lower priority, one pod asking 50 % of a device.
void BM_ChooseVictims(benchmark::State& state) {
  Cluster& c = cluster(1);
  const int perDevice = static_cast<int>(state.range(0));
  const std::uint32_t percent = static_cast<std::uint32_t>(100 / perDevice);
  NodeState node(c.nodes[0].name, c.nodes[0].inventory);  // empty usage
  std::vector<VictimCandidate> pods;
  for (int d = 0; d < 8; ++d)
    for (int i = 0; i < perDevice; ++i) {
      VictimCandidate v;
      v.uid = v.key = "p-" + std::to_string(d) + "-" + std::to_string(i);
      v.priority = i;
      v.assignment.node = node.name;
      v.assignment.containers.push_back(
          {"main", false, {{"sim", "GPU-0-" + std::to_string(d), d, 81920ull * percent / 100, percent, -1, -1}}});
      (void)node.add(v.assignment);
      pods.push_back(std::move(v));
    }
  ContainerResources half{"main", false, {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 40960}, {"nvidia.com/gpucores", 50}}};
  auto request = buildPodRequest(c.backends, "default", "urgent", {half}, {});
  const PreparedPod pod = std::move(PreparedPod::prepare(*request, c.backends)).value();
  const PlacementEngine engine;
  for (auto _ : state) {
    auto choice = chooseVictims(engine, pod, 1000, node, pods);
    if (!choice.ok() || choice->victims.empty()) state.SkipWithError("no victims");
    benchmark::DoNotOptimize(choice);
  }
  state.counters["pods"] = static_cast<double>(pods.size());
}
BENCHMARK(BM_ChooseVictims)->Arg(4)->Arg(10)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vgpu

BENCHMARK_MAIN();
