#pragma once
// The agent against the apiserver and kubelet doubles, with the sim backend loaded from the
// build tree's backend folder.

#include "test_support.h"

namespace vgpu::deviceplugin::testing {

/// The agent's options as the tests start it: everything under `dir`, the sim backend from
/// the build tree, the apiserver double at `apiUrl`, short waits, no tmpfs per container
/// (the mounts are tested in private mount namespaces: folder_tmpfs_test.cpp).
inline AgentOptions agentTestOptions(const fs::path& dir, const std::string& apiUrl,
                                     const std::string& configFile = "device-config.yaml") {
  AgentOptions o;
  o.nodeName = kNode;
  o.configPath = (dir / configFile).string();
  o.backendDir = VGPU_BACKEND_DIR;
  o.pluginDir = (dir / "dp").string();
  o.podResourcesSocket = (dir / "pr" / "kubelet.sock").string();
  o.metricsAddress = "127.0.0.1:0";
  o.stateDir = (dir / "state").string();
  o.cdiDir = (dir / "cdi").string();
  o.apiConfig.server = apiUrl;
  o.podWait = std::chrono::milliseconds(2000);
  o.apiTimeout = std::chrono::milliseconds(300);
  o.apiRetries = 1;
  o.podResourcesInterval = std::chrono::milliseconds(200);
  o.cleanupInterval = std::chrono::milliseconds(300);
  o.regionTmpfs = FolderTmpfs::kOff;
  return o;
}

class AgentFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = fakes::FakeApiServer::start();
    ASSERT_TRUE(server.ok()) << server.error().message;
    api = std::move(server).value();
    ASSERT_TRUE(api->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}}).ok());
  }
  void TearDown() override {
    if (agent) agent->stop();
    if (kubelet) kubelet->stop();
  }

  void startKubelet(bool ignorePreferred = false) {
    fakes::FakeKubeletOptions ko;
    ko.devicePluginDir = (dir.path() / "dp").string();
    ko.podResourcesSocket = (dir.path() / "pr" / "kubelet.sock").string();
    ko.ignorePreferred = ignorePreferred;
    auto k = fakes::FakeKubelet::start(ko);
    ASSERT_TRUE(k.ok()) << k.error().message;
    kubelet = std::move(k).value();
  }

  AgentOptions options() const { return agentTestOptions(dir.path(), api->url()); }

  void writeSimNode() {
    const auto devFile = dir.write("sim-devices.yaml", simDevicesYaml(devices));
    dir.write("device-config.yaml", simConfigYaml(devFile.string(), split));
  }

  void startAgent(AgentOptions o) {
    auto a = Agent::create(std::move(o));
    ASSERT_TRUE(a.ok()) << a.error().message;
    agent = std::move(a).value();
    auto s = agent->start();
    ASSERT_TRUE(s.ok()) << s.error().message;
  }

  /// Sim node + kubelet + agent, registered, the kubelet holding the first list.
  void startSimNode(bool ignorePreferred = false) {
    writeSimNode();
    startKubelet(ignorePreferred);
    startAgent(options());
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
    ASSERT_TRUE(waitFor([&] { return agent->podsSynced(); }));
  }

  std::string createPod(const PodSpec& spec) {
    auto created = api->create("pods", podJson(spec));
    EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error().message);
    if (!created.ok()) return "";
    const auto& meta = created->at("metadata").as_object();
    return std::string(meta.at("uid").as_string());
  }

  /// A pod's annotation on the apiserver once the agent's queued writes have landed (the agent
  /// writes Allocate's outcome after answering).
  std::string annotationOf(const std::string& pod, std::string_view key) const {
    if (agent) agent->flushWrites(std::chrono::seconds(5));
    auto p = api->get("pods", "default", pod);
    if (!p) return "";
    const auto* meta = p->if_contains("metadata");
    if (!meta || !meta->as_object().if_contains("annotations")) return "";
    const auto& ann = meta->as_object().at("annotations").as_object();
    auto it = ann.find(key);
    return it == ann.end() || !it->value().is_string() ? "" : std::string(it->value().as_string());
  }

  std::optional<Assignment> assignmentOf(const std::string& pod) const {
    auto a = decodeAssignment(annotationOf(pod, keys::kPodAssignment));
    if (!a.ok()) return std::nullopt;
    return std::move(a).value();
  }

  /// The host folder the agent made for what the kubelet handed out in `a`.
  std::string folderOf(const fakes::ContainerAllocation& a) const {
    return (stateRoot() / handoutId(a.resource, a.deviceIds)).string();
  }
  fs::path stateRoot() const { return dir.path() / "state" / "containers"; }
  /// The names under the state root (folders and their records).
  std::vector<std::string> stateEntries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(stateRoot(), ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  TempDir dir;
  std::vector<SimDevice> devices{{"sim-0", 16384}, {"sim-1", 16384}};
  int split = 4;
  std::unique_ptr<fakes::FakeApiServer> api;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  std::unique_ptr<Agent> agent;
};

}  // namespace vgpu::deviceplugin::testing
