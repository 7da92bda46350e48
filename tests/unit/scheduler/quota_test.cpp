// Issue 28 item 6: a ResourceQuota on device memory and compute (requests./limits. of the
// backends' memory and cores resources) limits what a namespace's pods really hold: the
// webhook refuses a pod that can never fit, the extender a placement that would exceed it
// (a memory percentage counted as the MiB it becomes on the chosen device), with words that
// name the namespace, the quota, the resource and the amounts; usage per namespace in metrics.
#include <gtest/gtest.h>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "../metrics/promtool_check.h"
#include "scheduler_harness.h"
#include "webhook.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

json::object resourceQuota(const std::string& ns, const std::string& name, std::map<std::string, std::string> hard) {
  json::object h;
  for (const auto& [k, v] : hard) h[k] = v;
  return json::object{{"apiVersion", "v1"},
                      {"kind", "ResourceQuota"},
                      {"metadata", json::object{{"name", name}, {"namespace", ns}}},
                      {"spec", json::object{{"hard", h}}}};
}

json::object teamPod(const std::string& name, std::map<std::string, std::string> limits, const std::string& ns = "team") {
  return podJson(ns, name, {{"main", std::move(limits)}});
}

struct QuotaFixture : ::testing::Test {
  SchedulerHarness h;
  TestHttpClient http{h.service->extenderPort()};
  TestHttpClient admin{h.service->port()};
  void SetUp() override {
    h.createNode(nodeJson("n", gpus("n", 2, 8000)));
    ASSERT_TRUE(h.awaitNodes(1));
  }
  void addQuota(json::object quota, std::int64_t expectLimits) {
    const std::string ns(quota.at("metadata").at("namespace").as_string());
    ASSERT_TRUE(h.api->create("resourcequotas", std::move(quota)).ok());
    ASSERT_TRUE(eventually([&] {
      return static_cast<std::int64_t>(h.service->cache().namespaceQuota(ns).limits.size()) == expectLimits;
    }));
  }
  std::vector<std::string> fitting(const json::object& pod) {
    std::vector<std::string> out;
    const json::object answer = parse(http.post("/filter", extenderArgs(pod, {"n"})).body);
    for (const auto& n : answer.at("NodeNames").as_array()) out.emplace_back(n.as_string());
    return out;
  }
  json::object bind(const json::object& pod) { return parse(http.post("/bind", bindingArgs(pod, "n")).body); }
  std::string lastFilteringFailed(const std::string& pod) {
    h.service->events().flush();
    std::string out;
    for (const auto& e : h.api->list("events"))
      if (e.at("involvedObject").at("name").as_string() == pod && e.at("reason").as_string() == "FilteringFailed")
        out = std::string(e.at("message").as_string());
    return out;
  }
};

TEST_F(QuotaFixture, TheExtenderRefusesAPlacementThatWouldExceedTheNamespacesQuota) {
  addQuota(resourceQuota("team", "gpu-quota", {{"limits.nvidia.com/gpumem", "10000"}, {"requests.nvidia.com/gpucores", "50"},
                                               {"requests.cpu", "4"}}),
           2);
  auto first = h.createPod(teamPod("first", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}, {"nvidia.com/gpucores", "20"}}));
  ASSERT_EQ(bind(first).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").used["nvidia.com/gpumem"] == 6000; }));
  // 6000 + 6000 MiB > 10000: the devices have room, the quota has not.
  auto second = h.createPod(teamPod("second", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}}));
  auto answer = parse(http.post("/filter", extenderArgs(second, {"n"})).body);
  EXPECT_TRUE(answer.at("NodeNames").as_array().empty());
  EXPECT_EQ(std::string_view(answer.at("FailedNodes").at("n").as_string()), Extender::kQuotaCategory);
  ASSERT_TRUE(eventually([&] { return !lastFilteringFailed("second").empty(); }));
  EXPECT_NE(lastFilteringFailed("second").find("namespace team: ResourceQuota gpu-quota limits limits.nvidia.com/gpumem to "
                                               "10000 MiB; the pod asks for 6000 MiB and the namespace's pods hold 6000 MiB"),
            std::string::npos)
      << lastFilteringFailed("second");
  // Compute: 20 + 40 > 50.
  EXPECT_TRUE(fitting(teamPod("cores", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "40"}})).empty());
  // What fits the quota goes; another namespace is not limited.
  EXPECT_EQ(fitting(teamPod("small", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}})), std::vector<std::string>{"n"});
  EXPECT_EQ(fitting(teamPod("other", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}}, "elsewhere")),
            std::vector<std::string>{"n"});
  // The first pod goes: the second fits.
  ASSERT_TRUE(h.api->remove("pods", "team", "first").ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").used.empty(); }));
  EXPECT_EQ(fitting(second), std::vector<std::string>{"n"});
}

TEST_F(QuotaFixture, AMemoryPercentageCountsAsTheMiBItBecomesOnTheDevice) {
  addQuota(resourceQuota("team", "mem", {{"requests.nvidia.com/gpumem", "5000"}}), 1);
  // 50 % of an 8000 MiB device is 4000 MiB: fits; a second one would make 8000.
  auto half = teamPod("half", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}});
  auto a = h.createPod(half);
  ASSERT_EQ(bind(a).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").used["nvidia.com/gpumem"] == 4000; }));
  auto b = h.createPod(teamPod("half-2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}));
  EXPECT_TRUE(fitting(b).empty());
  // Bind checks again under the cache's lock (a filter answer may be stale): refused in words.
  auto refused = bind(b);
  EXPECT_NE(std::string(refused.at("Error").as_string()).find("quota exceeded: namespace team: ResourceQuota mem limits "
                                                              "requests.nvidia.com/gpumem to 5000 MiB; the pod asks for 4000 MiB"),
            std::string::npos)
      << refused;
}

TEST_F(QuotaFixture, UsagePerNamespaceAndTheQuotasAreInTheMetrics) {
  addQuota(resourceQuota("team", "gpu-quota", {{"limits.nvidia.com/gpumem", "12k"}}), 1);
  ASSERT_EQ(bind(h.createPod(teamPod("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "10"}})))
                .at("Error"),
            "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").used["nvidia.com/gpumem"] == 6000; }));
  auto m = admin.get("/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* expected : {"vgpu_namespace_allocated{namespace=\"team\",resource=\"nvidia.com/gpumem\"} 6000",
                               "vgpu_namespace_allocated{namespace=\"team\",resource=\"nvidia.com/gpucores\"} 20",
                               "vgpu_namespace_quota_hard{namespace=\"team\",quota=\"gpu-quota\",resource=\"limits.nvidia.com/gpumem\"} 12000"})
    EXPECT_NE(m.body.find(expected), std::string::npos) << expected << "\n" << m.body;
  EXPECT_EQ(promtoolProblems(m.body), "");
  // A deleted quota limits nothing any more.
  ASSERT_TRUE(h.api->remove("resourcequotas", "team", "gpu-quota").ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").limits.empty(); }));
}

// HAMi's dashboards read hami_resource_quota_used{namespace,quota_name,limit}: one series per
// `limits.` key (HAMi counts no other), in the resource's unit.
TEST(QuotaHamiMetrics, UsageUnderEachLimitsKeyIsExportedWithHamisLabels) {
  ServiceOptions options;
  options.hamiMetrics = true;
  SchedulerHarness h(options);
  h.createNode(nodeJson("n", gpus("n", 2, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  ASSERT_TRUE(h.api->create("resourcequotas", resourceQuota("team", "gpu-quota",
                                                           {{"limits.nvidia.com/gpumem", "12000"},
                                                            {"limits.nvidia.com/gpucores", "150"},
                                                            {"requests.nvidia.com/gpumem", "9000"}}))
                  .ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").limits.size() == 3; }));
  TestHttpClient http{h.service->extenderPort()}, admin{h.service->port()};
  auto pod = h.createPod(teamPod("p", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "10"}}));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(pod, "n")).body).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().namespaceQuota("team").used["nvidia.com/gpumem"] == 6000; }));
  const std::string text = admin.get("/metrics").body;
  for (const char* expected :
       {"hami_resource_quota_used{namespace=\"team\",quota_name=\"nvidia.com/gpumem\",limit=\"12000\",zone=\"vGPU\"} 6000\n",
        "hami_resource_quota_used{namespace=\"team\",quota_name=\"nvidia.com/gpucores\",limit=\"150\",zone=\"vGPU\"} 20\n"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  EXPECT_EQ(text.find("limit=\"9000\""), std::string::npos) << "a requests. key is not HAMi's";
  EXPECT_EQ(promtoolProblems(text), "");
}

TEST(QuotaWebhook, APodThatCanNeverFitTheQuotaIsRefusedInWords) {
  BackendSet backends = simBackends();
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  QuotaLookup quotas = [&](const std::string& ns) {
    QuotaResources resources(backends);
    return ns == "team" ? parseResourceQuota(resourceQuota("team", "gpu-quota", {{"limits.nvidia.com/gpumem", "10000"}}), resources)
                        : std::vector<QuotaLimit>{};
  };
  Webhook webhook(backends, {}, metrics, quotas);
  auto review = [&](const json::object& pod) {
    http::Request r;
    r.method = "POST";
    r.path = "/webhook";
    json::object req{{"uid", "u1"},
                     {"kind", json::object{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                     {"resource", json::object{{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                     {"namespace", pod.at("metadata").at("namespace")},
                     {"operation", "CREATE"},
                     {"userInfo", json::object{{"username", "alice"}}},
                     {"object", pod}};
    r.body = json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}});
    return json::parse(webhook.review(r).body).at("response").as_object();
  };
  // 2 devices x 6000 MiB = 12000 > 10000, whatever else runs.
  auto refused = review(teamPod("big", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "6000"}}));
  EXPECT_EQ(refused.at("allowed"), false);
  EXPECT_EQ(refused.at("status").at("code"), 403);
  EXPECT_EQ(refused.at("status").at("message"),
            "vgpu: pod team/big can never fit its namespace's quota: namespace team: ResourceQuota gpu-quota limits "
            "limits.nvidia.com/gpumem to 10000 MiB; the pod asks for 12000 MiB");
  EXPECT_EQ(review(teamPod("fits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}})).at("allowed"), true);
  EXPECT_EQ(review(teamPod("elsewhere", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "6000"}}, "other")).at("allowed"), true);
  // A percentage's size depends on the device: not refused here (the extender counts it).
  EXPECT_EQ(review(teamPod("pct", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "100"}})).at("allowed"), true);
}

}  // namespace
}  // namespace vgpu::scheduler
