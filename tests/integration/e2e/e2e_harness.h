#pragma once
// The end-to-end harness: a small cluster on one machine, with the real daemons.
//
//   apiserver       the apiserver double (vgpu::fakes::FakeApiServer), in this process, HTTP
//   vgpu-scheduler  the real binary, a child process: extender + webhook over plain HTTP,
//                   pointed at the double through a kubeconfig file
//   per node:       vgpu-device-plugin, the real binary, a child process with its own
//                   NODE_NAME, plugin folder, PodResources socket, state folder and metrics
//                   port, on fake vendor libraries (fake NVML/libcuda, cnDev, ROCm-SMI/hydmi)
//                   describing that node's devices; and the kubelet double
//                   (vgpu::fakes::FakeKubelet), in this process, speaking real gRPC to it
//   kube-scheduler  played by this process (schedulePod): filter, prioritize, bind over
//                   HTTP exactly as a kube-scheduler with the extender configured would
//   the runtime     played by this process (startContainer): a child in its own mount
//                   namespace with the ContainerSpec's env, mounts and preload
//
// All nodes share one device-config.yaml (as the chart's ConfigMap): the NVIDIA, Cambricon
// and Hygon backends enabled, per-node overrides for folders. A backend whose fake driver
// has no device on a node is skipped there by the agent, as on a real mixed cluster.
//
// Typical use (see e2e_test.cpp; a test file here is built by this folder's CMakeLists.txt,
// e2e_failure_test.cpp included, linking vgpu_e2e_harness, with VGPU_E2E_CUDA_APP defined):
//   Cluster c;                                  // options: split counts, policies, heartbeats
//   ASSERT_TRUE(c.start({{.name = "gpu-a", .gpus = {{.uuid = "GPU-..."}}}}).ok());
//   auto run = c.runPod(yamlManifest);          // webhook, store, filter, prioritize, bind, Allocate
//   ASSERT_TRUE(run.ok()) << run.error().message;
//   auto app = c.startContainer(*run, "main", VGPU_E2E_CUDA_APP, {"1048576"});
//   c.deletePod("default", "name");
// or step by step (createPod, predict, schedulePod, admitPod) to look in between; a pod
// that does not fit comes back from schedulePod with bound() false and the reasons.
//
// Nothing here sleeps for synchronization: every wait polls a condition until a deadline
// (kWait unless stated) and reports what it saw. Every child is killed and reaped by the
// destructor, also when a test fails half way. Each part can be stopped and started again
// (stopScheduler/startScheduler, stopAgent/startAgent, restartKubelet,
// stopApiServer/startApiServer) for the failure tests.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "child_process.h"
#include "container_runtime.h"
#include "fake_nodes.h"
#include "vgpu/assignment.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/fakes/fake_kubelet.h"
#include "vgpu/placement.h"
#include "vgpu/result.h"

namespace vgpu::e2e {

/// Generous: the suite must pass on a loaded 2-core machine.
inline constexpr std::chrono::milliseconds kWait{30000};
/// A request to a daemon that has no reply by then fails, so one that hangs fails the test
/// instead of stalling it.
inline constexpr std::chrono::milliseconds kHttpTimeout{10000};
inline constexpr const char* kSchedulerName = "vgpu-scheduler";

struct ClusterOptions {
  int nvidiaSplit = 4;
  int cambriconSplit = 4;
  int hygonSplit = 4;
  std::string ascendFamilies{};  ///< the ascend backend's options.families; empty: its default names
  std::string nodePolicy = "binpack";
  std::string devicePolicy = "spread";
  std::string heartbeatTimeout = "90s";  ///< scheduler.heartbeatTimeout in device-config.yaml
  int heartbeatSeconds = 30;             ///< the agents' --heartbeat-seconds
  int bindHoldTimeoutMs = 3000;          ///< vgpu-scheduler --bind-hold-timeout
};

// ---- what the pod steps report ----

/// kube-scheduler's view of one scheduling attempt.
struct ScheduleOutcome {
  std::vector<std::string> candidates;             ///< nodes sent to /filter
  std::vector<std::string> fitting;                ///< NodeNames of the filter answer
  std::map<std::string, std::string> failedNodes;  ///< FailedNodes + FailedAndUnresolvableNodes
  std::map<std::string, std::int64_t> scores;      ///< /prioritize, per fitting node
  std::string node;                                ///< where it was bound; empty when not
  std::string error;                               ///< why not (no fit, bind error)
  bool bound() const { return !node.empty(); }
};

/// A pod that went all the way to the kubelet.
struct PodRun {
  boost::json::object pod;  ///< as stored after admission (uid filled in)
  ScheduleOutcome schedule;
  fakes::AdmitResult admission;  ///< the kubelet double's Allocate results, per container and resource
  std::string uid() const;
  /// The merged ContainerAllocateResponses of one container.
  ContainerSpec specOf(const std::string& container) const;
};

/// What the placement engine says about a pod on the cluster as it is now.
struct Prediction {
  std::string node;  ///< empty when nothing fits
  Assignment assignment;
  std::map<std::string, std::string> refusals;  ///< node -> the engine's reason in words
};

/// The NVIDIA container toolkit as the node's default runtime: a container whose spec names
/// NVIDIA_VISIBLE_DEVICES gets the driver libraries (the fake libcuda/NVML on LD_LIBRARY_PATH)
/// and sees only those GPUs of `node`, in that order; any other container is left alone.
/// Errors: a GPU the node does not have.
Status addNvidiaToolkit(ContainerLaunch& launch, const NodeSpec& node);

/// The key=value lines vgpu_e2e_cuda_app (cuda_app.cpp) prints up to "holding".
std::map<std::string, std::string> readReport(ChildProcess& app);
inline constexpr std::uint64_t kMiB = 1024 * 1024;
inline constexpr int kCudaOutOfMemory = 2;  ///< CUDA_ERROR_OUT_OF_MEMORY, as the report shows it

class Cluster {
 public:
  explicit Cluster(ClusterOptions options = {});
  ~Cluster();  ///< stops everything; children killed and reaped
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// Writes the config and fake machines, starts the apiserver double, creates the Node
  /// objects, starts each node's kubelet double and agent and the scheduler, and waits
  /// until every kubelet holds its plugins' device lists and the scheduler's cache shows
  /// every node's devices. Errors say which part did not come up, with its log.
  Status start(std::vector<NodeSpec> nodes);

  // ---- the pod's path through the cluster ----

  /// The apiserver's create: the YAML manifest goes through the admission webhook (POST
  /// /webhook, AdmissionReview v1), the JSONPatch is applied and the pod stored. Errors:
  /// the webhook refused (its message), the manifest is not a Pod.
  Result<boost::json::object> createPod(const std::string& manifestYaml);
  /// kube-scheduler: its own fit check of the advertised device counts against the
  /// kubelets' device lists, then POST /filter (nodeCacheCapable: NodeNames), /prioritize,
  /// picks the best score (ties: the first node by name) and POST /bind. Only the outcome's
  /// error says why a pod stayed pending; transport failures are errors.
  Result<ScheduleOutcome> schedulePod(const std::string& ns, const std::string& name);
  /// The kubelet of the node the pod was bound to: waits until the apiserver shows
  /// spec.nodeName, admits it (GetPreferredAllocation and Allocate per container) and,
  /// when admitted, reports phase Running. The result says whether the plugin refused.
  Result<fakes::AdmitResult> admitPod(const std::string& ns, const std::string& name);
  /// createPod + schedulePod + admitPod; an error at any step (including not bound or not
  /// admitted) is an error naming the step.
  Result<PodRun> runPod(const std::string& manifestYaml);
  /// The pod is deleted (apiserver) and its containers are gone (kubelet).
  Status deletePod(const std::string& ns, const std::string& name);

  /// "Starts" one container of an admitted pod: runs `program` (stdin and stdout on pipes)
  /// in a mount namespace with the container's merged ContainerSpec (see
  /// container_runtime.h). As the NVIDIA container toolkit would, it injects the driver
  /// libraries (the fake libcuda/NVML on LD_LIBRARY_PATH) and shows the process only the
  /// GPUs in NVIDIA_VISIBLE_DEVICES, in that order.
  Result<std::unique_ptr<ChildProcess>> startContainer(const PodRun& run, const std::string& container,
                                                       const std::string& program,
                                                       const std::vector<std::string>& args = {});

  // ---- what the cluster knows ----

  /// The placement engine (core) on the inventories the agents published and the
  /// assignments of the pods bound now, with the same config: where `pod` (as stored, after
  /// the webhook's defaults) should go. Nodes in name order, as schedulePod sends them.
  Result<Prediction> predict(const boost::json::object& pod);
  std::optional<boost::json::object> pod(const std::string& ns, const std::string& name) const;
  /// The vgpu.io/assignment annotation of a pod, decoded.
  std::optional<Assignment> assignmentOf(const std::string& ns, const std::string& name) const;
  std::string annotationOf(const std::string& ns, const std::string& name, const std::string& key) const;
  /// GET /metrics of a node's agent / of the scheduler; empty on failure.
  std::string agentMetrics(const std::string& node);
  std::string schedulerMetrics();
  /// Polls `cond` every 20 ms until it holds or `timeout` passes.
  static bool waitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout = kWait);
  /// The value of the first sample whose line starts with `seriesPrefix` (metric name and
  /// labels, e.g. `vgpu_container_memory_used_bytes{namespace="default",pod="p"`).
  static std::optional<double> metricValue(const std::string& metricsText, const std::string& seriesPrefix);

  // ---- the parts, for tests that break them ----

  fakes::FakeApiServer& api() { return *api_; }
  fakes::FakeKubelet& kubelet(const std::string& node);
  ChildProcess* scheduler() { return scheduler_.get(); }
  ChildProcess* agent(const std::string& node);
  std::uint16_t schedulerPort() const { return schedulerPort_; }  ///< the webhook, /metrics, /readyz
  std::uint16_t extenderPort() const { return extenderPort_; }    ///< filter, prioritize, bind
  const std::vector<NodeSpec>& nodes() const { return specs_; }
  /// The shared device-config.yaml, the scheduler's and agents' log files.
  std::string configPath() const;
  std::string schedulerLog() const;
  std::string agentLog(const std::string& node) const;
  /// The node's own folder: its fake drivers' configs (gpus.conf, cndev.conf and the fake
  /// cnDev's state cndev.conf.state, rocm.conf), sys/, dev/, state/ and plugin sockets.
  std::string nodeDir(const std::string& node) const;

  /// SIGTERM (graceful) or SIGKILL; the scheduler comes back on the same port.
  void stopScheduler(bool graceful = true);
  /// Starts it and waits for /readyz and for every running agent's devices in its cache.
  Status startScheduler();
  void stopAgent(const std::string& node, bool graceful = true);
  /// Starts it and waits until its plugins registered and sent devices to the kubelet, the
  /// Node shows its inventory and (when running) the scheduler's cache has its devices.
  Status startAgent(const std::string& node);
  /// The kubelet restarts: every socket in its plugin folder deleted, kubelet.sock
  /// recreated; admitted pods keep their devices. Waits for the agent to register again.
  Status restartKubelet(const std::string& node);
  /// The apiserver goes away: it stops listening and drops every connection (clients get
  /// "connection refused"); its objects stay. The pod steps fail while it is down.
  void stopApiServer();
  /// It listens again on the same port with the same objects, resourceVersions and watch
  /// history, as an apiserver restarted over the same etcd.
  Status startApiServer();

 private:
  struct Node;
  Node* node(const std::string& name);
  const Node* node(const std::string& name) const;
  Status writeClusterFiles();
  Status writeNodeFiles(Node& n);
  Status startKubelet(Node& n);
  Status waitForAgentDevices(Node& n);
  Status waitForSchedulerCache();
  std::vector<std::string> kubeSchedulerCandidates(const boost::json::object& pod);

  ClusterOptions options_;
  std::vector<NodeSpec> specs_;
  std::string dir_;  ///< one temp folder for everything; removed by the destructor
  std::unique_ptr<fakes::FakeApiServer> api_;
  bool apiDown_ = false;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unique_ptr<ChildProcess> scheduler_;
  std::uint16_t schedulerPort_ = 0;
  std::uint16_t extenderPort_ = 0;
  int schedulerStarts_ = 0;
  std::unique_ptr<BackendLoadOutcome> loaded_;  ///< for predict() and the advertised counts
  std::unique_ptr<DeviceConfig> config_;
};

}  // namespace vgpu::e2e
