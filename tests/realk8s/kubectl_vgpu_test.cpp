// kubectl-vgpu against the real apiserver (per release): the built binary run as a process
// with the cluster's admin kubeconfig, finding the chart's device-config ConfigMap by its
// label; nodes and pods show a placed pod's slice; explain on a pod kube-scheduler refused
// prints the category of its FailedScheduling event and vgpu-scheduler's per-node words;
// simulate places a manifest's pods on the live state.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "realk8s_fixture.h"
#include "vgpu/annotations.h"
#include "vgpu/k8s/object.h"

namespace vgpu::realk8s {
namespace {
namespace json = boost::json;
namespace fs = std::filesystem;

struct Printed {
  int rc = -1;
  std::string out, err;
};

/// kubectl-vgpu, built beside this test program (bin/), with `args`.
Printed kubectlVgpu(RealCluster& c, const std::vector<std::string>& args) {
  const fs::path binary = fs::read_symlink("/proc/self/exe").parent_path() / "kubectl-vgpu";
  std::vector<std::string> argv{binary.string(), "--kubeconfig", c.adminKubeconfig()};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = c.dir() + "/kubectl-vgpu.out", err = c.dir() + "/kubectl-vgpu.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto read = [](const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  };
  Printed p{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(out), read(err)};
  std::ofstream(c.dir() + "/answers.txt", std::ios::app)
      << "[" << c.kubernetesVersion() << "] kubectl-vgpu";
  for (const auto& a : args) std::ofstream(c.dir() + "/answers.txt", std::ios::app) << " " << a;
  std::ofstream(c.dir() + "/answers.txt", std::ios::app) << " -> " << p.rc << "\n" << p.out << p.err;
  return p;
}

/// The line of `text` that starts with `first`, or "".
std::string lineStarting(const std::string& text, const std::string& first) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(first + " ", 0) == 0) return line;
  return {};
}

TEST_F(RealK8s, KubectlVgpuShowsSlicesAndExplainsARefusalInTheEventsWords) {
  auto& c = cluster();
  const std::string ns = "kubectl-vgpu";
  ASSERT_TRUE(c.createNamespace(ns).ok());
  const std::string node = ns + "-0";
  ASSERT_TRUE(c.addVgpuNode(node, {{kGroupLabel, ns}}).ok());
  // The chart's ConfigMap (the harness mounts the rendered file instead of applying it):
  // found by its label, as on a cluster where the chart is installed.
  std::ifstream configFile(c.deviceConfigPath());
  std::stringstream config;
  config << configFile.rdbuf();
  json::object cm{{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata", json::object{{"name", "vgpu-device-config"},
                                            {"labels", json::object{{"app.kubernetes.io/name", "vgpu"}}}}},
                  {"data", json::object{{"device-config.yaml", config.str()}}}};
  auto created = c.api().post("/api/v1/namespaces/" + ns + "/configmaps", json::serialize(cm));
  ASSERT_EQ(created.status, 201) << created.describe();

  Admitter admitter(c, ns);
  ASSERT_TRUE(createPod(c, ns, {.name = "small", .limits = simLimits(1, 10000, 20), .group = ns}).ok());
  ASSERT_TRUE(createPod(c, ns, {.name = "too-big", .limits = simLimits(1, 100000, 30), .group = ns}).ok());
  auto placed = waitForPod(c, ns, "small", [](const json::object& p) {
    return k8s::annotation(p, keys::kPodBindPhase) == std::optional<std::string_view>("success");
  });
  ASSERT_TRUE(placed) << "small was not placed and admitted";
  // A FailedScheduling event from an attempt that asked the extender (see
  // RefusalReasonsReachThePodsEventsExactlyAsVgpuSchedulerWroteThem).
  std::string failedScheduling;
  ASSERT_TRUE(RealCluster::waitFor([&] {
    for (const auto& e : podEvents(c, ns, "too-big"))
      if (str(e.if_contains("reason")) == "FailedScheduling" && str(e.if_contains("message")).find("vgpu: ") != std::string::npos)
        failedScheduling = str(e.if_contains("message"));
    return !failedScheduling.empty();
  })) << "no FailedScheduling event of too-big names vgpu";
  auto refused = waitForPod(c, ns, "too-big", unschedulable);
  ASSERT_TRUE(refused);
  auto verdict = filterDirect(c, *refused, {node});
  ASSERT_TRUE(verdict.ok()) << verdict.error().message;
  ASSERT_EQ(verdict->refused.count(node), 1u);
  const std::string category = verdict->refused.at(node);
  ASSERT_NE(failedScheduling.find("1 " + category), std::string::npos) << failedScheduling;

  // nodes: the placed pod's slice on one of the node's eight devices.
  Printed nodes = kubectlVgpu(c, {"nodes", "-o", "wide"});
  ASSERT_EQ(nodes.rc, 0) << nodes.err;
  EXPECT_NE(nodes.out.find(ns + "/small"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("10000/81920 MiB"), std::string::npos) << nodes.out;
  const std::string deviceLine = lineStarting(nodes.out, node);
  EXPECT_NE(deviceLine.find("Ready"), std::string::npos) << nodes.out;

  // pods: where, how much, and that the agent confirmed it.
  Printed pods = kubectlVgpu(c, {"pods", "-n", ns});
  ASSERT_EQ(pods.rc, 0) << pods.err;
  const std::string small = lineStarting(pods.out, "small");
  EXPECT_NE(small.find(node), std::string::npos) << pods.out;
  EXPECT_NE(small.find("10000 MiB"), std::string::npos) << pods.out;
  EXPECT_NE(small.find("yes"), std::string::npos) << pods.out;
  EXPECT_EQ(pods.out.find("too-big"), std::string::npos) << pods.out;

  // explain on the refused pod: the event's category, counted, and the node's own words.
  Printed why = kubectlVgpu(c, {"explain", "too-big", "-n", ns});
  ASSERT_EQ(why.rc, 0) << why.err;
  const std::string row = lineStarting(why.out, node);
  EXPECT_NE(row.find(category), std::string::npos) << "the event says \"" << category << "\":\n" << why.out;
  EXPECT_NE(row.find("100000 MiB"), std::string::npos) << why.out;
  EXPECT_NE(why.out.find(" " + category), std::string::npos) << why.out;
  EXPECT_NE(why.out.find("0/"), std::string::npos) << why.out;
  EXPECT_NE(why.out.find("Closest to fitting: " + node), std::string::npos) << why.out;

  // explain on the placed pod: what it got and where.
  Printed granted = kubectlVgpu(c, {"explain", "small", "-n", ns});
  ASSERT_EQ(granted.rc, 0) << granted.err;
  EXPECT_NE(granted.out.find("on node " + node), std::string::npos) << granted.out;
  EXPECT_NE(granted.out.find("10000 MiB"), std::string::npos) << granted.out;

  // simulate: a pod that fits goes to the node (the suite's only vgpu node now), one too big
  // gets the same category; nothing is created.
  const std::string manifest = c.dir() + "/kubectl-vgpu-pods.yaml";
  std::ofstream(manifest) << json::serialize(podObject({.name = "would-fit", .limits = simLimits(1, 70000, 10), .group = ns}))
                          << "\n---\n"
                          << json::serialize(podObject({.name = "never", .limits = simLimits(1, 100000, 30), .group = ns})) << "\n";
  Printed simulated = kubectlVgpu(c, {"simulate", "-f", manifest, "-n", ns});
  ASSERT_EQ(simulated.rc, 0) << simulated.err;
  EXPECT_NE(lineStarting(simulated.out, ns + "/would-fit").find("placed"), std::string::npos) << simulated.out;
  EXPECT_NE(lineStarting(simulated.out, ns + "/would-fit").find(node), std::string::npos) << simulated.out;
  EXPECT_NE(lineStarting(simulated.out, ns + "/never").find(" " + category), std::string::npos) << simulated.out;
  EXPECT_EQ(c.api().get("/api/v1/namespaces/" + ns + "/pods/would-fit").status, 404);

  // The real apiserver's NotFound, in kubectl's words.
  Printed missing = kubectlVgpu(c, {"explain", "nope", "-n", ns});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("Error from server (NotFound): pods \"nope\" not found"), std::string::npos) << missing.err;

  admitter.stop();
  EXPECT_EQ(c.api().del("/api/v1/namespaces/" + ns + "/configmaps/vgpu-device-config").status, 200);
  EXPECT_TRUE(cleanUp(c, ns, {node}).ok());
}

}  // namespace
}  // namespace vgpu::realk8s
