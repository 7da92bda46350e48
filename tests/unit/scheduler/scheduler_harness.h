#pragma once
// Builders and a running scheduler against the apiserver double, shared by the scheduler
// tests and benchmarks: nodes with sim devices published as the node agent would, pods as
// kubectl would create them, and the extender's real JSON shapes.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "service.h"
#include "vgpu/annotations.h"
#include "vgpu/backend_loader.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/k8s/client.h"

namespace vgpu::testing {

namespace json = boost::json;

/// The sim backend answering to NVIDIA's resource names, as examples/device-config.yaml has it.
inline BackendSet simBackends() {
  BackendParams params;
  params.name = "sim";
  params.resources.count = "nvidia.com/gpu";
  params.resources.memory = "nvidia.com/gpumem";
  params.resources.memoryPercent = "nvidia.com/gpumem-percentage";
  params.resources.cores = "nvidia.com/gpucores";
  auto sim = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, "sim"), params);
  if (!sim.ok()) throw std::runtime_error(sim.error().message);
  BackendSet set;
  (void)set.add(std::move(sim).value());
  return set;
}

inline std::vector<Device> gpus(const std::string& node, int count, std::uint64_t memoryMiB = 81920, std::uint32_t split = 10) {
  std::vector<Device> out;
  for (int i = 0; i < count; ++i) {
    Device d;
    d.id = "GPU-" + node + "-" + std::to_string(i);
    d.index = i;
    d.backend = "sim";
    d.model = "NVIDIA A100-SXM4-80GB";
    d.memoryMiB = memoryMiB;
    d.splitCount = split;
    d.numaNode = i / 4;
    d.health = Health::kHealthy;
    out.push_back(std::move(d));
  }
  return out;
}

/// A Node as the node agent leaves it: inventory and heartbeat annotations.
inline json::object nodeJson(const std::string& name, const std::vector<Device>& devices,
                             std::chrono::system_clock::time_point heartbeat = std::chrono::system_clock::now()) {
  json::object ann;
  if (!devices.empty()) ann[keys::nodeDevices("sim")] = encodeInventory(devices);
  ann[std::string(keys::kNodeHeartbeat)] = formatTimestamp(heartbeat);
  return json::object{{"apiVersion", "v1"},
                      {"kind", "Node"},
                      {"metadata", json::object{{"name", name}, {"annotations", ann}}},
                      {"status", json::object{}}};
}

struct ContainerSpecForTest {
  std::string name = "main";
  std::map<std::string, std::string> limits;
  bool init = false;
  bool privileged = false;
};

inline json::object podJson(const std::string& ns, const std::string& name, const std::vector<ContainerSpecForTest>& containers,
                            const std::string& schedulerName = "vgpu-scheduler", json::object annotations = {}) {
  json::array app, init;
  for (const auto& c : containers) {
    json::object limits;
    for (const auto& [k, v] : c.limits) limits[k] = v;
    json::object container{{"name", c.name}, {"image", "busybox"}, {"resources", json::object{{"limits", limits}}}};
    if (c.privileged) container["securityContext"] = json::object{{"privileged", true}};
    (c.init ? init : app).push_back(std::move(container));
  }
  json::object spec{{"containers", app}};
  if (!init.empty()) spec["initContainers"] = init;
  if (!schedulerName.empty()) spec["schedulerName"] = schedulerName;
  return json::object{{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", json::object{{"name", name}, {"namespace", ns}, {"annotations", annotations}}},
                      {"spec", spec},
                      {"status", json::object{{"phase", "Pending"}}}};
}

inline json::object gpuPod(const std::string& name, int memoryMiB, int cores = 0, int count = 1) {
  std::map<std::string, std::string> limits{{"nvidia.com/gpu", std::to_string(count)},
                                            {"nvidia.com/gpumem", std::to_string(memoryMiB)}};
  if (cores > 0) limits["nvidia.com/gpucores"] = std::to_string(cores);
  return podJson("default", name, {{"main", limits}});
}

/// A pod the node agent has admitted: bound to `node`, its assignment on the pod (on the
/// node's device `gpu`, as gpus() names them).
inline json::object admittedPod(const std::string& name, const std::string& node, std::uint64_t memoryMiB, std::uint32_t cores = 0,
                                int gpu = 0) {
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", false, {{"sim", "GPU-" + node + "-" + std::to_string(gpu), gpu, memoryMiB, cores, 0}}});
  std::map<std::string, std::string> limits{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(memoryMiB)}};
  if (cores > 0) limits["nvidia.com/gpucores"] = std::to_string(cores);
  json::object pod = podJson("default", name, {{"main", limits}}, "vgpu-scheduler",
                             json::object{{std::string(keys::kPodAssignment), encodeAssignment(a)},
                                          {std::string(keys::kPodBindPhase), "success"}});
  pod["spec"].as_object()["nodeName"] = node;
  pod["status"].as_object()["phase"] = "Running";
  return pod;
}

/// ExtenderArgs with nodeCacheCapable (NodeNames) or without (Nodes).
inline std::string extenderArgs(const json::object& pod, const std::vector<std::string>& names) {
  json::array n;
  for (const auto& s : names) n.emplace_back(s);
  return json::serialize(json::object{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", n}});
}
inline std::string extenderArgsWithNodes(const json::object& pod, const std::vector<json::object>& nodes) {
  json::array items;
  for (const auto& n : nodes) items.push_back(n);
  return json::serialize(
      json::object{{"Pod", pod}, {"Nodes", json::object{{"metadata", json::object{}}, {"items", items}}}, {"NodeNames", nullptr}});
}
inline std::string bindingArgs(const json::object& pod, const std::string& node) {
  const auto& meta = pod.at("metadata").as_object();
  return json::serialize(json::object{{"PodName", meta.at("name")},
                                      {"PodNamespace", meta.at("namespace")},
                                      {"PodUID", meta.contains("uid") ? meta.at("uid") : json::value("")},
                                      {"Node", node}});
}

/// Polls `pred` until it holds or `timeout` passes (a condition, not a fixed sleep).
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// The apiserver double, a client, the sim backend and a running vgpu-scheduler.
struct SchedulerHarness {
  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<k8s::Client> client;
  std::unique_ptr<k8s::Client> eventClient;  ///< as vgpu-scheduler's main has
  BackendSet backends;
  DeviceConfig config;
  std::unique_ptr<scheduler::SchedulerService> service;

  /// `heartbeatTimeout`: longer for runs under valgrind, where building a large cluster
  /// takes minutes and the nodes' heartbeats would go stale before the first request.
  explicit SchedulerHarness(scheduler::ServiceOptions options = {}, NodePolicy nodePolicy = NodePolicy::kBinpack,
                            std::chrono::seconds heartbeatTimeout = std::chrono::seconds(90)) {
    auto server = fakes::FakeApiServer::start();
    if (!server.ok()) throw std::runtime_error(server.error().message);
    api = std::move(server).value();
    k8s::ClientConfig cc;
    cc.server = api->url();
    k8s::ClientOptions co;
    co.maxIdleConnections = 64;
    auto c = k8s::Client::create(cc, co);
    if (!c.ok()) throw std::runtime_error(c.error().message);
    client = std::move(c).value();
    auto e = k8s::Client::create(cc, co);
    if (!e.ok()) throw std::runtime_error(e.error().message);
    eventClient = std::move(e).value();
    options.eventClient = eventClient.get();
    backends = simBackends();
    config.scheduler.nodePolicy = nodePolicy;
    config.scheduler.heartbeatTimeout = heartbeatTimeout;
    options.informerBackoffMin = std::chrono::milliseconds(20);
    auto s = scheduler::SchedulerService::start(config, backends, *client, options);
    if (!s.ok()) throw std::runtime_error(s.error().message);
    service = std::move(s).value();
    if (!service->waitForSync(std::chrono::seconds(10))) throw std::runtime_error("scheduler caches did not sync");
  }

  /// Creates a pod in the double and returns it as stored (with its uid).
  json::object createPod(json::object pod) {
    auto stored = api->create("pods", std::move(pod));
    if (!stored.ok()) throw std::runtime_error(stored.error().message);
    return *stored;
  }
  void createNode(json::object node) {
    auto stored = api->create("nodes", std::move(node));
    if (!stored.ok()) throw std::runtime_error(stored.error().message);
  }
  /// Waits until the scheduler's cache has `n` nodes.
  bool awaitNodes(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return eventually([&] { return service->cache().stats().nodes == n; }, timeout);
  }
  /// Waits until the scheduler's cache has `n` pods.
  bool awaitPods(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return eventually([&] { return service->cache().stats().pods == n; }, timeout);
  }
};

}  // namespace vgpu::testing
