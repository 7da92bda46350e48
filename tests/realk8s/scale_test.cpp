// The scale benchmark (ctest -L scale; issue 42 items 2-4): kube-scheduler with vgpu-scheduler
// as its extender against kube-scheduler alone on the same Node objects, and one agent's cost.
//
// Sizes and rates come from the environment (defaults in brackets):
//   VGPU_SCALE_NODES [1000]  VGPU_SCALE_PODS [10000]  VGPU_SCALE_RATE [100 pods/s created]
//   VGPU_SCALE_DELAYS [0,0.5 s: the agent's confirmation after a bind, one vgpu phase each]
//   VGPU_SCALE_IDLE_SECONDS [300: each of the agent test's two idle windows, as long as the
//     agent's informers keep a watch open before they restart it]
//   VGPU_SCALE_OTHER_PODS [10000: the pods beside the agent's node in its start-up test]
//   VGPU_SCALE_OUT [unset: a file the figures are appended to]
#include <gtest/gtest.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "real_cluster.h"
#include "scale_support.h"
#include "scenario_support.h"
#include "vgpu/annotations.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release

namespace {

namespace json = boost::json;
using namespace scale;

/// What a run measured, printed and kept (figures.txt in the run's folder, $VGPU_SCALE_OUT).
class Figures {
 public:
  explicit Figures(const RealCluster& c) : dir_(c.dir()) {}
  void line(const std::string& text) {
    std::cout << "[scale] " << text << std::endl;
    std::ofstream(dir_ + "/figures.txt", std::ios::app) << text << "\n";
    if (const char* out = std::getenv("VGPU_SCALE_OUT"); out && *out) std::ofstream(out, std::ios::app) << text << "\n";
  }

 private:
  std::string dir_;
};

std::string fixed(double v, int digits = 2) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

double number(const char* name, double fallback) {
  auto v = envNumber(name, fallback);
  if (!v.ok()) throw std::runtime_error(v.error().message);
  return *v;
}

/// Four shapes in turn: one device of 10000 MiB / 10 %, 20000 MiB / 25 %, two devices of
/// 8000 MiB / 20 %, one of 40000 MiB / 50 %. kube-scheduler alone gets the same counts of a
/// plain extended resource.
constexpr int kShapeCount[] = {1, 1, 2, 1};
constexpr std::uint64_t kShapeMiB[] = {10000, 20000, 8000, 40000};
constexpr int kShapeCores[] = {10, 25, 20, 50};
constexpr const char* kPlainResource = "scale.vgpu.io/gpu";

struct Phase {
  std::string name;
  bool vgpu;
  std::optional<std::chrono::milliseconds> confirmDelay;
};

struct PhaseResult {
  double podsPerSecond = 0, p50 = 0, p99 = 0, seconds = 0, createdPerSecond = 0;
  std::size_t bound = 0, sent = 0;
  double vgpuCpuSeconds = 0, vgpuPeakRssMiB = 0, writesPerBind = 0;
};

/// Deletes the phase's pods p-0 ... p-<pods-1> from 8 threads and waits until the namespace
/// has none (up to 10 minutes), so that the next phase does not share the machine with the
/// deletion. One DELETE of the collection is not enough: kube-apiserver deletes a collection
/// with one worker (--delete-collection-workers=1), 3,000 pods took over 5 minutes under load
/// 20, and the client's 30 s deadline passed long before.
Status clearPods(RealCluster& c, const std::string& ns, int pods) {
  const std::string path = "/api/v1/namespaces/" + ns + "/pods";
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t)
    workers.emplace_back([&] {
      ApiClient api = c.clientAs(c.tokenFor("admin"));
      for (int i; (i = next++) < pods;) {
        const auto r = api.del(path + "/p-" + std::to_string(i),
                               R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0})");
        if (r.status != 200 && r.status != 404) {
          std::lock_guard lock(mu);
          errors.push_back("p-" + std::to_string(i) + ": " + r.describe());
        }
      }
    });
  for (auto& w : workers) w.join();
  if (!errors.empty()) return makeError(std::to_string(errors.size()) + " pods of " + ns + " not deleted, the first " + errors.front());
  if (!RealCluster::waitFor(
          [&] {
            auto left = c.getObject(path + "?limit=1");
            const auto* items = left.ok() ? left->if_contains("items") : nullptr;
            return items && items->is_array() && items->as_array().empty();
          },
          std::chrono::minutes(10)))
    return makeError("the pods of " + ns + " were still there 10 minutes after their deletion");
  return {};
}

PhaseResult runPhase(RealCluster& c, Figures& fig, const Phase& phase, const std::string& ns, int pods, double rate) {
  PhaseResult out;
  EXPECT_TRUE(c.createNamespace(ns).ok());
  const int pid = c.pidOf("vgpu-scheduler");
  resetPeakRss(pid);
  const auto procBefore = sampleProcess(pid);
  // CPU seconds per bound pod of each component: on a shared machine a steadier comparison
  // than the wall clock, which other work on the machine stretches.
  const std::vector<std::string> components{"etcd", "kube-apiserver", "kube-scheduler", "vgpu-scheduler"};
  std::map<std::string, double> cpuBefore;
  for (const auto& name : components)
    if (auto p = sampleProcess(c.pidOf(name))) cpuBefore[name] = p->cpuSeconds;
  const auto reqBefore = apiserverRequests(c);
  const std::vector<std::string> families{"vgpu_scheduler_bind_duration_seconds_count",
                                          "vgpu_scheduler_bind_duration_seconds_sum", "vgpu_scheduler_pods_refused_total"};
  const auto vgpuBefore = metricSeries(c.vgpuSchedulerMetrics(), families);
  BindWatcher watcher(c, ns, phase.vgpu ? phase.confirmDelay : std::nullopt);
  const std::string scheduler = c.schedulerName();
  const auto stream = createPodStream(c, ns, pods, rate, 8, [&](int i) {
    PodSpec spec{.name = "p-" + std::to_string(i), .group = "scale", .schedulerName = scheduler};
    const int s = i % 4;
    if (phase.vgpu)
      spec.limits = simLimits(kShapeCount[s], kShapeMiB[s], kShapeCores[s]);
    else
      spec.limits = {{kPlainResource, std::to_string(kShapeCount[s])}};
    return spec;
  });
  EXPECT_TRUE(stream.errors.empty()) << stream.errors.size() << " pods refused, the first: " << stream.errors.front();
  // Until every pod is bound, or two minutes pass without one more.
  std::size_t last = 0;
  auto progress = Clock::now();
  while (watcher.bound() < stream.sent.size() && Clock::now() - progress < std::chrono::minutes(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (const auto b = watcher.bound(); b != last) last = b, progress = Clock::now();
  }
  if (phase.confirmDelay)  // the last confirmations land before the counters are read
    RealCluster::waitFor([&] { return watcher.confirmed() + watcher.confirmErrors().size() >= watcher.bound(); },
                         std::chrono::seconds(30));
  const auto procAfter = sampleProcess(pid);
  std::string cpuPerPod;
  for (const auto& name : components)
    if (auto p = sampleProcess(c.pidOf(name)); p && cpuBefore.count(name))
      cpuPerPod += (cpuPerPod.empty() ? "" : ", ") + name + " " + fixed(p->cpuSeconds - cpuBefore[name], 1) + " (" +
                   fixed(1000.0 * (p->cpuSeconds - cpuBefore[name]) / std::max<std::size_t>(1, watcher.bound()), 2) +
                   " ms a pod)";
  const auto reqAfter = apiserverRequests(c);
  const auto vgpuAfter = metricSeries(c.vgpuSchedulerMetrics(), families);
  watcher.stop();

  const auto binds = watcher.bindTimes();
  std::vector<double> latencies;
  Clock::time_point lastBind = stream.start;
  for (const auto& [name, sent] : stream.sent)
    if (const auto b = binds.find(name); b != binds.end()) {
      latencies.push_back(std::chrono::duration<double>(b->second - sent).count());
      lastBind = std::max(lastBind, b->second);
    }
  out.sent = stream.sent.size();
  out.bound = latencies.size();
  out.seconds = std::chrono::duration<double>(lastBind - stream.start).count();
  out.podsPerSecond = out.seconds > 0 ? static_cast<double>(out.bound) / out.seconds : 0;
  out.createdPerSecond =
      static_cast<double>(out.sent) / std::max(1e-9, std::chrono::duration<double>(stream.lastSent - stream.start).count());
  out.p50 = quantile(latencies, 0.5);
  out.p99 = quantile(latencies, 0.99);
  if (procBefore && procAfter) {
    out.vgpuCpuSeconds = procAfter->cpuSeconds - procBefore->cpuSeconds;
    out.vgpuPeakRssMiB = static_cast<double>(procAfter->peakRssKiB) / 1024.0;
  }
  std::string requests = "(no apiserver metrics)";
  if (reqBefore.ok() && reqAfter.ok()) {
    const auto d = requestsBetween(*reqBefore, *reqAfter);
    out.writesPerBind = out.bound ? writesOf(d) / static_cast<double>(out.bound) : 0;
    requests = describe(d);
  }
  fig.line(phase.name + ": " + std::to_string(out.bound) + "/" + std::to_string(out.sent) + " bound in " +
           fixed(out.seconds, 1) + " s = " + fixed(out.podsPerSecond, 1) + " pods/s (created at " +
           fixed(out.createdPerSecond, 1) + "/s); creation->binding p50 " + fixed(out.p50, 3) + " s, p99 " +
           fixed(out.p99, 3) + " s; vgpu-scheduler " + fixed(out.vgpuCpuSeconds, 1) + " CPU-s, peak RSS " +
           fixed(out.vgpuPeakRssMiB, 1) + " MiB; apiserver writes per bind " + fixed(out.writesPerBind, 2) +
           (phase.confirmDelay ? "; confirmed " + std::to_string(watcher.confirmed()) : std::string()));
  fig.line("  apiserver requests during the phase: " + requests);
  fig.line("  CPU seconds during the phase: " + cpuPerPod);
  std::string bindFigures;
  for (const auto& [series, v] : requestsBetween(vgpuBefore, vgpuAfter))
    bindFigures += (bindFigures.empty() ? "" : ", ") + series + " " + fixed(v, 2);
  if (phase.vgpu) fig.line("  vgpu-scheduler during the phase: " + bindFigures);
  EXPECT_EQ(out.bound, out.sent) << phase.name << ": not every pod was bound";
  EXPECT_TRUE(watcher.confirmErrors().empty()) << watcher.confirmErrors().front();
  const auto cleared = clearPods(c, ns, pods);
  EXPECT_TRUE(cleared.ok()) << cleared.error().message;
  return out;
}

std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, d;
  f >> a >> b >> d;
  return a + " " + b + " " + d;
}

}  // namespace

TEST(ScaleBench, KubeSchedulerWithVgpuSchedulerAgainstKubeSchedulerAlone) {
  const int nodes = static_cast<int>(number("VGPU_SCALE_NODES", 1000));
  const int pods = static_cast<int>(number("VGPU_SCALE_PODS", 10000));
  const double rate = number("VGPU_SCALE_RATE", 100);
  const auto delays = envNumbers("VGPU_SCALE_DELAYS", {0, 0.5});
  ASSERT_TRUE(delays.ok()) << delays.error().message;
  ASSERT_GT(nodes, 0);
  ASSERT_GT(pods, 0);
  ASSERT_GT(rate, 0);

  RealCluster c({.release = gRelease, .startVgpu = true, .chartValues = suiteChartValues()});
  const auto started = c.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  Figures fig(c);
  fig.line("Kubernetes " + c.kubernetesVersion() + ", " + std::to_string(nodes) + " nodes, " + std::to_string(pods) +
           " pods per phase at " + fixed(rate, 0) + "/s; load average at start " + loadAverage());

  // What one real agent publishes (sim backend, the suite's eight devices) is what every
  // simulated node carries.
  ASSERT_TRUE(c.addVgpuNode("scale-template", {{kGroupLabel, "scale-template"}}).ok());
  auto tmpl = c.getObject("/api/v1/nodes/scale-template");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  std::map<std::string, std::string> annotations, capacity{{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}};
  if (const auto* a = at(*tmpl, {"metadata", "annotations"}); a && a->is_object())
    for (const auto& kv : a->as_object())
      if (std::string(kv.key()).rfind(keys::kNodeDevicesPrefix, 0) == 0) annotations[kv.key()] = str(&kv.value());
  const std::string shares = str(at(*tmpl, {"status", "capacity", "vgpu.io/sim"}));
  ASSERT_FALSE(annotations.empty());
  ASSERT_FALSE(shares.empty());
  capacity["vgpu.io/sim"] = shares;
  capacity[kPlainResource] = shares;  // the same count, for kube-scheduler alone

  NodePublisher publisher(c, "scale", nodes, capacity, {{kGroupLabel, "scale"}}, annotations, std::chrono::seconds(30));
  const auto t0 = Clock::now();
  const auto published = publisher.publish(4);
  ASSERT_TRUE(published.ok()) << published.error().message;
  const bool known = RealCluster::waitFor(
      [&] {
        return RealCluster::metricValue(c.vgpuSchedulerMetrics(), "vgpu_scheduler_nodes{state=\"ready\"}").value_or(0) >=
               nodes + 1;
      },
      std::chrono::minutes(10));
  ASSERT_TRUE(known) << "vgpu-scheduler never showed the " << nodes << " nodes ready";
  fig.line(std::to_string(nodes) + " Nodes and Leases published and in vgpu-scheduler's cache in " +
           fixed(std::chrono::duration<double>(Clock::now() - t0).count(), 1) + " s (" +
           std::to_string(shares.size() ? std::stoi(shares) : 0) + " shares per node)");

  std::vector<Phase> phases{{"kube-scheduler alone (" + std::string(kPlainResource) + ")", false, std::nullopt}};
  for (double d : *delays)
    phases.push_back({"kube-scheduler + vgpu-scheduler, agent confirms after " + fixed(d, 1) + " s", true,
                      std::chrono::milliseconds(static_cast<long>(d * 1000))});
  std::vector<PhaseResult> results;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    results.push_back(runPhase(c, fig, phases[i], "scale-" + std::to_string(i), pods, rate));
    fig.line("  load average after the phase " + loadAverage());
  }
  for (std::size_t i = 1; i < results.size(); ++i)
    fig.line("ratio (" + phases[i].name + ") / kube-scheduler alone: " +
             fixed(results[0].podsPerSecond > 0 ? results[i].podsPerSecond / results[0].podsPerSecond : 0, 2));
  const double renewSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  fig.line("Lease renewals by the simulated agents: " + std::to_string(publisher.renewals()) + " (one per node per 30 s: " +
           fixed(renewSeconds * nodes / 30.0, 0) + "), failed " + std::to_string(publisher.renewalFailures()));
  EXPECT_EQ(publisher.renewalFailures(), 0u);
}

namespace {

/// 110 pods on `node` (the kubelet's default maximum): every share of its 8 devices taken
/// by 32 slice pods placed by kube-scheduler + vgpu-scheduler and admitted through the agent,
/// and 78 pods without devices; the node is added (its agent started) and `ns` created first.
/// A fatal failure when they do not all get there.
void fillAgentNode(RealCluster& c, const std::string& ns, const std::string& node) {
  ASSERT_TRUE(c.addVgpuNode(node, {{kGroupLabel, "agent"}}).ok());
  ASSERT_TRUE(c.createNamespace(ns).ok());
  {
    Admitter admitter(c, ns);
    for (int i = 0; i < 32; ++i)
      ASSERT_TRUE(createPod(c, ns, {.name = "slice-" + std::to_string(i), .limits = simLimits(1, 10000, 25), .group = "agent"})
                      .ok());
    ASSERT_TRUE(RealCluster::waitFor(
        [&] {
          auto bound = listPods(c, ns, "spec.nodeName%3D" + node);
          return bound.ok() && bound->size() == 32 && admitter.caughtUp();
        },
        std::chrono::minutes(3)))
        << "the 32 slice pods were not all bound and admitted";
    EXPECT_TRUE(admitter.refusals().empty());
  }
  for (int i = 0; i < 78; ++i)
    ASSERT_TRUE(createPod(c, ns, {.name = "plain-" + std::to_string(i), .nodeName = node}).ok());
  ASSERT_TRUE(RealCluster::waitFor(
      [&] {
        auto pods = listPods(c, ns);
        if (!pods.ok() || pods->size() != 110) return false;
        for (const auto& p : *pods)
          if (str(at(p, {"metadata", "name"})).rfind("slice-", 0) == 0 &&
              str(at(p, {"metadata", "annotations", std::string(keys::kPodBindPhase)})) != "success")
            return false;
        return true;
      },
      std::chrono::minutes(2)));
}

}  // namespace

TEST(ScaleAgent, IdleAgentWithAFullNodeWritesNoNodeAndItsCostPerHour) {
  const double idle = number("VGPU_SCALE_IDLE_SECONDS", 300);
  ASSERT_GT(idle, 0);
  RealCluster c({.release = gRelease, .startVgpu = true, .chartValues = suiteChartValues()});
  const auto started = c.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  Figures fig(c);
  const std::string node = "agent-node", ns = "agent";

  fillAgentNode(c, ns, node);
  if (::testing::Test::HasFatalFailure()) return;
  // kube-scheduler and vgpu-scheduler stop (an idle agent needs neither), so that the
  // apiserver's counters see the agent and the apiserver's own upkeep only: their
  // leader-election renewals and watch restarts made the difference below mostly noise.
  c.stopKubeScheduler();
  c.stopVgpuScheduler();
  std::this_thread::sleep_for(std::chrono::seconds(10));  // the last writes settle

  // Window A: the agent idle; window B: the same without the agent. The agent's requests
  // are A - B (the apiserver's counters have no user label).
  const auto window = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(idle));
  const int pid = c.pidOf("vgpu-device-plugin@" + node);
  ASSERT_GT(pid, 0);
  const auto a0 = apiserverRequests(c);
  const auto p0 = sampleProcess(pid);
  std::this_thread::sleep_for(window);
  const auto a1 = apiserverRequests(c);
  const auto p1 = sampleProcess(pid);
  c.stopVgpuAgent(node);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const auto b0 = apiserverRequests(c);
  std::this_thread::sleep_for(window);
  const auto b1 = apiserverRequests(c);
  ASSERT_TRUE(a0.ok() && a1.ok() && b0.ok() && b1.ok()) << "kube-apiserver's /metrics did not answer";
  ASSERT_TRUE(p0 && p1) << "no /proc reading of the agent";

  const double perHour = 3600.0 / idle;
  const auto withAgent = requestsBetween(*a0, *a1);
  const auto without = requestsBetween(*b0, *b1);
  RequestCounts agent;
  for (const auto& [k, v] : withAgent) agent[k] = v - (without.count(k) ? without.at(k) : 0);
  for (const auto& [k, v] : without)
    if (!withAgent.count(k)) agent[k] = -v;
  double nodeWrites = 0, requests = 0;
  for (const auto& [k, v] : withAgent)
    if (k.find(" nodes") != std::string::npos && writesOf({{k, v}}) > 0) nodeWrites += v;
  for (const auto& [k, v] : agent) requests += v;
  fig.line("Kubernetes " + c.kubernetesVersion() + ", idle windows of " + fixed(idle, 0) + " s, load average " +
           loadAverage());
  fig.line("agent with 110 pods (32 slices): RSS " + fixed(static_cast<double>(p1->rssKiB) / 1024.0, 1) +
           " MiB (peak " + fixed(static_cast<double>(p1->peakRssKiB) / 1024.0, 1) + " MiB), CPU " +
           fixed((p1->cpuSeconds - p0->cpuSeconds) * perHour, 1) + " s per hour");
  fig.line("Node writes while idle: " + fixed(nodeWrites, 0) + " in " + fixed(idle, 0) + " s = " +
           fixed(nodeWrites * perHour, 0) + " per node per hour");
  fig.line("the agent's apiserver requests (with - without it): " + describe(agent, true) + "; writes " +
           fixed(writesOf(agent) * perHour, 0) + " per hour, all requests " + fixed(requests * perHour, 0) +
           " per hour");
  fig.line("  with the agent: " + describe(withAgent, true));
  fig.line("  without it:     " + describe(without, true));
  EXPECT_EQ(nodeWrites, 0) << "an idle agent wrote its Node";
}

// Issue 42 item 1: an agent lists only its node's pods, so its start-up stays small however
// many pods the cluster holds. Its node full (110 pods), VGPU_SCALE_OTHER_PODS [10000] other
// pods in the cluster (pending: a schedulerName nobody serves), the agent restarted: the
// peak RSS of its first sync.
TEST(ScaleAgent, StartupPeakWithItsNodesPodsAmongManyOthers) {
  const int others = static_cast<int>(number("VGPU_SCALE_OTHER_PODS", 10000));
  RealCluster c({.release = gRelease, .startVgpu = true, .chartValues = suiteChartValues()});
  const auto started = c.start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  Figures fig(c);
  const std::string node = "agent-node", ns = "agent";
  ASSERT_TRUE(c.createNamespace("others").ok());
  fillAgentNode(c, ns, node);
  if (HasFatalFailure()) return;
  const auto stream = createPodStream(c, "others", others, 300, 8, [](int i) {
    return PodSpec{.name = "other-" + std::to_string(i), .schedulerName = "nobody"};
  });
  ASSERT_TRUE(stream.errors.empty()) << stream.errors.front();
  ASSERT_TRUE(c.restartVgpuAgent(node).ok());
  // Synced when the restarted agent has listed its pods and published; a minute is ample.
  std::this_thread::sleep_for(std::chrono::seconds(60));
  const int pid = c.pidOf("vgpu-device-plugin@" + node);
  ASSERT_GT(pid, 0) << "the restarted agent is not running";
  const auto sample = sampleProcess(pid);
  ASSERT_TRUE(sample) << "no /proc reading of the agent";
  const double peak = static_cast<double>(sample->peakRssKiB) / 1024.0;
  fig.line("Kubernetes " + c.kubernetesVersion() + ": agent restarted with 110 pods on its node and " +
           std::to_string(others) + " other pods in the cluster: RSS " +
           fixed(static_cast<double>(sample->rssKiB) / 1024.0, 1) + " MiB a minute after its start, peak " +
           fixed(peak, 1) + " MiB; load average " + loadAverage());
  EXPECT_LE(peak, 30.0) << "issue 42: an agent's start-up peak is at most 30 MiB";
}

}  // namespace vgpu::realk8s
