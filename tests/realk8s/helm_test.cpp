// The chart installed with real helm on the real node (part of RealNode.<release>): the
// images scripts/build-images.sh makes (imported into the node's containerd), helm v4 built
// from its module, `helm install` with documented values only, the pod network (bridge CNI,
// kube-proxy) a user's node has. Nothing of vgpu runs outside a pod here.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fake_nodes.h"
#include "real_cluster.h"
#include "real_node.h"
#include "scenario_support.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release (release_main.cpp)

namespace {
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr const char* kHelm = VGPU_REALNODE_HELM;
constexpr const char* kBuildDir = VGPU_REALNODE_BUILD_DIR;
constexpr const char* kSourceDir = VGPU_REALNODE_SOURCE_DIR;

/// Runs a program to its end within `timeout`; its output, or an error quoting it.
Result<std::string> run(const std::string& program, const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env, const std::string& log,
                        std::chrono::seconds timeout) {
  e2e::ProcessOptions o;
  o.program = program;
  o.args = args;
  o.env = env;
  o.logFile = log;
  auto p = e2e::ChildProcess::start(std::move(o));
  if (!p.ok()) return p.error();
  const auto status = (*p)->waitExit(timeout);
  std::string line = program;
  for (const auto& a : args) line += " " + a;
  if (!status) return makeError("`" + line + "` did not finish in " + std::to_string(timeout.count()) + " s: " + (*p)->log());
  if (e2e::exitCodeOf(*status) != 0)
    return makeError("`" + line + "` exited with " + std::to_string(e2e::exitCodeOf(*status)) + ": " + (*p)->log());
  return (*p)->log();
}

class RealNodeHelmTest : public ::testing::Test {
 protected:
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
    return {};
  }
  /// scripts/build-images.sh for the chart's images (cached: seconds when warm).
  static Result<std::vector<std::string>> buildImages() {
    const std::string out = cluster_->dir() + "/images";
    auto r = run(std::string(kSourceDir) + "/scripts/build-images.sh",
                 {"--build-dir", kBuildDir, "--out", out, "--k8s-binary", cluster_->binary(), "--k8s-release", gRelease,
                  "--image", "vgpu-scheduler", "--image", "vgpu-device-plugin", "--image", "kube-scheduler-" + gRelease},
                 {{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin"}, {"HOME", std::getenv("HOME") ? std::getenv("HOME") : "/root"},
                  {"VGPU_JOBS", "2"}},
                 cluster_->dir() + "/build-images.log", std::chrono::seconds(900));
    if (!r.ok()) return r.error();
    std::vector<std::string> files;
    std::ifstream list(out + "/images.txt");
    for (std::string name, ref, file; list >> name >> ref >> file;) files.push_back(file);
    if (files.size() != 3) return makeError("build-images.sh listed " + std::to_string(files.size()) + " images in " + out);
    return files;
  }
  static Result<std::string> helm(const std::vector<std::string>& args) {
    const std::string home = cluster_->dir() + "/helm";
    return run(kHelm, args,
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
  EXPECT_TRUE(RealCluster::waitFor([&] {
    auto n = c.getObject("/api/v1/nodes/" + node_->name());
    const std::string count = n.ok() ? str(at(*n, {"status", "allocatable", "vgpu.io/sim"})) : "";
    return !count.empty() && count != "0";
  }));
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

}  // namespace
}  // namespace vgpu::realk8s
