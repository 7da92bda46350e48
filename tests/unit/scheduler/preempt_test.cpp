// The preempt verb (ExtenderPreemptionArgs/Result with the real JSON shapes) and the room
// held for a nominated preemptor, over HTTP against the apiserver double.
#include <gtest/gtest.h>

#include <set>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "extender.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

constexpr int k80G = 81920;
constexpr int kFifth = k80G / 5;

/// A pod of ours running on `node`'s device `device`, with `percent` of its memory and compute.
json::object runningPod(const std::string& name, const std::string& node, int device, int percent, int priority) {
  const std::uint64_t memory = static_cast<std::uint64_t>(k80G) * percent / 100;
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", false, {{"sim", "GPU-" + node + "-" + std::to_string(device), device, memory,
                                           static_cast<std::uint32_t>(percent), -1}}});
  json::object pod = podJson("default", name,
                             {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(memory)},
                                        {"nvidia.com/gpucores", std::to_string(percent)}}}},
                             "vgpu-scheduler",
                             json::object{{std::string(keys::kPodAssignment), encodeAssignment(a)},
                                          {std::string(keys::kPodBindPhase), "success"}});
  pod["spec"].as_object()["nodeName"] = node;
  pod["spec"].as_object()["priority"] = priority;
  pod["status"].as_object()["phase"] = "Running";
  return pod;
}

json::object pendingPod(const std::string& name, int percent, int priority) {
  json::object pod = gpuPod(name, k80G * percent / 100, percent);
  pod["spec"].as_object()["priority"] = priority;
  return pod;
}

struct PreemptFixture : ::testing::Test {
  SchedulerHarness h;
  TestHttpClient http{h.service->extenderPort()};
  std::map<std::string, std::string> uidOf, nameOf;  // pod name <-> uid
  std::map<std::string, int> deviceOf;

  void SetUp() override {
    h.createNode(nodeJson("n1", gpus("n1", 2, k80G, 5)));
    h.createNode(nodeJson("n2", gpus("n2", 1, k80G, 5)));
    ASSERT_TRUE(h.awaitNodes(2));
  }
  /// Every device of n1 full of 20 % pods of `priority`; n2 full of pods of priority 5000.
  void fill(int priority) {
    for (int d = 0; d < 2; ++d)
      for (int i = 0; i < 5; ++i)
        add(runningPod("low-" + std::to_string(d) + "-" + std::to_string(i), "n1", d, 20, priority), d);
    for (int i = 0; i < 5; ++i) add(runningPod("vip-" + std::to_string(i), "n2", 0, 20, 5000), 0);
    ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == uidOf.size(); }));
  }
  void add(json::object pod, int device) {
    const json::object stored = h.createPod(std::move(pod));
    const std::string name(k8s::name(stored)), uid(k8s::uid(stored));
    uidOf[name] = uid;
    nameOf[uid] = name;
    deviceOf[name] = device;
  }
  /// ExtenderPreemptionArgs as kube-scheduler sends it with nodeCacheCapable: true.
  std::string metaArgs(const json::object& pod, const std::map<std::string, std::vector<std::string>>& victims,
                       std::int64_t pdb = 0) {
    json::object map;
    for (const auto& [node, names] : victims) {
      json::array pods;
      for (const auto& n : names) pods.push_back(json::object{{"UID", uidOf.at(n)}});
      map[node] = json::object{{"Pods", pods}, {"NumPDBViolations", pdb}};
    }
    return json::serialize(json::object{{"Pod", pod}, {"NodeNameToVictims", nullptr}, {"NodeNameToMetaVictims", map}});
  }
  /// The answer's victims by node, as pod names.
  std::map<std::string, std::set<std::string>> preempt(const std::string& body) {
    auto r = http.post("/preempt", body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, std::set<std::string>> out;
    const json::object answer = parse(r.body);
    EXPECT_EQ(answer.size(), 1u) << r.body;
    for (const auto& [node, v] : answer.at("NodeNameToMetaVictims").as_object()) {
      auto& names = out[std::string(node)];
      for (const auto& p : v.at("Pods").as_array()) names.insert(nameOf.at(std::string(p.at("UID").as_string())));
      EXPECT_TRUE(v.at("NumPDBViolations").is_int64());
    }
    return out;
  }
  json::object filter(const json::object& pod, const std::vector<std::string>& nodes) {
    auto r = http.post("/filter", extenderArgs(pod, nodes));
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r.body);
  }
  static std::set<std::string> passed(const json::object& filterAnswer) {
    std::set<std::string> out;
    for (const auto& n : filterAnswer.at("NodeNames").as_array()) out.emplace(n.as_string());
    return out;
  }
};

TEST_F(PreemptFixture, SchedulerPreemptAnswersTheFewestLowerPriorityPodsOfOneDevice) {
  fill(0);
  // kube-scheduler counts nvidia.com/gpu per node: one pod out makes room in its eyes.
  auto victims = preempt(metaArgs(pendingPod("urgent", 50, 1000), {{"n1", {"low-1-4"}}}));
  ASSERT_EQ(victims.size(), 1u);
  const auto& chosen = victims.at("n1");
  ASSERT_EQ(chosen.size(), 3u);  // 100 % - 3 x 20 % = 40 % used: 50 % fits, 2 pods would not do
  std::set<int> devices;
  for (const auto& n : chosen) devices.insert(deviceOf.at(n));
  EXPECT_EQ(devices, std::set<int>{1});  // beside kube-scheduler's own pick
  EXPECT_EQ(chosen.count("low-1-4"), 1u);
}

TEST_F(PreemptFixture, SchedulerPreemptReadsWholePodsWithoutNodeCacheAndAnswersUids) {
  fill(0);
  json::array pods{*h.api->get("pods", "default", "low-0-0")};
  const std::string body = json::serialize(json::object{
      {"Pod", pendingPod("urgent", 50, 1000)},
      {"NodeNameToVictims", json::object{{"n1", json::object{{"Pods", pods}, {"NumPDBViolations", 0}}}}},
      {"NodeNameToMetaVictims", nullptr}});
  auto victims = preempt(body);
  ASSERT_EQ(victims.at("n1").size(), 3u);
  EXPECT_EQ(victims.at("n1").count("low-0-0"), 1u);
}

TEST_F(PreemptFixture, SchedulerPreemptNeverOffersPodsOfEqualOrHigherPriority) {
  fill(1000);
  // n1's pods have the preemptor's own priority, n2's a higher one: no node is left.
  auto victims = preempt(metaArgs(pendingPod("urgent", 50, 1000), {{"n1", {"low-0-0"}}, {"n2", {"vip-0"}}}));
  EXPECT_TRUE(victims.empty());
}

TEST_F(PreemptFixture, SchedulerPreemptDropsNodesWhereNoSetHelps) {
  fill(0);
  // n2's pods outrank the preemptor; n1 is kept.
  auto victims = preempt(metaArgs(pendingPod("urgent", 50, 1000), {{"n1", {"low-0-0"}}, {"n2", {"vip-0"}}}));
  EXPECT_EQ(victims.size(), 1u);
  EXPECT_TRUE(victims.count("n1"));
  // Larger than any device: nothing anywhere helps.
  EXPECT_TRUE(preempt(metaArgs(pendingPod("giant", 200, 1000), {{"n1", {"low-0-0"}}})).empty());
}

TEST_F(PreemptFixture, SchedulerPreemptRefusesMalformedArgsInWords) {
  auto r = http.post("/preempt", R"({"NodeNameToMetaVictims":{}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Pod"), std::string::npos) << r.body;
  r = http.post("/preempt", R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[]}},)"
                            R"("NodeNameToMetaVictims":{"n1":{"Pods":[{}]}}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("UID"), std::string::npos) << r.body;
}

TEST_F(PreemptFixture, SchedulerNominatedPreemptorHoldsTheFreedSliceAgainstLowerPriorities) {
  fill(0);
  auto victims = preempt(metaArgs(pendingPod("urgent", 50, 1000), {{"n1", {"low-1-4"}}}));
  ASSERT_EQ(victims.at("n1").size(), 3u);
  // kube-scheduler nominates the preemptor, then evicts the victims.
  json::object urgent = pendingPod("urgent", 50, 1000);
  urgent["status"].as_object()["nominatedNodeName"] = "n1";
  add(std::move(urgent), -1);
  const json::object lowPending = pendingPod("low-pending", 20, 0);
  // While the victims are still there, the whole node is held against lower priorities
  // (once the informer has brought the nomination).
  json::object held;
  EXPECT_TRUE(eventually([&] {
    held = filter(lowPending, {"n1"});
    const json::value* why = held.at("FailedNodes").as_object().if_contains("n1");
    return why && why->is_string() && why->as_string() == Extender::kHeldCategory;
  })) << json::serialize(held);
  EXPECT_TRUE(passed(held).empty());
  for (const auto& name : victims.at("n1")) ASSERT_TRUE(h.api->remove("pods", "default", name).ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == uidOf.size() - 1 - 3; }));
  // 60 % free on the device: the preemptor's 50 % is held, so a 20 % pod of lower priority
  // does not fit, one of higher priority does, and so does the preemptor itself.
  EXPECT_TRUE(passed(filter(lowPending, {"n1"})).empty());
  EXPECT_EQ(passed(filter(pendingPod("higher", 20, 2000), {"n1"})), std::set<std::string>{"n1"});
  json::object self = *h.api->get("pods", "default", "urgent");
  EXPECT_EQ(passed(filter(self, {"n1"})), std::set<std::string>{"n1"});
  // Nomination cleared (the preemptor went elsewhere or away): the slice is free again.
  self["status"].as_object()["nominatedNodeName"] = "";
  ASSERT_TRUE(h.api->update("pods", self).ok());
  EXPECT_TRUE(eventually([&] { return !passed(filter(lowPending, {"n1"})).empty(); }));
}

TEST_F(PreemptFixture, SchedulerBindOfALowerPriorityPodLeavesTheHeldSliceAlone) {
  fill(0);
  for (const char* name : {"low-1-0", "low-1-1", "low-1-2"}) ASSERT_TRUE(h.api->remove("pods", "default", name).ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == uidOf.size() - 3; }));
  json::object urgent = pendingPod("urgent", 50, 1000);
  urgent["status"].as_object()["nominatedNodeName"] = "n1";
  add(std::move(urgent), -1);
  // Filtered before the nomination reached vgpu-scheduler, bound after.
  const json::object low = h.createPod(pendingPod("low-pending", 20, 0));
  ASSERT_TRUE(eventually([&] { return !passed(filter(pendingPod("probe", 20, 2000), {"n1"})).empty() &&
                                      passed(filter(low, {"n1"})).empty(); }));
  auto r = http.post("/bind", bindingArgs(low, "n1"));
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(parse(r.body).at("Error").as_string().find("held for"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace vgpu::scheduler
