// The real-node scenarios (ctest -L realnode: RealNode.1.34, RealNode.1.37): a control plane
// with kube-controller-manager, one real node (containerd, runc, the release's kubelet) and
// vgpu-device-plugin with the chart's arguments against that kubelet's device manager. No
// kubelet double and no test CDI runtime: containers are started by runc.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstring>
#include <iostream>
#include <set>

#include "real_cluster.h"
#include "real_node.h"
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
  static Status waitForDeviceCapacity() {
    std::string last;
    if (!RealCluster::waitFor([&] {
          auto n = cluster_->getObject("/api/v1/nodes/" + node_->name());
          last = n.ok() ? str(at(*n, {"status", "allocatable", "vgpu.io/sim"})) : "";
          return last == "32";
        }))
      return makeError("the Node's allocatable vgpu.io/sim is '" + last + "', not 32; the kubelet's log ends:\n" +
                       node_->logTail("kubelet"));
    return {};
  }
  static void TearDownTestSuite() {
    if (cluster_ && node_) cluster_->stopVgpuAgent(node_->name());
    delete node_;  // before the cluster: its folder holds the node's
    delete cluster_;
    delete startStatus_;
    node_ = nullptr;
    cluster_ = nullptr;
    startStatus_ = nullptr;
  }
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
    auto r = cluster().api().get("/api/v1/namespaces/" + ns + "/pods/" + name + "/log?container=main" +
                                 (previous ? "&previous=true" : ""));
    return r.status == 200 ? r.body : "(" + r.describe() + ")";
  }
  /// Graceful deletion, confirmed by the real kubelet once the containers are gone.
  void remove(const std::string& ns, const std::string& name) {
    const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
    auto r = cluster().api().del(path);
    ASSERT_TRUE(r.status == 200 || r.status == 404) << r.describe();
    EXPECT_TRUE(RealCluster::waitFor([&] { return cluster().api().get(path).status == 404; }, std::chrono::seconds(60)))
        << path << " was not removed by the kubelet; its log ends:\n"
        << node().logTail("kubelet", 30);
  }
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

}  // namespace
}  // namespace vgpu::realk8s
