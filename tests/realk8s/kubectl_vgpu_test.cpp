// kubectl-vgpu against the real apiserver (per release): the built binary run as a process
// with the cluster's admin kubeconfig, finding the chart's device-config ConfigMap by its
// label; nodes and pods show a placed pod's slice; explain on a pod kube-scheduler refused
// prints the category of its FailedScheduling event and vgpu-scheduler's per-node words;
// simulate places a manifest's pods on the live state; top reads the agent's metrics
// through the apiserver's node proxy.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

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

/// This machine's first IPv4 address that is global unicast, or "": the apiserver's node
/// proxy refuses loopback and link-local node addresses ("address not allowed").
std::string globalAddress() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return {};
  std::string found;
  for (ifaddrs* a = all; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    if ((ip >> 24) == 127 || (ip >> 16) == 0xA9FE || ip == 0) continue;  // loopback, link-local
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
  }
  ::freeifaddrs(all);
  return found;
}

/// The network between the apiserver and a node's agent: the harness's agents listen on
/// loopback only, so this forwards connections to `address`:<port()> to 127.0.0.1:`target`.
class Relay {
 public:
  Relay(const std::string& address, std::uint16_t target) : target_(target) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Relay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(target_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) pump(client, upstream);
      ::close(upstream);
      ::close(client);
    }
  }
  // One connection at a time, both directions, until either side closes.
  void pump(int a, int b) {
    char buffer[65536];
    while (!stop_) {
      pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(fds, 2, 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n <= 0 || ::write(i == 0 ? b : a, buffer, static_cast<std::size_t>(n)) != n) return;
      }
    }
  }
  std::uint16_t target_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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

  // top: the real agent's /metrics through the real apiserver's node proxy. The node's
  // address must be global unicast for the proxy, and the harness's agent listens on
  // loopback: a relay on this machine's address stands in for the network.
  const std::string address = globalAddress();
  std::smatch m;
  const std::string agentLog = c.logTail("vgpu-device-plugin@" + node, 400);
  ASSERT_TRUE(std::regex_search(agentLog, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)"))) << agentLog;
  if (address.empty()) GTEST_SKIP() << "this machine has no global unicast IPv4 address for the node proxy";
  Relay relay(address, static_cast<std::uint16_t>(std::stoi(m[1].str())));
  ASSERT_NE(relay.port(), 0);
  const json::object addresses{{"status", json::object{{"addresses", json::array{json::object{{"type", "InternalIP"}, {"address", address}}}}}}};
  auto patched = c.api().patch("/api/v1/nodes/" + node + "/status", json::serialize(addresses));
  ASSERT_EQ(patched.status, 200) << patched.describe();
  Printed top = kubectlVgpu(c, {"top", "-n", ns, "--metrics-port", std::to_string(relay.port())});
  ASSERT_EQ(top.rc, 0) << top.err;
  // The node's eight devices as its agent serves them. Container series appear once a
  // container's program runs under libvgpu.so (its region file); no program runs here, so
  // none (the unit test KubectlVgpu.TopReadsTheAgentsMetrics... covers those rows).
  EXPECT_EQ(top.err, "");
  EXPECT_NE(lineStarting(top.out, node).find("sim/0    SIM-GPU-0"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find(node + "   sim/7"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("No containers on vgpu devices in " + ns + " namespace."), std::string::npos) << top.out;

  admitter.stop();
  EXPECT_EQ(c.api().del("/api/v1/namespaces/" + ns + "/configmaps/vgpu-device-config").status, 200);
  EXPECT_TRUE(cleanUp(c, ns, {node}).ok());
}

}  // namespace
}  // namespace vgpu::realk8s
