#include "vgpu/k8s/object.h"
#include "e2e_harness.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "container_runtime.h"
#include "e2e_paths.h"
#include "json_patch.h"
#include "test_http_client.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/base64.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/pod_info.h"
#include "vgpu/pod_request.h"
#include "vgpu/yaml_json.h"

namespace vgpu::e2e {
namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using testing::TestHttpClient;

struct Cluster::Node {
  NodeSpec spec;
  fs::path dir;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  std::unique_ptr<ChildProcess> agent;
  std::uint16_t metricsPort = 0;
  int agentStarts = 0;
  int containers = 0;

  fs::path pluginDir() const { return dir / "dp"; }
  fs::path podResourcesSocket() const { return dir / "pr" / "kubelet.sock"; }
  fs::path stateDir() const { return dir / "state"; }
  fs::path agentLog() const { return dir / ("agent-" + std::to_string(agentStarts) + ".log"); }
  /// Backends with devices here, by name.
  std::vector<std::string> backendsHere() const {
    std::vector<std::string> out;
    if (!spec.gpus.empty()) out.push_back("nvidia");
    if (!spec.mlus.empty()) out.push_back("cambricon");
    if (!spec.dcus.empty()) out.push_back("hygon");
    if (!spec.npus.empty()) out.push_back("ascend");
    if (!spec.amdGpus.empty()) out.push_back("amd");
    return out;
  }
  size_t deviceCount() const { return spec.gpus.size() + spec.mlus.size() + spec.dcus.size() + spec.npus.size() +
                                     spec.amdGpus.size(); }
};

namespace {

std::string str(const json::value* v) { return v && v->is_string() ? std::string(v->as_string()) : std::string(); }

const json::value* at(const json::object& obj, std::initializer_list<std::string_view> path) {
  return k8s::findPath(obj, path);
}

Result<json::object> parseManifest(const std::string& yaml) {
  auto docs = yamlDocumentsToJson(yaml, "pod manifest");
  if (!docs.ok()) return std::move(docs).error();
  if (docs->size() != 1 || !(*docs)[0].is_object()) return makeError("the manifest must be one object");
  json::object pod = (*docs)[0].as_object();
  if (str(pod.if_contains("kind")) != "Pod") return makeError("the manifest is not a Pod");
  auto& meta = pod["metadata"];
  if (!meta.is_object()) return makeError("the manifest has no metadata");
  if (!meta.as_object().contains("namespace")) meta.as_object()["namespace"] = "default";
  return pod;
}

/// The device count a pod takes of `resource`, as kube-scheduler counts it: the larger of
/// its largest init container and the sum of its app containers.
std::int64_t podDemand(const PodInfo& pod, const std::string& resource) {
  std::int64_t init = 0, app = 0;
  for (const auto& c : pod.containers) {
    auto it = c.limits.find(resource);
    if (it == c.limits.end()) continue;
    if (c.init)
      init = std::max(init, it->second);
    else
      app += it->second;
  }
  return std::max(init, app);
}

std::string randomUid() {
  static std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-4%03llx-8%03llx-%012llx", static_cast<unsigned long long>(rng() >> 32),
                static_cast<unsigned long long>(rng() & 0xffff), static_cast<unsigned long long>(rng() & 0xfff),
                static_cast<unsigned long long>(rng() & 0xfff),
                static_cast<unsigned long long>(rng() & 0xffffffffffffull));
  return buf;
}

/// "http://127.0.0.1:PORT" following `marker` in the last line of `log` that has it.
std::string urlAfter(const std::string& log, const std::string& marker) {
  const auto pos = log.rfind(marker);
  if (pos == std::string::npos) return "";
  const auto begin = pos + marker.size();
  const auto end = log.find_first_of(" \n)", begin);
  return log.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

/// The port of such a URL.
std::uint16_t portOf(const std::string& url) {
  return static_cast<std::uint16_t>(std::atoi(url.c_str() + url.rfind(':') + 1));
}

}  // namespace

// ---- PodRun ----

std::string PodRun::uid() const { return str(at(pod, {"metadata", "uid"})); }

ContainerSpec PodRun::specOf(const std::string& container) const {
  ContainerSpec merged;
  for (const auto& a : admission.allocations) {
    if (a.container != container) continue;
    for (const auto& [k, v] : a.response.env) merged.env[k] = v;
    for (const auto& [k, v] : a.response.annotations) merged.annotations[k] = v;
    merged.mounts.insert(merged.mounts.end(), a.response.mounts.begin(), a.response.mounts.end());
    merged.devices.insert(merged.devices.end(), a.response.devices.begin(), a.response.devices.end());
  }
  return merged;
}

// ---- set-up and tear-down ----

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  // Short: unix socket paths are limited to 107 bytes.
  std::string pattern = "/tmp/ve2e-XXXXXX";
  if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
}

Cluster::~Cluster() {
  if (scheduler_) scheduler_->kill();
  for (auto& n : nodes_) {
    if (n->agent) n->agent->kill();
    if (n->kubelet) n->kubelet->stop();
  }
  if (api_) api_->stop();
  // Keep the folder of a failed run for its logs when asked to.
  if (std::getenv("VGPU_E2E_KEEP") == nullptr && !dir_.empty()) removeTree(dir_);
}

std::string Cluster::configPath() const { return (fs::path(dir_) / "device-config.yaml").string(); }

Status Cluster::writeClusterFiles() {
  const fs::path dir(dir_);
  std::ostringstream y;
  y << "version: 1\n"
    << "scheduler:\n  nodePolicy: " << options_.nodePolicy << "\n  devicePolicy: " << options_.devicePolicy
    << "\n  heartbeatTimeout: " << options_.heartbeatTimeout << "\nbackends:\n"
    << "  nvidia:\n    enabled: true\n    splitCount: " << options_.nvidiaSplit << "\n    options:\n"
    << "      discovery: nvml\n      nvmlLibrary: " << paths::kFakeGpuDir << "/libnvidia-ml.so.1\n"
    << "      hostSysRoot: " << (dir / "no-sys").string() << "\n      memoryEnforcement: libvgpu\n"
    << "      libvgpuPath: " << paths::kLibvgpu << "\n      libvgpuContainerPath: " << kLibvgpuInContainer
    << "\n      ldPreloadPath: " << (dir / "ld.so.preload").string() << "\n";
#ifdef VGPU_E2E_FAKE_CNDEV
  y << "  cambricon:\n    enabled: true\n    splitCount: " << options_.cambriconSplit << "\n    options:\n"
    << "      libraryPath: " << VGPU_E2E_FAKE_CNDEV << "\n";
#endif
#ifdef VGPU_E2E_FAKE_ROCM_DIR
  y << "  hygon:\n    enabled: true\n    splitCount: " << options_.hygonSplit << "\n    options:\n"
    << "      driverDir: " << VGPU_E2E_FAKE_ROCM_DIR << "\n      enforcement: vdev-file\n";
#endif
#ifdef VGPU_E2E_FAKE_DCMI
  y << "  ascend:\n    enabled: true\n    options:\n      libraryPath: " << VGPU_E2E_FAKE_DCMI << "\n";
  if (!options_.ascendFamilies.empty()) y << "      families: \"" << options_.ascendFamilies << "\"\n";
#endif
#ifdef VGPU_E2E_FAKE_AMDSMI
  y << "  amd:\n    enabled: true\n    splitCount: 4\n    options:\n      libraryPath: " << VGPU_E2E_FAKE_AMDSMI << "\n";
#endif
  // Per-node folders, as a DaemonSet's host paths differ per node (here they share a disk).
  y << "nodes:\n";
  for (const auto& n : nodes_) {
    y << "  - name: " << n->spec.name << "\n    backends:\n";
#ifdef VGPU_E2E_FAKE_CNDEV
    y << "      cambricon:\n        options:\n          stateDir: " << (n->dir / "cambricon").string()
      << "\n          devRoot: " << (n->dir / "dev-mlu").string() << "\n";
#endif
#ifdef VGPU_E2E_FAKE_ROCM_DIR
    y << "      hygon:\n        options:\n          sysfsRoot: " << (n->dir / "sys").string()
      << "\n          devRoot: " << (n->dir / "dev").string() << "\n          stateDir: " << (n->dir / "hygon").string()
      << "\n          vdevCopyDir: " << (n->dir / "etc-vdev").string() << "\n";
#endif
#ifdef VGPU_E2E_FAKE_DCMI
    y << "      ascend:\n        options:\n          stateDir: " << (n->dir / "ascend").string()
      << "\n          devRoot: " << (n->dir / "dev-npu").string() << "\n";
#endif
#ifdef VGPU_E2E_FAKE_AMDSMI
    y << "      amd:\n        options:\n          devRoot: " << (n->dir / "dev-amd").string() << "\n";
#endif
    y << "      nvidia:\n        splitCount: " << options_.nvidiaSplit << "\n";
  }
  if (auto s = writeText(configPath(), y.str()); !s.ok()) return s;
  // What the chart's init container writes on every node: the preload file naming libvgpu.so.
  if (auto s = writeText(dir / "ld.so.preload", std::string(kLibvgpuInContainer) + "\n"); !s.ok()) return s;
  const std::string kubeconfig =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: " + api_->url() +
      "\nusers:\n- name: e2e\n  user:\n    token: e2e\ncontexts:\n- name: e2e\n  context:\n"
      "    cluster: e2e\n    user: e2e\ncurrent-context: e2e\n";
  return writeText(dir / "kubeconfig", kubeconfig);
}

Status Cluster::writeNodeFiles(Node& n) {
  if (auto s = writeText(n.dir / "gpus.conf", fakeGpuMachine(n.spec.gpus)); !s.ok()) return s;
  if (auto s = writeFakeMluNode(n.dir, n.spec.mlus); !s.ok()) return s;
  if (auto s = writeFakeNpuNode(n.dir, n.spec.npus); !s.ok()) return s;
  if (auto s = writeFakeAmdNode(n.dir, n.spec.amdGpus); !s.ok()) return s;
  return writeFakeDcuNode(n.dir, n.spec.dcus);
}

Status Cluster::start(std::vector<NodeSpec> nodes) {
  if (dir_.empty()) return makeError("cannot create a temp folder under /tmp");
  if (auto s = checkContainerSupport(); !s.ok()) return s;
  specs_ = nodes;
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& spec : nodes) {
    auto n = std::make_unique<Node>();
    n->dir = fs::path(dir_) / spec.name;
    n->spec = std::move(spec);
    nodes_.push_back(std::move(n));
  }
  if (auto s = startApiServer(); !s.ok()) return s;
  if (auto s = writeClusterFiles(); !s.ok()) return s;
  auto config = loadDeviceConfig(configPath());
  if (!config.ok()) return makeError("the harness wrote a bad device-config.yaml: " + config.error().message);
  config_ = std::make_unique<DeviceConfig>(std::move(config).value());
  loaded_ = std::make_unique<BackendLoadOutcome>(loadEnabledBackends(*config_, paths::kBackendDir, ""));
  if (!loaded_->failures.empty()) return makeError("backend not loaded in the test: " + loaded_->failures[0].message);

  for (auto& n : nodes_) {
    json::object node{
        {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", n->spec.name}, {"labels", {{"gpu", "on"}}}}}};
    if (auto c = api_->create("nodes", node); !c.ok())
      return makeError("creating Node " + n->spec.name + ": " + c.error().message);
    if (auto s = writeNodeFiles(*n); !s.ok()) return s;
    if (auto s = startKubelet(*n); !s.ok()) return s;
  }
  for (auto& n : nodes_)
    if (auto s = startAgent(n->spec.name); !s.ok()) return s;
  return startScheduler();
}

// ---- the apiserver ----

void Cluster::stopApiServer() {
  if (api_) api_->stop();
  apiDown_ = true;
}

Status Cluster::startApiServer() {
  if (api_) {
    // The same store and resourceVersion counter, as a restarted apiserver over its etcd.
    if (auto s = api_->restart(true); !s.ok()) return makeError("apiserver double: " + s.error().message);
    apiDown_ = false;
    return {};
  }
  auto started = fakes::FakeApiServer::start();
  if (!started.ok()) return makeError("apiserver double: " + started.error().message);
  api_ = std::move(started).value();
  return {};
}

// ---- the kubelet ----

fakes::FakeKubelet& Cluster::kubelet(const std::string& name) { return *node(name)->kubelet; }

Status Cluster::startKubelet(Node& n) {
  fakes::FakeKubeletOptions o;
  o.devicePluginDir = n.pluginDir().string();
  o.podResourcesSocket = n.podResourcesSocket().string();
  std::error_code ec;
  fs::create_directories(n.pluginDir(), ec);
  fs::create_directories(n.podResourcesSocket().parent_path(), ec);
  auto k = fakes::FakeKubelet::start(o);
  if (!k.ok()) return makeError("kubelet double of " + n.spec.name + ": " + k.error().message);
  n.kubelet = std::move(k).value();
  return {};
}

Status Cluster::restartKubelet(const std::string& name) {
  Node* n = node(name);
  const size_t before = n->kubelet->registrations().size();
  if (auto s = n->kubelet->restart(); !s.ok())
    return makeError("kubelet restart on " + name + ": " + s.error().message);
  const size_t want = before + n->backendsHere().size();
  if (!waitUntil([&] { return n->kubelet->registrations().size() >= want; }))
    return makeError("the agent on " + name + " did not register again after the kubelet restarted; its log:\n" +
                     agentLog(name));
  return waitForAgentDevices(*n);
}

// ---- the node agent ----

ChildProcess* Cluster::agent(const std::string& name) { return node(name)->agent.get(); }
std::string Cluster::agentLog(const std::string& name) const {
  const Node* n = node(name);
  return n->agent ? n->agent->log() : "";
}
std::string Cluster::nodeDir(const std::string& name) const { return node(name)->dir.string(); }

Status Cluster::startAgent(const std::string& name) {
  Node* n = node(name);
  if (n->agent && n->agent->running()) return makeError("the agent on " + name + " is already running");
  ++n->agentStarts;
  const size_t registeredBefore = n->kubelet->registrations().size();
  ProcessOptions o;
  o.program = paths::kAgent;
  o.args = {"--heartbeat-seconds", std::to_string(options_.heartbeatSeconds),
            "--pod-wait-ms",       "10000",
            "--api-timeout-ms",    "5000",
            // The agents run as root in this machine's mount namespace: a tmpfs per container
            // would be mounted on the host and outlive an agent a test kills. The mounts are
            // tested in private namespaces (tests/unit/deviceplugin/folder_tmpfs_test.cpp).
            "--region-tmpfs",      "off"};
  o.env = baseEnv();
  o.env["NODE_NAME"] = name;
  o.env["VGPU_CONFIG"] = configPath();
  o.env["VGPU_BACKEND_DIR"] = paths::kBackendDir;
  o.env["VGPU_DEVICE_PLUGIN_DIR"] = n->pluginDir().string();
  o.env["VGPU_POD_RESOURCES_SOCKET"] = n->podResourcesSocket().string();
  o.env["VGPU_METRICS_ADDRESS"] = "127.0.0.1:0";
  o.env["VGPU_STATE_DIR"] = n->stateDir().string();
  o.env["KUBECONFIG_FILE"] = (fs::path(dir_) / "kubeconfig").string();
  // The node's "hardware": what its fake vendor libraries report.
  o.env["VGPU_FAKE_GPU_CONFIG"] = (n->dir / "gpus.conf").string();
  o.env["VGPU_FAKE_CNDEV_CONFIG"] = (n->dir / "cndev.conf").string();
  o.env["VGPU_FAKE_ROCM_CONFIG"] = (n->dir / "rocm.conf").string();
  o.env["VGPU_FAKE_DCMI_CONFIG"] = (n->dir / "dcmi.conf").string();
  o.env["VGPU_FAKE_AMDSMI_CONFIG"] = (n->dir / "amdsmi.conf").string();
  o.logFile = n->agentLog().string();
  auto started = ChildProcess::start(std::move(o));
  if (!started.ok()) return makeError("vgpu-device-plugin on " + name + ": " + started.error().message);
  n->agent = std::move(started).value();
  // The line comes in several writes to stderr: wait for its end before reading the address.
  const auto servingLine = [&] {
    const std::string log = n->agent->log();
    const auto at = log.rfind("vgpu-device-plugin: serving");
    return at != std::string::npos && log.find('\n', at) != std::string::npos;
  };
  waitUntil([&] { return servingLine() || !n->agent->running(); });
  if (!servingLine())
    return makeError("vgpu-device-plugin on " + name + " did not come up; its log:\n" + n->agent->log());
  const std::string metricsUrl = urlAfter(n->agent->log(), "metrics on ");
  if (metricsUrl.empty()) return makeError("vgpu-device-plugin on " + name + " did not say where /metrics is");
  n->metricsPort = portOf(metricsUrl);
  const size_t want = registeredBefore + n->backendsHere().size();
  if (!waitUntil([&] { return n->kubelet->registrations().size() >= want; }))
    return makeError("vgpu-device-plugin on " + name + " did not register its plugins; its log:\n" + n->agent->log());
  if (auto s = waitForAgentDevices(*n); !s.ok()) return s;
  // A running scheduler must see the node's devices again before it can place there.
  return scheduler_ && scheduler_->running() ? waitForSchedulerCache() : Status{};
}

void Cluster::stopAgent(const std::string& name, bool graceful) {
  Node* n = node(name);
  if (!n->agent) return;
  if (graceful)
    n->agent->stop();
  else
    n->agent->kill();
}

Status Cluster::waitForAgentDevices(Node& n) {
  for (const auto& backend : n.backendsHere()) {
    Backend* b = loaded_->backends.find(backend);
    if (!b) return makeError("backend " + backend + " is not built; node " + n.spec.name + " needs it");
    for (const auto& r : b->allocator().resources()) {
      if (!r.advertised) continue;
      // A healthy device, not just a list: after a restart the kubelet keeps the old list,
      // marked unhealthy, until the plugin sends its new one.
      const auto anyHealthy = [](const std::vector<fakes::KubeletDevice>& list) {
        return std::any_of(list.begin(), list.end(), [](const auto& d) { return d.healthy; });
      };
      if (!n.kubelet->waitForDevices(r.name, kWait, anyHealthy))
        return makeError("no " + r.name + " devices reached the kubelet of " + n.spec.name + "; agent log:\n" +
                         n.agent->log());
    }
    const std::string key = keys::nodeDevices(backend);
    if (!waitUntil([&] { return !annotationOf("", n.spec.name, key).empty(); }))
      return makeError("Node " + n.spec.name + " never got " + key + "; agent log:\n" + n.agent->log());
  }
  return {};
}

// ---- the scheduler ----

std::string Cluster::schedulerLog() const { return scheduler_ ? scheduler_->log() : ""; }

Status Cluster::startScheduler() {
  if (scheduler_ && scheduler_->running()) return makeError("vgpu-scheduler is already running");
  ProcessOptions o;
  o.program = paths::kScheduler;
  o.args = {"--config",
            configPath(),
            "--backend-dir",
            paths::kBackendDir,
            "--kubeconfig",
            (fs::path(dir_) / "kubeconfig").string(),
            "--listen",
            "127.0.0.1:" + std::to_string(schedulerPort_),
            "--extender-listen",
            "127.0.0.1:" + std::to_string(extenderPort_),
            "--scheduler-name",
            kSchedulerName,
            "--threads",
            "4",
            "--bind-hold-timeout",
            std::to_string(options_.bindHoldTimeoutMs)};
  o.env = baseEnv();
  o.env["POD_NAME"] = "vgpu-scheduler-e2e";
  o.logFile = (fs::path(dir_) / ("scheduler-" + std::to_string(++schedulerStarts_) + ".log")).string();
  auto started = ChildProcess::start(std::move(o));
  if (!started.ok()) return makeError("vgpu-scheduler: " + started.error().message);
  scheduler_ = std::move(started).value();
  if (!scheduler_->waitForLog("vgpu-scheduler serving on ", kWait))
    return makeError("vgpu-scheduler did not come up; its log:\n" + scheduler_->log());
  schedulerPort_ = portOf(urlAfter(scheduler_->log(), "vgpu-scheduler serving on "));
  extenderPort_ = portOf(urlAfter(scheduler_->log(), "vgpu-scheduler extender verbs on "));
  if (!waitUntil([&] {
        return TestHttpClient(schedulerPort_).setTimeout(std::chrono::seconds(2)).get("/readyz").status == 200;
      }))
    return makeError("vgpu-scheduler never became ready; its log:\n" + scheduler_->log());
  return waitForSchedulerCache();
}

void Cluster::stopScheduler(bool graceful) {
  if (!scheduler_) return;
  if (graceful)
    scheduler_->stop();
  else
    scheduler_->kill();
}

Status Cluster::waitForSchedulerCache() {
  // The scheduler's per-device capacity gauge lists a node's devices once its cache holds
  // the node's inventory: the filter can only place there from then on.
  std::string last;
  const bool ok = waitUntil([&] {
    last = schedulerMetrics();
    for (const auto& n : nodes_) {
      if (!n->agent || !n->agent->running()) continue;
      size_t seen = 0;
      const std::string label = "node=\"" + n->spec.name + "\"";
      std::istringstream lines(last);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("vgpu_device_memory_capacity_bytes{", 0) == 0 && line.find(label) != std::string::npos) ++seen;
      if (seen != n->deviceCount()) return false;
    }
    return true;
  });
  if (!ok) return makeError("vgpu-scheduler's cache never showed every node's devices; its metrics:\n" + last);
  return {};
}

std::string Cluster::schedulerMetrics() {
  auto r = TestHttpClient(schedulerPort_).setTimeout(std::chrono::seconds(5)).get("/metrics");
  return r.status == 200 ? r.body : "";
}

std::string Cluster::agentMetrics(const std::string& name) {
  auto r = TestHttpClient(node(name)->metricsPort).setTimeout(std::chrono::seconds(5)).get("/metrics");
  return r.status == 200 ? r.body : "";
}

// ---- the pod's path ----

Result<json::object> Cluster::createPod(const std::string& manifestYaml) {
  if (apiDown_) return makeError("the apiserver is down");
  auto parsed = parseManifest(manifestYaml);
  if (!parsed.ok()) return std::move(parsed).error();
  json::object pod = std::move(parsed).value();
  const std::string ns = str(at(pod, {"metadata", "namespace"})), name = str(at(pod, {"metadata", "name"}));
  const std::string reviewUid = randomUid();
  json::object request{{"uid", reviewUid},
                       {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                       {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                       {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                       {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                       {"name", name},
                       {"namespace", ns},
                       {"operation", "CREATE"},
                       {"userInfo", {{"username", "e2e-user"}}},
                       {"object", pod},
                       {"oldObject", nullptr},
                       {"dryRun", false},
                       {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}};
  const json::object review{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
  auto reply = TestHttpClient(schedulerPort_).setTimeout(kHttpTimeout).post("/webhook", json::serialize(review));
  if (reply.status == 0) return makeError("admission webhook: " + reply.error);
  if (reply.status != 200)
    return makeError("admission webhook answered HTTP " + std::to_string(reply.status) + ": " + reply.body);
  json::value answer;
  try {
    answer = json::parse(reply.body);
  } catch (const std::exception& e) {
    return makeError(std::string("admission webhook: not JSON: ") + e.what());
  }
  const json::value* responseValue = answer.is_object() ? at(answer.as_object(), {"response"}) : nullptr;
  const json::object* response = responseValue ? responseValue->if_object() : nullptr;
  if (!response || str(response->if_contains("uid")) != reviewUid)
    return makeError("admission webhook: no response for review " + reviewUid + ": " + reply.body);
  const json::value* allowed = response->if_contains("allowed");
  if (!allowed || !allowed->is_bool() || !allowed->as_bool())
    return makeError("admission webhook \"vgpu-scheduler.vgpu.io\" denied the request: " +
                     str(at(*response, {"status", "message"})));
  if (const json::value* patch = response->if_contains("patch")) {
    if (str(response->if_contains("patchType")) != "JSONPatch")
      return makeError("admission webhook: patch without patchType JSONPatch");
    auto text = base64Decode(str(patch));
    if (!text.ok()) return makeError("admission webhook patch: " + text.error().message);
    json::value doc = pod;
    try {
      if (auto s = applyJsonPatch(doc, json::parse(*text)); !s.ok())
        return makeError("admission webhook patch: " + s.error().message);
    } catch (const std::exception& e) {
      return makeError(std::string("admission webhook patch is not JSON: ") + e.what());
    }
    pod = doc.as_object();
  }
  pod["status"] = json::object{{"phase", "Pending"}};
  auto stored = api_->create("pods", pod);
  if (!stored.ok()) return makeError("storing the pod: " + stored.error().message);
  return std::move(stored).value();
}

std::vector<std::string> Cluster::kubeSchedulerCandidates(const json::object& podObj) {
  std::vector<std::string> out;
  auto pod = parsePod(podObj);
  if (!pod.ok()) return out;
  // kube-scheduler's NodeResourcesFit for the advertised device counts: a node's
  // allocatable is what its kubelet got from the plugin (healthy devices); pods bound
  // there take their counts whether or not the kubelet admitted them yet.
  std::set<std::string> advertised;
  for (const auto& b : loaded_->backends.all())
    for (const auto& r : b->allocator().resources())
      if (r.advertised) advertised.insert(r.name);
  const auto pods = api_->list("pods");
  for (const auto& n : nodes_) {
    bool fits = true;
    for (const auto& resource : advertised) {
      const std::int64_t want = podDemand(*pod, resource);
      if (want == 0) continue;
      std::int64_t allocatable = 0, used = 0;
      for (const auto& d : n->kubelet->devices(resource)) allocatable += d.healthy ? 1 : 0;
      for (const auto& other : pods) {
        auto info = parsePod(other);
        if (info.ok() && info->nodeName == n->spec.name && !info->terminated()) used += podDemand(*info, resource);
      }
      fits = fits && used + want <= allocatable;
    }
    if (fits) out.push_back(n->spec.name);
  }
  return out;
}

Result<ScheduleOutcome> Cluster::schedulePod(const std::string& ns, const std::string& name) {
  if (apiDown_) return makeError("the apiserver is down");
  auto stored = pod(ns, name);
  if (!stored) return makeError("pod " + ns + "/" + name + " does not exist");
  if (str(at(*stored, {"spec", "schedulerName"})) != kSchedulerName)
    return makeError("pod " + ns + "/" + name + " is not for " + kSchedulerName + " (the webhook did not claim it)");
  ScheduleOutcome out;
  out.candidates = kubeSchedulerCandidates(*stored);
  json::array names;
  for (const auto& c : out.candidates) names.push_back(json::string(c));
  // One keep-alive connection for the pod's filter, prioritize and bind, as kube-scheduler's.
  TestHttpClient extender(extenderPort_);
  extender.setTimeout(kHttpTimeout);
  auto call = [&](const std::string& verb, const json::object& body) -> Result<json::value> {
    auto reply = extender.post("/" + verb, json::serialize(body));
    if (reply.status == 0) return makeError("extender " + verb + ": " + reply.error);
    if (reply.status != 200)
      return makeError("extender " + verb + " answered HTTP " + std::to_string(reply.status) + ": " + reply.body);
    try {
      return json::parse(reply.body);
    } catch (const std::exception& e) {
      return makeError("extender " + verb + ": not JSON: " + e.what());
    }
  };
  if (out.candidates.empty()) {
    out.error = "0/" + std::to_string(nodes_.size()) + " nodes are available: insufficient advertised devices";
    return out;
  }
  auto filtered = call("filter", {{"Pod", *stored}, {"NodeNames", names}});
  if (!filtered.ok()) return std::move(filtered).error();
  const json::object& f = filtered->as_object();
  if (const auto* nn = f.if_contains("NodeNames"); nn && nn->is_array())
    for (const auto& v : nn->as_array()) out.fitting.push_back(str(&v));
  for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"})
    if (const auto* m = f.if_contains(key); m && m->is_object())
      for (const auto& [node, why] : m->as_object()) out.failedNodes[std::string(node)] = str(&why);
  std::sort(out.fitting.begin(), out.fitting.end());
  if (!str(f.if_contains("Error")).empty()) {
    out.error = "filter: " + str(f.if_contains("Error"));
    return out;
  }
  if (out.fitting.empty()) {
    out.error = "0/" + std::to_string(nodes_.size()) + " nodes are available:";
    for (const auto& [node, why] : out.failedNodes) out.error += " " + node + ": " + why + ";";
    return out;
  }
  json::array fitting;
  for (const auto& c : out.fitting) fitting.push_back(json::string(c));
  auto scored = call("prioritize", {{"Pod", *stored}, {"NodeNames", fitting}});
  if (!scored.ok()) return std::move(scored).error();
  if (scored->is_array())
    for (const auto& e : scored->as_array())
      if (const auto* o = e.if_object(); o && o->contains("Host") && o->at("Host").is_string())
        out.scores[str(o->if_contains("Host"))] = o->at("Score").is_int64() ? o->at("Score").as_int64() : 0;
  std::string best = out.fitting.front();
  for (const auto& c : out.fitting)
    if (out.scores[c] > out.scores[best]) best = c;
  auto bound = call(
      "bind",
      {{"PodName", name}, {"PodNamespace", ns}, {"PodUID", str(at(*stored, {"metadata", "uid"}))}, {"Node", best}});
  if (!bound.ok()) return std::move(bound).error();
  const std::string bindError = bound->is_object() ? str(bound->as_object().if_contains("Error")) : "not an object";
  if (!bindError.empty()) {
    out.error = "bind to " + best + ": " + bindError;
    return out;
  }
  out.node = best;
  return out;
}

Result<fakes::AdmitResult> Cluster::admitPod(const std::string& ns, const std::string& name) {
  if (apiDown_) return makeError("the apiserver is down");
  std::string nodeName;
  if (!waitUntil([&] {
        auto p = pod(ns, name);
        nodeName = p ? str(at(*p, {"spec", "nodeName"})) : "";
        return !nodeName.empty();
      }))
    return makeError("pod " + ns + "/" + name + " was never bound");
  Node* n = node(nodeName);
  if (!n) return makeError("pod " + ns + "/" + name + " is bound to unknown node " + nodeName);
  auto info = parsePod(*pod(ns, name));
  if (!info.ok()) return std::move(info).error();
  const fakes::KubeletPod kp = fakes::kubeletPodOf(*info);
  fakes::AdmitResult result = n->kubelet->admit(kp);
  if (result.admitted) {
    // The kubelet starts the containers and reports the pod running.
    if (auto p = api_->patch("pods", ns, name, {{"status", {{"phase", "Running"}}}}); !p.ok())
      return makeError("reporting " + ns + "/" + name + " Running: " + p.error().message);
  }
  return result;
}

Result<PodRun> Cluster::runPod(const std::string& manifestYaml) {
  PodRun run;
  auto created = createPod(manifestYaml);
  if (!created.ok()) return makeError("create: " + created.error().message);
  run.pod = std::move(created).value();
  const std::string ns = str(at(run.pod, {"metadata", "namespace"})), name = str(at(run.pod, {"metadata", "name"}));
  auto scheduled = schedulePod(ns, name);
  if (!scheduled.ok()) return makeError("schedule: " + scheduled.error().message);
  run.schedule = std::move(scheduled).value();
  if (!run.schedule.bound()) return makeError("schedule: " + run.schedule.error);
  auto admitted = admitPod(ns, name);
  if (!admitted.ok()) return makeError("kubelet: " + admitted.error().message);
  run.admission = std::move(admitted).value();
  if (!run.admission.admitted) return makeError("kubelet: the pod was rejected: " + run.admission.error);
  if (auto p = pod(ns, name)) run.pod = *p;
  return run;
}

Status Cluster::deletePod(const std::string& ns, const std::string& name) {
  if (apiDown_) return makeError("the apiserver is down");
  auto p = pod(ns, name);
  if (!p) return makeError("pod " + ns + "/" + name + " does not exist");
  const std::string nodeName = str(at(*p, {"spec", "nodeName"})), uid = str(at(*p, {"metadata", "uid"}));
  if (auto s = api_->remove("pods", ns, name); !s.ok()) return s;
  if (Node* n = node(nodeName)) n->kubelet->removePod(uid);
  return {};
}

// ---- the container runtime ----

Result<std::unique_ptr<ChildProcess>> Cluster::startContainer(const PodRun& run, const std::string& container,
                                                              const std::string& program,
                                                              const std::vector<std::string>& args) {
  Node* n = node(run.schedule.node);
  if (!n) return makeError("the pod was not bound to a node of this cluster");
  ContainerLaunch launch;
  launch.spec = run.specOf(container);
  launch.program = program;
  launch.args = args;
  launch.scratchDir = (n->dir / ("c" + std::to_string(++n->containers))).string();
  launch.logFile = launch.scratchDir + "/stderr.log";
  std::error_code ec;
  fs::create_directories(launch.scratchDir, ec);
  launch.runtimeEnv = baseEnv();
  if (auto s = addNvidiaToolkit(launch, n->spec); !s.ok()) return s.error();
  return e2e::startContainer(launch);
}

std::map<std::string, std::string> readReport(ChildProcess& app) {
  std::map<std::string, std::string> out;
  while (auto line = app.readLine(kWait)) {
    if (*line == "holding") break;
    const auto eq = line->find('=');
    if (eq != std::string::npos) out[line->substr(0, eq)] = line->substr(eq + 1);
  }
  return out;
}

Status addNvidiaToolkit(ContainerLaunch& launch, const NodeSpec& node) {
  auto visible = launch.spec.env.find("NVIDIA_VISIBLE_DEVICES");
  if (visible == launch.spec.env.end()) return {};
  std::vector<FakeGpu> shown;
  std::stringstream ids(visible->second);
  for (std::string id; std::getline(ids, id, ',');) {
    auto it = std::find_if(node.gpus.begin(), node.gpus.end(), [&](const FakeGpu& g) { return g.uuid == id; });
    if (it == node.gpus.end()) return makeError("NVIDIA_VISIBLE_DEVICES names " + id + ", not a GPU of " + node.name);
    shown.push_back(*it);
  }
  const fs::path machine = fs::path(launch.scratchDir) / "visible-gpus.conf";
  if (auto s = writeText(machine, fakeGpuMachine(shown)); !s.ok()) return s;
  launch.runtimeEnv["LD_LIBRARY_PATH"] = paths::kFakeGpuDir;
  launch.runtimeEnv["VGPU_FAKE_GPU_CONFIG"] = machine.string();
  return {};
}

// ---- observation ----

std::optional<json::object> Cluster::pod(const std::string& ns, const std::string& name) const {
  return api_ && !apiDown_ ? api_->get("pods", ns, name) : std::nullopt;
}

std::string Cluster::annotationOf(const std::string& ns, const std::string& name, const std::string& key) const {
  if (!api_ || apiDown_) return "";
  auto obj = ns.empty() ? api_->get("nodes", "", name) : api_->get("pods", ns, name);
  return obj ? str(at(*obj, {"metadata", "annotations", key.c_str()})) : "";
}

std::optional<Assignment> Cluster::assignmentOf(const std::string& ns, const std::string& name) const {
  auto a = decodeAssignment(annotationOf(ns, name, std::string(keys::kPodAssignment)));
  if (!a.ok()) return std::nullopt;
  return std::move(a).value();
}

Result<Prediction> Cluster::predict(const json::object& podObj) {
  if (apiDown_) return makeError("the apiserver is down");
  auto info = parsePod(podObj);
  if (!info.ok()) return std::move(info).error();
  const BackendSet& backends = loaded_->backends;
  auto request = buildPodRequest(backends, info->podNamespace, info->name, info->containers, info->annotations);
  if (!request.ok()) return std::move(request).error();
  auto prepared = PreparedPod::prepare(*request, backends);
  if (!prepared.ok()) return std::move(prepared).error();

  std::vector<NodeState> states;
  const auto pods = api_->list("pods");
  for (const auto& n : nodes_) {
    std::vector<Device> devices;
    for (const auto& b : backends.all()) {
      const std::string inventory = annotationOf("", n->spec.name, keys::nodeDevices(b->name()));
      if (inventory.empty()) continue;
      auto decoded = decodeInventory(inventory, b->name());
      if (!decoded.ok()) return makeError("node " + n->spec.name + ": " + decoded.error().message);
      devices.insert(devices.end(), decoded->begin(), decoded->end());
    }
    std::set<std::string> cordoned;
    std::stringstream cordon(annotationOf("", n->spec.name, std::string(keys::kNodeDeviceCordon)));
    for (std::string id; std::getline(cordon, id, ',');)
      if (!id.empty()) cordoned.insert(id);
    NodeState state(n->spec.name, std::make_shared<NodeInventory>(std::move(devices), backends, cordoned));
    for (const auto& other : pods) {
      auto o = parsePod(other);
      if (!o.ok() || o->nodeName != n->spec.name || o->terminated() || o->uid == info->uid) continue;
      auto held = assignmentOf(o->podNamespace, o->name);
      if (held)
        if (auto s = state.add(*held); !s.ok()) return makeError("pod " + o->key() + ": " + s.error().message);
    }
    states.push_back(std::move(state));
  }
  const PlacementEngine engine(config_->scheduler);
  const Placement placement = engine.place(*prepared, states);
  Prediction out;
  for (size_t i = 0; i < states.size(); ++i)
    if (!placement.evaluations[i].fits)
      out.refusals[states[i].name] = engine.explain(*prepared, states[i], placement.evaluations[i]);
  if (placement.chosen) {
    out.node = states[*placement.chosen].name;
    out.assignment = placement.assignment;
  }
  return out;
}

bool Cluster::waitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

std::optional<double> Cluster::metricValue(const std::string& text, const std::string& seriesPrefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(seriesPrefix, 0) != 0) continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    return std::strtod(line.c_str() + space + 1, nullptr);
  }
  return std::nullopt;
}

// ---- lookups ----

Cluster::Node* Cluster::node(const std::string& name) {
  for (auto& n : nodes_)
    if (n->spec.name == name) return n.get();
  return nullptr;
}

const Cluster::Node* Cluster::node(const std::string& name) const {
  for (const auto& n : nodes_)
    if (n->spec.name == name) return n.get();
  return nullptr;
}

}  // namespace vgpu::e2e
