// vgpu-scheduler's memory with a large cluster in its informers (issue 19, item 3): 5,000
// nodes x 8 GPUs (inventory and heartbeat annotations as the node agent writes them) and
// 50,000 placed pods as the apiserver sends them (managedFields, kubectl's last-applied
// copy, env, volumes, probes, conditions, statuses), served by the apiserver double in a
// process of its own. Each measurement runs in a fresh process of this program:
//   whole    - node and pod informers without a transform feeding a ClusterCache (as
//              vgpu-scheduler did before vgpu/k8s/trim.h)
//   trimmed  - the same with trimNode/trimPod
//   informer - the two trimmed informers alone, without the cache
//   service  - SchedulerService, as vgpu-scheduler's main starts it (allocator tuned; its pod
//              informer's store keeps bound pods as stubs, k8s::podStub)
// and reports VmRSS once both caches have synced, and VmHWM (the peak, during the list).
// Each mode runs against the double serving streaming lists (watch with sendInitialEvents,
// kube-apiserver's default), then `informer` and `service` again with the double's WatchList
// gate off (--no-watch-list), where the informers fall back to lists.
// Run: bin/vgpu_scheduler_memory_bench [nodes pods]; figures in docs/kubernetes-client.md.
// One measurement alone: bin/vgpu_scheduler_memory_bench --child MODE URL|KUBECONFIG.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/json/serialize.hpp>

#include "cluster_cache.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/trim.h"

namespace vgpu {
namespace {

using namespace vgpu::testing;

long statusKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return -1;
}

/// What field managers and kubectl leave on a Job's pod: the bulk that nothing of ours reads.
json::object bulkyPod(int i, const std::string& node, int gpu) {
  const std::string name = "job-" + std::to_string(i / 4) + "-worker-" + std::to_string(i % 4);
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", false, {{"sim", "GPU-" + node + "-" + std::to_string(gpu), gpu, 8000, 10, 0}}});
  json::array env;
  for (int e = 0; e < 20; ++e)
    env.push_back(json::object{{"name", "TRAINING_SETTING_" + std::to_string(e)}, {"value", "value-" + std::to_string(e * 7919)}});
  json::object limits{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "8000"}, {"nvidia.com/gpucores", "10"},
                      {"cpu", "4"}, {"memory", "16Gi"}};
  json::object container{
      {"name", "main"},
      {"image", "registry.example.com/ml/trainer:2026.11.3"},
      {"command", json::array{"python", "-m", "trainer"}},
      {"args", json::array{"--epochs=90", "--batch-size=256", "--data=/data/imagenet"}},
      {"env", env},
      {"resources", json::object{{"limits", limits}, {"requests", limits}}},
      {"volumeMounts", json::array{json::object{{"name", "data"}, {"mountPath", "/data"}, {"readOnly", true}},
                                   json::object{{"name", "kube-api-access-abcde"}, {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}, {"readOnly", true}}}},
      {"livenessProbe", json::object{{"httpGet", json::object{{"path", "/healthz"}, {"port", 8080}}}, {"periodSeconds", 10}}},
      {"terminationMessagePath", "/dev/termination-log"},
      {"terminationMessagePolicy", "File"},
      {"imagePullPolicy", "IfNotPresent"}};
  json::object projected{{"sources", json::array{
      json::object{{"serviceAccountToken", json::object{{"expirationSeconds", 3607}, {"path", "token"}}}},
      json::object{{"configMap", json::object{{"name", "kube-root-ca.crt"},
                                              {"items", json::array{json::object{{"key", "ca.crt"}, {"path", "ca.crt"}}}}}}}}}};
  json::array volumes{json::object{{"name", "data"}, {"persistentVolumeClaim", json::object{{"claimName", "imagenet"}}}},
                      json::object{{"name", "kube-api-access-abcde"}, {"projected", projected}}};
  json::object spec{
      {"containers", json::array{container}},
      {"nodeName", node},
      {"schedulerName", "vgpu-scheduler"},
      {"restartPolicy", "Never"},
      {"serviceAccountName", "default"},
      {"priority", 0},
      {"dnsPolicy", "ClusterFirst"},
      {"enableServiceLinks", true},
      {"tolerations", json::array{json::object{{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}},
                                  json::object{{"key", "node.kubernetes.io/unreachable"}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}}}},
      {"volumes", volumes}};
  json::object lastApplied{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", json::object{{"name", name}, {"namespace", "ml"}}}, {"spec", spec}};
  json::object managed{{"f:metadata", json::object{{"f:annotations", json::object{{".", json::object{}}, {"f:vgpu.io/assignment", json::object{}}}}}},
                       {"f:spec", json::object{{"f:containers", json::object{{"k:{\"name\":\"main\"}", json::object{{".", json::object{}}, {"f:env", json::object{}}, {"f:image", json::object{}}, {"f:resources", json::object{{"f:limits", json::object{}}}}}}}}}},
                       {"f:status", json::object{{"f:conditions", json::object{}}, {"f:containerStatuses", json::object{}}, {"f:phase", json::object{}}, {"f:podIP", json::object{}}}}};
  json::array managedFields;
  for (const char* m : {"kube-controller-manager", "kubelet", "vgpu-scheduler", "vgpu-device-plugin"})
    managedFields.push_back(json::object{{"manager", m}, {"operation", "Update"}, {"apiVersion", "v1"},
                                         {"time", "2026-11-30T10:00:00Z"}, {"fieldsType", "FieldsV1"}, {"fieldsV1", managed}});
  json::array conditions;
  for (const char* c : {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})
    conditions.push_back(json::object{{"type", c}, {"status", "True"}, {"lastProbeTime", nullptr}, {"lastTransitionTime", "2026-11-30T10:00:05Z"}});
  return json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", json::object{
           {"name", name}, {"namespace", "ml"}, {"generateName", "job-" + std::to_string(i / 4) + "-worker-"},
           {"creationTimestamp", "2026-11-30T10:00:00Z"},
           {"labels", json::object{{"batch.kubernetes.io/job-name", "job-" + std::to_string(i / 4)}, {"app", "trainer"}}},
           {"annotations", json::object{{std::string(keys::kPodAssignment), encodeAssignment(a)},
                                        {std::string(keys::kPodBindPhase), "success"},
                                        {std::string(keys::kPodBindTime), "2026-11-30T10:00:01Z"},
                                        {"kubectl.kubernetes.io/last-applied-configuration", json::serialize(lastApplied)}}},
           {"ownerReferences", json::array{json::object{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "job-" + std::to_string(i / 4)},
                                                        {"uid", "6f1c2d3e-0000-4000-8000-" + std::to_string(100000000000 + i / 4)}, {"controller", true}, {"blockOwnerDeletion", true}}}},
           {"managedFields", managedFields}}},
      {"spec", spec},
      {"status", json::object{
           {"phase", "Running"}, {"hostIP", "10.1.2.3"}, {"podIP", "10.244.3.4"}, {"qosClass", "Guaranteed"},
           {"startTime", "2026-11-30T10:00:02Z"}, {"conditions", conditions},
           {"containerStatuses", json::array{json::object{
                {"name", "main"}, {"ready", true}, {"restartCount", 0}, {"started", true},
                {"image", "registry.example.com/ml/trainer:2026.11.3"},
                {"imageID", "registry.example.com/ml/trainer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
                {"containerID", "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
                {"state", json::object{{"running", json::object{{"startedAt", "2026-11-30T10:00:04Z"}}}}},
                {"lastState", json::object{}}}}}}}};
}

/// A Node with the labels, annotations and status a cloud node carries besides ours.
json::object bulkyNode(int i) {
  const std::string name = "gpu-node-" + std::to_string(i);
  json::object node = nodeJson(name, gpus(name, 8));
  auto& md = node["metadata"].as_object();
  md["labels"] = json::object{{"kubernetes.io/hostname", name}, {"kubernetes.io/os", "linux"}, {"kubernetes.io/arch", "amd64"},
                              {"node.kubernetes.io/instance-type", "p4d.24xlarge"}, {"topology.kubernetes.io/zone", "us-east-1a"},
                              {"nvidia.com/gpu.product", "A100-SXM4-80GB"}};
  md["annotations"].as_object()["node.alpha.kubernetes.io/ttl"] = "0";
  md["annotations"].as_object()["volumes.kubernetes.io/controller-managed-attach-detach"] = "true";
  md["managedFields"] = json::array{json::object{{"manager", "kubelet"}, {"operation", "Update"}, {"fieldsType", "FieldsV1"},
                                                 {"fieldsV1", json::object{{"f:status", json::object{{"f:conditions", json::object{}}, {"f:images", json::object{}}}}}}}};
  json::array images;
  for (int k = 0; k < 20; ++k)
    images.push_back(json::object{{"names", json::array{"registry.example.com/image-" + std::to_string(k) + "@sha256:0123456789abcdef0123456789abcdef"}}, {"sizeBytes", 1000000 * k}});
  node["status"] = json::object{{"capacity", json::object{{"cpu", "96"}, {"memory", "1152Gi"}, {"nvidia.com/gpu", "80"}}},
                                {"allocatable", json::object{{"cpu", "95"}, {"memory", "1150Gi"}, {"nvidia.com/gpu", "80"}}},
                                {"conditions", json::array{json::object{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}, {"message", "kubelet is posting ready status"}}}},
                                {"images", images},
                                {"nodeInfo", json::object{{"kubeletVersion", "v1.31.2"}, {"osImage", "Ubuntu 22.04"}, {"containerRuntimeVersion", "containerd://1.7.22"}}}};
  return node;
}

int child(const std::string& mode, const std::string& server) {
  spdlog::set_level(spdlog::level::warn);
  if (mode == "service") scheduler::tuneAllocator();
  BackendSet backends = simBackends();
  // A URL (the double), or a kubeconfig (a real cluster: tests/realk8s runs this mode).
  k8s::ClientConfig cc;
  if (server.rfind("http", 0) == 0) {
    cc.server = server;
  } else {
    auto loaded = k8s::loadKubeconfig(server);
    if (!loaded.ok()) return std::cerr << loaded.error().message << "\n", 1;
    cc = std::move(loaded).value();
  }
  auto client = k8s::Client::create(cc, {});
  if (!client.ok()) return std::cerr << client.error().message << "\n", 1;
  const long before = statusKiB("VmRSS:");
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<scheduler::SchedulerService> service;
  std::unique_ptr<scheduler::ClusterCache> cache;
  std::unique_ptr<k8s::Informer> nodes, pods;
  if (mode == "service") {
    DeviceConfig config;
    config.scheduler.heartbeatTimeout = std::chrono::hours(24);
    auto s = scheduler::SchedulerService::start(config, backends, **client, {});
    if (!s.ok()) return std::cerr << s.error().message << "\n", 1;
    service = std::move(s).value();
    if (!service->waitForSync(std::chrono::minutes(10))) return std::cerr << "no sync\n", 1;
  } else {
    cache = std::make_unique<scheduler::ClusterCache>(backends, scheduler::ClusterCache::Options{});
    auto* c = cache.get();
    k8s::InformerOptions no, po;
    po.fieldSelector = "status.phase!=Succeeded,status.phase!=Failed";
    if (mode != "whole") {
      no.transform = k8s::trimNode;
      po.transform = k8s::trimPod;
    }
    nodes = std::make_unique<k8s::Informer>(**client, k8s::kNodes, no,
                                            mode == "informer" ? k8s::InformerHandlers{} : k8s::InformerHandlers{[c](const k8s::ObjectPtr& n) { c->upsertNode(*n); }, {}, {}});
    pods = std::make_unique<k8s::Informer>(**client, k8s::kPods, po,
                                           mode == "informer" ? k8s::InformerHandlers{} : k8s::InformerHandlers{[c](const k8s::ObjectPtr& p) { c->upsertPod(*p); }, {}, {}});
    nodes->start();
    pods->start();
    if (!nodes->waitForSync(std::chrono::minutes(10)) || !pods->waitForSync(std::chrono::minutes(10)))
      return std::cerr << "no sync\n", 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the last page's buffers go
  const scheduler::ClusterCache& cc2 = service ? service->cache() : *cache;
  const struct mallinfo2 heap = mallinfo2();
  std::printf("%-8s  nodes %6zu  pods %6zu  sync %5.1f s  RSS before %4ld MiB  after %5ld MiB  peak %5ld MiB"
              "  (malloc: %zu MiB in use, %zu MiB free)\n",
              mode.c_str(), cc2.stats().nodes, cc2.stats().pods, seconds, before / 1024, statusKiB("VmRSS:") / 1024,
              statusKiB("VmHWM:") / 1024, (heap.uordblks + heap.hblkhd) >> 20, heap.fordblks >> 20);
  return 0;
}

}  // namespace
}  // namespace vgpu

int main(int argc, char** argv) {
  using namespace vgpu;
  if (argc == 4 && std::string(argv[1]) == "--child") return child(argv[2], argv[3]);
  const int nodeCount = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int podCount = argc > 2 ? std::atoi(argv[2]) : 50000;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("vgpu-memory-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "cluster.json");
    out << R"({"apiVersion":"v1","kind":"List","items":[)";
    for (int i = 0; i < nodeCount; ++i) out << (i ? "," : "") << json::serialize(bulkyNode(i));
    std::size_t podBytes = 0;
    for (int i = 0; i < podCount; ++i) {
      std::string pod = json::serialize(bulkyPod(i, "gpu-node-" + std::to_string(i % nodeCount), (i / nodeCount) % 8));
      podBytes += pod.size();
      out << "," << pod;
    }
    out << "]}";
    std::printf("%d nodes x 8 GPUs, %d pods of %zu bytes of JSON each on average\n", nodeCount, podCount,
                podCount ? podBytes / static_cast<std::size_t>(podCount) : 0);
  }
  // The double in its own process, so only the scheduler side is measured.
  auto startDouble = [&](bool watchList, std::string& url) -> pid_t {
    int toParent[2];
    if (pipe(toParent) != 0) return -1;
    pid_t api = fork();
    if (api == 0) {
      dup2(toParent[1], 1);
      execl(VGPU_FAKE_APISERVER_BIN, VGPU_FAKE_APISERVER_BIN, "--fixtures", dir.c_str(), "--port", "0",
            watchList ? nullptr : "--no-watch-list", nullptr);
      _exit(127);
    }
    close(toParent[1]);
    std::string line;
    for (char ch; read(toParent[0], &ch, 1) == 1 && ch != '\n';) line += ch;
    close(toParent[0]);
    const auto at = line.find("http");
    if (at == std::string::npos) {
      std::cerr << "the apiserver double did not start: " << line << "\n";
      return -1;
    }
    url = line.substr(at);
    return api;
  };
  int rc = 0;
  for (bool watchList : {true, false}) {
    std::string url;
    pid_t api = startDouble(watchList, url);
    if (api < 0) return 1;
    std::printf("-- the double's WatchList gate %s\n", watchList ? "on (streaming lists)" : "off (lists)");
    for (const char* mode : {"whole", "trimmed", "informer", "service"}) {
      if (!watchList && std::string(mode) != "informer" && std::string(mode) != "service") continue;
      std::fflush(stdout);
      pid_t p = fork();
      if (p == 0) {
        execl("/proc/self/exe", argv[0], "--child", mode, url.c_str(), nullptr);
        _exit(127);
      }
      int status = 0;
      waitpid(p, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    kill(api, SIGTERM);
    waitpid(api, nullptr, 0);
  }
  fs::remove_all(dir);
  return rc;
}
