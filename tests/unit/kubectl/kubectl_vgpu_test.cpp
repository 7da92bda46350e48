// kubectl-vgpu as users run it: the binary against the apiserver double with a kubeconfig,
// every verb, kubectl's exit codes and messages on bad input, and the example of
// docs/kubectl-vgpu.md, whose printed output must be exactly what the binary prints.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../scheduler/scheduler_harness.h"
#include "vgpu/http/server.h"

namespace vgpu::testing {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kDeviceConfig = R"(version: 1
scheduler:
  nodePolicy: binpack
  devicePolicy: spread
  heartbeatTimeout: 90s
backends:
  sim:
    enabled: true
    resources:
      count: nvidia.com/gpu
      memory: nvidia.com/gpumem
      memoryPercentage: nvidia.com/gpumem-percentage
      cores: nvidia.com/gpucores
    splitCount: 10
)";

/// A pod the scheduler placed on `node`'s device `gpu` (as gpus() names them), in `phase`.
json::object placedPod(const std::string& ns, const std::string& name, const std::string& node, int gpu, int slot,
                       std::uint64_t memoryMiB, std::uint32_t cores, const std::string& bindPhase, int priority) {
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", false, {{"sim", "GPU-" + node + "-" + std::to_string(gpu), gpu, memoryMiB, cores, slot}}});
  std::map<std::string, std::string> limits{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(memoryMiB)}};
  if (cores > 0) limits["nvidia.com/gpucores"] = std::to_string(cores);
  json::object pod = podJson(ns, name, {{"main", limits}}, "vgpu-scheduler",
                             json::object{{std::string(keys::kPodAssignment), encodeAssignment(a)},
                                          {std::string(keys::kPodBindPhase), bindPhase}});
  pod["spec"].as_object()["nodeName"] = node;
  pod["spec"].as_object()["priority"] = priority;
  pod["status"].as_object()["phase"] = bindPhase == "success" ? "Running" : "Pending";
  return pod;
}

/// What an agent serves on /metrics for node-a (names and labels as docs/metrics.md has them):
/// trainer within its slice, notebook above its memory limit.
constexpr const char* kAgentMetrics = R"(# HELP vgpu_device_memory_bytes memory offered to containers
# TYPE vgpu_device_memory_bytes gauge
vgpu_device_memory_bytes{backend="sim",device_id="GPU-node-a-0",device_index="0",model="NVIDIA A100-SXM4-80GB"} 85899345920
vgpu_device_memory_bytes{backend="sim",device_id="GPU-node-a-1",device_index="1",model="NVIDIA A100-SXM4-80GB"} 85899345920
# TYPE vgpu_container_memory_used_bytes gauge
vgpu_container_memory_used_bytes{namespace="default",pod="trainer",container="main",device_uuid="GPU-node-a-0",device_index="0"} 21474836480
vgpu_container_memory_used_bytes{namespace="default",pod="notebook",container="main",device_uuid="GPU-node-a-0",device_index="0"} 18253611008
vgpu_container_memory_limit_bytes{namespace="default",pod="trainer",container="main",device_uuid="GPU-node-a-0",device_index="0"} 42949672960
vgpu_container_memory_limit_bytes{namespace="default",pod="notebook",container="main",device_uuid="GPU-node-a-0",device_index="0"} 17179869184
vgpu_container_compute_limit_percent{namespace="default",pod="trainer",container="main",device_uuid="GPU-node-a-0",device_index="0"} 50
vgpu_container_compute_limit_percent{namespace="default",pod="notebook",container="main",device_uuid="GPU-node-a-0",device_index="0"} 20
vgpu_container_processes{namespace="default",pod="trainer",container="main"} 1
)";

/// The line of `text` that starts with `first`, or "".
std::string lineOf(const std::string& text, const std::string& first) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(first + " ", 0) == 0) return line;
  return {};
}

class KubectlVgpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = fakes::FakeApiServer::start();
    ASSERT_TRUE(started.ok()) << started.error().message;
    api_ = std::move(started).value();
    dir_ = fs::temp_directory_path() / ("kubectl-vgpu-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    kubeconfig_ = (dir_ / "kubeconfig").string();
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: "
                               << api_->url()
                               << "\nusers:\n- name: admin\n  user:\n    token: t\ncontexts:\n"
                                  "- name: fake\n  context:\n    cluster: fake\n    user: admin\n"
                                  "- name: ml\n  context:\n    cluster: fake\n    user: admin\n    namespace: ml\n"
                                  "current-context: fake\n";
    // The chart's ConfigMap, found by its label.
    json::object cm{{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", json::object{{"name", "vgpu-device-config"},
                                              {"namespace", "kube-system"},
                                              {"labels", json::object{{"app.kubernetes.io/name", "vgpu"}}}}},
                    {"data", json::object{{"device-config.yaml", kDeviceConfig}}}};
    ASSERT_TRUE(api_->create("configmaps", cm).ok());
  }
  void TearDown() override {
    api_->stop();
    fs::remove_all(dir_);
  }

  /// The example cluster of docs/kubectl-vgpu.md.
  void exampleCluster() {
    auto a = gpus("node-a", 2);
    auto b = gpus("node-b", 1, 40960, 4);
    for (auto& d : b) d.model = "NVIDIA A100-PCIE-40GB";
    ASSERT_TRUE(api_->create("nodes", nodeJson("node-a", a)).ok());
    ASSERT_TRUE(api_->create("nodes", nodeJson("node-b", b)).ok());
    // node-c's agent never published a heartbeat (one that went stale would print its age).
    json::object c = nodeJson("node-c", gpus("node-c", 1));
    c["metadata"].as_object()["annotations"].as_object().erase(keys::kNodeHeartbeat);
    ASSERT_TRUE(api_->create("nodes", c).ok());
    ASSERT_TRUE(api_->create("pods", placedPod("default", "trainer", "node-a", 0, 0, 40960, 50, "success", 1000)).ok());
    ASSERT_TRUE(api_->create("pods", placedPod("default", "notebook", "node-a", 0, 1, 16384, 20, "success", 0)).ok());
    ASSERT_TRUE(api_->create("pods", placedPod("ml", "infer", "node-b", 0, 0, 20480, 30, "allocating", 100)).ok());
    ASSERT_TRUE(api_->create("pods", placedPod("ml", "eval", "node-a", 1, 0, 16384, 0, "success", 100)).ok());
    ASSERT_TRUE(api_->create("pods", podJson("default", "big", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "70000"}}}})).ok());
  }

  /// node-a's agent serving kAgentMetrics, reachable at node-a's InternalIP; node-b and node-c
  /// publish no address. Returns its metrics port.
  std::string startAgentOnNodeA() {
    http::Router router;
    router.get("/metrics", [](const http::Request&) { return http::Response::text(kAgentMetrics); });
    auto agent = http::Server::start({}, std::move(router));
    if (!agent.ok()) throw std::runtime_error(agent.error().message);
    agent_ = std::move(*agent);
    auto nodeA = *api_->get("nodes", "", "node-a");
    nodeA["status"].as_object()["addresses"] = json::array{json::object{{"type", "InternalIP"}, {"address", "127.0.0.1"}}};
    if (!api_->update("nodes", nodeA).ok()) throw std::runtime_error("node-a not updated");
    return std::to_string(agent_->port());
  }

  Outcome run(std::vector<std::string> args, bool withKubeconfig = true) {
    std::vector<std::string> argv{KUBECTL_VGPU_BIN};
    if (withKubeconfig) argv.insert(argv.end(), {"--kubeconfig", kubeconfig_});
    argv.insert(argv.end(), args.begin(), args.end());
    const fs::path out = dir_ / "out", err = dir_ / "err";
    pid_t pid = ::fork();
    if (pid == 0) {
      int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> cargs;
      for (auto& s : argv) cargs.push_back(s.data());
      cargs.push_back(nullptr);
      ::execv(cargs[0], cargs.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    Outcome r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::unique_ptr<fakes::FakeApiServer> api_;
  std::unique_ptr<http::Server> agent_;
  fs::path dir_;
  std::string kubeconfig_;
};

TEST_F(KubectlVgpu, NodesShowsEveryDeviceWithWhatItsPodsTake) {
  exampleCluster();
  Outcome r = run({"nodes"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("NODE     STATUS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("57344/81920 MiB"), std::string::npos) << r.out;  // trainer + notebook
  EXPECT_NE(r.out.find("70%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2/10"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vgpu-device-plugin has not published a heartbeat"), std::string::npos) << r.out;

  Outcome wide = run({"nodes", "-o", "wide"});
  ASSERT_EQ(wide.rc, 0) << wide.err;
  EXPECT_NE(wide.out.find("default/notebook,default/trainer"), std::string::npos) << wide.out;

  Outcome js = run({"nodes", "-ojson"});
  ASSERT_EQ(js.rc, 0) << js.err;
  auto parsed = json::parse(js.out).as_object();
  EXPECT_EQ(parsed.at("items").as_array().size(), 4u);
  EXPECT_EQ(parsed.at("items").as_array()[0].as_object().at("memoryUsedMiB").as_int64(), 57344);

  Outcome yaml = run({"nodes", "--output=yaml"});
  ASSERT_EQ(yaml.rc, 0) << yaml.err;
  EXPECT_NE(yaml.out.find("memoryUsedMiB: 57344"), std::string::npos) << yaml.out;
}

TEST_F(KubectlVgpu, PodsListsHoldersPerNamespaceAndTheHandoutState) {
  exampleCluster();
  Outcome r = run({"pods"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("trainer"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("infer"), std::string::npos) << "ml is not the context's namespace:\n" << r.out;
  EXPECT_EQ(r.out.find("big"), std::string::npos) << "pending pods hold nothing:\n" << r.out;

  Outcome all = run({"pods", "-A"});
  ASSERT_EQ(all.rc, 0) << all.err;
  EXPECT_NE(all.out.find("NAMESPACE"), std::string::npos);
  EXPECT_NE(all.out.find("no (allocating)"), std::string::npos) << all.out;

  Outcome ns = run({"pods", "-n", "ml", "-o", "wide"});
  ASSERT_EQ(ns.rc, 0) << ns.err;
  EXPECT_NE(ns.out.find("main: GPU-node-b-0::0 20480MiB 30%"), std::string::npos) << ns.out;

  Outcome context = run({"pods", "--context", "ml"});
  ASSERT_EQ(context.rc, 0) << context.err;
  EXPECT_NE(context.out.find("infer"), std::string::npos) << "the context's namespace is ml:\n" << context.out;

  Outcome none = run({"pods", "-n", "empty"});
  EXPECT_EQ(none.rc, 0);
  EXPECT_EQ(none.err, "No pods holding vgpu slices found in empty namespace.\n");
}

TEST_F(KubectlVgpu, ExplainGivesEveryNodesVerdictInTheSchedulersWords) {
  exampleCluster();
  Outcome r = run({"explain", "big"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0/3 nodes can take the pod: 1 vgpu: not enough free device memory (CardInsufficientMemory), "
                       "1 vgpu: devices too small for the request (CardInsufficientMemory), "
                       "1 vgpu: vgpu-device-plugin has not published a heartbeat"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Closest to fitting: node-a"), std::string::npos) << r.out;

  Outcome placed = run({"explain", "trainer"});
  ASSERT_EQ(placed.rc, 0) << placed.err;
  EXPECT_NE(placed.out.find("on node node-a"), std::string::npos) << placed.out;
  EXPECT_NE(placed.out.find("confirmed the handout"), std::string::npos) << placed.out;

  Outcome js = run({"explain", "big", "-o", "json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  EXPECT_EQ(json::parse(js.out).as_object().at("closest").as_object().at("node").as_string(), "node-a");
}

TEST_F(KubectlVgpu, SimulatePlacesAManifestsPodsInOrderOnTheLiveState) {
  exampleCluster();
  const fs::path manifest = dir_ / "pods.yaml";
  // Two 60000 MiB pods: node-a's second GPU (65536 MiB free) takes the first, then nothing
  // has room for the second; a pod of nobody's, and an invalid one.
  std::ofstream(manifest) << "apiVersion: v1\nkind: Pod\nmetadata: {name: first}\nspec:\n  containers:\n"
                             "  - name: main\n    image: x\n    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 60000}}\n"
                             "---\napiVersion: v1\nkind: List\nitems:\n"
                             "- apiVersion: v1\n  kind: Pod\n  metadata: {name: second, namespace: ml}\n  spec:\n    containers:\n"
                             "    - name: main\n      image: x\n      resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 60000}}\n"
                             "---\napiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec: {containers: [{name: c, image: x}]}\n"
                             "---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n"
                             "  - name: main\n    image: x\n    resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 300}}\n";
  Outcome r = run({"simulate", "-f", manifest.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(lineOf(r.out, "default/first").find("node-a   main: GPU-node-a-1 (60000 MiB, 0%)"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "ml/second").find("pending"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "ml/second").find("0/3 nodes can take the pod"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "default/plain").find("asks for no vgpu device"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "default/bad").find("invalid vgpu request"), std::string::npos) << r.out;
  // Nothing was created.
  EXPECT_FALSE(api_->get("pods", "default", "first"));

  Outcome js = run({"simulate", "-f", manifest.string(), "-n", "ml", "-o", "json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  EXPECT_EQ(json::parse(js.out).at("items").as_array()[0].at("pod").as_string(), "ml/first");

  Outcome noFile = run({"simulate"});
  EXPECT_EQ(noFile.rc, 1);
  EXPECT_NE(noFile.err.find("simulate needs the pods as a file"), std::string::npos);
  Outcome missing = run({"simulate", "-f", (dir_ / "nope.yaml").string()});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("nope.yaml\" cannot be read"), std::string::npos) << missing.err;
  const fs::path notPods = dir_ / "node.yaml";
  std::ofstream(notPods) << "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n";
  Outcome wrongKind = run({"simulate", "-f", notPods.string()});
  EXPECT_EQ(wrongKind.rc, 1);
  EXPECT_NE(wrongKind.err.find("document 1 is a Node, not a Pod"), std::string::npos) << wrongKind.err;
  const fs::path garbled = dir_ / "garbled.yaml";
  std::ofstream(garbled) << "kind: Pod\nmetadata: [unclosed\n";
  Outcome badYaml = run({"simulate", "-f", garbled.string()});
  EXPECT_EQ(badYaml.rc, 1);
  EXPECT_NE(badYaml.err.find("garbled.yaml"), std::string::npos) << badYaml.err;
}


TEST_F(KubectlVgpu, TopReadsTheAgentsMetricsThroughTheNodeProxyAndMarksContainersOverTheirSlice) {
  exampleCluster();
  const std::string port = startAgentOnNodeA();

  Outcome r = run({"top", "--metrics-port", port});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(lineOf(r.out, "node-a").find("sim/0    GPU-node-a-0   NVIDIA A100-SXM4-80GB   37888/81920 MiB   2"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "notebook").find("17408/16384 MiB   -/20%     OVER (memory)"), std::string::npos) << r.out;
  EXPECT_NE(lineOf(r.out, "trainer").find("20480/40960 MiB   -/50%"), std::string::npos) << r.out;
  EXPECT_EQ(lineOf(r.out, "trainer").find("OVER"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("warning: node \"node-b\": the agent's metrics cannot be read: Error from server (ServiceUnavailable)"),
            std::string::npos) << r.err;

  Outcome ml = run({"top", "--metrics-port", port, "-n", "ml"});
  ASSERT_EQ(ml.rc, 0) << ml.err;
  EXPECT_NE(ml.out.find("No containers on vgpu devices in ml namespace."), std::string::npos) << ml.out;

  Outcome js = run({"top", "--metrics-port", port, "-A", "-o", "json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  EXPECT_EQ(json::parse(js.out).at("containers").as_array().size(), 2u);

  // An agent that is not there, a port that is not one, and metrics that do not parse.
  Outcome refused = run({"top", "--metrics-port", "1"});
  EXPECT_EQ(refused.rc, 0);
  EXPECT_NE(refused.err.find("warning: node \"node-a\": the agent's metrics cannot be read"), std::string::npos) << refused.err;
  Outcome badPort = run({"top", "--metrics-port", "http"});
  EXPECT_EQ(badPort.rc, 1);
  EXPECT_NE(badPort.err.find("--metrics-port"), std::string::npos);
  http::Router garbled;
  garbled.get("/metrics", [](const http::Request&) { return http::Response::text("vgpu_device_memory_bytes{device_id=\"x} 1\n"); });
  auto broken = http::Server::start({}, std::move(garbled));
  ASSERT_TRUE(broken.ok());
  Outcome unparsable = run({"top", "--metrics-port", std::to_string((*broken)->port())});
  EXPECT_EQ(unparsable.rc, 0);
  EXPECT_NE(unparsable.err.find("the agent's metrics do not parse: line 1"), std::string::npos) << unparsable.err;
}

TEST_F(KubectlVgpu, BadInputGetsKubectlsErrorsAndExitCodes) {
  exampleCluster();
  Outcome unknownPod = run({"explain", "nope"});
  EXPECT_EQ(unknownPod.rc, 1);
  EXPECT_EQ(unknownPod.out, "");
  EXPECT_NE(unknownPod.err.find("Error from server (NotFound): pods \"nope\" not found"), std::string::npos) << unknownPod.err;

  Outcome badOutput = run({"nodes", "-o", "xml"});
  EXPECT_EQ(badOutput.rc, 1);
  EXPECT_NE(badOutput.err.find("error: unable to match a printer suitable for the output format \"xml\""), std::string::npos)
      << badOutput.err;

  Outcome badFlag = run({"pods", "--bogus"});
  EXPECT_EQ(badFlag.rc, 1);
  EXPECT_NE(badFlag.err.find("error: unknown flag: --bogus"), std::string::npos) << badFlag.err;

  Outcome badVerb = run({"frobnicate"});
  EXPECT_EQ(badVerb.rc, 1);
  EXPECT_NE(badVerb.err.find("unknown command \"frobnicate\""), std::string::npos) << badVerb.err;

  Outcome noKubeconfig = run({"--kubeconfig", (dir_ / "missing").string(), "nodes"}, false);
  EXPECT_EQ(noKubeconfig.rc, 1);
  EXPECT_NE(noKubeconfig.err.find("error: "), std::string::npos);
  EXPECT_NE(noKubeconfig.err.find("missing"), std::string::npos) << noKubeconfig.err;

  fs::path unreadable = dir_ / "garbled-kubeconfig";
  std::ofstream(unreadable) << "clusters: [this is not: a kubeconfig\n";
  Outcome garbledKubeconfig = run({"--kubeconfig", unreadable.string(), "pods"}, false);
  EXPECT_EQ(garbledKubeconfig.rc, 1);
  EXPECT_NE(garbledKubeconfig.err.find("garbled-kubeconfig"), std::string::npos) << garbledKubeconfig.err;

  Outcome noPod = run({"explain"});
  EXPECT_EQ(noPod.rc, 1);
  EXPECT_NE(noPod.err.find("explain needs exactly one pod name"), std::string::npos);

  // A garbled assignment: named on stderr, the rest still listed; explain refuses it clearly.
  json::object garbled = placedPod("default", "garbled", "node-b", 0, 1, 1024, 0, "success", 0);
  garbled["metadata"].as_object()["annotations"].as_object()[std::string(keys::kPodAssignment)] = "{not json";
  ASSERT_TRUE(api_->create("pods", garbled).ok());
  Outcome pods = run({"pods"});
  EXPECT_EQ(pods.rc, 0);
  EXPECT_NE(pods.err.find("warning: pod default/garbled: annotation vgpu.io/assignment cannot be read"), std::string::npos)
      << pods.err;
  EXPECT_NE(pods.out.find("trainer"), std::string::npos);
  Outcome explainGarbled = run({"explain", "garbled"});
  EXPECT_EQ(explainGarbled.rc, 1);
  EXPECT_NE(explainGarbled.err.find("error: pod default/garbled: annotation vgpu.io/assignment cannot be read"),
            std::string::npos) << explainGarbled.err;

  // A garbled inventory: the node is named, the others still shown.
  json::object node = nodeJson("node-d", {});
  node["metadata"].as_object()["annotations"].as_object()[keys::nodeDevices("sim")] = "[{broken";
  ASSERT_TRUE(api_->create("nodes", node).ok());
  Outcome nodes = run({"nodes"});
  EXPECT_EQ(nodes.rc, 0);
  EXPECT_NE(nodes.err.find("warning: node \"node-d\""), std::string::npos) << nodes.err;
  EXPECT_NE(nodes.out.find("node-a"), std::string::npos);
}

TEST_F(KubectlVgpu, DeviceConfigComesFromAFileOrANamedConfigMap) {
  exampleCluster();
  ASSERT_TRUE(api_->remove("configmaps", "kube-system", "vgpu-device-config").ok());
  Outcome missing = run({"nodes"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("no vgpu device config found"), std::string::npos) << missing.err;

  const fs::path file = dir_ / "device-config.yaml";
  std::ofstream(file) << kDeviceConfig;
  Outcome fromFile = run({"nodes", "--device-config", file.string()});
  EXPECT_EQ(fromFile.rc, 0) << fromFile.err;

  Outcome noSuchMap = run({"nodes", "--config-map", "kube-system/none"});
  EXPECT_EQ(noSuchMap.rc, 1);
  EXPECT_NE(noSuchMap.err.find("Error from server (NotFound)"), std::string::npos) << noSuchMap.err;
}

TEST_F(KubectlVgpu, HelpAndCompletionNeedNoCluster) {
  for (const std::string verb : {"nodes", "pods", "explain", "simulate", "top", "completion"}) {
    Outcome r = run({verb, "--help"}, false);
    EXPECT_EQ(r.rc, 0);
    EXPECT_NE(r.out.find("NAME\n  kubectl vgpu " + verb), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("EXIT STATUS"), std::string::npos);
  }
  Outcome bash = run({"completion", "bash"}, false);
  EXPECT_EQ(bash.rc, 0);
  EXPECT_NE(bash.out.find("complete -F _kubectl_vgpu kubectl-vgpu"), std::string::npos);
  Outcome zsh = run({"completion", "zsh"}, false);
  EXPECT_EQ(zsh.rc, 0);
  EXPECT_NE(zsh.out.find("#compdef kubectl-vgpu"), std::string::npos);
  Outcome fish = run({"completion", "fish"}, false);
  EXPECT_EQ(fish.rc, 1);
  EXPECT_NE(fish.err.find("bash or zsh"), std::string::npos);
  // The bash script is valid bash.
  const fs::path script = dir_ / "completion.bash";
  std::ofstream(script) << bash.out;
  EXPECT_EQ(std::system(("bash -n " + script.string()).c_str()), 0);
  // ...and completes verbs and -o values as bash would ask it.
  const fs::path answers = dir_ / "completions.txt";
  const std::string probe = "bash -c 'source " + script.string() +
                            "; COMP_WORDS=(kubectl-vgpu ex); COMP_CWORD=1; _kubectl_vgpu; echo \"${COMPREPLY[*]}\";"
                            " COMP_WORDS=(kubectl-vgpu nodes -o \"\"); COMP_CWORD=3; _kubectl_vgpu; echo \"${COMPREPLY[*]}\"' > " +
                            answers.string();
  EXPECT_EQ(std::system(probe.c_str()), 0);
  EXPECT_EQ(slurp(answers), "explain\nwide json yaml\n");
}

/// docs/kubectl-vgpu.md: every "$ kubectl vgpu ..." block prints exactly what follows it.
TEST_F(KubectlVgpu, TheGuidesExampleOutputIsExact) {
  exampleCluster();
  const std::string agentPort = startAgentOnNodeA();  // for `top`
  const std::string doc = slurp(fs::path(VGPU_SOURCE_DIR) / "docs/kubectl-vgpu.md");
  const std::regex block("```text\n\\$ kubectl vgpu ([^\n]*)\n([^`]*)```");
  int checked = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), block), end; it != end; ++it) {
    std::vector<std::string> args;
    std::istringstream words((*it)[1].str());
    for (std::string w; words >> w;) args.push_back(w);
    if (args.front() == "top") args.insert(args.end(), {"--metrics-port", agentPort});
    Outcome r = run(args);
    // KUBECTL_VGPU_PRINT_GUIDE=1 prints what the binary printed, to refresh the guide after a change.
    if (std::getenv("KUBECTL_VGPU_PRINT_GUIDE")) std::cout << "@@@ " << (*it)[1] << "\n" << r.out << "@@@END\n";
    EXPECT_EQ(r.rc, 0) << (*it)[1] << ": " << r.err;
    EXPECT_EQ(r.out, (*it)[2].str()) << "kubectl vgpu " << (*it)[1];
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace vgpu::testing
