#pragma once
// A real Kubernetes control plane for the tests, on loopback, in a temp folder:
//
//   etcd            the release's own etcd (the version k8s.io/kubernetes requires)
//   kube-apiserver  TLS on 127.0.0.1 with the harness's CA, static tokens, Node,RBAC
//   kube-scheduler  configured from the file the chart renders (renderChart says what is
//                   substituted), running as the chart's ServiceAccount with the chart's
//                   RBAC applied
//   vgpu-scheduler  (startVgpu) the real binary with the chart's arguments, HTTPS with a
//                   certificate of the harness's CA, registered through the chart's
//                   MutatingWebhookConfiguration (pointed at 127.0.0.1, with the caBundle)
//   per vgpu node   (addVgpuNode) a Node object, the kubelet double (in this process) and
//                   the real vgpu-device-plugin with the chart's arguments
//
// etcd and the Kubernetes components come from the release's multi-call binary
// (tests/realk8s/build.sh; `k8s <component>`); every daemon is a child process with its
// log in the folder. kube-controller-manager runs when asked (startControllerManager; a
// real node, real_node.h, needs it); otherwise the harness does its part and the kubelet's
// where a test needs it (namespaces get their `default` ServiceAccount,
// Node objects are made Ready and untainted and get the device counts the kubelet double
// holds, pods are deleted with gracePeriodSeconds=0). README.md lists every flag and why.
//
//   RealCluster c({.release = "1.34"});
//   ASSERT_TRUE(c.start().ok());
//   c.createNamespace("t"); c.createNode("node-a");
//   auto r = c.api().post("/api/v1/namespaces/t/pods", podJson);
//   c.waitFor([&] { ... }, std::chrono::seconds(60));
//
// The destructor kills and reaps every child, also when a test fails half way; the
// folder is removed unless VGPU_REALK8S_KEEP is set (its logs are then kept and named).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "api_client.h"
#include "child_process.h"
#include "free_port.h"
#include "pki.h"
#include "cluster_audit.h"
#include "vgpu/fakes/fake_kubelet.h"
#include "vgpu/result.h"

namespace vgpu::realk8s {

/// Bounds for starting a component on a loaded 2-core machine (the two releases' suites
/// run at once).
inline constexpr std::chrono::seconds kStartTimeout{180};
inline constexpr std::chrono::seconds kWait{60};

/// The chart's release: namespace and name, as `helm install vgpu -n vgpu-system` would.
inline constexpr const char* kChartNamespace = "vgpu-system";
inline constexpr const char* kChartRelease = "vgpu";

struct RealClusterOptions {
  std::string release;  ///< "1.34" or "1.37": a folder of the build's realk8s/
  bool startKubeScheduler = true;
  /// vgpu-scheduler and the chart's webhook too (start them later with startVgpu()).
  bool startVgpu = false;
  /// Values laid over the chart's values.yaml, as `helm install -f`; the harness adds
  /// only scheduler.extender.port. kSimChartValues: the chart's sim devices instead of
  /// NVIDIA (machines without a GPU or its fake driver).
  std::string chartValues{};
  /// `--feature-gates` for kube-apiserver and kube-scheduler ("DRAConsumableCapacity=true");
  /// empty: the release's defaults.
  std::string featureGates{};
  /// kube-controller-manager too (a real node's cluster: DaemonSets, Deployments, garbage
  /// collection, the node lifecycle controller). Off for clusters of Node objects without
  /// kubelets, which its node lifecycle controller would taint and evict.
  bool startControllerManager = false;
  /// A default kube-scheduler too (for pods of `default-scheduler`: the chart's own).
  bool startDefaultScheduler = false;
  /// kube-apiserver listens on every address and advertises hostAddress() (the `kubernetes`
  /// Service's endpoint), so that pods on a real node's pod network reach it (kube-proxy).
  bool listenOnHost = false;
  /// The chart's namespace and RBAC applied by the harness (off when `helm install` does it).
  bool applyChartRbac = true;
};

/// Where a vgpu-device-plugin meets its kubelet (startVgpuAgent).
struct AgentPaths {
  std::string devicePluginDir;
  std::string podResourcesSocket;
  std::string stateDir;
};

/// The machine's first non-loopback IPv4 address (127.0.0.1 when it has none): a real
/// node's InternalIP (the 1.37 kubelet refuses a loopback --node-ip, "nodeIP can't be
/// loopback address"), where its pods reach the apiserver.
std::string hostAddress();

inline constexpr const char* kSimChartValues = "devices:\n  nvidia:\n    enabled: false\n  sim:\n    enabled: true\n";

class RealCluster {
 public:
  explicit RealCluster(RealClusterOptions options);
  ~RealCluster();  ///< kills and reaps every component
  RealCluster(const RealCluster&) = delete;
  RealCluster& operator=(const RealCluster&) = delete;

  /// Certificates, keys and tokens; etcd; kube-apiserver until /readyz; the `default`
  /// ServiceAccount, the chart's namespace and its scheduler RBAC; kube-scheduler until
  /// /healthz. Errors name the part that did not come up, with the end of its log.
  Status start();

  // ---- the components: stop (SIGTERM, or SIGKILL when not graceful) and start again on
  // the same ports and data; start waits until the component is ready ----
  Status startEtcd();
  void stopEtcd(bool graceful = true);
  Status startApiServer();
  void stopApiServer(bool graceful = true);
  Status startKubeScheduler();
  void stopKubeScheduler(bool graceful = true);
  Status restartEtcd(bool graceful = true);
  /// Also starts kube-scheduler again when it exited meanwhile (keepKubeSchedulerRunning).
  Status restartApiServer(bool graceful = true);
  Status restartKubeScheduler(bool graceful = true);
  /// kube-controller-manager as cluster admin, until /healthz (controller_manager.cpp).
  Status startControllerManager();
  void stopControllerManager(bool graceful = true);
  /// The cluster's default kube-scheduler (profile default-scheduler), until /healthz.
  Status startDefaultScheduler();

  // ---- vgpu, as the chart deploys it ----
  /// vgpu-scheduler (waits for /readyz), then the chart's MutatingWebhookConfiguration.
  Status startVgpu();
  /// vgpu-scheduler alone (it keeps its port; the webhook stays registered); waits for
  /// /readyz and until its cache shows every vgpu node's devices.
  Status startVgpuScheduler();
  void stopVgpuScheduler(bool graceful = true);
  /// The vgpu-scheduler binary run: $VGPU_REALK8S_VGPU_SCHEDULER when set (an older build,
  /// to show that a test fails without a fix), else the one this build made.
  static std::string vgpuSchedulerBinary();
  /// POSTs `body` to the running vgpu-scheduler's `path`: /filter, /prioritize, /bind on the
  /// verbs' listener (plain HTTP, as kube-scheduler calls them), others over HTTPS.
  ApiReply callVgpuScheduler(const std::string& path, const std::string& body);
  /// /healthz of vgpu-scheduler's verbs listener answers 200 (it serves; its caches may not
  /// be synced yet).
  bool vgpuSchedulerServing();
  /// /metrics of the running vgpu-scheduler (empty when it does not answer).
  std::string vgpuSchedulerMetrics();
  /// The value of the first series of `metricsText` that starts with `seriesPrefix`
  /// (`name{labels}` or `name`); nullopt when there is none.
  static std::optional<double> metricValue(const std::string& metricsText, const std::string& seriesPrefix);
  /// Rewrites `nodeCacheCapable` in the extender of kube-scheduler's configuration (the
  /// chart sets it true) and restarts kube-scheduler with it.
  Status setNodeCacheCapable(bool on);

  /// A vgpu node: createNode (with `labels`), a kubelet double, vgpu-device-plugin; waits
  /// until the plugins registered and sent devices, the Node carries the agent's inventory
  /// annotation and the device counts (as the kubelet would set its capacity), and a
  /// running vgpu-scheduler has the node's devices in its cache.
  Status addVgpuNode(const std::string& name, const std::map<std::string, std::string>& labels = {});
  /// vgpu-device-plugin alone for node `node`, with the DaemonSet's arguments and the
  /// kubelet at `paths` (a real kubelet's, or a double's); waits until it serves. Its
  /// component is "vgpu-device-plugin@<node>". `env`: more of its environment (a fake
  /// driver's settings: its "hardware").
  Status startVgpuAgent(const std::string& node, const AgentPaths& paths,
                        const std::map<std::string, std::string>& env = {});
  void stopVgpuAgent(const std::string& node, bool graceful = true);
  /// vgpu-dra-plugin for the real node `node` with the DRA DaemonSet's arguments (the chart
  /// rendered with `dra.enabled: true`), as the chart's ServiceAccount; the kubelet's
  /// plugins_registry and plugins folders are the chart's (the kubelet's default root),
  /// its checkpoint and claim folders under `stateDir`. The chart's DRA RBAC and
  /// DeviceClasses are applied at the first start. Waits until the kubelet accepted its
  /// registration. Its component is "vgpu-dra-plugin@<node>".
  Status startVgpuDraPlugin(const std::string& node, const std::string& stateDir);
  void stopVgpuDraPlugin(const std::string& node, bool graceful = true);
  /// The agent of vgpu node `node` stopped and started again with the same kubelet paths
  /// and state folder, as its DaemonSet's pod restarts.
  Status restartVgpuAgent(const std::string& node, bool graceful = true);
  /// From now on the agent of `node` (started by addVgpuNode or restartVgpuAgent) reaches
  /// kube-apiserver through 127.0.0.1:`port` (a TcpProxy's) instead of directly.
  void routeAgentApi(const std::string& node, std::uint16_t port);
  /// Until the Node carries the agent's inventory annotation of each enabled backend and a
  /// running vgpu-scheduler has the node's devices in its cache.
  Status waitForVgpuInventory(const std::string& node);
  /// Takes a vgpu node away: its agent and kubelet double stop, the Node is deleted.
  Status removeVgpuNode(const std::string& name);
  /// Restarts the node's kubelet double as a kubelet restarts (every socket in the plugin
  /// folder deleted, kubelet.sock recreated) and waits until the agent registered every
  /// resource again and sent healthy devices; then the Node's capacity shows them, as the
  /// kubelet sets it. Returns how many registrations the kubelet double recorded in all.
  Result<std::size_t> restartKubelet(const std::string& node);
  fakes::FakeKubelet& kubelet(const std::string& node);
  /// The node's kubelet admits a bound pod (GetPreferredAllocation, Allocate per
  /// container) and, when it did, reports it Running. Thread-safe (admissions on one node
  /// are serialized by its kubelet double, as in the kubelet).
  Result<fakes::AdmitResult> admitPod(const std::string& ns, const std::string& name);
  Result<fakes::AdmitResult> admitPod(const boost::json::object& pod);

  /// The audits of tests/integration/e2e/cluster_audit.h over the vgpu nodes `nodes`: every
  /// live pod bound there (from the apiserver) with its assignment, the devices each node's
  /// agent published, and what each node's kubelet double handed out. One message per
  /// violation; an error when the apiserver cannot be read.
  Result<std::vector<std::string>> audit(const std::vector<std::string>& nodes);
  /// The devices each of the vgpu nodes `nodes` publishes, for cluster_audit.h.
  Result<std::vector<e2e::AuditNode>> auditNodes(const std::vector<std::string>& nodes);
  /// The device-config.yaml both daemons read: the chart's ConfigMap, "mounted" in the
  /// folder (its /etc/vgpu/ paths pointing there).
  std::string deviceConfigPath() const;

  /// Compacts etcd's history at its current revision (`k8s etcd-compact`, through the
  /// etcd client); returns that revision. By default as kube-apiserver's compactor does it
  /// (the revision recorded in etcd's compact_rev_key, which every apiserver watches);
  /// `raw`: the compaction alone, as etcd's --auto-compaction would, unknown to the
  /// apiservers. kube-apiserver's own compaction runs once a day
  /// (--etcd-compaction-interval=24h), so history goes only when a test says so.
  Result<std::int64_t> compactEtcd(bool raw = false);

  /// A certificate signed by the cluster's CA (which kube-apiserver trusts for clients):
  /// a kubelet's `system:node:<name>` in `system:nodes`.
  Result<PemPair> issueCertificate(const LeafSpec& spec) const;

  // ---- the API, as cluster admin (a static token in system:masters) ----
  ApiClient& api() { return *admin_; }
  /// A client with another of the static tokens (tokenFor).
  ApiClient clientAs(const std::string& token) const;
  /// Creates a namespace and its `default` ServiceAccount (the ServiceAccount admission
  /// plugin refuses pods without it; the controller-manager would make it).
  Status createNamespace(const std::string& name);
  /// A Node object as a registered, Ready kubelet shows it: `capacity` (= allocatable;
  /// default 8 CPUs, 32Gi, 110 pods), condition Ready, and without the not-ready taint
  /// that admission puts on a new Node (the node lifecycle controller would lift it).
  /// `annotations` are set at creation (the scale benchmark's copied inventories).
  Status createNode(const std::string& name, std::map<std::string, std::string> capacity = {},
                    const std::map<std::string, std::string>& labels = {},
                    const std::map<std::string, std::string>& annotations = {});
  /// DELETE with gracePeriodSeconds=0 (no kubelet confirms a graceful delete), then waits
  /// until it is gone. A vgpu node's kubelet double frees what the pod held first (the
  /// kubelet stops a pod before its object goes), and admitPod refuses it from then on.
  Status deletePod(const std::string& ns, const std::string& name);
  /// The object at `path` (GET), or an error with the reply.
  Result<boost::json::object> getObject(const std::string& path);
  /// Polls `cond` every 100 ms until it holds or `timeout` passes.
  static bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout = kWait);

  // ---- what the cluster is made of ----
  const std::string& release() const { return options_.release; }
  /// "v1.34.4": what the binary says it is (`k8s version`).
  const std::string& kubernetesVersion() const { return kubernetesVersion_; }
  const std::string& dir() const { return dir_; }
  /// The release's multi-call binary (`k8s <component>`).
  const std::string& binary() const { return binary_; }
  std::uint16_t apiServerPort() const { return apiPort_; }
  std::string etcdUrl() const;
  std::string caFile() const;
  std::string adminKubeconfig() const;
  /// vgpu-scheduler's extender verbs (filter, prioritize, bind; plain HTTP on loopback,
  /// --extender-listen): the chart's scheduler.extender.verbsPort, rendered into kube-scheduler's
  /// urlPrefix.
  std::uint16_t extenderPort() const { return extenderPort_; }
  /// vgpu-scheduler's HTTPS listener (--listen: the webhook, /metrics, /healthz, /readyz):
  /// the chart's scheduler.extender.port.
  std::uint16_t webhookPort() const { return webhookPort_; }
  /// The profile the chart gives kube-scheduler (scheduler.schedulerName).
  const std::string& schedulerName() const { return schedulerName_; }
  /// The kube-scheduler configuration as written for this run, and as rendered.
  const std::string& schedulerConfig() const { return schedulerConfig_; }
  /// The bearer token of a static user: "admin", "kube-scheduler" (the chart's scheduler
  /// ServiceAccount), "vgpu-scheduler" (the same account: one pod), "vgpu-device-plugin",
  /// "vgpu-dra-plugin".
  std::string tokenFor(const std::string& user) const;
  /// The last lines of a component's current log ("etcd", "kube-apiserver",
  /// "kube-scheduler", "vgpu-scheduler", "vgpu-device-plugin@<node>").
  std::string logTail(const std::string& component, size_t lines = 40) const;
  /// The process id of a running component (names as for logTail); -1 when it is not running.
  /// For the scale benchmark's readings of its RSS and CPU time from /proc.
  int pidOf(const std::string& component) const;
  /// The process id of a running component (names as for logTail); 0 when not running.
  int componentPid(const std::string& component) const;
  /// The sim backend's devices file both daemons read (the chart's sim-devices.yaml).
  std::string simDevicesFile() const { return dir_ + "/etc-vgpu/sim-devices.yaml"; }

 private:
  struct Component;
  struct VgpuNode;
  Status writeFiles();
  Status renderChart();
  Status applyChartObjects(const std::string& templateFile);
  Status registerWebhook();
  Result<std::vector<std::string>> chartArgs(const std::string& templateFile, const std::string& container,
                                             const std::map<std::string, std::string>& substitutions);
  /// Starts `program` (the release binary with the component's name first when empty).
  Status startComponent(Component& c, const std::vector<std::string>& args, const std::function<bool()>& ready,
                        const std::string& program = "", const std::map<std::string, std::string>& extraEnv = {});
  void stopComponent(Component& c, bool graceful);
  Component& component(const std::string& name) const;
  /// The component `name` ("vgpu-device-plugin@<node>"), made on first use.
  Component& componentSlot(const std::string& name);
  Status waitForVgpuSchedulerCache(const std::string& node);
  /// After an apiserver restart: a kube-scheduler that lost its Lease meanwhile exited; it
  /// is started again, as the kubelet restarts its container.
  Status keepKubeSchedulerRunning();
  /// The kubelet's part: the Node's capacity and allocatable show the healthy devices the
  /// node's plugins sent its kubelet double.
  Status publishDeviceCapacity(VgpuNode& node);

  RealClusterOptions options_;
  std::string dir_;
  std::string binary_;
  std::string kubernetesVersion_;
  std::uint16_t etcdPort_ = 0, etcdPeerPort_ = 0, apiPort_ = 0, kubeSchedulerPort_ = 0, webhookPort_ = 0,
                extenderPort_ = 0, controllerManagerPort_ = 0, defaultSchedulerPort_ = 0;
  std::unique_ptr<CertificateAuthority> ca_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<ApiClient> admin_;
  std::map<std::string, std::unique_ptr<Component>> components_;
  std::string schedulerName_;
  std::string schedulerConfig_;
  std::vector<std::string> enabledBackends_;  ///< in the chart's device config
  std::vector<std::string> countResources_;   ///< of those backends: what their plugins register
  bool draObjectsApplied_ = false;            ///< the chart's DRA RBAC and DeviceClasses
  std::map<std::string, std::unique_ptr<VgpuNode>> vgpuNodes_;
  std::map<std::string, std::uint16_t> agentApiPorts_;  ///< routeAgentApi
  std::mutex stoppedMu_;
  std::set<std::string> stoppedUids_;  ///< pods deletePod stopped: never admitted after that
};

}  // namespace vgpu::realk8s
