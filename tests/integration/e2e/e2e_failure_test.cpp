// Failure cases with the real daemons (issue 10, part 2): the kubelet restarts, the
// apiserver goes away and comes back, the scheduler restarts mid-stream, a node's agent
// stops. After each, the cluster must still place and admit pods, and no share of a device
// may be given twice: every check ends with the same two audits of what the apiserver holds
// (expectNoShareGivenTwice, expectAnnotationsMatchKubelet).
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json.hpp>

#include "cluster_audit.h"
#include "e2e_harness.h"
#include "test_http_client.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/pod_info.h"

namespace vgpu::e2e {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kGpuA0 = "GPU-a0000000-0000-4000-8000-000000000000";
const std::string kGpuA1 = "GPU-a1000000-0000-4000-8000-000000000000";
const std::string kGpuB0 = "GPU-b0000000-0000-4000-8000-000000000000";

std::string podYaml(const std::string& name, int gpus, int memoryMiB, int cores = 0) {
  std::string limits = "        nvidia.com/gpu: " + std::to_string(gpus) +
                       "\n        nvidia.com/gpumem: " + std::to_string(memoryMiB) + "\n";
  if (cores > 0) limits += "        nvidia.com/gpucores: " + std::to_string(cores) + "\n";
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
         "\nspec:\n  containers:\n  - name: main\n    image: cuda-app\n    resources:\n      limits:\n" + limits;
}

std::string nameOf(const json::object& pod) { return std::string(pod.at("metadata").at("name").as_string()); }
std::string uidOf(const json::object& pod) { return std::string(pod.at("metadata").at("uid").as_string()); }

/// The live pods bound to a node, parsed.
std::vector<PodInfo> boundPods(Cluster& c) {
  std::vector<PodInfo> out;
  for (const auto& obj : c.api().list("pods")) {
    auto info = parsePod(obj);
    if (info.ok() && !info->nodeName.empty() && !info->terminated()) out.push_back(*info);
  }
  return out;
}

/// The live pods bound to a node, with their assignments, for the audits.
std::vector<AuditPod> auditPods(Cluster& c) {
  std::vector<AuditPod> out;
  for (const auto& pod : boundPods(c))
    out.push_back({pod.key(), pod.uid, pod.nodeName, c.assignmentOf(pod.podNamespace, pod.name)});
  return out;
}

/// Audit 1 (cluster_audit.h): the assignment annotations of every bound pod, summed per
/// device, stay within the inventory the node's agent published (memory, compute, share
/// count), and no virtual device (<device id>::<slot>) is held by two pods. The pods here
/// have no init containers, whose devices could be reused by the app containers.
void expectNoShareGivenTwice(Cluster& c) {
  std::vector<AuditNode> nodes;
  for (const auto& node : c.nodes()) {
    auto inventory = decodeInventory(c.annotationOf("", node.name, keys::nodeDevices("nvidia")), "nvidia");
    ASSERT_TRUE(inventory.ok()) << node.name << ": " << inventory.error().message;
    nodes.push_back({node.name, *inventory});
  }
  for (const auto& violation : auditShares(nodes, auditPods(c))) ADD_FAILURE() << violation;
}

/// Audit 2 (cluster_audit.h): every bound pod was admitted by its node's kubelet, and its
/// annotation names exactly the virtual devices that kubelet handed each container.
void expectAnnotationsMatchKubelet(Cluster& c) {
  std::map<std::string, KubeletHoldings> holdings;
  for (const auto& node : c.nodes()) holdings[node.name] = c.kubelet(node.name).allocations();
  for (const auto& violation : auditKubeletAgreement(holdings, auditPods(c))) ADD_FAILURE() << violation;
}

void expectClusterConsistent(Cluster& c) {
  expectNoShareGivenTwice(c);
  expectAnnotationsMatchKubelet(c);
}

/// The failure messages `audit` reports, captured instead of failing the test.
std::vector<std::string> failuresOf(const std::function<void()>& audit) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    audit();
  }
  std::vector<std::string> out;
  for (int i = 0; i < results.size(); ++i) out.emplace_back(results.GetTestPartResult(i).message());
  return out;
}

/// Starts the cluster; "" when it came up, else what did not (with its log).
std::string startError(Cluster& c, std::vector<NodeSpec> nodes) {
  auto started = c.start(std::move(nodes));
  return started.ok() ? "" : started.error().message;
}

// ---- kube-scheduler's calls, made directly ----

/// The extender's /filter answer for `pod` on `nodes`, as a kube-scheduler asks it when its
/// own view of the nodes (allocatable, from the kubelets' node status) lags.
struct FilterAnswer {
  std::vector<std::string> fitting;
  std::map<std::string, std::string> failed;  ///< FailedNodes and FailedAndUnresolvableNodes
  std::vector<std::string> unresolvable;      ///< those of FailedAndUnresolvableNodes
};

Result<FilterAnswer> filterDirect(Cluster& c, const json::object& pod, const std::vector<std::string>& nodes) {
  json::array names;
  for (const auto& n : nodes) names.push_back(json::string(n));
  auto reply = vgpu::testing::TestHttpClient(c.extenderPort())
                   .setTimeout(kHttpTimeout)
                   .post("/filter", json::serialize(json::object{{"Pod", pod}, {"NodeNames", names}}));
  if (reply.status == 0) return makeError("filter: " + reply.error);
  if (reply.status != 200) return makeError("filter answered HTTP " + std::to_string(reply.status));
  FilterAnswer out;
  const json::object answer = json::parse(reply.body).as_object();
  if (const auto* fitting = answer.if_contains("NodeNames"); fitting && fitting->is_array())
    for (const auto& n : fitting->as_array()) out.fitting.emplace_back(n.as_string());
  for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"})
    if (const auto* m = answer.if_contains(key); m && m->is_object())
      for (const auto& [node, why] : m->as_object()) {
        out.failed[std::string(node)] = std::string(why.as_string());
        if (std::string_view(key) == "FailedAndUnresolvableNodes") out.unresolvable.emplace_back(node);
      }
  return out;
}

/// The extender's /bind of `pod` to `node`: its Error (empty when bound).
Result<std::string> bindDirect(Cluster& c, const json::object& pod, const std::string& node,
                               std::chrono::milliseconds timeout = kWait) {
  const json::object args{
      {"PodName", nameOf(pod)}, {"PodNamespace", "default"}, {"PodUID", uidOf(pod)}, {"Node", node}};
  auto reply =
      vgpu::testing::TestHttpClient(c.extenderPort()).setTimeout(timeout).post("/bind", json::serialize(args));
  if (reply.status == 0) return makeError("bind: " + reply.error);
  if (reply.status != 200) return makeError("bind answered HTTP " + std::to_string(reply.status) + ": " + reply.body);
  const json::object answer = json::parse(reply.body).as_object();
  const auto* error = answer.if_contains("Error");
  return error && error->is_string() ? std::string(error->as_string()) : std::string();
}

/// kube-scheduler retries a pending pod: schedules until it is bound or `timeout` passes.
std::optional<ScheduleOutcome> scheduleWithRetries(Cluster& c, const std::string& name, std::string& lastError) {
  std::optional<ScheduleOutcome> bound;
  Cluster::waitUntil([&] {
    auto attempt = c.schedulePod("default", name);
    lastError = attempt.ok() ? attempt->error : attempt.error().message;
    if (attempt.ok() && attempt->bound()) bound = *attempt;
    return bound.has_value();
  });
  return bound;
}

// The audits are what the failure tests rely on: they must see a share given twice.
TEST(E2EFailure, AuditsCatchAShareGivenTwiceAndAPodTheKubeletNeverAdmitted) {
  Cluster cluster;
  ASSERT_EQ(startError(cluster, {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}}), "");
  auto real = cluster.runPod(podYaml("real", 1, 30000));
  ASSERT_TRUE(real.ok()) << real.error().message;
  EXPECT_THAT(failuresOf([&] { expectClusterConsistent(cluster); }), ::testing::IsEmpty());

  // A second pod bound with a copy of the first's assignment, never admitted.
  json::object forged = real->pod;
  forged["metadata"] = json::object{{"name", "forged"},
                                    {"namespace", "default"},
                                    {"annotations",
                                     {{std::string(keys::kPodAssignment),
                                       cluster.annotationOf("default", "real", std::string(keys::kPodAssignment))}}}};
  ASSERT_TRUE(cluster.api().create("pods", forged).ok());
  const auto doubled = failuresOf([&] { expectClusterConsistent(cluster); });
  const auto reported = [&](const std::string& what) {
    return std::any_of(doubled.begin(), doubled.end(), [&](const auto& m) { return m.find(what) != m.npos; });
  };
  EXPECT_TRUE(reported(kGpuA0 + "::0 is given to both")) << ::testing::PrintToString(doubled);
  EXPECT_TRUE(reported("memory over-committed")) << ::testing::PrintToString(doubled);
  EXPECT_TRUE(reported("default/forged is bound to gpu-a but its kubelet holds nothing"))
      << ::testing::PrintToString(doubled);
  // Taken away, the cluster is consistent again.
  ASSERT_TRUE(cluster.api().remove("pods", "default", "forged").ok());
  EXPECT_THAT(failuresOf([&] { expectClusterConsistent(cluster); }), ::testing::IsEmpty());
}

// ---- the kubelet restarts ----

// A one-GPU pod waiting for its Allocate and a pod of two one-GPU containers: the agent
// matches container by container, so it could give the pair's first container the
// waiting pod's share (and its limit). The scheduler holds the pair's bind back until the
// first pod is admitted; then each pod gets its own limits.
TEST(E2EFailure, BindOfAPodWithAContainerLikeOneInFlightWaitsAndNoLimitIsSwapped) {
  Cluster cluster({.bindHoldTimeoutMs = 200});
  ASSERT_EQ(startError(cluster, {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}}), "");
  ASSERT_TRUE(cluster.createPod(podYaml("single", 1, 5000)).ok());
  auto single = cluster.schedulePod("default", "single");
  ASSERT_TRUE(single.ok() && single->bound()) << (single.ok() ? single->error : single.error().message);

  const std::string container = "    image: cuda-app\n    resources:\n      limits:\n"
                                "        nvidia.com/gpu: 1\n        nvidia.com/gpumem: 3000\n";
  const std::string pair = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pair\nspec:\n  containers:\n"
                           "  - name: first\n" + container + "  - name: second\n" + container;
  ASSERT_TRUE(cluster.createPod(pair).ok());
  auto held = cluster.schedulePod("default", "pair");
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_FALSE(held->bound()) << "bound to " << held->node << " while default/single waits for its Allocate";
  EXPECT_THAT(held->error, HasSubstr("held back: pod default/single"));

  auto admitted = cluster.admitPod("default", "single");
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  std::string lastError;
  ASSERT_TRUE(scheduleWithRetries(cluster, "pair", lastError)) << lastError;
  auto pairAdmitted = cluster.admitPod("default", "pair");
  ASSERT_TRUE(pairAdmitted.ok()) << pairAdmitted.error().message;

  const auto limitOf = [](const fakes::AdmitResult& r, const std::string& c) {
    PodRun run;
    run.admission = r;
    return run.specOf(c).env["CUDA_DEVICE_MEMORY_LIMIT_0"];
  };
  EXPECT_EQ(limitOf(*admitted, "main"), "5000m");
  EXPECT_EQ(limitOf(*pairAdmitted, "first"), "3000m");
  EXPECT_EQ(limitOf(*pairAdmitted, "second"), "3000m");
  expectClusterConsistent(cluster);
}

TEST(E2EFailure, KubeletRestartAgentRegistersAgainAndPodsBeforeAndAfterKeepTheirDevices) {
  Cluster cluster;
  ASSERT_EQ(startError(cluster, {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}, {.uuid = kGpuA1}}}}), "");
  auto before = cluster.runPod(podYaml("before", 1, 8000, 30));
  ASSERT_TRUE(before.ok()) << before.error().message;
  const auto assignedBefore = cluster.assignmentOf("default", "before");
  ASSERT_TRUE(assignedBefore);
  const auto heldBefore = cluster.kubelet("gpu-a").allocations().at(before->uid());

  for (int restart = 1; restart <= 2; ++restart) {
    const size_t registrations = cluster.kubelet("gpu-a").registrations().size();
    const auto t0 = Clock::now();
    auto restarted = cluster.restartKubelet("gpu-a");  // waits (kWait) for the new registration
    ASSERT_TRUE(restarted.ok()) << restarted.error().message;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    RecordProperty("reregistered_ms_" + std::to_string(restart), std::to_string(ms));
    const auto regs = cluster.kubelet("gpu-a").registrations();
    ASSERT_GT(regs.size(), registrations);
    EXPECT_EQ(regs.back().resource, "nvidia.com/gpu");
    EXPECT_TRUE(regs.back().preferredAllocationAvailable);
    EXPECT_TRUE(cluster.agent("gpu-a")->running());
  }

  // What was admitted before keeps its devices, in the kubelet and on the pod.
  EXPECT_EQ(cluster.kubelet("gpu-a").allocations().at(before->uid()), heldBefore);
  EXPECT_EQ(cluster.assignmentOf("default", "before"), assignedBefore);
  EXPECT_EQ(cluster.annotationOf("default", "before", std::string(keys::kPodBindPhase)), "success");

  // Pods created afterwards still allocate, next to it and on the same GPU.
  for (const char* name : {"after-1", "after-2", "after-3"}) {
    auto after = cluster.runPod(podYaml(name, 1, 8000, 20));
    ASSERT_TRUE(after.ok()) << name << ": " << after.error().message << "\nagent log:\n" << cluster.agentLog("gpu-a");
    ASSERT_EQ(after->admission.allocations.size(), 1u);
    EXPECT_EQ(after->specOf("main").env["CUDA_DEVICE_MEMORY_LIMIT_0"], "8000m") << name;
  }
  expectClusterConsistent(cluster);
}

// ---- the apiserver goes away and comes back ----

TEST(E2EFailure, ApiserverOutageFailsBindsInBoundedTimeAndAfterItNothingIsLostOrGivenTwice) {
  // The agents write their heartbeat every second, so they do try during the outage.
  Cluster cluster({.heartbeatSeconds = 1});
  ASSERT_EQ(startError(cluster,
                       {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}, {.name = "gpu-b", .gpus = {{.uuid = kGpuB0}}}}),
            "");
  // binpack puts these three on one node. "doomed" is bound there last (the kubelet admits
  // pods in the order they were created) and admitted during the outage.
  auto p1 = cluster.runPod(podYaml("p1", 1, 20000, 40));
  ASSERT_TRUE(p1.ok()) << p1.error().message;
  const std::string full = p1->schedule.node, empty = full == "gpu-a" ? "gpu-b" : "gpu-a";
  auto p2 = cluster.runPod(podYaml("p2", 1, 10000));
  ASSERT_TRUE(p2.ok()) << p2.error().message;
  ASSERT_EQ(p2->schedule.node, full);
  const auto p2Assigned = cluster.assignmentOf("default", "p2");
  ASSERT_TRUE(cluster.createPod(podYaml("doomed", 1, 5000)).ok());
  auto doomedBound = cluster.schedulePod("default", "doomed");
  ASSERT_TRUE(doomedBound.ok() && doomedBound->node == full);
  auto doomed = parsePod(*cluster.pod("default", "doomed"));
  ASSERT_TRUE(doomed.ok());
  fakes::KubeletPod doomedAdmission{.ns = "default", .name = "doomed", .uid = doomed->uid, .containers = {}};
  for (const auto& c : doomed->containers) doomedAdmission.containers.push_back({c.name, c.init, c.limits});
  const std::string apiUrl = cluster.api().url(), apiAddress = apiUrl.substr(apiUrl.find("://") + 3);
  // 5960 MiB are left on the full node: "pending" belongs on the other one.
  auto pending = cluster.createPod(podYaml("pending", 1, 15000));
  ASSERT_TRUE(pending.ok()) << pending.error().message;
  ASSERT_EQ(cluster.predict(*pending)->node, empty);

  std::map<std::string, std::string> heartbeats;
  for (const auto& node : cluster.nodes())
    heartbeats[node.name] = cluster.annotationOf("", node.name, std::string(keys::kNodeHeartbeat));

  cluster.stopApiServer();
  // kube-scheduler's bind fails with an error that names the apiserver, in bounded time,
  // and leaves no reservation behind (checked below: "big" needs that room). It fails at
  // the Binding, or at reading the pod when the scheduler's watch had not shown it yet.
  const auto t0 = Clock::now();
  auto bind = bindDirect(cluster, *pending, empty);
  const auto bindMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_TRUE(bind.ok()) << "no answer to /bind while the apiserver is away: " << bind.error().message;
  RecordProperty("bind_while_apiserver_away_ms", std::to_string(bindMs));
  EXPECT_LT(bindMs, 5000) << "past the extender httpTimeout of docs/scheduler.md's example (5 s)";
  EXPECT_THAT(*bind, ::testing::AnyOf(HasSubstr("binding to " + empty), HasSubstr("cannot read pod default/pending")));
  EXPECT_THAT(*bind, HasSubstr(apiAddress));
  // The extender still answers from its cache, and the agents keep running.
  auto filtered = filterDirect(cluster, *pending, {"gpu-a", "gpu-b"});
  ASSERT_TRUE(filtered.ok()) << filtered.error().message;
  EXPECT_EQ(filtered->fitting, std::vector<std::string>{empty});
  // The kubelet admitting a pod meanwhile: Allocate answers from what the agent knows and
  // writes the outcome on the pod once the apiserver is back (issue 27 item 15). The agent
  // may not have seen doomed bound before the outage (its watch lags by milliseconds): then
  // it waits --pod-wait-ms for the pod and says none is waiting.
  const auto t1 = Clock::now();
  const auto admittedMeanwhile = cluster.kubelet(full).admit(doomedAdmission);
  RecordProperty("allocate_while_apiserver_away_ms",
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t1).count()));
  const bool agentKnewIt = admittedMeanwhile.admitted;
  RecordProperty("agent_knew_pod", agentKnewIt ? "yes" : "no");
  EXPECT_EQ(cluster.kubelet(full).allocations().contains(doomed->uid), agentKnewIt);
  if (!agentKnewIt) {
    EXPECT_THAT(admittedMeanwhile.error, HasSubstr("is waiting for 1 nvidia.com/gpu"));
  }
  for (const auto& node : cluster.nodes()) {
    EXPECT_TRUE(cluster.agent(node.name)->running()) << node.name;
    EXPECT_FALSE(cluster.agentMetrics(node.name).empty()) << node.name;
  }

  auto up = cluster.startApiServer();
  ASSERT_TRUE(up.ok()) << up.error().message;
  // The agents write again (the outage lasted seconds, so the heartbeat time moves on).
  for (const auto& [node, before] : heartbeats)
    EXPECT_TRUE(Cluster::waitUntil([&] {
      return cluster.annotationOf("", node, std::string(keys::kNodeHeartbeat)) != before;
    })) << node
        << " still shows heartbeat " << before << "; agent log:\n"
        << cluster.agentLog(node);
  // The agent records the outcome once it can. Then doomed fails: the kubelet gives its
  // devices back and reports it, which gives its share back (checked below: "big" needs it).
  if (agentKnewIt) {
    EXPECT_TRUE(Cluster::waitUntil([&] {
      return cluster.annotationOf("default", "doomed", std::string(keys::kPodBindPhase)) == "success";
    })) << cluster.agentLog(full);
    cluster.kubelet(full).removePod(doomed->uid);
  }
  ASSERT_TRUE(cluster.api().patch("pods", "default", "doomed", {{"status", {{"phase", "Failed"}}}}).ok());
  // kube-scheduler retries the pending pod: it is placed and admitted.
  std::string lastError;
  auto placed = scheduleWithRetries(cluster, "pending", lastError);
  ASSERT_TRUE(placed) << lastError << "\nscheduler log:\n" << cluster.schedulerLog();
  EXPECT_EQ(placed->node, empty);
  auto admitted = cluster.admitPod("default", "pending");
  ASSERT_TRUE(admitted.ok() && admitted->admitted) << (admitted.ok() ? admitted->error : admitted.error().message);

  // The informers resynced: a delete made now reaches the scheduler's cache (30000 MiB fits
  // only where p1 and doomed were), and a pod bound now reaches the agent (it is admitted).
  ASSERT_TRUE(cluster.createPod(podYaml("big", 1, 30000)).ok());
  auto notYet = cluster.schedulePod("default", "big");
  ASSERT_TRUE(notYet.ok()) << notYet.error().message;
  EXPECT_FALSE(notYet->bound());
  ASSERT_TRUE(cluster.deletePod("default", "p1").ok());
  auto big = scheduleWithRetries(cluster, "big", lastError);
  ASSERT_TRUE(big) << lastError << "\nscheduler log:\n" << cluster.schedulerLog();
  EXPECT_EQ(big->node, full);
  auto bigAdmitted = cluster.admitPod("default", "big");
  ASSERT_TRUE(bigAdmitted.ok() && bigAdmitted->admitted)
      << (bigAdmitted.ok() ? bigAdmitted->error : bigAdmitted.error().message) << "\nagent log:\n"
      << cluster.agentLog(full);

  // Nothing lost: every pod is still there with its assignment.
  for (const char* name : {"p2", "pending", "big"}) EXPECT_TRUE(cluster.assignmentOf("default", name)) << name;
  EXPECT_EQ(cluster.assignmentOf("default", "p2"), p2Assigned);
  expectClusterConsistent(cluster);
}

// ---- the scheduler restarts ----

class E2EFailureSchedulerRestart : public ::testing::TestWithParam<bool> {};

TEST_P(E2EFailureSchedulerRestart, CacheRebuildsFromTheApiserverAndNoShareIsGivenTwice) {
  const bool graceful = GetParam();
  Cluster cluster;
  ASSERT_EQ(startError(cluster, {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}}), "");
  // 40960 MiB, 100% compute, 4 shares. "early" is admitted; "in-flight" is bound (its
  // assignment on the pod) but the kubelet has not admitted it when the scheduler dies.
  auto early = cluster.runPod(podYaml("early", 1, 20000, 50));
  ASSERT_TRUE(early.ok()) << early.error().message;
  ASSERT_TRUE(cluster.createPod(podYaml("in-flight", 1, 15000, 30)).ok());
  auto inFlight = cluster.schedulePod("default", "in-flight");
  ASSERT_TRUE(inFlight.ok() && inFlight->bound()) << (inFlight.ok() ? inFlight->error : inFlight.error().message);
  const auto placedBefore = cluster.assignmentOf("default", "in-flight");
  // Two pods that fit only if the old assignments are forgotten (5960 MiB and 20% compute
  // are left), pending when the scheduler goes.
  struct Refused {
    const char* name;
    int memoryMiB, cores;
    const char* why;
  };
  // kube-scheduler gets a category per node (issue 27 item 8); the numbers are in the pod's
  // FilteringFailed event.
  const Refused refusals[] = {{"too-much-memory", 10000, 10, "vgpu: not enough free device memory (CardInsufficientMemory)"},
                              {"too-much-compute", 1000, 30, "vgpu: not enough free device compute (CardInsufficientCore)"}};
  for (const Refused& r : refusals) ASSERT_TRUE(cluster.createPod(podYaml(r.name, 1, r.memoryMiB, r.cores)).ok());

  cluster.stopScheduler(graceful);
  EXPECT_FALSE(cluster.scheduler()->running());
  // Meanwhile kube-scheduler's attempts fail (the extender is not ignorable), at once.
  auto whileDown = cluster.schedulePod("default", "too-much-memory");
  EXPECT_FALSE(whileDown.ok() && whileDown->bound());
  auto restarted = cluster.startScheduler();  // /readyz and every node's devices in its cache
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;

  // The kubelet admits the in-flight pod on what the old scheduler assigned.
  auto admitted = cluster.admitPod("default", "in-flight");
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_TRUE(admitted->admitted) << admitted->error;
  EXPECT_EQ(cluster.assignmentOf("default", "in-flight"), placedBefore);

  // The new scheduler refuses both with the engine's reason, and the engine agrees.
  for (const Refused& r : refusals) {
    auto outcome = cluster.schedulePod("default", r.name);
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    EXPECT_FALSE(outcome->bound()) << r.name << " was bound to " << outcome->node;
    ASSERT_TRUE(outcome->failedNodes.contains("gpu-a")) << r.name << ": " << outcome->error;
    EXPECT_THAT(outcome->failedNodes.at("gpu-a"), HasSubstr(r.why));
    auto predicted = cluster.predict(*cluster.pod("default", r.name));
    ASSERT_TRUE(predicted.ok());
    EXPECT_EQ(predicted->node, "") << r.name;
    ASSERT_TRUE(cluster.deletePod("default", r.name).ok());
  }

  // What is left is still given out, once: two more pods take the last two shares.
  for (const char* name : {"late-1", "late-2"}) {
    auto late = cluster.runPod(podYaml(name, 1, 2900, 10));
    ASSERT_TRUE(late.ok()) << name << ": " << late.error().message << "\nscheduler log:\n" << cluster.schedulerLog();
  }
  // And no fifth share: kube-scheduler sees the 4 advertised devices taken, and so does
  // the extender when asked anyway.
  auto full = cluster.createPod(podYaml("one-too-many", 1, 10, 0));
  ASSERT_TRUE(full.ok());
  auto refused = cluster.schedulePod("default", "one-too-many");
  ASSERT_TRUE(refused.ok()) << refused.error().message;
  EXPECT_FALSE(refused->bound());
  auto extender = filterDirect(cluster, *full, {"gpu-a"});
  ASSERT_TRUE(extender.ok()) << extender.error().message;
  EXPECT_THAT(extender->fitting, ::testing::IsEmpty());
  EXPECT_EQ(extender->failed["gpu-a"], "vgpu: every share of the devices taken (CardTimeSlicingExhausted)");
  expectClusterConsistent(cluster);
}

INSTANTIATE_TEST_SUITE_P(E2EFailure, E2EFailureSchedulerRestart, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Graceful" : "Sigkill"; });

// ---- a node's agent stops ----

TEST(E2EFailure, StoppedAgentsNodeIsRefusedOnceItsHeartbeatIsStaleAndUsedAgainWhenItReturns) {
  // Heartbeats every second, stale after 5 s: long enough that a live agent on a loaded
  // machine is never taken for a dead one.
  Cluster cluster({.heartbeatTimeout = "5s", .heartbeatSeconds = 1});
  ASSERT_EQ(startError(cluster,
                       {{.name = "gpu-a", .gpus = {{.uuid = kGpuA0}}}, {.name = "gpu-b", .gpus = {{.uuid = kGpuB0}}}}),
            "");
  // binpack: once "first" is on gpu-a, gpu-a is where the next small pod belongs.
  auto first = cluster.runPod(podYaml("first", 1, 20000));
  ASSERT_TRUE(first.ok()) << first.error().message;
  const std::string busy = first->schedule.node, other = busy == "gpu-a" ? "gpu-b" : "gpu-a";
  auto probe = cluster.createPod(podYaml("probe", 1, 1000));
  ASSERT_TRUE(probe.ok());
  ASSERT_EQ(cluster.predict(*probe)->node, busy);

  // The agent dies (SIGKILL: its last heartbeat stays on the Node and ages).
  cluster.stopAgent(busy, /*graceful=*/false);
  // Asked directly (kube-scheduler's node view may lag the kubelet), the extender refuses
  // the node once the heartbeat is older than the limit, and says why.
  std::string why;
  ASSERT_TRUE(Cluster::waitUntil([&] {
    auto answer = filterDirect(cluster, *probe, {"gpu-a", "gpu-b"});
    if (!answer.ok()) return false;
    why = answer->failed.contains(busy) ? answer->failed.at(busy) : "";
    return !why.empty();
  })) << "the extender never refused "
      << busy;
  EXPECT_THAT(why, HasSubstr("heartbeat is stale"));
  EXPECT_THAT(why, HasSubstr("vgpu-device-plugin"));
  auto answer = filterDirect(cluster, *probe, {"gpu-a", "gpu-b"});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->fitting, std::vector<std::string>{other});
  EXPECT_THAT(answer->unresolvable, ::testing::IsEmpty()) << "in FailedNodes: the agent may come back";
  // Even a bind straight to it is refused, with the same reason.
  auto forced = bindDirect(cluster, *probe, busy);
  ASSERT_TRUE(forced.ok()) << forced.error().message;
  EXPECT_THAT(*forced, HasSubstr("heartbeat is stale"));
  EXPECT_EQ(cluster.annotationOf("default", "probe", std::string(keys::kPodAssignment)), "");

  // New pods go to the other node.
  ASSERT_TRUE(cluster.createPod(podYaml("meanwhile", 1, 1000)).ok());
  for (const char* name : {"probe", "meanwhile"}) {
    auto outcome = cluster.schedulePod("default", name);
    ASSERT_TRUE(outcome.ok()) << outcome.error().message;
    EXPECT_EQ(outcome->node, other) << name << ": " << outcome->error;
    auto admitted = cluster.admitPod("default", name);
    ASSERT_TRUE(admitted.ok() && admitted->admitted) << name;
  }

  // The agent comes back: a fresh heartbeat, and the node is used again.
  auto back = cluster.startAgent(busy);
  ASSERT_TRUE(back.ok()) << back.error().message;
  auto returned = cluster.createPod(podYaml("returned", 1, 1000));
  ASSERT_TRUE(returned.ok());
  ASSERT_TRUE(Cluster::waitUntil([&] {
    auto a = filterDirect(cluster, *returned, {"gpu-a", "gpu-b"});
    return a.ok() && a->fitting.size() == 2;
  }));
  auto placed = cluster.schedulePod("default", "returned");
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_EQ(placed->node, busy) << placed->error;
  auto admitted = cluster.admitPod("default", "returned");
  ASSERT_TRUE(admitted.ok() && admitted->admitted)
      << (admitted.ok() ? admitted->error : admitted.error().message) << "\nagent log:\n"
      << cluster.agentLog(busy);
  expectClusterConsistent(cluster);

  // A graceful stop takes the inventory and heartbeat off the Node: refused at once, with
  // that reason.
  cluster.stopAgent(busy, /*graceful=*/true);
  ASSERT_TRUE(Cluster::waitUntil([&] {
    auto a = filterDirect(cluster, *returned, {"gpu-a", "gpu-b"});
    why = a.ok() && a->failed.contains(busy) ? a->failed.at(busy) : "";
    return !why.empty();
  }));
  EXPECT_EQ(why, "vgpu: no vgpu devices are published on the node");
}

}  // namespace
}  // namespace vgpu::e2e
