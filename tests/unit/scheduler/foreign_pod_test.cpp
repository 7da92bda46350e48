// Issue 27 item 3: pods bound by another scheduler (or given spec.nodeName directly) that ask
// for our resources. They carry no assignment, so the scheduler did not count them and gave
// their share to a vgpu pod; the node agent then handed a promised slice to the wrong pod.
// The cache now counts such a pod on every device it could hold, and holds back a bind the
// node agent could confuse with it until the kubelet has admitted or refused it.
#include <gtest/gtest.h>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/object.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

/// A pod another scheduler bound to `node`: no assignment, the kubelet not there yet.
json::object foreignPod(const std::string& name, const std::string& node, std::map<std::string, std::string> limits,
                        const std::string& schedulerName = "default-scheduler") {
  json::object pod = podJson("default", name, {{"main", std::move(limits)}}, schedulerName);
  pod["spec"].as_object()["nodeName"] = node;
  return pod;
}

std::vector<std::string> fitting(TestHttpClient& http, const json::object& pod, const std::vector<std::string>& nodes) {
  std::vector<std::string> out;
  const json::object answer = parse(http.post("/filter", extenderArgs(pod, nodes)).body);
  for (const auto& n : answer.at("NodeNames").as_array())
    out.emplace_back(n.as_string());
  return out;
}

struct ForeignFixture : ::testing::Test {
  SchedulerHarness h{[] {
    ServiceOptions o;
    o.extender.bindHoldTimeout = std::chrono::milliseconds(300);
    return o;
  }()};
  TestHttpClient http{h.service->extenderPort()};
  void SetUp() override {
    h.createNode(nodeJson("n", gpus("n", 2, 8000)));
    ASSERT_TRUE(h.awaitNodes(1));
  }
  bool memoryOnBoth(std::uint64_t mib) {
    for (const char* d : {"GPU-n-0", "GPU-n-1"})
      if (h.service->cache().deviceUsage("n", d)->memoryMiB != mib) return false;
    return true;
  }
};

TEST_F(ForeignFixture, APodOfAnotherSchedulerIsCountedOnEveryDeviceItCouldHold) {
  h.createPod(foreignPod("theirs", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}}));
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(6000); })) << "not counted";
  // Either device may be the one the kubelet hands it: 2000 MiB is all that can be promised.
  EXPECT_TRUE(fitting(http, gpuPod("p", 4000), {"n"}).empty());
  EXPECT_EQ(fitting(http, gpuPod("q", 2000), {"n"}), std::vector<std::string>{"n"});
  // Refused by the node agent (or finished): it holds nothing any more.
  ASSERT_TRUE(h.api->patch("pods", "default", "theirs", json::object{{"status", json::object{{"phase", "Failed"}}}}).ok());
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(0); }));
  EXPECT_EQ(fitting(http, gpuPod("p", 4000), {"n"}), std::vector<std::string>{"n"});
}

TEST_F(ForeignFixture, ABareDeviceCountTakesWholeDevices) {
  // No memory or cores asked: the whole device, on either of them.
  h.createPod(foreignPod("whole", "n", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(8000); }));
  EXPECT_TRUE(fitting(http, gpuPod("p", 100), {"n"}).empty());
}

TEST_F(ForeignFixture, GivenSpecNodeNameDirectlyOrWithAnUnreadableAssignmentItIsCountedToo) {
  h.createPod(foreignPod("direct", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "vgpu-scheduler"));
  json::object garbled = foreignPod("garbled", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2000"}}, "vgpu-scheduler");
  garbled["metadata"].as_object()["annotations"] = json::object{{std::string(keys::kPodAssignment), "{not json"}};
  h.createPod(garbled);
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(3000); }));
  // Pods that ask for none of our resources are not counted.
  h.createPod(foreignPod("cpu-only", "n", {}));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(h.service->cache().stats().pods, 2u);
}

TEST_F(ForeignFixture, ANewInventoryRecountsIt) {
  h.createPod(foreignPod("theirs", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}}));
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(6000); }));
  // A third device appears: the pod could be on it too; one device too small for it is not counted.
  auto devices = gpus("n", 3, 8000);
  devices.push_back(gpus("n", 4, 4000)[3]);
  ASSERT_TRUE(h.api->update("nodes", nodeJson("n", devices)).ok());
  ASSERT_TRUE(eventually([&] {
    auto u = h.service->cache().deviceUsage("n", "GPU-n-2");
    return u && u->memoryMiB == 6000;
  }));
  EXPECT_TRUE(memoryOnBoth(6000));
  EXPECT_EQ(h.service->cache().deviceUsage("n", "GPU-n-3")->memoryMiB, 0u);
  ASSERT_TRUE(h.api->remove("pods", "default", "theirs").ok());
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(0) && h.service->cache().deviceUsage("n", "GPU-n-2")->memoryMiB == 0; }));
}

TEST_F(ForeignFixture, ABindTheNodeAgentCouldConfuseWithItWaitsUntilTheKubeletDecided) {
  h.createPod(foreignPod("theirs", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}));
  ASSERT_TRUE(eventually([&] { return memoryOnBoth(1000); }));
  // Ours asks for one nvidia.com/gpu too: its Allocate looks the same as the other pod's.
  auto mine = h.createPod(gpuPod("mine", 1000));
  auto out = parse(http.post("/bind", bindingArgs(mine, "n")).body);
  EXPECT_NE(std::string(out.at("Error").as_string()).find("held back"), std::string::npos) << out;
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "mine")), "");
  // The kubelet admitted the other pod (container statuses listed): ours goes ahead.
  ASSERT_TRUE(h.api->patch("pods", "default", "theirs",
                           json::object{{"status", json::object{{"containerStatuses",
                                                                 json::array{json::object{{"name", "main"}}}}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().inFlight == 0; }));
  out = parse(http.post("/bind", bindingArgs(mine, "n")).body);
  EXPECT_EQ(out.at("Error"), "") << out;
}

}  // namespace
}  // namespace vgpu::scheduler
