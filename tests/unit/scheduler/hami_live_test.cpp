// Issue 28 item 2: switching from HAMi with pods running. HAMi's scheduler wrote each pod's
// devices in hami.io/*-devices-allocated (shared/reference/hami.md section 2); vgpu-scheduler
// counts exactly those (memory, compute and a share on the device with that UUID), so nothing
// is double-booked and nothing else is held back. Unusable annotations fall back to the
// conservative count of any foreign pod, with a log line and a Warning event.
#include <gtest/gtest.h>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "scheduler_harness.h"
#include "vgpu/codec/assignment_codec.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

/// A running pod HAMi placed on `node`: its limits, and the annotations HAMi's filter wrote.
json::object hamiPod(const std::string& name, const std::string& node, std::map<std::string, std::string> limits,
                     const std::string& allocated, bool withInit = false) {
  std::vector<ContainerSpecForTest> containers;
  if (withInit) containers.push_back({"setup", {}, true});
  containers.push_back({"main", std::move(limits)});
  json::object ann{{"hami.io/vgpu-node", node},
                   {"hami.io/vgpu-time", "1764750000"},
                   {"hami.io/vgpu-devices-allocated", allocated},
                   {"hami.io/vgpu-devices-to-allocate", withInit ? ";;" : ";"},
                   {"hami.io/bind-phase", "success"}};
  json::object pod = podJson("default", name, containers, "hami-scheduler", std::move(ann));
  pod["spec"].as_object()["nodeName"] = node;
  pod["status"].as_object()["phase"] = "Running";
  pod["status"].as_object()["containerStatuses"] = json::array{json::object{{"name", "main"}}};
  return pod;
}

struct HamiLiveFixture : ::testing::Test {
  SchedulerHarness h;
  TestHttpClient http{h.service->extenderPort()};
  void SetUp() override {
    h.createNode(nodeJson("n", gpus("n", 2, 8000)));
    ASSERT_TRUE(h.awaitNodes(1));
  }
  std::uint64_t memory(const char* device) { return h.service->cache().deviceUsage("n", device)->memoryMiB; }
  std::vector<json::object> events(const std::string& reason) {
    h.service->events().flush();
    std::vector<json::object> out;
    for (const auto& e : h.api->list("events"))
      if (e.at("reason").as_string() == reason) out.push_back(e);
    return out;
  }
};

TEST_F(HamiLiveFixture, APodHamiPlacedIsCountedOnTheDeviceItsAnnotationNames) {
  h.createPod(hamiPod("from-hami", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}, {"nvidia.com/gpucores", "30"}},
                      "GPU-n-1,NVIDIA,6000,30:;"));
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-1") == 6000; })) << "not counted";
  const DeviceUsage used = *h.service->cache().deviceUsage("n", "GPU-n-1");
  EXPECT_EQ(used.compute, 30u);
  EXPECT_EQ(used.shares, 1u);
  EXPECT_EQ(memory("GPU-n-0"), 0u) << "only the device HAMi gave it";
  // 6000 MiB still fit on GPU-n-0 (a foreign pod's count would have taken both), and the
  // bind puts it there, not on the device HAMi's pod holds.
  auto mine = h.createPod(gpuPod("mine", 6000));
  auto out = parse(http.post("/bind", bindingArgs(mine, "n")).body);
  ASSERT_EQ(out.at("Error"), "") << out;
  auto bound = h.api->get("pods", "default", "mine");
  auto assignment = decodeAssignment(std::string(*k8s::annotation(*bound, keys::kPodAssignment)));
  ASSERT_TRUE(assignment.ok());
  EXPECT_EQ(assignment->containers[0].devices[0].deviceId, "GPU-n-0");
  // A third pod of 6000 MiB fits nowhere: both devices hold 6000 of 8000 MiB.
  auto third = h.createPod(gpuPod("third", 6000));
  EXPECT_TRUE(parse(http.post("/filter", extenderArgs(third, {"n"})).body).at("NodeNames").as_array().empty());
  // The HAMi pod ends: its device is free again.
  ASSERT_TRUE(h.api->remove("pods", "default", "from-hami").ok());
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-1") == 0; }));
}

TEST_F(HamiLiveFixture, InitContainersAndSeveralDevicesAreReadAsHamiAlignsThem) {
  // Container 0 is the init container (no devices), container 1 has both GPUs.
  h.createPod(hamiPod("two", "n", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}},
                      ";GPU-n-0,NVIDIA,3000,0:GPU-n-1,NVIDIA,3000,0:;", true));
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-0") == 3000 && memory("GPU-n-1") == 3000; }));
  EXPECT_EQ(h.service->cache().podsOn("n").at(0).assignment.containers.at(0).name, "main");
}

TEST_F(HamiLiveFixture, UnusableHamiAnnotationsFallBackToTheForeignCountWithAWarningEvent) {
  struct Case {
    const char* name;
    const char* allocated;
    const char* eventWords;
  } cases[] = {
      {"garbled", "GPU-n-1,NVIDIA,lots,30:;", "memory \"lots\" is not a non-negative integer"},
      {"too-many", "GPU-n-1,NVIDIA,1000,0:;GPU-n-0,NVIDIA,1000,0:;", "lists 2 containers, the pod has 1"},
  };
  for (const auto& c : cases)
    h.createPod(hamiPod(c.name, "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, c.allocated));
  // Counted on every device it could hold, as any pod of another scheduler: 2 x 1000 MiB each.
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-0") == 2000 && memory("GPU-n-1") == 2000; }));
  for (const auto& c : cases) {
    bool found = false;
    ASSERT_TRUE(eventually([&] {
      for (const auto& e : events("HamiAnnotationsIgnored"))
        if (e.at("involvedObject").at("name").as_string() == c.name) {
          found = std::string(e.at("message").as_string()).find(c.eventWords) != std::string::npos;
          return true;
        }
      return false;
    })) << c.name << ": no event";
    EXPECT_TRUE(found) << c.name;
  }
}

TEST_F(HamiLiveFixture, ADeviceTheNodeDoesNotPublishFallsBackToTheForeignCount) {
  h.createPod(hamiPod("elsewhere", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "GPU-unknown,NVIDIA,1000,0:;"));
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-0") == 1000 && memory("GPU-n-1") == 1000; }));
  // The node publishes that device later: the pod is counted where HAMi put it.
  auto devices = gpus("n", 2, 8000);
  devices[1].id = "GPU-unknown";
  ASSERT_TRUE(h.api->update("nodes", nodeJson("n", devices)).ok());
  ASSERT_TRUE(eventually([&] {
    auto u = h.service->cache().deviceUsage("n", "GPU-unknown");
    return u && u->memoryMiB == 1000 && memory("GPU-n-0") == 0;
  }));
}

TEST_F(HamiLiveFixture, AHamiNodeAnnotationForAnotherNodeIsNotBelieved) {
  json::object pod = hamiPod("moved", "n", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "GPU-n-1,NVIDIA,1000,0:;");
  pod["metadata"].as_object()["annotations"].as_object()["hami.io/vgpu-node"] = "other";
  h.createPod(pod);
  ASSERT_TRUE(eventually([&] { return memory("GPU-n-0") == 1000 && memory("GPU-n-1") == 1000; }));
}

}  // namespace
}  // namespace vgpu::scheduler
