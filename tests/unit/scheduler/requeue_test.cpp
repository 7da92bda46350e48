// Issue 27 item 7: a pod we refused waited for kube-scheduler's next cluster event or its
// 5-minute flush, also when it reacted to the very deletion that made room before our cache
// had seen it. When our cache frees capacity on a node, the pods we refused there that fit
// now get an annotation update, which moves them out of kube-scheduler's unschedulable pool.
#include <gtest/gtest.h>

#include "../http/test_http_client.h"
#include "kube_scheduler_double.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;
using Clock = std::chrono::steady_clock;

bool touched(fakes::FakeApiServer& api, const std::string& pod) {
  auto p = api.get("pods", "default", pod);
  return p && k8s::annotation(*p, kCapacityFreedAnnotation).has_value();
}

TEST(SchedulerRequeue, ARefusedPodIsPlacedWithinSecondsOfTheCapacityFreeing) {
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  h.createPod(admittedPod("holder", "n", 8000));  // the whole GPU
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 1; }));

  KubeSchedulerDouble::Options o;
  o.apiUrl = h.api->url();
  o.extenderPort = h.service->extenderPort();
  o.nodes = {"n"};
  // The event of the holder's deletion is the one kube-scheduler reacts to below, before our
  // cache has seen it (the race this item is about): it moves the pod once, not again.
  o.requeueOnClusterEvents = false;
  KubeSchedulerDouble kubeScheduler(o);
  h.createPod(gpuPod("waiting", 8000));
  ASSERT_TRUE(eventually([&] { return kubeScheduler.unschedulable("waiting"); }));

  // kube-scheduler saw the deletion first and retried: our cache still counted the holder.
  kubeScheduler.retryNow("waiting");
  ASSERT_TRUE(kubeScheduler.unschedulable("waiting"));
  ASSERT_EQ(kubeScheduler.attempts("waiting"), 2);
  const auto freed = Clock::now();
  ASSERT_TRUE(h.api->remove("pods", "default", "holder").ok());

  ASSERT_TRUE(eventually([&] { return kubeScheduler.boundAt("waiting").has_value(); }, std::chrono::seconds(12)))
      << "still waiting (kube-scheduler's next move: its 5-minute flush)";
  const auto waited = std::chrono::duration<double>(*kubeScheduler.boundAt("waiting") - freed).count();
  EXPECT_LT(waited, 10.0);
  EXPECT_TRUE(touched(*h.api, "waiting"));
  ::testing::Test::RecordProperty("placed_after_ms", static_cast<int>(waited * 1000));
  std::printf("placed %.0f ms after the capacity freed\n", waited * 1000);
}

TEST(SchedulerRequeue, WithoutPopFromBackoffTheBackoffBoundsTheWait) {
  // Kubernetes before 1.33 (or the gate off): the woken pod waits out its backoff (here 2 s
  // after its second attempt), at most kube-scheduler's 10 s.
  SchedulerHarness h;
  h.createNode(nodeJson("n", gpus("n", 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(1));
  h.createPod(admittedPod("holder", "n", 8000));
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 1; }));
  KubeSchedulerDouble::Options o;
  o.apiUrl = h.api->url();
  o.extenderPort = h.service->extenderPort();
  o.nodes = {"n"};
  o.requeueOnClusterEvents = false;
  o.popFromBackoffQ = false;
  KubeSchedulerDouble kubeScheduler(o);
  h.createPod(gpuPod("waiting", 8000));
  ASSERT_TRUE(eventually([&] { return kubeScheduler.unschedulable("waiting"); }));
  kubeScheduler.retryNow("waiting");
  const auto freed = Clock::now();
  ASSERT_TRUE(h.api->remove("pods", "default", "holder").ok());
  ASSERT_TRUE(eventually([&] { return kubeScheduler.boundAt("waiting").has_value(); }, std::chrono::seconds(12)));
  const auto waited = std::chrono::duration<double>(*kubeScheduler.boundAt("waiting") - freed).count();
  EXPECT_LT(waited, 10.0);
  EXPECT_GT(waited, 1.0) << "the backoff of its two attempts";
  std::printf("placed %.0f ms after the capacity freed (backoff)\n", waited * 1000);
}

TEST(SchedulerRequeue, OnlyPodsRefusedThereThatFitNowAreWokenAndNeverOnesBoundElsewhere) {
  SchedulerHarness h;
  for (const char* n : {"n1", "n2", "n3"}) h.createNode(nodeJson(n, gpus(n, 1, 8000)));
  ASSERT_TRUE(h.awaitNodes(3));
  h.createPod(admittedPod("holder-1", "n1", 8000));
  h.createPod(admittedPod("holder-2", "n2", 8000));
  h.createPod(admittedPod("holder-3", "n3", 8000));
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 3; }));
  TestHttpClient http(h.service->extenderPort());
  auto refuse = [&](const char* name, int mib, std::vector<std::string> nodes) {
    auto pod = h.createPod(gpuPod(name, mib));
    auto r = http.post("/filter", extenderArgs(pod, nodes));
    ASSERT_NE(r.body.find("\"NodeNames\":[]"), std::string::npos) << r.body;
  };
  refuse("oldest", 6000, {"n1", "n2"});
  refuse("elsewhere", 6000, {"n2"});        // n1 was not among its candidates
  refuse("younger", 6000, {"n1"});          // fits n1 too, but not beside the oldest
  refuse("small", 2000, {"n1"});            // fits beside the oldest
  refuse("bound-meanwhile", 1000, {"n1"});  // another binder placed it on n3
  ASSERT_TRUE(h.client->bind({"default", "bound-meanwhile", "n3", "", {}}).ok());
  ASSERT_TRUE(eventually([&] { return h.service->requeuer().tracked() == 4; }));

  ASSERT_TRUE(h.api->remove("pods", "default", "holder-1").ok());
  ASSERT_TRUE(eventually([&] { return touched(*h.api, "oldest") && touched(*h.api, "small"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(touched(*h.api, "elsewhere"));
  EXPECT_FALSE(touched(*h.api, "younger"));
  EXPECT_FALSE(touched(*h.api, "bound-meanwhile"));
  const auto oldest = h.api->get("pods", "default", "oldest");
  const std::string value(*k8s::annotation(*oldest, kCapacityFreedAnnotation));
  EXPECT_EQ(value.rfind("n1 ", 0), 0u) << value;
}

TEST(SchedulerRequeue, TouchesAreRateLimited) {
  ServiceOptions options;
  options.requeue.qps = 5;
  options.requeue.burst = 2;
  SchedulerHarness h(options);
  h.createNode(nodeJson("n", gpus("n", 1, 8000, 20)));
  ASSERT_TRUE(h.awaitNodes(1));
  h.createPod(admittedPod("holder", "n", 8000));
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 1; }));
  TestHttpClient http(h.service->extenderPort());
  std::vector<std::string> pods;
  for (int i = 0; i < 8; ++i) {
    pods.push_back("p" + std::to_string(i));
    ASSERT_EQ(http.post("/filter", extenderArgs(h.createPod(gpuPod(pods.back(), 500)), {"n"})).status, 200);
  }
  ASSERT_EQ(h.service->requeuer().tracked(), 8u);
  const auto start = Clock::now();
  ASSERT_TRUE(h.api->remove("pods", "default", "holder").ok());
  auto count = [&] { return std::count_if(pods.begin(), pods.end(), [&](const auto& p) { return touched(*h.api, p); }); };
  ASSERT_TRUE(eventually([&] { return count() >= 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(250) - (Clock::now() - start));
  EXPECT_LE(count(), 4) << "a burst of 2, then 5 per second";
  ASSERT_TRUE(eventually([&] { return count() == 8; }, std::chrono::seconds(5)));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace vgpu::scheduler
