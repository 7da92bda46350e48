// The real-cluster tests: one run per release (ctest RealK8s.1.34, RealK8s.1.37: this
// program with --release=<release>). The tests of a run share one cluster, started once
// (it takes seconds): the control plane, vgpu-scheduler and the chart's webhook, with the
// chart's sim devices (no GPU needed); each test works in its own namespace and nodes.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstring>
#include <fstream>
#include <iostream>

#include "realk8s_fixture.h"
#include "vgpu/k8s/node_lease.h"
#include "vgpu/annotations.h"

namespace vgpu::realk8s {

RealCluster* RealK8s::cluster_ = nullptr;
Status* RealK8s::startStatus_ = nullptr;

namespace {
namespace json = boost::json;

TEST_F(RealK8s, ControlPlaneStartsAndSchedulesAPlainPod) {
  auto& c = cluster();
  ASSERT_TRUE(c.createNamespace("plain").ok());
  ASSERT_TRUE(c.createNode("plain-node", {}, {{kGroupLabel, "plain"}}).ok());
  // No device request: kube-scheduler places it alone (the extender is called only for
  // pods naming a managedResource), with the profile the chart configures.
  const json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "plain"}}},
      {"spec",
       {{"schedulerName", c.schedulerName()},
        {"nodeSelector", {{kGroupLabel, "plain"}}},
        {"containers", json::array{json::object{{"name", "main"}, {"image", "registry.k8s.io/pause:3.10"}}}}}}};
  auto created = c.api().post("/api/v1/namespaces/plain/pods", json::serialize(pod));
  ASSERT_EQ(created.status, 201) << created.describe();

  std::string node;
  const bool bound = c.waitFor([&] {
    auto p = c.getObject("/api/v1/namespaces/plain/pods/plain");
    node = p.ok() ? str(at(*p, {"spec", "nodeName"})) : "";
    return !node.empty();
  });
  ASSERT_TRUE(bound) << "kube-scheduler did not bind the pod; its log ends:\n" << c.logTail("kube-scheduler");
  EXPECT_EQ(node, "plain-node");
  auto p = c.getObject("/api/v1/namespaces/plain/pods/plain");
  ASSERT_TRUE(p.ok());
  bool scheduledCondition = false;
  if (const auto* conds = at(*p, {"status", "conditions"}); conds && conds->is_array())
    for (const auto& cond : conds->as_array())
      if (cond.is_object() && str(cond.as_object().if_contains("type")) == "PodScheduled")
        scheduledCondition = str(cond.as_object().if_contains("status")) == "True";
  EXPECT_TRUE(scheduledCondition) << json::serialize(*p);
  EXPECT_TRUE(c.deletePod("plain", "plain").ok());
}

// Issue 42 item 2 against the real apiserver: the agent, with the chart's flags and RBAC, keeps
// its node alive by a Lease the apiserver accepts (MicroTime, labels), renewed without Node writes.
TEST_F(RealK8s, TheAgentsLeaseIsAcceptedAndRenewedWithTheChartsRbac) {
  auto& c = cluster();
  auto node = c.addVgpuNode("lease-node", {{kGroupLabel, "lease"}});
  ASSERT_TRUE(node.ok()) << node.error().message;
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/vgpu-system/leases/" + nodeLeaseName("lease-node");
  json::object lease;
  const bool made = c.waitFor([&] {
    auto l = c.getObject(path);
    if (l.ok()) lease = *l;
    return l.ok();
  });
  ASSERT_TRUE(made) << "no Lease " << path << "; the agent's log ends:\n" << c.logTail("vgpu-device-plugin@lease-node");
  auto renewal = parseNodeLease(lease);
  ASSERT_TRUE(renewal) << json::serialize(lease);
  EXPECT_EQ(renewal->node, "lease-node");
  EXPECT_LT(std::chrono::system_clock::now() - renewal->renewed, std::chrono::minutes(1));
  EXPECT_EQ(c.logTail("vgpu-device-plugin@lease-node").find("cannot renew the node's Lease"), std::string::npos)
      << c.logTail("vgpu-device-plugin@lease-node");
  ASSERT_TRUE(c.removeVgpuNode("lease-node").ok());
}

TEST_F(RealK8s, SharedDevicePodIsMutatedAndPlacedThroughTheExtender) {
  auto& c = cluster();
  ASSERT_TRUE(c.createNamespace("shared").ok());
  auto node = c.addVgpuNode("sim-node", {{kGroupLabel, "shared"}});
  ASSERT_TRUE(node.ok()) << node.error().message;
  // Asks for a slice of a sim device and names no scheduler: the chart's webhook must
  // send it to the chart's profile, whose extender (vgpu-scheduler) places it.
  const json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "slice"}}},
      {"spec",
       {{"nodeSelector", {{kGroupLabel, "shared"}}},
        {"containers",
         json::array{json::object{
             {"name", "main"},
             {"image", "registry.k8s.io/pause:3.10"},
             {"resources",
              {{"limits", {{"vgpu.io/sim", "1"}, {"vgpu.io/sim-memory", "4096"}, {"vgpu.io/sim-cores", "30"}}}}}}}}}}};
  auto created = c.api().post("/api/v1/namespaces/shared/pods", json::serialize(pod));
  ASSERT_EQ(created.status, 201) << created.describe();
  EXPECT_EQ(str(at(created.json(), {"spec", "schedulerName"})), c.schedulerName())
      << "the webhook did not claim the pod: " << created.body;

  json::object stored;
  const bool bound = c.waitFor([&] {
    auto p = c.getObject("/api/v1/namespaces/shared/pods/slice");
    if (p.ok()) stored = *p;
    return p.ok() && !str(at(stored, {"spec", "nodeName"})).empty();
  });
  ASSERT_TRUE(bound) << "not bound: " << json::serialize(stored) << "\nkube-scheduler's log ends:\n"
                     << c.logTail("kube-scheduler") << "\nvgpu-scheduler's log ends:\n"
                     << c.logTail("vgpu-scheduler");
  EXPECT_EQ(str(at(stored, {"spec", "nodeName"})), "sim-node");
  // Bound by the extender's /bind: the assignment came with the Binding.
  const std::string assignmentKey(keys::kPodAssignment);
  const std::string assignment = str(at(stored, {"metadata", "annotations", assignmentKey.c_str()}));
  EXPECT_NE(assignment.find("SIM-GPU-"), std::string::npos) << json::serialize(stored);

  // The kubelet double admits it: the agent finds the pod through the real apiserver.
  auto admitted = c.admitPod("shared", "slice");
  ASSERT_TRUE(admitted.ok()) << admitted.error().message;
  EXPECT_TRUE(admitted->admitted) << admitted->error << "\nthe agent's log ends:\n"
                                  << c.logTail("vgpu-device-plugin@sim-node");
  EXPECT_TRUE(c.deletePod("shared", "slice").ok());
  EXPECT_TRUE(c.removeVgpuNode("sim-node").ok());
}

/// What the apiserver answers about a resourceVersion: a list at exactly that version, the
/// first page of a list from it, and the first event of a watch from it.
struct OldVersionAnswers {
  ApiReply exactList, pagedList, watch;
  std::vector<json::object> events;
};

TEST_F(RealK8s, EtcdCompactionIsObservable) {
  auto& c = cluster();
  ASSERT_TRUE(c.createNamespace("compaction").ok());
  const std::string base = "/api/v1/namespaces/compaction/configmaps";
  // A ConfigMap written four times: its first resourceVersion is history afterwards.
  const auto writeHistory = [&](const std::string& name) {
    auto created = c.api().post(base, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                                          R"("},"data":{"n":"0"}})");
    EXPECT_EQ(created.status, 201) << created.describe();
    for (int i = 1; i <= 3; ++i) {
      auto r = c.api().patch(base + "/" + name, R"({"data":{"n":")" + std::to_string(i) + R"("}})");
      EXPECT_EQ(r.status, 200) << r.describe();
    }
    return str(at(created.json(), {"metadata", "resourceVersion"}));
  };
  const auto ask = [&](const std::string& label, const std::string& rv) {
    OldVersionAnswers a;
    a.exactList = c.api().get(base + "?resourceVersion=" + rv + "&resourceVersionMatch=Exact");
    record(label + ": LIST resourceVersion=" + rv + "&resourceVersionMatch=Exact", a.exactList);
    a.pagedList = c.api().get(base + "?limit=1&resourceVersion=" + rv);
    record(label + ": LIST limit=1&resourceVersion=" + rv, a.pagedList);
    a.watch = c.api().watch(
        base + "?watch=true&resourceVersion=" + rv + "&timeoutSeconds=5",
        [&](const json::object& e) {
          a.events.push_back(e);
          return false;  // the first event says it
        },
        std::chrono::seconds(15));
    ApiReply shown = a.watch;  // the status and the first event, not the whole stream
    if (!a.events.empty()) shown.body = json::serialize(a.events[0]);
    record(label + ": WATCH resourceVersion=" + rv + " (status, first event)", shown);
    return a;
  };

  // Before any compaction an old version is served.
  const std::string rv1 = writeHistory("first");
  ASSERT_FALSE(rv1.empty());
  auto before = ask("before compaction", rv1);
  EXPECT_EQ(before.exactList.status, 200);
  EXPECT_EQ(before.pagedList.status, 200);

  // etcd compacted behind the apiservers' back (etcd's own auto-compaction): recorded only,
  // what the apiserver answers depends on whether its cache still holds the version.
  auto raw = c.compactEtcd(/*raw=*/true);
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  std::cout << "[" << c.kubernetesVersion() << "] etcd compacted (raw) at revision " << *raw << std::endl;
  ask("after a raw etcd compaction", rv1);

  // Compacted as kube-apiserver's compactor does (what a cluster does every 5 minutes).
  const std::string rv2 = writeHistory("second");
  auto announced = c.compactEtcd();
  ASSERT_TRUE(announced.ok()) << announced.error().message;
  std::cout << "[" << c.kubernetesVersion() << "] etcd compacted (as kube-apiserver) at revision " << *announced
            << std::endl;
  // The apiserver learns of it through a watch on compact_rev_key: give it a moment.
  ASSERT_TRUE(c.waitFor(
      [&] {
        return c.api().get(base + "?resourceVersion=" + rv2 + "&resourceVersionMatch=Exact").status == 410;
      },
      std::chrono::seconds(30)))
      << "the apiserver still lists the compacted resourceVersion " << rv2;
  auto after = ask("after compaction", rv2);
  EXPECT_EQ(after.exactList.status, 410);
  EXPECT_EQ(str(at(after.exactList.json(), {"reason"})), "Expired") << after.exactList.describe();
  EXPECT_EQ(after.pagedList.status, 410);
  EXPECT_EQ(str(at(after.pagedList.json(), {"reason"})), "Expired") << after.pagedList.describe();
  // A watch is served from the watch cache's own window of events, which a compaction does
  // not shorten: recorded, not asserted. The window starts afresh when the apiserver does.
  // Killed: a graceful stop waits ~20 s for the open watches' connections (below).
  ASSERT_TRUE(c.restartApiServer(/*graceful=*/false).ok()) << c.logTail("kube-apiserver");
  auto restarted = ask("after compaction and an apiserver restart", rv2);
  EXPECT_EQ(restarted.exactList.status, 410);
  EXPECT_EQ(restarted.pagedList.status, 410);
  ASSERT_TRUE(restarted.watch.status == 200 || restarted.watch.status == 410) << restarted.watch.describe();
  if (restarted.watch.status == 200) {
    ASSERT_FALSE(restarted.events.empty()) << "the watch ended without an event: " << restarted.watch.describe();
    const auto& event = restarted.events[0];
    EXPECT_EQ(str(event.if_contains("type")), "ERROR") << json::serialize(event);
    const auto* code = at(event, {"object", "code"});
    EXPECT_TRUE(code && code->is_int64() && code->as_int64() == 410) << json::serialize(event);
    EXPECT_EQ(str(at(event, {"object", "reason"})), "Expired") << json::serialize(event);
  }
}

}  // namespace
}  // namespace vgpu::realk8s
