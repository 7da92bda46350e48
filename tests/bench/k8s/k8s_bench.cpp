// Kubernetes client figures against the apiserver double on loopback:
//  - an informer's initial list of 5,000 nodes and 50,000 pods (paged, 500 per page);
//  - sustained annotation patches per second, from 1 and 8 threads, HTTP and HTTPS.

#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <string>

#include <boost/json.hpp>

#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/informer.h"

namespace {

namespace json = boost::json;
using namespace vgpu;

json::object realisticNode(int i) {
  std::string name = "gpu-node-" + std::to_string(i);
  std::string devices;
  for (int d = 0; d < 8; ++d) {
    devices += "GPU-" + std::to_string(i) + "-" + std::to_string(d) +
               ",10,81920,100,NVIDIA-H100-80GB,0,true:";
  }
  return json::object{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.present", "true"}, {"topology.kubernetes.io/zone", "zone-" + std::to_string(i % 3)}}},
        {"annotations", {{"vgpu.io/node-nvidia-register", devices}, {"vgpu.io/node-handshake", "Reported 2026-12-02T09:00:00Z"}}}}},
      {"spec", {{"podCIDR", "10.244." + std::to_string(i % 250) + ".0/24"}}},
      {"status",
       {{"capacity", {{"cpu", "64"}, {"memory", "527958952Ki"}, {"nvidia.com/gpu", "80"}, {"pods", "110"}}},
        {"allocatable", {{"cpu", "63"}, {"memory", "527856552Ki"}, {"nvidia.com/gpu", "80"}, {"pods", "110"}}},
        {"conditions", json::array{json::object{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
        {"nodeInfo", {{"kubeletVersion", "v1.34.0"}, {"containerRuntimeVersion", "containerd://1.7.20"}}}}}};
}

json::object realisticPod(int i) {
  std::string name = "train-" + std::to_string(i);
  return json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "team-" + std::to_string(i % 20)},
        {"labels", {{"app", "trainer"}, {"pod-template-hash", "7d9f8c6b5"}}},
        {"annotations", {{"vgpu.io/vgpu-devices-allocated", "GPU-" + std::to_string(i % 5000) + "-3,NVIDIA,3000,30:;"},
                         {"vgpu.io/bind-phase", "success"}}}}},
      {"spec",
       {{"nodeName", "gpu-node-" + std::to_string(i % 5000)},
        {"schedulerName", "vgpu-scheduler"},
        {"containers",
         json::array{json::object{
             {"name", "main"},
             {"image", "registry.example/ml/trainer:2.4.1"},
             {"args", json::array{"--epochs", "10", "--batch", "64"}},
             {"env", json::array{json::object{{"name", "NCCL_DEBUG"}, {"value", "WARN"}}}},
             {"resources", {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}}},
                            {"requests", {{"cpu", "2"}, {"memory", "8Gi"}}}}},
             {"volumeMounts", json::array{json::object{{"name", "data"}, {"mountPath", "/data"}}}}}}},
        {"volumes", json::array{json::object{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "data-" + name}}}}}}}},
      {"status",
       {{"phase", "Running"},
        {"podIP", "10.244." + std::to_string(i % 250) + "." + std::to_string(i % 200)},
        {"conditions", json::array{json::object{{"type", "PodScheduled"}, {"status", "True"}},
                                   json::object{{"type", "Ready"}, {"status", "True"}}}}}}};
}

struct Cluster {
  std::unique_ptr<fakes::FakeApiServer> server;
  std::unique_ptr<k8s::Client> client;
};

Cluster makeCluster(bool tls, int nodes, int pods, double qps = k8s::ClientOptions{}.qps) {
  fakes::FakeApiServerOptions o;
  o.tls = tls;
  o.token = "bench";
  Cluster c{fakes::FakeApiServer::start(o).value(), nullptr};
  for (int i = 0; i < nodes; ++i) (void)c.server->create("nodes", realisticNode(i));
  for (int i = 0; i < pods; ++i) (void)c.server->create("pods", realisticPod(i));
  k8s::ClientConfig cfg;
  cfg.server = c.server->url();
  cfg.caPem = c.server->caPem();
  cfg.bearerToken = "bench";
  k8s::ClientOptions options;
  options.qps = qps;
  c.client = k8s::Client::create(cfg, options).value();
  return c;
}

void listIntoCache(benchmark::State& state, const k8s::ResourceType& type, Cluster& c) {
  std::size_t items = 0;
  for (auto _ : state) {
    k8s::InformerOptions o;
    o.pageSize = 500;
    k8s::Informer informer(*c.client, type, o, {});
    informer.start();
    if (!informer.waitForSync(std::chrono::minutes(5))) state.SkipWithError("no sync");
    items = informer.size();
    informer.stop();
  }
  state.counters["objects"] = static_cast<double>(items);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * items));
}

void BM_InformerListNodes(benchmark::State& state) {
  static Cluster c = makeCluster(false, 5000, 0);
  listIntoCache(state, k8s::kNodes, c);
}
BENCHMARK(BM_InformerListNodes)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

void BM_InformerListPods(benchmark::State& state) {
  static Cluster c = makeCluster(false, 0, 50000);
  listIntoCache(state, k8s::kPods, c);
}
BENCHMARK(BM_InformerListPods)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Args: {0 = HTTP / 1 = HTTPS, 0 = default rate limit (1000 QPS) / 1 = unlimited}.
// Each thread patches its own pod's annotations.
void BM_PatchPodAnnotations(benchmark::State& state) {
  static Cluster clusters[2][2] = {{makeCluster(false, 0, 64), makeCluster(false, 0, 64, 0)},
                                   {makeCluster(true, 0, 64), makeCluster(true, 0, 64, 0)}};
  Cluster& c = clusters[state.range(0)][state.range(1)];
  std::int64_t n = 0;
  for (auto _ : state) {
    k8s::MetadataPatch p;
    p.annotations["vgpu.io/heartbeat"] = std::to_string(n++);
    auto r = c.client->patchMetadata(k8s::kPods, "team-" + std::to_string(state.thread_index() % 20),
                                     "train-" + std::to_string(state.thread_index()), p);
    if (!r) state.SkipWithError(r.error().describe().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PatchPodAnnotations)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
