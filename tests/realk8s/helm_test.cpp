// The chart installed with real helm on the real node (part of RealNode.<release>): the
// images scripts/build-images.sh makes (imported into the node's containerd), helm v4 built
// from its module, `helm install` with documented values only, the pod network (bridge CNI,
// kube-proxy) a user's node has. Nothing of vgpu runs outside a pod here.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "fake_nodes.h"
#include "project_images.h"
#include "real_cluster.h"
#include "realnode_support.h"
#include "real_node.h"
#include "scenario_support.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release (release_main.cpp)

namespace {
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr const char* kHelm = VGPU_REALNODE_HELM;
constexpr const char* kSourceDir = VGPU_REALNODE_SOURCE_DIR;

class RealNodeHelmTest : public ::testing::Test {
 protected:
  /// Whether the Node's allocatable vgpu.io/sim turned nonzero within the wait: the kubelet
  /// shows an agent's devices within its update period after the registration, and a pod
  /// created before is refused ("Insufficient vgpu.io/sim").
  static bool nodeShowsSimDevices() {
    return RealCluster::waitFor([] {
      auto n = cluster_->getObject("/api/v1/nodes/" + node_->name());
      const std::string count = n.ok() ? str(at(*n, {"status", "allocatable", "vgpu.io/sim"})) : "";
      return !count.empty() && count != "0";
    });
  }
  static void SetUpTestSuite() {
    cluster_ = new RealCluster({.release = gRelease,
                                .startKubeScheduler = false,
                                .startControllerManager = true,
                                .startDefaultScheduler = true,
                                .listenOnHost = true,
                                .applyChartRbac = false});
    startStatus_ = new Status(startAll());
  }
  static Status startAll() {
    if (auto s = cluster_->start(); !s.ok()) return s;
    auto images = buildImages();
    if (!images.ok()) return images.error();
    // The chart's devicePlugin.stateDir, mounted Bidirectional.
    node_ = new RealNode(*cluster_, {.podNetwork = true, .sharedHostDirs = {"/var/lib/vgpu"}, .images = *images});
    if (auto s = node_->start(); !s.ok()) return s;
    // docs/install.md step 2: the agent runs on nodes labelled gpu=on.
    if (auto r = cluster_->api().patch("/api/v1/nodes/" + node_->name(), R"({"metadata":{"labels":{"gpu":"on"}}})");
        r.status != 200)
      return makeError("labelling the node: " + r.describe());
    // As a user installs it: the chart's defaults and two documented values (sim devices
    // instead of NVIDIA, docs/config-reference.md); the images are the chart's default
    // names, present on the node (pullPolicy IfNotPresent).
    auto out = helm({"install", kChartRelease, std::string(kSourceDir) + "/charts/vgpu", "--namespace", kChartNamespace,
                     "--create-namespace", "--set", "devices.sim.enabled=true", "--set", "devices.nvidia.enabled=false",
                     "--wait", "--timeout", "3m"});
    if (!out.ok())
      return makeError("helm install: " + out.error().message + "\nthe kubelet's log ends:\n" +
                       node_->logTail("kubelet", 40));
    // `--wait` returns once the pods are Ready; the webhook's Service reaches them once the
    // EndpointSlice and kube-proxy's rules follow (seen: "connection refused" on the
    // ClusterIP right after, on 1.37). Until then the chart's webhook (failurePolicy Fail)
    // refuses pods with shares, as on any cluster just installed.
    const std::string probe =
        R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"webhook-probe"},"spec":{"containers":[{"name":"main",)"
        R"("image":"busybox","resources":{"limits":{"vgpu.io/sim":"1"}}}]}})";
    std::string last;
    if (!RealCluster::waitFor([&] {
          auto r = cluster_->api().post("/api/v1/namespaces/default/pods?dryRun=All", probe);
          last = r.describe();
          return r.status == 201;
        }))
      return makeError("the chart's webhook did not answer after helm install: " + last);
    return {};
  }
  /// The chart's images (project_images.h).
  static Result<std::vector<std::string>> buildImages() {
    auto images = projectImages(*cluster_, {"vgpu-scheduler", "vgpu-device-plugin", "kube-scheduler-" + gRelease});
    if (!images.ok()) return images.error();
    std::vector<std::string> out;
    for (const auto& i : *images) out.push_back(i.archive);
    return out;
  }
  static Result<std::string> helm(const std::vector<std::string>& args) {
    const std::string home = cluster_->dir() + "/helm";
    return runProgram(kHelm, args,
               {{"PATH", "/usr/bin:/bin"},
                {"HOME", home},
                {"KUBECONFIG", cluster_->adminKubeconfig()},
                {"HELM_CACHE_HOME", home + "/cache"},
                {"HELM_CONFIG_HOME", home + "/config"},
                {"HELM_DATA_HOME", home + "/data"}},
               cluster_->dir() + "/helm.log", std::chrono::seconds(400));
  }
  static void TearDownTestSuite() {
    delete node_;
    delete cluster_;
    delete startStatus_;
    node_ = nullptr;
    cluster_ = nullptr;
    startStatus_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(startStatus_->ok()) << "the " << gRelease << " cluster with the chart installed by helm did not start: "
                                    << startStatus_->error().message;
  }

  static RealCluster* cluster_;
  static RealNode* node_;
  static Status* startStatus_;
};

RealCluster* RealNodeHelmTest::cluster_ = nullptr;
RealNode* RealNodeHelmTest::node_ = nullptr;
Status* RealNodeHelmTest::startStatus_ = nullptr;

TEST_F(RealNodeHelmTest, HelmInstallRunsEveryPodReadyAndASlicePodThroughTheChartsScheduler) {
  auto& c = *cluster_;
  auto pods = listPods(c, kChartNamespace);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  EXPECT_GE(pods->size(), 2u);  // vgpu-scheduler's and the agent's
  for (const auto& p : *pods) {
    bool ready = false;
    if (const auto* conds = at(p, {"status", "conditions"}); conds && conds->is_array())
      for (const auto& cond : conds->as_array())
        if (cond.is_object() && str(cond.as_object().if_contains("type")) == "Ready")
          ready = str(cond.as_object().if_contains("status")) == "True";
    EXPECT_TRUE(ready) << json::serialize(p);
  }
  // A slice pod on the pod network: the chart's webhook (through its Service) gives it the
  // chart's scheduler, the chart's kube-scheduler and vgpu-scheduler place it, the chart's
  // agent admits it through the kubelet's device manager, and runc runs it with its slice.
  ASSERT_TRUE(c.createNamespace("helm-slice").ok());
  // The kubelet shows the agent's devices in the Node's status within its update period;
  // a pod created before is refused ("Insufficient vgpu.io/sim").
  EXPECT_TRUE(nodeShowsSimDevices());
  const json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "slice"}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"terminationGracePeriodSeconds", 1},
        {"containers",
         json::array{json::object{
             {"name", "main"},
             {"image", kBusyboxImage},
             {"imagePullPolicy", "Never"},
             {"command", json::array{"/bin/sh", "-c",
                                     "test \"$VGPU_SIM_MEMORY_LIMIT_0\" = 3000m && test \"$VGPU_SIM_CORE_LIMIT\" = 30"}},
             {"resources", {{"limits", {{"vgpu.io/sim", "1"}, {"vgpu.io/sim-memory", "3000"}, {"vgpu.io/sim-cores", "30"}}}}}}}}}}};
  auto r = c.api().post("/api/v1/namespaces/helm-slice/pods", json::serialize(pod));
  ASSERT_EQ(r.status, 201) << r.describe();
  EXPECT_EQ(str(at(r.json(), {"spec", "schedulerName"})), "vgpu-scheduler") << "the chart's webhook did not mutate it";
  json::object last;
  EXPECT_TRUE(RealCluster::waitFor(
      [&] {
        auto p = c.getObject("/api/v1/namespaces/helm-slice/pods/slice");
        if (p.ok()) last = *p;
        return p.ok() && str(at(*p, {"status", "phase"})) == "Succeeded";
      },
      std::chrono::seconds(120)))
      << json::serialize(last) << "\nthe kubelet's log ends:\n"
      << node_->logTail("kubelet", 30);
}


/// A sleeping slice pod on the pod network; once Running, its container's id.
std::string startSlicePod(RealCluster& c, const std::string& ns, const std::string& name, const std::string& script) {
  const json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"terminationGracePeriodSeconds", 1},
        {"containers",
         json::array{json::object{
             {"name", "main"},
             {"image", kBusyboxImage},
             {"imagePullPolicy", "Never"},
             {"command", json::array{"/bin/sh", "-c", script.c_str()}},
             {"resources", {{"limits", {{"vgpu.io/sim", "1"}, {"vgpu.io/sim-memory", "3000"}, {"vgpu.io/sim-cores", "30"}}}}}}}}}}};
  auto r = c.api().post("/api/v1/namespaces/" + ns + "/pods", json::serialize(pod));
  if (r.status != 201) return "(create: " + r.describe() + ")";
  std::string id;
  RealCluster::waitFor(
      [&] {
        auto p = c.getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
        if (!p.ok() || str(at(*p, {"status", "phase"})) != "Running") return false;
        const auto* statuses = at(*p, {"status", "containerStatuses"});
        if (!statuses || !statuses->is_array() || statuses->as_array().empty()) return false;
        id = str(at(statuses->as_array()[0].as_object(), {"containerID"}));
        return !id.empty();
      },
      std::chrono::seconds(90));
  return id;
}

std::string agentPodUid(RealCluster& c) {
  auto pods = listPods(c, kChartNamespace);
  if (!pods.ok()) return {};
  for (const auto& p : *pods)
    if (str(at(p, {"metadata", "name"})).rfind("vgpu-device-plugin-", 0) == 0 &&
        !at(p, {"metadata", "deletionTimestamp"}) && str(at(p, {"status", "phase"})) == "Running")
      return str(at(p, {"metadata", "uid"}));
  return {};
}

TEST_F(RealNodeHelmTest, HelmUpgradeWithAChangedValueRollsTheAgentAndLeavesGpuPodsRunning) {
  auto& c = *cluster_;
  ASSERT_TRUE(c.createNamespace("helm-upgrade").ok());
  const std::string id = startSlicePod(c, "helm-upgrade", "running", "exec sleep 3600");
  ASSERT_EQ(id.rfind("containerd://", 0), 0u) << id;
  const std::string agentBefore = agentPodUid(c);
  ASSERT_FALSE(agentBefore.empty());
  const std::size_t registeredBefore = deviceRegistrations(*node_, "vgpu.io/sim");
  // A documented value of the agent (docs/config-reference.md): its pod template changes.
  auto out = helm({"upgrade", kChartRelease, std::string(kSourceDir) + "/charts/vgpu", "--namespace", kChartNamespace,
                   "--reuse-values", "--set", "devicePlugin.heartbeatSeconds=20", "--wait", "--timeout", "3m"});
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::string agentAfter;
  EXPECT_TRUE(RealCluster::waitFor([&] {
    agentAfter = agentPodUid(c);
    return !agentAfter.empty() && agentAfter != agentBefore;
  })) << "the agent's pod was not replaced";
  auto p = c.getObject("/api/v1/namespaces/helm-upgrade/pods/running");
  ASSERT_TRUE(p.ok());
  const auto& status = at(*p, {"status", "containerStatuses"})->as_array()[0].as_object();
  EXPECT_EQ(str(at(status, {"containerID"})), id) << json::serialize(*p);
  EXPECT_EQ(json::serialize(*status.if_contains("restartCount")), "0") << json::serialize(*p);
  EXPECT_EQ(str(at(*p, {"status", "phase"})), "Running");
  // The new agent admits a new pod, once it registered with the kubelet and the Node shows
  // its devices again (a pod created before is refused "Insufficient vgpu.io/sim" and, on
  // 1.37, was not retried within the wait).
  EXPECT_TRUE(RealCluster::waitFor([&] { return deviceRegistrations(*node_, "vgpu.io/sim") > registeredBefore; }))
      << "the new agent did not register; the kubelet's log ends:\n" << node_->logTail("kubelet", 30);
  EXPECT_TRUE(nodeShowsSimDevices());
  EXPECT_EQ(startSlicePod(c, "helm-upgrade", "after", "exec sleep 3600").rfind("containerd://", 0), 0u)
      << "the kubelet's log ends:\n" << node_->logTail("kubelet", 30);
  for (const char* name : {"running", "after"}) c.api().del(std::string("/api/v1/namespaces/helm-upgrade/pods/") + name);
  EXPECT_TRUE(RealCluster::waitFor([&] {
    auto pods = listPods(c, "helm-upgrade");
    return pods.ok() && pods->empty();
  }));
}

// The last test of the suite: the chart goes.
TEST_F(RealNodeHelmTest, HelmUninstallLeavesNoSocketCdiSpecPreloadRegionFileNodeAnnotationOrLease) {
  auto& c = *cluster_;
  auto out = helm({"uninstall", kChartRelease, "--namespace", kChartNamespace, "--wait", "--timeout", "3m"});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_TRUE(RealCluster::waitFor([&] {
    auto pods = listPods(c, kChartNamespace);
    return pods.ok() && pods->empty();
  }));
  std::vector<std::string> left;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(std::string(kKubeletDevicePluginDir), ec))
    if (e.path().filename().string().rfind("vgpu", 0) == 0) left.push_back(e.path().string());
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"})
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().find("vgpu") != std::string::npos) left.push_back(e.path().string());
  // The per-container folders (region files); the rest of /var/lib/vgpu (the agent's
  // journal) stays after an uninstall, as docs/install.md says.
  for (auto it = fs::recursive_directory_iterator("/var/lib/vgpu/containers", ec); it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) || it->is_socket(ec)) left.push_back(it->path().string());
  for (const char* file : {"/usr/local/vgpu/ld.so.preload", "/etc/ld.so.preload"})
    if (fs::exists(file, ec)) left.push_back(file);
  EXPECT_TRUE(left.empty()) << ::testing::PrintToString(left);
  // The agent removes its Node annotations and node Lease on SIGTERM (publishNode(true),
  // removeLease). helm deletes the DaemonSet and its RBAC in one step, which refused that
  // cleanup (both annotations and the Lease were left on both releases); the chart's
  // pre-delete hook (templates/uninstall-hook.yaml) stops the agents first.
  auto n = c.getObject("/api/v1/nodes/" + node_->name());
  ASSERT_TRUE(n.ok());
  std::vector<std::string> kept;
  if (const auto* annotations = at(*n, {"metadata", "annotations"}); annotations && annotations->is_object())
    for (const auto& [key, value] : annotations->as_object())
      if (std::string(key).find("vgpu") != std::string::npos) kept.push_back(std::string(key));
  EXPECT_TRUE(kept.empty()) << "after helm uninstall the Node keeps " << ::testing::PrintToString(kept);
  const std::string lease = std::string("/apis/coordination.k8s.io/v1/namespaces/") + kChartNamespace +
                            "/leases/vgpu-node-" + node_->name();
  EXPECT_EQ(c.api().get(lease).status, 404) << lease << " is left after helm uninstall";
  // The hook's own Job, ServiceAccount and RBAC go with it (hook-delete-policy hook-succeeded).
  for (const std::string& path : {"/apis/batch/v1/namespaces/" + std::string(kChartNamespace) + "/jobs/vgpu-stop-agents",
                                 "/api/v1/namespaces/" + std::string(kChartNamespace) + "/serviceaccounts/vgpu-stop-agents"})
    EXPECT_EQ(c.api().get(path).status, 404) << path << " is left after helm uninstall";
}

}  // namespace
}  // namespace vgpu::realk8s
