// The cluster cache on its own: inventories from node annotations, usage from pod
// assignments, reservations, slots and the 6a hold-back rule.
#include <gtest/gtest.h>

#include <future>

#include "cluster_cache.h"
#include "scheduler_harness.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/trim.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;
using std::chrono::system_clock;

json::object boundPod(const std::string& name, const std::string& uid, const std::string& node, const std::string& device,
                      std::uint64_t memory, int slot, const std::string& phase = "Running",
                      const std::string& bindPhase = "success") {
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", false, {{"sim", device, 0, memory, 0, slot}}});
  json::object ann{{std::string(keys::kPodAssignment), encodeAssignment(a)},
                   {std::string(keys::kPodBindPhase), bindPhase},
                   {std::string(keys::kPodBindTime), formatTimestamp(system_clock::now())}};
  json::object pod = podJson("default", name, {{"main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(memory)}}}},
                             "vgpu-scheduler", ann);
  pod["metadata"].as_object()["uid"] = uid;
  pod["spec"].as_object()["nodeName"] = node;
  pod["status"].as_object()["phase"] = phase;
  return pod;
}

struct CacheFixture : ::testing::Test {
  BackendSet backends = simBackends();
  system_clock::time_point now = system_clock::now();
  ClusterCache cache{backends, [this] {
                       ClusterCache::Options o;
                       o.now = [this] { return now; };
                       return o;
                     }()};
  PlacementEngine engine;

  PreparedPod prepare(const PodInfo& info) {
    auto request = buildPodRequest(backends, info.podNamespace, info.name, info.containers, info.annotations);
    EXPECT_TRUE(request.ok());
    return std::move(PreparedPod::prepare(*request, backends)).value();
  }
  PodInfo info(const json::object& pod, const std::string& uid) {
    json::object copy = pod;
    copy["metadata"].as_object()["uid"] = uid;
    return std::move(parsePod(json::value(copy))).value();
  }
};

TEST_F(CacheFixture, SchedulerCacheCountsBoundPodsAndFreesThemWhenTheyEndOrGo) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 2), now));
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0));
  cache.upsertPod(boundPod("b", "uid-b", "n1", "GPU-n1-0", 2000, 1));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{2, 3000, 0}));
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Succeeded"));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{1, 2000, 0}));
  cache.removePod(boundPod("b", "uid-b", "n1", "GPU-n1-0", 2000, 1));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{0, 0, 0}));
  EXPECT_EQ(cache.stats().pods, 0u);
}

TEST_F(CacheFixture, SchedulerCacheCountsTrimmedPodsAndNodesAsWholeOnes) {
  // What the service's informers hand the cache (vgpu/k8s/trim.h) reads as the whole object.
  json::object node = nodeJson("n1", gpus("n1", 2), now);
  node["metadata"].as_object()["managedFields"] = json::array{json::object{{"manager", "kubelet"}}};
  cache.upsertNode(k8s::trimNode(node));
  json::object bound = boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0);
  bound["status"].as_object()["containerStatuses"] = json::array{json::object{{"name", "main"}, {"image", "x"}}};
  cache.upsertPod(k8s::trimPod(bound));
  cache.upsertPod(k8s::trimPod(boundPod("b", "uid-b", "n1", "GPU-n1-1", 2000, 1)));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{1, 1000, 0}));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-1"), (DeviceUsage{1, 2000, 0}));
  cache.upsertPod(k8s::trimPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Succeeded")));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{0, 0, 0}));
  cache.removePod(k8s::trimPod(boundPod("b", "uid-b", "n1", "GPU-n1-1", 2000, 1)));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-1"), (DeviceUsage{0, 0, 0}));
}

TEST_F(CacheFixture, SchedulerCachePodsSeenBeforeTheirNodeCountOnceItAppearsAndAfterInventoryChanges) {
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-1", 4000, 0));
  cache.upsertNode(nodeJson("n1", gpus("n1", 2), now));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-1"), (DeviceUsage{1, 4000, 0}));
  cache.upsertNode(nodeJson("n1", gpus("n1", 4), now));  // a new inventory: usage rebuilt, not lost
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-1"), (DeviceUsage{1, 4000, 0}));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-3"), (DeviceUsage{0, 0, 0}));
}

TEST_F(CacheFixture, SchedulerCacheStaleOrMissingHeartbeatAndMissingInventoryHaveReasons) {
  cache.upsertNode(nodeJson("fresh", gpus("fresh", 1), now));
  cache.upsertNode(nodeJson("stale", gpus("stale", 1), now - std::chrono::minutes(5)));
  cache.upsertNode(nodeJson("bare", {}, now));
  json::object broken = nodeJson("broken", {}, now);
  broken["metadata"].as_object()["annotations"].as_object()[keys::nodeDevices("sim")] = "{not json";
  cache.upsertNode(broken);
  std::map<std::string, std::string> reasons;
  cache.read([&](const ClusterCache::Lookup& lookup, system_clock::time_point t) {
    for (const char* n : {"fresh", "stale", "bare", "broken"}) reasons[n] = nodeUnusableReason(*lookup(n), t, std::chrono::seconds(90));
    EXPECT_EQ(lookup("absent"), nullptr);
  });
  EXPECT_EQ(reasons["fresh"], "");
  EXPECT_NE(reasons["stale"].find("heartbeat is stale"), std::string::npos) << reasons["stale"];
  EXPECT_NE(reasons["bare"].find("no vgpu devices"), std::string::npos) << reasons["bare"];
  EXPECT_NE(reasons["broken"].find("cannot be read"), std::string::npos) << reasons["broken"];
  now += std::chrono::minutes(3);  // time passes without a heartbeat: fresh goes stale too
  cache.read([&](const ClusterCache::Lookup& lookup, system_clock::time_point t) {
    EXPECT_NE(nodeUnusableReason(*lookup("fresh"), t, std::chrono::seconds(90)), "");
  });
}

// Issue 42 item 2: an idle agent renews its Lease instead of writing its Node; the Lease keeps
// the node alive, a stale one makes it stale, and an older agent's annotation still counts.
TEST_F(CacheFixture, SchedulerCacheNodeLeasesKeepNodesAliveAndAnnotationsOfOlderAgentsStillCount) {
  const auto old = now - std::chrono::hours(2);  // the annotation of the last inventory change
  cache.renewNode("leased", now);                // a Lease seen before its Node
  cache.upsertNode(nodeJson("leased", gpus("leased", 1), old));
  cache.upsertNode(nodeJson("lapsed", gpus("lapsed", 1), old));
  cache.renewNode("lapsed", now - std::chrono::minutes(5));
  cache.upsertNode(nodeJson("older-agent", gpus("older-agent", 1), now));  // no Lease at all
  cache.upsertNode(nodeJson("renewed-later", gpus("renewed-later", 1), old));
  auto reasons = [&] {
    std::map<std::string, std::string> out;
    cache.read([&](const ClusterCache::Lookup& lookup, system_clock::time_point t) {
      for (const char* n : {"leased", "lapsed", "older-agent", "renewed-later"})
        out[n] = nodeUnusableReason(*lookup(n), t, std::chrono::seconds(90));
    });
    return out;
  };
  auto r = reasons();
  EXPECT_EQ(r["leased"], "");
  EXPECT_NE(r["lapsed"].find("heartbeat is stale"), std::string::npos) << r["lapsed"];
  EXPECT_EQ(r["older-agent"], "");
  EXPECT_NE(r["renewed-later"], "");
  // Renewed: usable again without any Node write; an inventory change (with its old
  // annotation) does not take the Lease's time back.
  cache.renewNode("renewed-later", now);
  cache.upsertNode(nodeJson("leased", gpus("leased", 2), old));
  r = reasons();
  EXPECT_EQ(r["renewed-later"], "");
  EXPECT_EQ(r["leased"], "");
  // The agent stopped and removed its Lease: nothing renews the node, which goes stale.
  cache.forgetLease("leased");
  now += std::chrono::minutes(3);
  EXPECT_NE(reasons()["leased"], "");
}

TEST_F(CacheFixture, SchedulerCacheReserveTakesLowestFreeSlotsAndReleaseGivesThemBack) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1), now));
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0));
  cache.upsertPod(boundPod("b", "uid-b", "n1", "GPU-n1-0", 1000, 2));
  const json::object pod = gpuPod("p", 1000);
  PodInfo p1 = info(pod, "uid-1");
  auto r1 = cache.reserve(p1, prepare(p1), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  EXPECT_EQ(r1->assignment.containers[0].devices[0].slot, 1);
  // Confirm p1 as allocated so the next one is not held back.
  json::object confirmed = boundPod("p", "uid-1", "n1", "GPU-n1-0", 1000, 1);
  cache.upsertPod(confirmed);
  PodInfo p2 = info(gpuPod("q", 1000), "uid-2");
  auto r2 = cache.reserve(p2, prepare(p2), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  EXPECT_EQ(r2->assignment.containers[0].devices[0].slot, 3);
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->shares, 4u);
  cache.release("uid-2", r2->id + 1);  // not that reservation: kept
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->shares, 4u);
  cache.release("uid-2", r2->id);
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->shares, 3u);
  PodInfo p3 = info(gpuPod("r", 1000), "uid-3");
  auto r3 = cache.reserve(p3, prepare(p3), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->assignment.containers[0].devices[0].slot, 3);
}

TEST_F(CacheFixture, SchedulerCacheReservationSurvivesAnOlderUnboundEventOfThePod) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1), now));
  json::object pod = gpuPod("p", 5000);
  pod["metadata"].as_object()["uid"] = "uid-p";
  PodInfo p = info(pod, "uid-p");
  ASSERT_TRUE(cache.reserve(p, prepare(p), "n1", engine, std::chrono::milliseconds(0)).ok());
  cache.upsertPod(pod);  // the informer delivers a pre-bind update late
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->memoryMiB, 5000u);
  cache.removePod(pod);  // deleted: gone at once
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->memoryMiB, 0u);
}

TEST_F(CacheFixture, SchedulerCacheRefusesWhatNoLongerFitsAndStaleNodes) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 8000), now));
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 6000, 0));
  PodInfo p = info(gpuPod("p", 4000), "uid-p");
  auto r = cache.reserve(p, prepare(p), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no longer fits"), std::string::npos) << r.error().message;
  now += std::chrono::minutes(10);
  PodInfo q = info(gpuPod("q", 1000), "uid-q");
  auto stale = cache.reserve(q, prepare(q), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("stale"), std::string::npos);
  auto unknown = cache.reserve(q, prepare(q), "nope", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(unknown.ok());
}

TEST_F(CacheFixture, SchedulerCacheHoldsBackOnlyConfusableBindsUntilTheFirstIsAllocated) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 2), now));
  // In flight: one container of 1 GPU, on GPU-n1-0.
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Pending", "allocating"));
  // One container of 2 GPUs: no Allocate call of it looks like a's, never held back.
  PodInfo two = info(gpuPod("two", 1000, 0, 2), "uid-two");
  ASSERT_TRUE(cache.reserve(two, prepare(two), "n1", engine, std::chrono::milliseconds(0)).ok());
  // Two one-GPU containers: the agent could take either for pod a's container: held back.
  std::map<std::string, std::string> one{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  PodInfo pair = info(podJson("default", "pair", {{"x", one}, {"y", one}}), "uid-pair");
  auto pairRefused = cache.reserve(pair, prepare(pair), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(pairRefused.ok());
  EXPECT_EQ(pairRefused.error().message.rfind("held back: pod default/a", 0), 0u) << pairRefused.error().message;
  // Same count, different device (spread puts it on the other GPU): held back.
  PodInfo p = info(gpuPod("p", 1000), "uid-p");
  PreparedPod prepared = prepare(p);
  auto refused = cache.reserve(p, prepared, "n1", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("held back", 0), 0u) << refused.error().message;
  // Waiting: the first pod's Allocate is answered meanwhile, and the bind goes through.
  auto waiting = std::async(std::launch::async, [&] { return cache.reserve(p, prepared, "n1", engine, std::chrono::seconds(10)); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Pending", "success"));
  auto granted = waiting.get();
  ASSERT_TRUE(granted.ok()) << granted.error().message;
}

// Issue 42: kube-scheduler places the next pod before the last one's bind is done. A bind
// held back for a confusable pod waits with its share reserved, so the pods placed
// meanwhile see the device as taken (and are not sent to the room it is about to take); a
// bind that times out gives the share back, and waiting binds leave in the order they came.
TEST_F(CacheFixture, SchedulerCacheHeldBindWaitsWithItsShareReserved) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 8000), now));
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Pending", "allocating"));
  PodInfo b = info(gpuPod("b", 3000), "uid-b");
  PreparedPod preparedB = prepare(b);
  auto heldB = std::async(std::launch::async, [&] { return cache.reserve(b, preparedB, "n1", engine, std::chrono::seconds(10)); });
  ASSERT_EQ(heldB.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->memoryMiB, 4000u) << "the waiting bind's share is not reserved";
  // A pod placed meanwhile for the room b takes: refused at once for what it is, no fit.
  PodInfo c = info(gpuPod("c", 5000), "uid-c");
  auto late = cache.reserve(c, prepare(c), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("no longer fits"), std::string::npos) << late.error().message;
  // d fits beside b and waits too, behind b (FIFO): a's confirmation lets b go, not d.
  PodInfo d = info(gpuPod("d", 1000), "uid-d");
  PreparedPod preparedD = prepare(d);
  auto heldD = std::async(std::launch::async, [&] { return cache.reserve(d, preparedD, "n1", engine, std::chrono::milliseconds(400)); });
  ASSERT_EQ(heldD.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->memoryMiB, 5000u);
  cache.upsertPod(boundPod("a", "uid-a", "n1", "GPU-n1-0", 1000, 0, "Pending", "success"));
  auto grantedB = heldB.get();
  ASSERT_TRUE(grantedB.ok()) << grantedB.error().message;
  // b is in flight now (its bind not yet confirmed): d times out and gives its share back.
  auto refusedD = heldD.get();
  ASSERT_FALSE(refusedD.ok());
  EXPECT_EQ(refusedD.error().message.rfind("held back: pod default/b", 0), 0u) << refusedD.error().message;
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0")->memoryMiB, 4000u);
}

// Issue 26 item 4: anyone who may create pods can write vgpu.io/assignment. The kubelet
// hands a container devices only for what it asks for, so a grant to a container that asks
// nothing of that backend (or that the pod lacks) is forged and holds nothing.
TEST_F(CacheFixture, SchedulerCacheSecurityForgedAssignmentDoesNotBlockPlacement) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 8000), now));
  Assignment forged;
  forged.node = "n1";
  forged.containers.push_back({"main", false, {{"sim", "GPU-n1-0", 0, 8000, 100, 0}}});
  const json::object ann{{std::string(keys::kPodAssignment), encodeAssignment(forged)},
                         {std::string(keys::kPodBindPhase), "success"}};
  // spec.nodeName set, no managed resource: the webhook lets it through, nothing schedules it.
  json::object squatter = podJson("default", "squatter", {{"main", {{"cpu", "1"}}}}, "default-scheduler", ann);
  squatter["metadata"].as_object()["uid"] = "uid-squatter";
  squatter["spec"].as_object()["nodeName"] = "n1";
  squatter["status"].as_object()["phase"] = "Running";
  cache.upsertPod(squatter);
  // A pod that asks for a device but names a container it does not have.
  Assignment elsewhere = forged;
  elsewhere.containers[0].name = "ghost";
  json::object ghost = boundPod("ghost", "uid-ghost", "n1", "GPU-n1-0", 1000, 1);
  ghost["metadata"].as_object()["annotations"].as_object()[std::string(keys::kPodAssignment)] = encodeAssignment(elsewhere);
  ghost["spec"].as_object()["containers"].as_array()[0].as_object()["resources"] =
      json::object{{"limits", json::object{{"cpu", "1"}}}};
  cache.upsertPod(ghost);
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{0, 0, 0}));

  PodInfo p = info(gpuPod("p", 6000, 50), "uid-p");
  auto placed = cache.reserve(p, prepare(p), "n1", engine, std::chrono::milliseconds(0));
  ASSERT_TRUE(placed.ok()) << placed.error().message;
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{1, 6000, 50}));

  // The same annotation on a pod that does ask for the device still counts (bound by us, or
  // a pod migrated from another scheduler whose assignment was translated).
  cache.upsertPod(boundPod("real", "uid-real", "n1", "GPU-n1-0", 1000, 2));
  EXPECT_EQ(cache.deviceUsage("n1", "GPU-n1-0"), (DeviceUsage{2, 7000, 50}));
}

TEST_F(CacheFixture, SchedulerCacheIndexFindsEveryNodeAfterGrowthAndRemoval) {
  for (int i = 0; i < 300; ++i) cache.upsertNode(nodeJson("n" + std::to_string(i), gpus("n" + std::to_string(i), 1), now));
  for (int i = 0; i < 300; i += 3) cache.removeNode("n" + std::to_string(i));
  cache.upsertNode(nodeJson("n5", gpus("n5", 2), now));  // a changed inventory keeps its place
  std::vector<std::string> owned;
  for (int i = 0; i < 300; ++i) owned.push_back("n" + std::to_string(i));
  owned.push_back("absent");
  std::vector<std::string_view> names(owned.begin(), owned.end());
  cache.readNodes(names, [&](const std::vector<const NodeEntry*>& found, system_clock::time_point) {
    ASSERT_EQ(found.size(), names.size());
    for (int i = 0; i < 300; ++i) {
      if (i % 3 == 0) {
        EXPECT_EQ(found[i], nullptr) << i;
      } else {
        ASSERT_NE(found[i], nullptr) << i;
        EXPECT_EQ(found[i]->state.name, names[i]);
      }
    }
    EXPECT_EQ(found[5]->state.inventory->entries().size(), 2u);
    EXPECT_EQ(found.back(), nullptr);
  });
}

TEST(SchedulerAllocateKeys, CountOnlyAdvertisedResourcesAndMeetPerContainer) {
  BackendSet backends = simBackends();
  PodInfo a = std::move(parsePod(json::value(gpuPod("a", 1000)))).value();
  PodInfo b = std::move(parsePod(json::value(gpuPod("b", 3000, 50)))).value();
  PodInfo c = std::move(parsePod(json::value(gpuPod("c", 1000, 0, 2)))).value();
  std::map<std::string, std::string> one{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "500"}};
  PodInfo pair = std::move(parsePod(json::value(podJson("default", "pair", {{"a", one}, {"b", one}})))).value();
  EXPECT_EQ(allocateKeys(a, backends), (AllocateKeys{"nvidia.com/gpu=1"})) << "gpumem is not advertised";
  EXPECT_TRUE(confusable(allocateKeys(a, backends), allocateKeys(b, backends)));
  EXPECT_FALSE(confusable(allocateKeys(a, backends), allocateKeys(c, backends)));
  // The agent matches container by container: a one-GPU pod and a pod of two one-GPU
  // containers can be taken for each other.
  EXPECT_TRUE(confusable(allocateKeys(a, backends), allocateKeys(pair, backends)));
  EXPECT_TRUE(confusable(allocateKeys(c, backends), AllocateKeys{"a=1", "nvidia.com/gpu=2"}));
  EXPECT_FALSE(confusable(AllocateKeys{}, allocateKeys(a, backends)));
  Assignment x, y;
  x.containers.push_back({"main", false, {{"sim", "G0", 0, 1000, 0, 0}}});
  y.containers.push_back({"main", false, {{"sim", "G0", 0, 1000, 0, 3}}});
  EXPECT_TRUE(interchangeable(x, y));
  y.containers[0].devices[0].deviceId = "G1";
  EXPECT_FALSE(interchangeable(x, y));
}

}  // namespace
}  // namespace vgpu::scheduler
