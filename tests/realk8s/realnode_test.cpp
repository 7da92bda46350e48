// The real-node scenarios (ctest -L realnode: RealNode.1.34, RealNode.1.37): a control plane
// with kube-controller-manager, one real node (containerd, runc, the release's kubelet) and
// vgpu-device-plugin with the chart's arguments against that kubelet's device manager. No
// kubelet double and no test CDI runtime: containers are started by runc.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstring>
#include <iostream>
#include <set>
#include <thread>
#include <tuple>

#include "real_cluster.h"
#include "real_node.h"
#include "realnode_support.h"
#include "scenario_support.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release (release_main.cpp)


namespace {
namespace json = boost::json;

class RealNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RealCluster({.release = gRelease,
                                .startVgpu = true,
                                .chartValues = suiteChartValues(),
                                .startControllerManager = true});
    node_ = new RealNode(*cluster_, {});
    startStatus_ = new Status(startAll());
  }
  static Status startAll() {
    if (auto s = cluster_->start(); !s.ok()) return s;
    if (auto s = node_->start(); !s.ok()) return s;
    if (auto s = cluster_->startVgpuAgent(node_->name(), node_->agentPaths()); !s.ok()) return s;
    if (auto s = cluster_->waitForVgpuInventory(node_->name()); !s.ok()) return s;
    return waitForDeviceCapacity();
  }
  /// The kubelet's device manager publishes what the agent registered: 8 devices x 4 shares.
  static Status waitForDeviceCapacity() { return waitForAllocatable(*cluster_, *node_, "vgpu.io/sim", "32"); }
  /// How often the agent registered with the running kubelet (its current log).
  static std::size_t registrations() { return deviceRegistrations(*node_, "vgpu.io/sim"); }
  /// After the kubelet or the agent started again: the agent registered with the running
  /// kubelet more than `before` times and the Node shows the devices again. A kubelet that
  /// starts sets the count to 0 until the plugin registers; kube-scheduler refuses pods
  /// meanwhile ("Insufficient vgpu.io/sim"), as on any cluster.
  static Status waitForAgentRegistered(std::size_t before = 0) {
    if (!RealCluster::waitFor([&] { return registrations() > before; }))
      return makeError("the agent did not register with the kubelet again; its log ends:\n" + node_->logTail("kubelet"));
    return waitForDeviceCapacity();
  }
  static void TearDownTestSuite() { stopRealNodeSuite(cluster_, node_, startStatus_); }
  void SetUp() override {
    ASSERT_TRUE(startStatus_->ok()) << "the " << gRelease << " cluster with a real node did not start: "
                                    << startStatus_->error().message;
  }

  RealCluster& cluster() { return *cluster_; }
  RealNode& node() { return *node_; }

  /// A busybox pod on the real node running `script` (host network; its own short grace:
  /// busybox's shell as PID 1 ignores SIGTERM).
  json::object pod(const std::string& name, const std::string& script, const std::map<std::string, std::string>& limits = {},
                   const std::string& restartPolicy = "Never") {
    json::object l;
    for (const auto& [k, v] : limits) l[k] = v;
    json::object container{{"name", "main"},
                           {"image", kBusyboxImage},
                           {"imagePullPolicy", "Never"},
                           {"command", json::array{"/bin/sh", "-c", script.c_str()}}};
    if (!l.empty()) container["resources"] = json::object{{"limits", l}};
    return json::object{{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}}},
                        {"spec",
                         {{"schedulerName", cluster().schedulerName()},
                          {"hostNetwork", true},
                          {"restartPolicy", restartPolicy},
                          {"terminationGracePeriodSeconds", 1},
                          {"containers", json::array{container}}}}};
  }
  void create(const std::string& ns, const json::object& p) {
    auto r = cluster().api().post("/api/v1/namespaces/" + ns + "/pods", json::serialize(p));
    ASSERT_EQ(r.status, 201) << r.describe();
  }
  /// The pod once its phase is `phase` (the kubelet's log in the failure otherwise).
  json::object waitPhase(const std::string& ns, const std::string& name, const std::string& phase,
                         std::chrono::milliseconds timeout = std::chrono::seconds(90)) {
    json::object last;
    const bool ok = RealCluster::waitFor(
        [&] {
          auto p = cluster().getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
          if (!p.ok()) return false;
          last = *p;
          return str(at(last, {"status", "phase"})) == phase;
        },
        timeout);
    EXPECT_TRUE(ok) << ns << "/" << name << " never reached " << phase << ": " << json::serialize(last)
                    << "\nthe kubelet's log ends:\n"
                    << node().logTail("kubelet", 30);
    return last;
  }
  /// The main container's state: "running", "terminated", "waiting" (empty when none).
  static std::string containerField(const json::object& p, std::initializer_list<std::string_view> path) {
    const auto* statuses = at(p, {"status", "containerStatuses"});
    if (!statuses || !statuses->is_array() || statuses->as_array().empty()) return {};
    const auto& s = statuses->as_array()[0];
    if (!s.is_object()) return {};
    const auto* v = at(s.as_object(), path);
    if (!v) return {};
    return v->is_string() ? std::string(v->as_string()) : json::serialize(*v);
  }
  std::string log(const std::string& ns, const std::string& name, bool previous = false) {
    return podLog(cluster(), ns, name, previous);
  }
  void remove(const std::string& ns, const std::string& name) { removePod(cluster(), node(), ns, name); }
  /// The devices of the pod's assignment annotation, "SIM-GPU-3::1" each.
  static std::vector<std::string> assigned(const json::object& p) {
    std::vector<std::string> out;
    auto a = decodeAssignment(str(at(p, {"metadata", "annotations", keys::kPodAssignment})));
    if (!a.ok()) return out;
    for (const auto& c : a->containers)
      for (const auto& g : c.devices) out.push_back(g.deviceId + "::" + std::to_string(g.slot));
    return out;
  }
  /// No share given twice, no device over its memory, compute or split count.
  void expectAuditClean() {
    auto audit = cluster().audit({node().name()});
    ASSERT_TRUE(audit.ok()) << audit.error().message;
    EXPECT_TRUE(audit->empty()) << ::testing::PrintToString(*audit);
  }
  /// A pod never refused by the kubelet's admission (UnexpectedAdmissionError, OutOf...).
  static void expectAdmitted(const json::object& p) {
    const std::string reason = str(at(p, {"status", "reason"}));
    EXPECT_TRUE(reason.empty()) << "the kubelet refused it: " << reason << ": " << str(at(p, {"status", "message"}));
  }

  /// A long-running slice pod (restartPolicy Always) that prints its devices and sleeps,
  /// once Running; its container's id.
  std::string startSleeper(const std::string& ns, const std::string& name, std::uint64_t memoryMiB = 20000) {
    create(ns, pod(name, "echo \"$VGPU_SIM_VISIBLE_DEVICES $VGPU_SIM_MEMORY_LIMIT_0\"; exec sleep 3600",
                   simLimits(1, memoryMiB, 30), "Always"));
    auto p = waitPhase(ns, name, "Running");
    expectAdmitted(p);
    return containerField(p, {"containerID"});
  }
  /// What the sleeper printed: its device and memory limit, as Allocate gave them.
  std::string expectedLine(const json::object& p, std::uint64_t memoryMiB = 20000) {
    const auto devices = assigned(p);
    if (devices.size() != 1) return "(assignment: " + ::testing::PrintToString(devices) + ")";
    return devices[0].substr(0, devices[0].find("::")) + " " + std::to_string(memoryMiB) + "m\n";
  }
  json::object get(const std::string& ns, const std::string& name) {
    auto p = cluster().getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
    return p.ok() ? *p : json::object{};
  }
  /// The pod runs the same container as before (not restarted, not replaced).
  void expectUndisturbed(const std::string& ns, const std::string& name, const std::string& containerId,
                         const std::vector<std::string>& devices) {
    auto p = get(ns, name);
    EXPECT_EQ(str(at(p, {"status", "phase"})), "Running") << json::serialize(p);
    EXPECT_EQ(containerField(p, {"containerID"}), containerId) << json::serialize(p);
    EXPECT_EQ(containerField(p, {"restartCount"}), "0") << json::serialize(p);
    EXPECT_EQ(assigned(p), devices) << json::serialize(p);
  }
  /// A new slice pod is admitted by the kubelet and runs (the agent serves its kubelet).
  void expectNewPodRuns(const std::string& ns, const std::string& name) {
    create(ns, pod(name, "test -n \"$VGPU_SIM_VISIBLE_DEVICES\"", simLimits(1, 20000, 30)));
    auto p = waitPhase(ns, name, "Succeeded");
    expectAdmitted(p);
    EXPECT_EQ(containerField(p, {"state", "terminated", "exitCode"}), "0") << json::serialize(p);
  }

  static RealCluster* cluster_;
  static RealNode* node_;
  static Status* startStatus_;
};

RealCluster* RealNodeTest::cluster_ = nullptr;
RealNode* RealNodeTest::node_ = nullptr;
Status* RealNodeTest::startStatus_ = nullptr;

TEST_F(RealNodeTest, NodeRegistersThroughItsCertificateAndRunsAPodWithRunc) {
  auto n = cluster().getObject("/api/v1/nodes/" + node().name());
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(str(at(*n, {"status", "nodeInfo", "kubeletVersion"})), cluster().kubernetesVersion());
  const std::string runtime = str(at(*n, {"status", "nodeInfo", "containerRuntimeVersion"}));
  // "containerd 1.6.20~ds1" (Debian's) or "containerd v2.4.2": the CRI reports 1.6.20, 2.4.2.
  std::string want = node().containerdVersion().substr(std::strlen("containerd "));
  if (!want.empty() && want[0] == 'v') want.erase(0, 1);
  want = want.substr(0, want.find_first_of("~+-"));
  EXPECT_EQ(runtime.rfind("containerd://" + want, 0), 0u) << runtime << " vs " << node().containerdVersion();
  std::cout << "[" << cluster().kubernetesVersion() << "] node runtime " << runtime << std::endl;

  ASSERT_TRUE(cluster().createNamespace("plain").ok());
  create("plain", pod("hello", "echo hello from runc"));
  auto p = waitPhase("plain", "hello", "Succeeded");
  EXPECT_EQ(containerField(p, {"state", "terminated", "exitCode"}), "0") << json::serialize(p);
  // The apiserver reads the log from the kubelet (at the Node's InternalIP).
  EXPECT_EQ(log("plain", "hello"), "hello from runc\n");
  remove("plain", "hello");
}

TEST_F(RealNodeTest, ControllerManagerRunsDeploymentsServiceAccountsAndGarbageCollection) {
  // A namespace alone: its `default` ServiceAccount comes from the controller-manager.
  const json::object ns{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kcm"}}}};
  ASSERT_EQ(cluster().api().post("/api/v1/namespaces", json::serialize(ns)).status, 201);
  EXPECT_TRUE(RealCluster::waitFor(
      [&] { return cluster().api().get("/api/v1/namespaces/kcm/serviceaccounts/default").status == 200; }));
  json::object tmpl = pod("ignored", "sleep 3600", {}, "Always");
  json::object podMeta{{"labels", {{"app", "sleeper"}}}};
  const json::object deployment{
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "sleeper"}}},
      {"spec",
       {{"replicas", 2},
        {"selector", {{"matchLabels", {{"app", "sleeper"}}}}},
        {"template", {{"metadata", podMeta}, {"spec", tmpl["spec"]}}}}}};
  auto r = cluster().api().post("/apis/apps/v1/namespaces/kcm/deployments", json::serialize(deployment));
  ASSERT_EQ(r.status, 201) << r.describe();
  const auto running = [&](std::size_t want) {
    auto pods = listPods(cluster(), "kcm");
    if (!pods.ok()) return false;
    std::size_t n = 0;
    for (const auto& p : *pods) n += str(at(p, {"status", "phase"})) == "Running";
    return n == want && pods->size() == want;
  };
  EXPECT_TRUE(RealCluster::waitFor([&] { return running(2); }, std::chrono::seconds(120)))
      << "kube-controller-manager's log ends:\n"
      << cluster().logTail("kube-controller-manager") << "\nthe kubelet's log ends:\n"
      << node().logTail("kubelet");
  // Deleting the Deployment: the garbage collector deletes its ReplicaSet and their pods.
  r = cluster().api().del("/apis/apps/v1/namespaces/kcm/deployments/sleeper",
                          R"({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"})");
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_TRUE(RealCluster::waitFor(
      [&] {
        auto pods = listPods(cluster(), "kcm");
        return pods.ok() && pods->empty();
      },
      std::chrono::seconds(120)));
}

TEST_F(RealNodeTest, SlicePodIsAdmittedByTheRealDeviceManagerAndRunsWithItsSlice) {
  ASSERT_TRUE(cluster().createNamespace("slice").ok());
  // The env the sim backend's Allocate gives the container, checked inside it by runc's
  // process; the device ids it sees printed for the log.
  create("slice", pod("slice",
                      "test \"$VGPU_SIM_MEMORY_LIMIT_0\" = 3000m && test \"$VGPU_SIM_CORE_LIMIT\" = 30 && "
                      "test -f /var/run/vgpu-sim/region && echo \"$VGPU_SIM_VISIBLE_DEVICES\"",
                      simLimits(1, 3000, 30)));
  auto p = waitPhase("slice", "slice", "Succeeded");
  expectAdmitted(p);
  EXPECT_EQ(containerField(p, {"state", "terminated", "exitCode"}), "0") << "the container's env: " << json::serialize(p);
  const auto devices = assigned(p);
  ASSERT_EQ(devices.size(), 1u) << json::serialize(p);
  // Visible: the device's id, without the share's slot.
  EXPECT_EQ(log("slice", "slice"), devices[0].substr(0, devices[0].find("::")) + "\n");
  remove("slice", "slice");
}


TEST_F(RealNodeTest, KubeletRestartKeepsRunningSlicesAndAdmitsANewPodWithoutDoubleBooking) {
  ASSERT_TRUE(cluster().createNamespace("kubelet-restart").ok());
  const std::string id = startSleeper("kubelet-restart", "before");
  const auto devices = assigned(get("kubelet-restart", "before"));
  ASSERT_EQ(log("kubelet-restart", "before"), expectedLine(get("kubelet-restart", "before")));
  // The kubelet stops and starts again; its device manager reads its checkpoint, the agent
  // sees kubelet.sock made again and registers again.
  node().stopKubelet();
  ASSERT_TRUE(node().startKubelet().ok()) << node().logTail("kubelet");
  ASSERT_TRUE(waitForAgentRegistered().ok());
  expectNewPodRuns("kubelet-restart", "after");
  expectUndisturbed("kubelet-restart", "before", id, devices);
  expectAuditClean();
  remove("kubelet-restart", "before");
  remove("kubelet-restart", "after");
}

TEST_F(RealNodeTest, ContainerdRestartKeepsRunningSlicesAndAdmitsANewPod) {
  ASSERT_TRUE(cluster().createNamespace("containerd-restart").ok());
  const std::string id = startSleeper("containerd-restart", "before");
  const auto devices = assigned(get("containerd-restart", "before"));
  // The containers live on in their shims while containerd is away.
  node().stopContainerd();
  ASSERT_TRUE(node().startContainerd().ok()) << node().logTail("containerd");
  expectNewPodRuns("containerd-restart", "after");
  expectUndisturbed("containerd-restart", "before", id, devices);
  expectAuditClean();
  remove("containerd-restart", "before");
  remove("containerd-restart", "after");
}

TEST_F(RealNodeTest, AgentKilledAndStartedAgainKeepsRunningContainersAndAdmitsANewPod) {
  ASSERT_TRUE(cluster().createNamespace("agent-restart").ok());
  const std::string id = startSleeper("agent-restart", "before");
  const auto devices = assigned(get("agent-restart", "before"));
  const std::size_t before = registrations();
  cluster().stopVgpuAgent(node().name(), false);  // SIGKILL, as a crash or a deleted pod
  ASSERT_TRUE(cluster().startVgpuAgent(node().name(), node().agentPaths()).ok());
  ASSERT_TRUE(cluster().waitForVgpuInventory(node().name()).ok());
  ASSERT_TRUE(waitForAgentRegistered(before).ok());
  expectNewPodRuns("agent-restart", "after");
  expectUndisturbed("agent-restart", "before", id, devices);
  expectAuditClean();
  remove("agent-restart", "before");
  remove("agent-restart", "after");
}

TEST_F(RealNodeTest, NodeRebootBringsPodsBackOnTheirDevicesOrFailsThemNeverDoubleBooked) {
  ASSERT_TRUE(cluster().createNamespace("reboot").ok());
  startSleeper("reboot", "a");
  startSleeper("reboot", "b", 30000);
  const auto devicesA = assigned(get("reboot", "a"));
  const auto devicesB = assigned(get("reboot", "b"));
  // Power cut: every daemon and container of the node dies at once; then it boots:
  // containerd, the kubelet, and the agent (its DaemonSet pod would start after them).
  cluster().stopVgpuAgent(node().name(), false);
  node().stopKubelet(false);
  node().stopContainerd(false);
  node().killContainers();
  ASSERT_TRUE(node().startContainerd().ok()) << node().logTail("containerd");
  ASSERT_TRUE(node().startKubelet().ok()) << node().logTail("kubelet");
  // The agent's DaemonSet pod is admitted and started by the kubelet like any other: the
  // kubelet has looked at the node's pods before it registers.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  ASSERT_TRUE(cluster().startVgpuAgent(node().name(), node().agentPaths()).ok());
  ASSERT_TRUE(cluster().waitForVgpuInventory(node().name()).ok());
  ASSERT_TRUE(waitForAgentRegistered().ok());
  // Each pod either runs again (a new sandbox and container) on the devices it had, and
  // its new container got them from Allocate again, or is failed with a reason.
  for (const auto& [name, devices, memory] : {std::tuple{"a", devicesA, 20000}, std::tuple{"b", devicesB, 30000}}) {
    json::object p;
    const bool settled = RealCluster::waitFor(
        [&] {
          p = get("reboot", name);
          const std::string phase = str(at(p, {"status", "phase"}));
          return phase == "Failed" ||
                 (phase == "Running" && containerField(p, {"restartCount"}) != "0" &&
                  containerField(p, {"ready"}) == "true");
        },
        std::chrono::seconds(120));
    ASSERT_TRUE(settled) << name << " neither ran again nor failed: " << json::serialize(p)
                         << "\nthe kubelet's log ends:\n"
                         << node().logTail("kubelet", 40);
    std::cout << "[" << cluster().kubernetesVersion() << "] after the reboot " << name << " is "
              << str(at(p, {"status", "phase"})) << " " << str(at(p, {"status", "reason"})) << std::endl;
    if (str(at(p, {"status", "phase"})) == "Failed") {
      EXPECT_FALSE(str(at(p, {"status", "reason"})).empty()) << json::serialize(p);
      continue;
    }
    EXPECT_EQ(assigned(p), devices) << json::serialize(p);
    EXPECT_TRUE(RealCluster::waitFor([&] { return log("reboot", name) == expectedLine(p, static_cast<std::uint64_t>(memory)); }))
        << log("reboot", name);
  }
  expectNewPodRuns("reboot", "c");
  expectAuditClean();
  for (const char* name : {"a", "b", "c"}) remove("reboot", name);
}

TEST_F(RealNodeTest, InitContainersAndACrashLoopingContainerKeepTheirDevices) {
  ASSERT_TRUE(cluster().createNamespace("crashloop").ok());
  // An init container without devices runs first; the main container asks a slice, prints
  // what it got and exits 1: the kubelet restarts it with the same devices (no Allocate
  // for a restart; the device manager keeps the pod's devices until the pod ends).
  json::object p = pod("loop", "echo \"$VGPU_SIM_VISIBLE_DEVICES $VGPU_SIM_MEMORY_LIMIT_0\"; exit 1",
                       simLimits(1, 20000, 30), "Always");
  p["spec"].as_object()["initContainers"] = json::array{json::object{{"name", "init"},
                                                                     {"image", kBusyboxImage},
                                                                     {"imagePullPolicy", "Never"},
                                                                     {"command", json::array{"/bin/sh", "-c", "true"}}}};
  create("crashloop", p);
  json::object now;
  ASSERT_TRUE(RealCluster::waitFor(
      [&] {
        now = get("crashloop", "loop");
        const std::string restarts = containerField(now, {"restartCount"});
        return !restarts.empty() && std::stoi(restarts) >= 2;
      },
      std::chrono::seconds(120)))
      << json::serialize(now);
  expectAdmitted(now);
  const std::string want = expectedLine(now);
  // The previous container's log (the kubelet may be removing an older one just then).
  std::string previous;
  EXPECT_TRUE(RealCluster::waitFor([&] { return (previous = log("crashloop", "loop", true)) == want; }))
      << "the restarted container saw other devices: " << previous << " instead of " << want;
  const auto devices = assigned(now);
  // Still holding its share while it loops: a second pod is placed elsewhere and the audit
  // counts both.
  expectNewPodRuns("crashloop", "other");
  EXPECT_EQ(assigned(get("crashloop", "loop")), devices);
  expectAuditClean();
  remove("crashloop", "loop");
  remove("crashloop", "other");
}

}  // namespace
}  // namespace vgpu::realk8s
