// Issue 27 item 9: one Event per pod and reason, with a count, as the kubelet keeps them.
// A pod kube-scheduler retries every few seconds made one FilteringFailed per retry.
#include <gtest/gtest.h>

#include "../http/test_http_client.h"
#include "scheduler_harness.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

std::vector<json::object> eventsOf(fakes::FakeApiServer& api, const std::string& pod, const std::string& reason) {
  std::vector<json::object> out;
  for (const auto& e : api.list("events"))
    if (e.at("involvedObject").at("name").as_string() == pod && e.at("reason").as_string() == reason) out.push_back(e);
  return out;
}

std::int64_t countOf(const json::object& e) { return e.at("count").to_number<std::int64_t>(); }

TEST(SchedulerEvents, OneEventPerPodAndReasonWithACount) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  TestHttpClient http(h.service->extenderPort());
  const auto pod = h.createPod(gpuPod("p", 20000));
  for (int attempt = 0; attempt < 5; ++attempt) {
    ASSERT_EQ(http.post("/filter", extenderArgs(pod, {"n"})).status, 200);
    h.service->events().flush();  // each retry after the previous one was written
  }
  auto refused = eventsOf(*h.api, "p", "FilteringFailed");
  ASSERT_EQ(refused.size(), 1u) << "one Event for five refusals";
  EXPECT_EQ(countOf(refused[0]), 5);
  EXPECT_EQ(refused[0].at("type"), "Warning");
  EXPECT_NE(std::string(refused[0].at("message").as_string()).find("0/1 nodes can take the pod"), std::string::npos);

  // Another pod, or another reason, is its own Event.
  const auto other = h.createPod(gpuPod("q", 20000));
  ASSERT_EQ(http.post("/filter", extenderArgs(other, {"n"})).status, 200);
  const auto fits = h.createPod(gpuPod("r", 1000));
  ASSERT_EQ(http.post("/bind", bindingArgs(fits, "n")).status, 200);
  h.service->events().flush();
  EXPECT_EQ(eventsOf(*h.api, "q", "FilteringFailed").size(), 1u);
  auto assigned = eventsOf(*h.api, "r", "DevicesAssigned");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(countOf(assigned[0]), 1);
  EXPECT_EQ(countOf(eventsOf(*h.api, "p", "FilteringFailed")[0]), 5);
}

TEST(SchedulerEvents, RepeatsWhileTheApiserverIsSlowAreFoldedIntoOneWrite) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  fakes::Fault slow;
  slow.method = "POST";
  slow.pathPrefix = "/api/v1/namespaces/default/events";
  slow.action = fakes::Fault::Action::kDelay;
  slow.delay = std::chrono::milliseconds(300);
  h.api->addFault(slow);
  TestHttpClient http(h.service->extenderPort());
  const auto pod = h.createPod(gpuPod("p", 20000));
  const auto before = h.api->requestCount();
  for (int attempt = 0; attempt < 20; ++attempt) ASSERT_EQ(http.post("/filter", extenderArgs(pod, {"n"})).status, 200);
  h.service->events().flush();
  auto refused = eventsOf(*h.api, "p", "FilteringFailed");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(countOf(refused[0]), 20);
  // The first create, then at most a count patch or two: not 20 writes.
  int eventWrites = 0;
  for (const auto& r : h.api->requests())
    if (r.path.rfind("/api/v1/namespaces/default/events", 0) == 0) ++eventWrites;
  EXPECT_LE(eventWrites, 3) << "of " << h.api->requestCount() - before << " requests";
}

TEST(SchedulerEvents, AnEventTheApiserverNoLongerHasIsCreatedAgain) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  TestHttpClient http(h.service->extenderPort());
  const auto pod = h.createPod(gpuPod("p", 20000));
  ASSERT_EQ(http.post("/filter", extenderArgs(pod, {"n"})).status, 200);
  h.service->events().flush();
  auto first = eventsOf(*h.api, "p", "FilteringFailed");
  ASSERT_EQ(first.size(), 1u);
  // Events expire on the apiserver (an hour by default): the next refusal starts over.
  ASSERT_TRUE(h.api->remove("events", "default", std::string(first[0].at("metadata").at("name").as_string())).ok());
  ASSERT_EQ(http.post("/filter", extenderArgs(pod, {"n"})).status, 200);
  h.service->events().flush();
  auto again = eventsOf(*h.api, "p", "FilteringFailed");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(countOf(again[0]), 1);
}


// Issue 43 defect 7: vgpu-scheduler's RSS grew ~1.9 KiB per pod created and deleted. Each
// pod's event series (its DevicesAssigned, a refused pod's FilteringFailed) stayed
// remembered after the pod was gone, up to 20,000 of them; a deleted pod's are forgotten.
TEST(SchedulerEvents, TheSeriesOfDeletedPodsAreForgotten) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 4, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  TestHttpClient http(h.service->extenderPort());
  constexpr int kBatches = 100, kPerBatch = 20;  // 2,000 pods placed, 100 refused
  for (int b = 0; b < kBatches; ++b) {
    // One at a time: a bound pod is in flight until deleted (no agent answers its Allocate),
    // and holds back the next one that asks alike.
    for (int i = 0; i < kPerBatch; ++i) {
      const std::string name = "p-" + std::to_string(b) + "-" + std::to_string(i);
      const auto pod = h.createPod(gpuPod(name, 1000));
      const auto bound = http.post("/bind", bindingArgs(pod, "n"));
      ASSERT_EQ(bound.status, 200) << name;
      ASSERT_EQ(json::parse(bound.body).at("Error"), "") << name;
      ASSERT_TRUE(h.api->remove("pods", "default", name).ok()) << name;
      ASSERT_TRUE(h.awaitPods(0)) << name;
    }
    const std::string big = "big-" + std::to_string(b);
    const auto refused = h.createPod(gpuPod(big, 20000));
    ASSERT_EQ(http.post("/filter", extenderArgs(refused, {"n"})).status, 200);
    ASSERT_TRUE(h.api->remove("pods", "default", big).ok()) << big;
  }
  h.service->events().flush();
  EXPECT_EQ(eventsOf(*h.api, "p-0-0", "DevicesAssigned").size(), 1u) << "the events were sent";
  EXPECT_TRUE(eventually([&] { return h.service->events().series() == 0; }, std::chrono::seconds(10)))
      << h.service->events().series() << " event series remembered for " << kBatches * (kPerBatch + 1)
      << " deleted pods";
  EXPECT_TRUE(eventually([&] { return h.service->requeuer().tracked() == 0; }, std::chrono::seconds(10)));
  const auto stats = h.service->cache().stats();
  EXPECT_EQ(stats.pods, 0u);
  EXPECT_EQ(stats.reservations, 0u);
  EXPECT_EQ(stats.inFlight, 0u);
}

}  // namespace
}  // namespace vgpu::scheduler
