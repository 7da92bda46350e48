// The extender verbs over HTTP against the apiserver double, with the real JSON shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "json_body.h"
#include "../http/test_http_client.h"
#include "../metrics/promtool_check.h"
#include "scheduler_harness.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/node_lease.h"
#include "vgpu/k8s/object.h"
#include "vgpu/allocator.h"
#include "vgpu/backend_abi.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

std::vector<std::string> names(const json::value& v) {
  std::vector<std::string> out;
  if (v.is_array())
    for (const auto& n : v.as_array()) out.emplace_back(n.as_string());
  return out;
}

std::uint64_t memoryOn(SchedulerService& s, const std::string& node, int devices) {
  std::uint64_t total = 0;
  for (int i = 0; i < devices; ++i)
    if (auto u = s.cache().deviceUsage(node, "GPU-" + node + "-" + std::to_string(i))) total += u->memoryMiB;
  return total;
}

/// Keeps the scheduler's informers from watching (their lists still work) while a test
/// changes the cluster behind their back.
void cutWatches(fakes::FakeApiServer& api) {
  // Both watches open first: one still on its way in could slip past the fault and the break.
  ASSERT_TRUE(eventually([&] { return api.openWatches() >= 2; }));
  fakes::Fault down;
  down.watch = fakes::Fault::Watch::kOnly;
  down.status = 503;
  down.times = -1;
  api.addFault(down);
  api.breakWatches();
}

struct ExtenderFixture : ::testing::Test {
  SchedulerHarness h;
  TestHttpClient http{h.service->extenderPort()};  ///< the extender verbs
  TestHttpClient admin{h.service->port()};         ///< the webhook, /metrics, /readyz

  void SetUp() override {
    h.createNode(nodeJson("big", gpus("big", 2, 81920)));
    h.createNode(nodeJson("small", gpus("small", 1, 8000)));
    h.createNode(nodeJson("stale", gpus("stale", 8), std::chrono::system_clock::now() - std::chrono::hours(1)));
    h.createNode(nodeJson("plain", {}));
    ASSERT_TRUE(h.awaitNodes(4));
  }
  json::object filter(const json::object& pod, const std::vector<std::string>& nodes) {
    auto r = http.post("/filter", extenderArgs(pod, nodes));
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r.body);
  }
};

TEST_F(ExtenderFixture, SchedulerFilterNodeCacheCapableAnswersNodeNamesAndReasonsInWords) {
  auto out = filter(gpuPod("p", 20000), {"big", "small", "stale", "plain", "ghost"});
  EXPECT_TRUE(out.at("Nodes").is_null());
  EXPECT_EQ(names(out.at("NodeNames")), std::vector<std::string>{"big"});
  const auto& failed = out.at("FailedNodes").as_object();
  const auto& unresolvable = out.at("FailedAndUnresolvableNodes").as_object();
  EXPECT_EQ(failed.at("small"), "vgpu: devices too small for the request (CardInsufficientMemory)") << failed;
  EXPECT_NE(std::string(failed.at("stale").as_string()).find("heartbeat is stale"), std::string::npos);
  EXPECT_NE(std::string(failed.at("ghost").as_string()).find("not known"), std::string::npos);
  EXPECT_NE(std::string(unresolvable.at("plain").as_string()).find("no vgpu devices"), std::string::npos);
  EXPECT_EQ(out.at("Error"), "");
}

// Issue 42 item 2: with --lease-namespace, a node whose agent renews its Lease is placeable
// though its Node was last written hours ago; a Lease elsewhere, or without the label, is not
// read (a lapsing Lease: SchedulerCacheNodeLeasesKeepNodesAliveAndAnnotationsOfOlderAgentsStillCount).
TEST(SchedulerNodeLease, ANodeKeptAliveByItsLeaseAloneIsPlaceable) {
  scheduler::ServiceOptions options;
  options.leaseNamespace = "vgpu-system";
  SchedulerHarness h(options);
  TestHttpClient http{h.service->extenderPort()};
  const auto hoursAgo = std::chrono::system_clock::now() - std::chrono::hours(3);
  for (const char* n : {"leased", "elsewhere", "unlabelled"}) h.createNode(nodeJson(n, gpus(n, 1), hoursAgo));
  ASSERT_TRUE(h.awaitNodes(3));
  const auto now = std::chrono::system_clock::now();
  ASSERT_TRUE(h.api->create("leases", nodeLeaseObject("leased", "vgpu-system", now, std::chrono::seconds(90))).ok());
  ASSERT_TRUE(h.api->create("leases", nodeLeaseObject("elsewhere", "default", now, std::chrono::seconds(90))).ok());
  json::object unlabelled = nodeLeaseObject("unlabelled", "vgpu-system", now, std::chrono::seconds(90));
  unlabelled["metadata"].as_object().erase("labels");
  ASSERT_TRUE(h.api->create("leases", unlabelled).ok());
  auto placeable = [&] {
    auto r = http.post("/filter", extenderArgs(gpuPod("p", 1000), {"leased", "elsewhere", "unlabelled"}));
    return names(parse(r.body).at("NodeNames"));
  };
  ASSERT_TRUE(eventually([&] { return placeable() == std::vector<std::string>{"leased"}; }));
  // A write carrying an older renewal, and an inventory change with its old annotation, take
  // nothing back.
  ASSERT_TRUE(h.api->patch("leases", "vgpu-system", nodeLeaseName("leased"),
                           nodeLeaseObject("leased", "vgpu-system", hoursAgo, std::chrono::seconds(90), true))
                  .ok());
  json::object later = nodeJson("leased", gpus("leased", 2), hoursAgo);  // and an inventory change
  ASSERT_TRUE(h.api->update("nodes", later).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(placeable(), std::vector<std::string>{"leased"}) << "a Lease never takes a node's time back";
}

TEST_F(ExtenderFixture, SchedulerFilterNothingFitsStillAnswersAnEmptyArray) {
  auto out = filter(gpuPod("huge", 100000), {"big", "small"});
  ASSERT_TRUE(out.at("NodeNames").is_array());  // never null: null would mean "reject all" silently
  EXPECT_TRUE(out.at("NodeNames").as_array().empty());
  EXPECT_EQ(out.at("FailedNodes").as_object().size(), 2u);
  // The refusal reaches the pod as an event.
  h.service->events().flush();
  EXPECT_TRUE(eventually([&] {
    for (const auto& e : h.api->list("events"))
      if (e.at("reason") == "FilteringFailed") return true;
    return false;
  }));
}

TEST_F(ExtenderFixture, SchedulerFilterNodesInTheSameKindOfStateShareOneText) {
  // Issue 27 item 8: kube-scheduler counts identical node messages; the numbers that made
  // every node's message unique go to the pod's event instead.
  h.createNode(nodeJson("small-2", gpus("small-2", 1, 8000)));
  h.createNode(nodeJson("medium", gpus("medium", 1, 9000)));
  ASSERT_TRUE(h.awaitNodes(6));
  auto out = filter(gpuPod("p", 20000), {"small", "medium", "small-2", "ghost", "ghost-2"});
  const auto& failed = out.at("FailedNodes").as_object();
  ASSERT_EQ(failed.size(), 5u) << failed;
  EXPECT_EQ(failed.at("small"), failed.at("medium"));
  EXPECT_EQ(failed.at("small"), failed.at("small-2"));
  EXPECT_EQ(failed.at("ghost"), failed.at("ghost-2"));
  EXPECT_NE(failed.at("small"), failed.at("ghost"));
}

TEST_F(ExtenderFixture, SchedulerFilterWithoutNodeCacheAnswersNodeObjects) {
  std::vector<json::object> nodes;
  for (const char* n : {"big", "small"}) nodes.push_back(*h.api->get("nodes", "", n));
  nodes.push_back(nodeJson("autoscaler-template", gpus("tmpl", 1)));  // not in the cache: judged by its annotations
  auto r = http.post("/filter", extenderArgsWithNodes(gpuPod("p", 20000), nodes));
  ASSERT_EQ(r.status, 200);
  auto out = parse(r.body);
  EXPECT_TRUE(out.at("NodeNames").is_null());
  std::vector<std::string> passed;
  for (const auto& n : out.at("Nodes").at("items").as_array()) passed.emplace_back(k8s::name(n.as_object()));
  EXPECT_EQ(passed, (std::vector<std::string>{"big", "autoscaler-template"}));
  EXPECT_TRUE(out.at("FailedNodes").as_object().contains("small"));
}

TEST_F(ExtenderFixture, SchedulerFilterPassesPodsThatAskForNoneOfOurResources) {
  json::object pod = podJson("default", "web", {{"main", {{"example.com/foo", "1"}}}}, "");
  auto out = filter(pod, {"big", "plain", "ghost"});
  EXPECT_EQ(names(out.at("NodeNames")), (std::vector<std::string>{"big", "plain", "ghost"}));
  EXPECT_TRUE(out.at("FailedNodes").as_object().empty());
}

TEST_F(ExtenderFixture, SchedulerFilterInvalidRequestIsUnresolvableEverywhereWithTheParseError) {
  json::object pod = podJson("default", "bad", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}}});
  auto out = filter(pod, {"big", "small"});
  EXPECT_TRUE(out.at("NodeNames").as_array().empty());
  const auto& u = out.at("FailedAndUnresolvableNodes").as_object();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_NE(std::string(u.at("big").as_string()).find("150"), std::string::npos) << u;
}

TEST_F(ExtenderFixture, SchedulerPrioritizeScoresZeroToTenByNodePolicy) {
  // Binpack: a node already in use scores above an idle one.
  h.createNode(nodeJson("big2", gpus("big2", 2, 81920)));
  ASSERT_TRUE(h.awaitNodes(5));
  auto first = h.createPod(gpuPod("first", 40000, 50));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(first, "big")).body).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().deviceUsage("big", "GPU-big-0")->memoryMiB +
                                          h.service->cache().deviceUsage("big", "GPU-big-1")->memoryMiB == 40000; }));
  auto scores = [&](const json::object& pod) {
    auto r = http.post("/prioritize", extenderArgs(pod, {"big", "big2", "small", "ghost"}));
    EXPECT_EQ(r.status, 200);
    boost::system::error_code ec;
    auto list = json::parse(r.body, ec).as_array();
    EXPECT_EQ(list.size(), 4u);
    std::map<std::string, std::int64_t> score;
    for (const auto& e : list) score[std::string(e.at("Host").as_string())] = e.at("Score").as_int64();
    for (const auto& [n, s] : score) {
      EXPECT_GE(s, 0) << n;
      EXPECT_LE(s, 10) << n;
    }
    EXPECT_EQ(score["small"] == 0, pod.at("metadata").at("name") == "two") << "a node the pod fits scores 1..10";
    return score;
  };
  // Issue 42: while "first" waits for its Allocate on big, a pod the node agent could
  // confuse with it would only bind there after it: big scores 0 for it, big2 is taken at
  // once. A pod of two devices in one container (not confusable) still prefers big.
  auto held = scores(gpuPod("p", 1000));
  EXPECT_EQ(held["big"], 0);
  EXPECT_GT(held["big2"], 0);  // idle, but the pod binds there at once: above big
  auto other = scores(gpuPod("two", 1000, 0, 2));
  EXPECT_GT(other["big"], other["big2"]);
  // The agent confirmed: binpack prefers the node in use again.
  k8s::MetadataPatch confirmed;
  confirmed.annotations[std::string(keys::kPodBindPhase)] = "success";
  ASSERT_TRUE(h.client->patchMetadata(k8s::kPods, "default", "first", confirmed).ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().inFlight == 0; }));
  auto score = scores(gpuPod("p", 1000));
  EXPECT_GT(score["big"], score["big2"]);
  EXPECT_EQ(score["ghost"], 0);
}

TEST_F(ExtenderFixture, SchedulerBindWritesTheAssignmentWithVirtualDeviceIdsAndBinds) {
  auto pod = h.createPod(gpuPod("p", 3000, 30));
  auto r = http.post("/bind", bindingArgs(pod, "big"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(parse(r.body).at("Error"), "") << r.body;
  auto stored = *h.api->get("pods", "default", "p");
  EXPECT_EQ(k8s::nodeName(stored), "big");
  auto annotation = k8s::annotation(stored, keys::kPodAssignment);
  ASSERT_TRUE(annotation);
  auto a = decodeAssignment(*annotation);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->node, "big");
  ASSERT_EQ(a->containers.size(), 1u);
  ASSERT_EQ(a->containers[0].devices.size(), 1u);
  EXPECT_EQ(a->containers[0].devices[0].slot, 0);
  EXPECT_EQ(a->containers[0].devices[0].memoryMiB, 3000u);
  EXPECT_EQ(a->containers[0].devices[0].compute, 30u);
  EXPECT_EQ(k8s::annotation(stored, keys::kPodBindPhase), "allocating");
  EXPECT_TRUE(k8s::annotation(stored, keys::kPodBindTime));
  h.service->events().flush();
  EXPECT_TRUE(eventually([&] {
    for (const auto& e : h.api->list("events"))
      if (e.at("reason") == "DevicesAssigned" && std::string(e.at("message").as_string()).find("::0") != std::string::npos)
        return true;
    return false;
  }));
  // Binding again is refused (already bound), and leaves the one reservation as it was.
  auto again = parse(http.post("/bind", bindingArgs(pod, "big")).body);
  EXPECT_NE(again.at("Error"), "");
  EXPECT_TRUE(eventually([&] { return h.service->cache().stats().pods == 1; }));
}

TEST_F(ExtenderFixture, SchedulerFailedBindLeavesNoReservation) {
  auto pod = h.createPod(gpuPod("p", 70000));
  fakes::Fault fault;
  fault.method = "POST";
  fault.pathPrefix = "/api/v1/namespaces/default/pods/p/binding";
  fault.status = 403;
  fault.times = -1;
  h.api->addFault(fault);
  auto out = parse(http.post("/bind", bindingArgs(pod, "big")).body);
  EXPECT_NE(std::string(out.at("Error").as_string()).find("403"), std::string::npos) << out;
  EXPECT_EQ(h.service->cache().stats().pods, 0u);
  EXPECT_EQ(h.service->cache().deviceUsage("big", "GPU-big-0")->memoryMiB +
                h.service->cache().deviceUsage("big", "GPU-big-1")->memoryMiB,
            0u);
  h.api->clearFaults();
  EXPECT_EQ(parse(http.post("/bind", bindingArgs(pod, "big")).body).at("Error"), "");
}

TEST_F(ExtenderFixture, SchedulerDeletedPodsFreeCapacityAtOnce) {
  auto a = h.createPod(gpuPod("a", 8000));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(a, "small")).body).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().reservations == 0; }));  // the informer confirmed it
  EXPECT_TRUE(names(filter(gpuPod("b", 8000), {"small"}).at("NodeNames")).empty());
  ASSERT_TRUE(h.api->remove("pods", "default", "a").ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().deviceUsage("small", "GPU-small-0")->memoryMiB == 0; }));
  EXPECT_EQ(names(filter(gpuPod("b", 8000), {"small"}).at("NodeNames")), std::vector<std::string>{"small"});
  // A pod that finished frees its devices too.
  auto c = h.createPod(gpuPod("c", 8000));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(c, "small")).body).at("Error"), "");
  ASSERT_TRUE(h.api->patch("pods", "default", "c", json::object{{"status", json::object{{"phase", "Succeeded"}}}}).ok());
  ASSERT_TRUE(eventually([&] { return h.service->cache().deviceUsage("small", "GPU-small-0")->memoryMiB == 0; }));
}

TEST_F(ExtenderFixture, SchedulerMalformedRequestsGetAnErrorAndNoCrash) {
  struct Case {
    const char* description;
    const char* path;
    std::string body;
    int status;
  } cases[] = {
      {"not JSON", "/filter", "{nope", 400},
      {"JSON but not an object", "/filter", "[1,2]", 400},
      {"no Pod", "/filter", R"({"NodeNames":["big"]})", 400},
      {"no node list at all", "/filter", R"({"Pod":{"metadata":{"name":"x"}}})", 400},
      {"NodeNames of numbers", "/filter", R"({"Pod":{"metadata":{"name":"x"}},"NodeNames":[1]})", 400},
      {"Pod of the wrong type", "/prioritize", R"({"Pod":"x","NodeNames":[]})", 400},
      {"binding without a node", "/bind", R"({"PodName":"x","PodNamespace":"default"})", 400},
      {"binding not JSON", "/bind", "\x01\x02", 400},
      {"webhook not JSON", "/webhook", "{", 400},
      {"wrong verb path", "/filters", "{}", 404},
  };
  for (const auto& c : cases) {
    auto r = (std::string_view(c.path) == "/webhook" ? admin : http).post(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.description << ": " << r.body;
    EXPECT_FALSE(r.body.empty()) << c.description;
  }
  // A pod of a non-integer quantity: refused in words on every node.
  auto odd = parse(http.post("/filter", R"({"Pod":{"metadata":{"name":"x"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1.5"}}}]}},"NodeNames":["big"]})").body);
  EXPECT_TRUE(odd.at("FailedAndUnresolvableNodes").as_object().contains("big")) << odd;
  // Binding a pod that does not exist.
  auto missing = parse(http.post("/bind", R"({"PodName":"ghost","PodNamespace":"default","PodUID":"","Node":"big"})").body);
  EXPECT_NE(std::string(missing.at("Error").as_string()).find("ghost"), std::string::npos);
  // A huge payload is refused by size, and the server keeps serving.
  std::string huge = extenderArgs(gpuPod("p", 1000), std::vector<std::string>(400000, "node-with-a-long-name"));
  EXPECT_EQ(http.post("/filter", huge).status, 413);
  EXPECT_EQ(TestHttpClient(h.service->port()).get("/healthz").status, 200);
}

TEST_F(ExtenderFixture, SchedulerMetricsHealthAndReadinessEndpoints) {
  auto pod = h.createPod(gpuPod("p", 1000));
  filter(pod, {"big", "small"});
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(pod, "big")).body).at("Error"), "");
  filter(gpuPod("huge", 900000), {"big"});
  EXPECT_EQ(http.get("/healthz").status, 200);
  EXPECT_EQ(admin.get("/healthz").status, 200);
  EXPECT_EQ(admin.get("/readyz").status, 200);
  auto m = admin.get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.headers["Content-Type"], metrics::Registry::kContentType);
  for (const char* expected : {"vgpu_scheduler_filter_duration_seconds_count 2", "vgpu_scheduler_pods_placed_total 1",
                               "vgpu_scheduler_pods_refused_total{reason=\"no-fitting-node\"} 1",
                               "vgpu_scheduler_bind_duration_seconds_count{result=\"ok\"} 1",
                               "vgpu_device_memory_allocated_bytes{node=\"big\"",
                               "vgpu_scheduler_nodes{state=\"stale\"} 1"})
    EXPECT_NE(m.body.find(expected), std::string::npos) << expected << "\n" << m.body;
#ifdef VGPU_PROMTOOL
  auto check = promtoolCheck(VGPU_PROMTOOL, m.body);
  EXPECT_EQ(check.exitCode, 0) << check.output;
  EXPECT_EQ(check.output, "");
#endif
}

// The line of `family` whose labels start with `labelsPrefix`, "" if none.
std::string seriesLine(const std::string& text, const std::string& family, const std::string& labelsPrefix) {
  const std::string start = family + "{" + labelsPrefix;
  for (size_t at = text.find(start); at != std::string::npos; at = text.find(start, at + 1))
    if (at == 0 || text[at - 1] == '\n') return text.substr(at, text.find('\n', at) - at);
  return "";
}

// --hami-metrics (issue 28): HAMi's names and labels beside ours, as hami-scheduler exports
// them (constant label zone="vGPU"), so HAMi's dashboards keep working; still valid text.
TEST(SchedulerHamiMetrics, ExportsHamisNamesAndLabelsBesideOursInValidText) {
  ServiceOptions options;
  options.hamiMetrics = true;
  SchedulerHarness h(options);
  h.createNode(nodeJson("big", gpus("big", 2, 81920)));
  ASSERT_TRUE(h.awaitNodes(1));
  TestHttpClient http{h.service->extenderPort()}, admin{h.service->port()};
  auto pod = h.createPod(gpuPod("p", 1000, 30));
  ASSERT_EQ(http.post("/filter", extenderArgs(pod, {"big"})).status, 200);
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(pod, "big")).body).at("Error"), "");
  std::string text;
  ASSERT_TRUE(eventually([&] {
    text = admin.get("/metrics").body;
    return !seriesLine(text, "hami_vgpu_memory_allocated_bytes", "").empty();
  })) << text;
  const std::string type = "device_type=\"SIM-NVIDIA A100-SXM4-80GB\"";
  const std::string dev0 = "node=\"big\",device_uuid=\"GPU-big-0\",device_index=\"0\",";
  EXPECT_EQ(seriesLine(text, "hami_gpu_memory_limit_bytes", dev0),
            "hami_gpu_memory_limit_bytes{" + dev0 + type + ",zone=\"vGPU\"} 85899345920");
  EXPECT_EQ(seriesLine(text, "hami_gpu_core_limit_ratio", dev0),
            "hami_gpu_core_limit_ratio{" + dev0 + type + ",zone=\"vGPU\"} 100");
  // The pod's device: its memory, cores and share counted in HAMi's units (bytes, percent).
  const std::string line = seriesLine(text, "hami_vgpu_memory_allocated_bytes",
                                      "namespace=\"default\",node=\"big\",pod=\"p\",container_index=\"0\",");
  ASSERT_NE(line, "") << text;
  EXPECT_THAT(line, ::testing::EndsWith(",zone=\"vGPU\"} 1048576000"));
  const std::string uuid = line.substr(line.find("device_uuid=\"") + 13, 9);  // GPU-big-N
  const std::string held = "node=\"big\",device_uuid=\"" + uuid + "\",device_index=\"" + uuid.substr(8) + "\",";
  EXPECT_EQ(seriesLine(text, "hami_vgpu_core_allocated_ratio", "namespace=\"default\",node=\"big\",pod=\"p\""),
            "hami_vgpu_core_allocated_ratio{namespace=\"default\",node=\"big\",pod=\"p\",container_index=\"0\","
            "device_uuid=\"" + uuid + "\",zone=\"vGPU\"} 30");
  EXPECT_EQ(seriesLine(text, "hami_gpu_memory_allocated_bytes", held),
            "hami_gpu_memory_allocated_bytes{" + held + "device_cores=\"100\"," + type + ",zone=\"vGPU\"} 1048576000");
  EXPECT_EQ(seriesLine(text, "hami_gpu_shared_count", held), "hami_gpu_shared_count{" + held + type + ",zone=\"vGPU\"} 1");
  EXPECT_EQ(seriesLine(text, "hami_gpu_core_allocated_ratio", held),
            "hami_gpu_core_allocated_ratio{" + held + type + ",zone=\"vGPU\"} 30");
  EXPECT_EQ(seriesLine(text, "hami_node_gpu_overview", held),
            "hami_node_gpu_overview{" + held + "device_cores=\"100\",device_memory_limit=\"81920\"," + type +
                ",zone=\"vGPU\"} 1048576000");
  EXPECT_THAT(seriesLine(text, "hami_node_gpu_memory_allocated_ratio", held),
              ::testing::StartsWith("hami_node_gpu_memory_allocated_ratio{" + held + type + ",zone=\"vGPU\"} 0.0122"));
  EXPECT_NE(seriesLine(text, "vgpu_device_memory_allocated_bytes", "node=\"big\""), "");  // ours are still there
  EXPECT_EQ(promtoolProblems(text), "");
  // Without the option, none of HAMi's names.
  SchedulerHarness plain;
  EXPECT_EQ(TestHttpClient(plain.service->port()).get("/metrics").body.find("hami_"), std::string::npos);
}

TEST(SchedulerReadiness, ReadyzIs503UntilTheCachesSync) {
  auto api = std::move(fakes::FakeApiServer::start()).value();
  fakes::Fault hang;
  hang.method = "GET";
  hang.pathPrefix = "/api/v1/pods";
  hang.action = fakes::Fault::Action::kHang;
  hang.times = -1;
  api->addFault(hang);
  k8s::ClientConfig cc;
  cc.server = api->url();
  auto client = std::move(k8s::Client::create(cc)).value();
  BackendSet backends = simBackends();
  auto service = std::move(SchedulerService::start(DeviceConfig{}, backends, *client, {})).value();
  TestHttpClient http(service->port());
  EXPECT_EQ(http.get("/readyz").status, 503);
  EXPECT_EQ(http.get("/healthz").status, 200);
  api->clearFaults();
  api->releaseHangs();
  ASSERT_TRUE(service->waitForSync(std::chrono::seconds(60)));
  EXPECT_EQ(http.get("/readyz").status, 200);
  service->stop();
}

// Issue 27 item 1: a restarted vgpu-scheduler answered from empty caches and gave out
// devices pods already held. Until the first list of nodes and of pods is in, filter and
// bind refuse with an Error (kube-scheduler's backoff queue: retried in seconds, no node
// marked unschedulable or unresolvable), prioritize scores nothing, /readyz is 503.
TEST(SchedulerReadiness, RefusesToPlaceUntilNodesAndPodsAreListed) {
  auto api = std::move(fakes::FakeApiServer::start()).value();
  ASSERT_TRUE(api->create("nodes", nodeJson("n", gpus("n", 1, 8000))).ok());
  ASSERT_TRUE(api->create("pods", admittedPod("holder", "n", 8000)).ok());  // the whole GPU
  auto waiting = api->create("pods", gpuPod("waiting", 8000));
  ASSERT_TRUE(waiting.ok());
  // An apiserver slow to list pods (nodes come at once): the informer's streaming list is a
  // watch (sendInitialEvents), its paged list a GET, so both are delayed.
  fakes::Fault slow;
  slow.method = "GET";
  slow.pathPrefix = "/api/v1/pods";
  slow.watch = fakes::Fault::Watch::kAny;
  slow.action = fakes::Fault::Action::kDelay;
  slow.delay = std::chrono::milliseconds(2500);
  api->addFault(slow);
  k8s::ClientConfig cc;
  cc.server = api->url();
  auto client = std::move(k8s::Client::create(cc)).value();
  BackendSet backends = simBackends();
  auto service = std::move(SchedulerService::start(DeviceConfig{}, backends, *client, {})).value();
  TestHttpClient http(service->port());
  TestHttpClient verbs(service->extenderPort());
  ASSERT_TRUE(eventually([&] { return service->cache().stats().nodes == 1; }));
  ASSERT_FALSE(service->ready());

  auto early = parse(verbs.post("/filter", extenderArgs(*waiting, {"n"})).body);
  EXPECT_NE(std::string(early.at("Error").as_string()).find("not ready"), std::string::npos) << early;
  EXPECT_TRUE(names(early.at("NodeNames")).empty()) << early;
  EXPECT_TRUE(early.at("FailedNodes").as_object().contains("n")) << early;
  EXPECT_TRUE(early.at("FailedAndUnresolvableNodes").as_object().empty()) << "nothing unresolvable";
  auto scores = json::parse(verbs.post("/prioritize", extenderArgs(*waiting, {"n"})).body).as_array();
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].at("Score"), 0);
  auto bound = parse(verbs.post("/bind", bindingArgs(*waiting, "n")).body);
  EXPECT_NE(std::string(bound.at("Error").as_string()).find("not ready"), std::string::npos) << bound;
  EXPECT_EQ(k8s::nodeName(*api->get("pods", "default", "waiting")), "") << "nothing was bound";
  EXPECT_EQ(service->cache().stats().reservations, 0u);
  EXPECT_EQ(http.get("/readyz").status, 503);
  EXPECT_EQ(http.get("/healthz").status, 200);

  ASSERT_TRUE(service->waitForSync(std::chrono::seconds(30)));
  EXPECT_EQ(http.get("/readyz").status, 200);
  auto later = parse(verbs.post("/filter", extenderArgs(*waiting, {"n"})).body);
  EXPECT_EQ(later.at("Error"), "");
  EXPECT_TRUE(names(later.at("NodeNames")).empty()) << "the holder's GPU is taken: " << later;
  EXPECT_EQ(later.at("FailedNodes").at("n"), "vgpu: not enough free device memory (CardInsufficientMemory)") << later;
  service->stop();
}

// Issue 27 item 2: the cache keys pods by uid; a pod deleted and created again under its
// name, seen only through a relist, must give back the old pod's devices.
TEST_F(ExtenderFixture, SchedulerAPodRecreatedUnderItsNameWhileUnwatchedGivesBackTheOldOnesDevices) {
  auto pod = h.createPod(gpuPod("p", 30000));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(pod, "big")).body).at("Error"), "");
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().reservations == 0; }));  // confirmed by the informer
  ASSERT_EQ(memoryOn(*h.service, "big", 2), 30000u);
  cutWatches(*h.api);
  ASSERT_TRUE(h.api->remove("pods", "default", "p").ok());
  h.createPod(gpuPod("p", 30000));  // a new uid, not bound
  h.api->compactHistory();          // so the scheduler learns of it through a relist
  h.api->clearFaults();
  EXPECT_TRUE(eventually([&] { return memoryOn(*h.service, "big", 2) == 0; }))
      << "the old pod still holds " << memoryOn(*h.service, "big", 2) << " MiB";
  EXPECT_EQ(h.service->cache().stats().pods, 0u);
}

// Issue 27 item 5: the client retries a POST whose answer was lost; the retry finds the pod
// bound by the first attempt (409). That is our own Binding: a success, reservation kept.
TEST_F(ExtenderFixture, SchedulerBindWhoseAnswerWasLostIsASuccessAndKeepsItsReservation) {
  auto pod = h.createPod(gpuPod("p", 30000));
  fakes::Fault lose;
  lose.method = "POST";
  lose.pathPrefix = "/api/v1/namespaces/default/pods/p/binding";
  lose.action = fakes::Fault::Action::kLoseReply;
  h.api->addFault(lose);
  auto out = parse(http.post("/bind", bindingArgs(pod, "big")).body);
  EXPECT_EQ(out.at("Error"), "") << out;
  EXPECT_EQ(memoryOn(*h.service, "big", 2), 30000u) << "the reservation of a bound pod was dropped";
  EXPECT_EQ(h.service->cache().stats().pods, 1u);
  std::size_t conflicts = 0;
  for (const auto& r : h.api->requests()) conflicts += r.method == "POST" && r.status == 409;
  EXPECT_EQ(conflicts, 1u) << "the retried POST met the first one's Binding";
  EXPECT_EQ(k8s::nodeName(*h.api->get("pods", "default", "p")), "big");
}

TEST_F(ExtenderFixture, SchedulerBindConflictingWithABindingElsewhereReleasesItsReservation) {
  auto pod = h.createPod(gpuPod("q", 30000));
  ASSERT_TRUE(h.client->bind({"default", "q", "small", "", {}}).ok());  // another binder got there first
  auto out = parse(http.post("/bind", bindingArgs(pod, "big")).body);
  // The Binding's 409, or, once the informer has seen the pod on "small" (counted there as
  // bound by another binder), the cache's own refusal.
  const std::string error(out.at("Error").as_string());
  EXPECT_TRUE(error.find("409") != std::string::npos || error.find("already bound to node small") != std::string::npos)
      << out;
  EXPECT_EQ(memoryOn(*h.service, "big", 2), 0u);
  EXPECT_EQ(h.service->cache().stats().reservations, 0u);
}

// Issue 27 item 6: kube-scheduler uses the extender's words as printf formats (extender.go
// fmt.Errorf(result.Error); schedule_one.go Eventf(..., msg) for FailedScheduling), so a
// '%' arrives as "%!c(MISSING)". Every reason template and every message the extender can
// send in FailedNodes, FailedAndUnresolvableNodes and Error must be free of them.
TEST(SchedulerMessages, EveryReasonTemplateSaysPercentInWords) {
  std::vector<std::string> texts;
  for (int reason = VGPU_REASON_NONE; reason <= VGPU_REASON_NUMA_MISMATCH; ++reason)
    for (std::uint64_t needed : {0, 30, 100})
      texts.push_back(explainCoreReason(vgpu_fit_result{0, reason, needed, 20, {}}));
  for (const char* name : {"sim", "nvidia", "cambricon", "hygon"}) {
    BackendParams params;
    params.name = name;
    auto backend = loadBackend(backendLibraryPath(VGPU_BACKEND_DIR, name), params);
    ASSERT_TRUE(backend.ok()) << name << ": " << backend.error().message;
    for (int reason = VGPU_REASON_NONE; reason < VGPU_REASON_BACKEND + 8; ++reason) {
      if (reason == VGPU_REASON_NUMA_MISMATCH + 1) reason = VGPU_REASON_BACKEND;
      for (std::uint64_t needed : {0, 30, 100})
        texts.push_back((*backend)->allocator().explain(vgpu_fit_result{0, reason, needed, 20, {}}));
    }
  }
  for (const auto& t : texts) EXPECT_EQ(t.find('%'), std::string::npos) << t;
  EXPECT_EQ(explainCoreReason(vgpu_fit_result{0, VGPU_REASON_INSUFFICIENT_COMPUTE, 30, 20, {}}),
            "not enough free compute (needs 30 percent, 20 percent free)");
  // What kube-scheduler gets instead: a category per reason, the same whatever the numbers.
  std::set<std::string> categories;
  for (int reason = VGPU_REASON_UNHEALTHY; reason <= VGPU_REASON_NUMA_MISMATCH; ++reason)
    for (std::uint64_t needed : {0, 30, 100})
      for (std::uint64_t available : {0, 20, 7777}) {
        const std::string c(categorizeCoreReason(vgpu_fit_result{0, reason, needed, available, {}}));
        EXPECT_FALSE(c.empty()) << reason;
        EXPECT_EQ(c.find_first_of("%0123456789"), std::string::npos) << c;
        categories.insert(c);
      }
  EXPECT_EQ(categories.size(), 11u) << "one per reason, two for exclusive use";
}

TEST_F(ExtenderFixture, SchedulerNoPercentSignInAnyRefusalOrError) {
  std::vector<std::string> said;  // every reason and error the extender answered
  auto collect = [&](const json::object& out) {
    for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"})
      if (out.contains(map))
        for (const auto& [node, why] : out.at(map).as_object()) said.emplace_back(why.as_string());
    said.emplace_back(out.at("Error").as_string());
  };
  // Compute nearly used up on "small": the refusal names percentages of compute.
  auto busy = h.createPod(gpuPod("busy", 1000, 90));
  ASSERT_EQ(parse(http.post("/bind", bindingArgs(busy, "small")).body).at("Error"), "");
  h.createNode(nodeJson("broken", {}));
  ASSERT_TRUE(h.api->patch("nodes", "", "broken",
                           json::object{{"metadata", json::object{{"annotations", json::object{{keys::nodeDevices("sim"),
                                                                                                "100% garbage"}}}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] {
    bool unreadable = false;
    h.service->cache().read([&](const ClusterCache::Lookup& lookup, std::chrono::system_clock::time_point) {
      const NodeEntry* n = lookup("broken");
      unreadable = n && n->state.unavailable.find("cannot be read") != std::string::npos;
    });
    return unreadable;
  }));
  const std::vector<std::string> everyNode{"big", "small", "stale", "plain", "broken", "ghost"};
  collect(filter(gpuPod("compute", 1000, 30), everyNode));
  collect(filter(podJson("default", "share", {{"main", {{"nvidia.com/gpu", "3"}, {"nvidia.com/gpumem-percentage", "50"}}}}),
                 everyNode));
  collect(filter(podJson("default", "odd", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "50%"}}}}), {"big"}));
  collect(filter(podJson("default", "over", {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}}}), {"big"}));
  // Bind refusals: no longer fits, and the apiserver's own words.
  collect(parse(http.post("/bind", bindingArgs(h.createPod(gpuPod("late", 1000, 30)), "small")).body));
  fakes::Fault quota;
  quota.method = "POST";
  quota.pathPrefix = "/api/v1/namespaces/default/pods/q/binding";
  quota.status = 403;
  quota.message = "pods \"q\" is forbidden: exceeded quota: 100% of gpu used";
  h.api->addFault(quota);
  collect(parse(http.post("/bind", bindingArgs(h.createPod(gpuPod("q", 1000)), "big")).body));

  std::string all;
  for (const auto& s : said) all += s + "\n";
  // The numbers are in the pod's events (kube-scheduler prints only the categories).
  h.service->events().flush();
  std::string events;
  for (const auto& e : h.api->list("events")) events += std::string(e.at("message").as_string()) + "\n";
  for (const char* expected : {"heartbeat is stale", "cannot be read", "not known", "50 percent", "150",
                               "100 percent of gpu used"})
    EXPECT_NE(all.find(expected), std::string::npos) << expected << " not among:\n" << all;
  for (const char* expected : {"30 percent compute", "needs 30 percent, 10 percent free", "50 percent of the memory"})
    EXPECT_NE(events.find(expected), std::string::npos) << expected << " not among the events:\n" << events;
  for (const auto& s : said) EXPECT_EQ(s.find('%'), std::string::npos) << s;
}

// Issue 19 item 4: apiserver calls never run on the threads that answer kube-scheduler.
TEST(SchedulerVerbs, FilterAnswersPromptlyWhileABindWaitsOnAHungApiserver) {
  ServiceOptions options;
  options.extenderHttp.threads = 1;  // one I/O thread: a bind on it would stall every verb
  options.extenderHttp.blockingThreads = 1;
  SchedulerHarness h(options);
  h.createNode(nodeJson("big", gpus("big", 2, 81920)));
  ASSERT_TRUE(h.awaitNodes(1));
  auto pod = h.createPod(gpuPod("p", 3000));
  fakes::Fault hang;
  hang.method = "POST";
  hang.pathPrefix = "/api/v1/namespaces/default/pods/p/binding";
  hang.action = fakes::Fault::Action::kHang;
  hang.times = -1;
  h.api->addFault(hang);
  auto binding = std::async(std::launch::async, [&h, &pod] {
    return TestHttpClient(h.service->extenderPort()).post("/bind", bindingArgs(pod, "big"));
  });
  struct Release {  // also when an assertion ends the test early: the bind must not wait out its timeouts
    fakes::FakeApiServer& api;
    ~Release() {
      api.clearFaults();
      api.releaseHangs();
    }
  } release{*h.api};
  ASSERT_TRUE(eventually([&] {
    for (const auto& r : h.api->requests())
      if (r.method == "POST" && r.path == hang.pathPrefix) return true;
    return false;
  }));
  TestHttpClient verbs(h.service->extenderPort());
  verbs.setTimeout(std::chrono::seconds(2));
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = verbs.post("/filter", extenderArgs(gpuPod("q", 1000), {"big"}));
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(names(parse(r.body).at("NodeNames")), std::vector<std::string>{"big"}) << r.body;
    EXPECT_LT(took, std::chrono::milliseconds(200));
    EXPECT_EQ(verbs.get("/healthz").status, 200);
  }
  EXPECT_EQ(binding.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);  // still stuck
  h.api->clearFaults();
  h.api->releaseHangs();
  auto bound = binding.get();  // the client's retry (or its check after a 409) ends it
  EXPECT_EQ(bound.status, 200) << bound.error;
}

}  // namespace
}  // namespace vgpu::scheduler
