// Filter's memo (filter_memo.h): a verdict kept for a node is used only while the node is
// unchanged, and answers are byte for byte those of judging every node afresh.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "extender.h"
#include "filter_memo.h"
#include "json_body.h"
#include "scheduler_harness.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;
using std::chrono::system_clock;

/// A cache and two extenders over it: one keeping verdicts, one judging afresh.
struct MemoFixture : ::testing::Test {
  BackendSet backends = simBackends();
  system_clock::time_point now = system_clock::now();
  SchedulerConfig config;
  ClusterCache cache{backends, [this] {
                       ClusterCache::Options o;
                       o.scheduler = config;
                       o.now = [this] { return now; };
                       return o;
                     }()};
  metrics::Registry registry;
  SchedulerMetrics metrics{registry};
  EventRecorder events{nullptr, "vgpu-scheduler", "test"};
  std::unique_ptr<k8s::Client> client = [] {
    k8s::ClientConfig cc;
    cc.server = "http://127.0.0.1:9";  // never called: filter reads the cache only
    return std::move(k8s::Client::create(cc)).value();
  }();
  Extender memoized{backends, config, cache, *client, events, metrics, {}, {}};
  Extender fresh{backends, config, cache, *client, events, metrics, {}, ExtenderOptions{.filterMemoShapes = 0}};

  static std::string filter(Extender& extender, const json::object& pod, const std::vector<std::string>& nodes) {
    http::Request r;
    r.method = "POST";
    r.path = "/filter";
    r.body = extenderArgs(pod, nodes);
    return extender.filter(r).body;
  }
  /// The nodes that pass, from the memoized extender's answer (checked against the fresh one's).
  std::vector<std::string> passing(const json::object& pod, const std::vector<std::string>& nodes) {
    const std::string answer = filter(memoized, pod, nodes);
    EXPECT_EQ(answer, filter(fresh, pod, nodes));
    const json::object parsed = parse(answer);
    std::vector<std::string> out;
    for (const auto& n : parsed.at("NodeNames").as_array()) out.emplace_back(n.as_string());
    return out;
  }
  static json::object withUid(json::object pod, const std::string& uid) {
    pod["metadata"].as_object()["uid"] = uid;
    return pod;
  }
};

using Names = std::vector<std::string>;

TEST_F(MemoFixture, SchedulerFilterMemoSeesAPodLeaveTheNode) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 20000), now));
  const json::object holder = withUid(admittedPod("holder", "n1", 15000), "uid-holder");
  cache.upsertPod(holder);
  const json::object waiting = withUid(gpuPod("waiting", 10000), "uid-waiting");
  EXPECT_EQ(filter(memoized, waiting, {"n1"}), filter(memoized, waiting, {"n1"}));  // the second from the memo
  EXPECT_EQ(passing(waiting, {"n1"}), Names{});
  cache.removePod(holder);
  EXPECT_EQ(passing(waiting, {"n1"}), Names{"n1"});
}

TEST_F(MemoFixture, SchedulerFilterMemoSeesABindTakeTheNode) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 20000), now));
  const json::object first = withUid(gpuPod("first", 15000), "uid-first");
  const json::object second = withUid(gpuPod("second", 15000), "uid-second");  // the same shape
  EXPECT_EQ(passing(second, {"n1"}), Names{"n1"});
  PlacementEngine engine(config);
  auto request = buildPodRequest(backends, "default", "first", std::move(parsePod(json::value(first))).value().containers, {});
  const PreparedPod prepared = std::move(PreparedPod::prepare(*request, backends)).value();
  ASSERT_TRUE(cache.reserve(std::move(parsePod(json::value(first))).value(), prepared, "n1", engine, std::chrono::milliseconds(0)).ok());
  EXPECT_EQ(passing(second, {"n1"}), Names{});
}

TEST_F(MemoFixture, SchedulerFilterMemoSeesANewInventoryAndANodeInARemovedOnesPlace) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 20000), now));
  cache.upsertNode(nodeJson("n2", gpus("n2", 1, 8000), now));
  const json::object pod = withUid(gpuPod("p", 10000), "uid-p");
  EXPECT_EQ(passing(pod, {"n1", "n2"}), Names{"n1"});
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 8000), now));  // the agent now publishes a smaller GPU
  EXPECT_EQ(passing(pod, {"n1", "n2"}), Names{});
  // n3 takes the removed n2's slot in the memo's table: its verdict is not n2's.
  cache.removeNode("n2");
  cache.upsertNode(nodeJson("n3", gpus("n3", 1, 20000), now));
  EXPECT_EQ(passing(pod, {"n1", "n3"}), Names{"n3"});
}

TEST_F(MemoFixture, SchedulerFilterMemoSeesAHeartbeatGoStaleAndComeBack) {
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 20000), now));
  const json::object pod = withUid(gpuPod("p", 10000), "uid-p");
  EXPECT_EQ(passing(pod, {"n1"}), Names{"n1"});
  now += std::chrono::hours(1);
  EXPECT_EQ(passing(pod, {"n1"}), Names{});
  cache.upsertNode(nodeJson("n1", gpus("n1", 1, 20000), now));
  EXPECT_EQ(passing(pod, {"n1"}), Names{"n1"});
}

TEST(SchedulerFilterMemoShape, PodsAskingAlikeShareAShapeWhateverTheirNames) {
  BackendSet backends = simBackends();
  auto request = [&](const json::object& pod) {
    const PodInfo info = std::move(parsePod(json::value(pod))).value();
    return std::move(buildPodRequest(backends, info.podNamespace, info.name, info.containers, info.annotations)).value();
  };
  EXPECT_TRUE(sameShape(request(gpuPod("a", 1000, 10)), request(gpuPod("b", 1000, 10))));
  EXPECT_FALSE(sameShape(request(gpuPod("a", 1000, 10)), request(gpuPod("a", 1001, 10))));
  EXPECT_FALSE(sameShape(request(gpuPod("a", 1000, 10)), request(gpuPod("a", 1000, 10, 2))));
  json::object packed = gpuPod("a", 1000, 10);
  packed["metadata"].as_object()["annotations"].as_object()["vgpu.io/node-scheduler-policy"] = "spread";
  EXPECT_FALSE(sameShape(request(gpuPod("a", 1000, 10)), request(packed)));
}

TEST(SchedulerFilterMemoShape, KeepsTheMostRecentlyUsedShapes) {
  FilterMemo memo(2);
  auto asking = [](std::uint64_t memoryMiB) {
    DeviceRequest r;
    r.backend = "sim";
    r.count = 1;
    r.memoryMiB = memoryMiB;
    PodRequest pod;
    pod.containers.push_back({"main", false, {r}});
    return pod;
  };
  const PodRequest a = asking(1000), b = asking(2000), c = asking(3000);
  NodeEntry node;
  node.generation = 7;
  auto remember = [&](const PodRequest& shape) {
    auto lent = memo.take(shape);
    lent->store(node, {0, 0, 0, true});
    memo.keep(std::move(lent));
  };
  auto known = [&](const PodRequest& shape) {  // and used again, when it is
    auto lent = memo.take(shape);
    if (!lent->find(node)) return false;
    memo.keep(std::move(lent));
    return true;
  };
  remember(a);
  remember(b);
  EXPECT_TRUE(known(a));  // a is now the most recently used
  remember(c);            // b goes
  EXPECT_FALSE(known(b));
  EXPECT_TRUE(known(a));
  EXPECT_TRUE(known(c));
  auto held = memo.take(a);  // lent to one request: another gets an empty one
  EXPECT_FALSE(memo.take(a)->find(node));
  memo.keep(std::move(held));
}

/// Random clusters changing between requests (pods placed, bound, finished; inventories
/// replaced; nodes removed, added, stale), random pods of a few shapes: the memoized
/// extender answers exactly as the one judging every node afresh.
TEST_F(MemoFixture, SchedulerFilterMemoAnswersAsJudgingAfreshWhileTheClusterChanges) {
  std::mt19937 rng(19);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  constexpr int kNodes = 24;
  std::vector<std::string> nodeNames;
  for (int n = 0; n < kNodes; ++n) nodeNames.push_back("n" + std::to_string(n));
  std::map<std::string, std::vector<Device>> published;  // nodes in the cache
  auto publish = [&](const std::string& name) {
    published[name] = gpus(name, 1 + pick(4), pick(2) ? 24000 : 40000, 4);
    cache.upsertNode(nodeJson(name, published[name], now));
  };
  auto gpuCount = [&](const std::string& name) { return static_cast<int>(published.at(name).size()); };
  for (const auto& name : nodeNames) publish(name);
  const std::vector<json::object> shapes = {
      gpuPod("small", 4000, 10), gpuPod("medium", 12000, 30), gpuPod("large", 30000, 50),
      gpuPod("pair", 8000, 20, 2), gpuPod("whole", 24000, 100),
      podJson("default", "two", {{"a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "9000"}}},
                                 {"b", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "9000"}}}})};
  std::vector<json::object> placed;
  int uids = 0, answers = 0, passes = 0;
  for (int step = 0; step < 400; ++step) {
    switch (pick(7)) {
      case 0:
      case 1: {  // a pod placed on some device
        const std::string& node = nodeNames[static_cast<std::size_t>(pick(kNodes))];
        if (!published.count(node)) break;
        json::object pod = withUid(admittedPod("p" + std::to_string(uids), node, 2000 + 2000u * static_cast<unsigned>(pick(8)),
                                               static_cast<std::uint32_t>(10 * pick(5)), pick(gpuCount(node))),
                                   "uid-" + std::to_string(uids));
        ++uids;
        cache.upsertPod(pod);
        placed.push_back(std::move(pod));
        break;
      }
      case 2: {  // one finishes
        if (placed.empty()) break;
        const std::size_t i = static_cast<std::size_t>(pick(static_cast<int>(placed.size())));
        cache.removePod(placed[i]);
        placed.erase(placed.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      case 3: {  // a bind through the extender's own reservation
        const json::object pod = withUid(shapes[static_cast<std::size_t>(pick(5))], "uid-" + std::to_string(uids++));
        const PodInfo info = std::move(parsePod(json::value(pod))).value();
        auto request = buildPodRequest(backends, info.podNamespace, info.name, info.containers, info.annotations);
        const PreparedPod prepared = std::move(PreparedPod::prepare(*request, backends)).value();
        (void)cache.reserve(info, prepared, nodeNames[static_cast<std::size_t>(pick(kNodes))], PlacementEngine(config),
                            std::chrono::milliseconds(0));
        break;
      }
      case 4:  // a new inventory
        publish(nodeNames[static_cast<std::size_t>(pick(kNodes))]);
        break;
      case 5: {  // a node goes, or comes back
        const std::string& node = nodeNames[static_cast<std::size_t>(pick(kNodes))];
        if (published.erase(node)) cache.removeNode(node);
        else publish(node);
        break;
      }
      case 6:  // time passes: most heartbeats are renewed, the others go stale in time
        now += std::chrono::seconds(40);
        for (const auto& [node, devices] : published)
          if (pick(4) != 0) cache.upsertNode(nodeJson(node, devices, now));
        break;
    }
    for (int request = 0; request < 3; ++request) {
      const json::object pod = withUid(shapes[static_cast<std::size_t>(pick(static_cast<int>(shapes.size())))], "uid-pending");
      std::vector<std::string> candidates = nodeNames;
      candidates.push_back("unknown");
      if (pick(3) == 0) std::shuffle(candidates.begin(), candidates.end(), rng);
      const std::string expected = filter(fresh, pod, candidates);
      ASSERT_EQ(filter(memoized, pod, candidates), expected) << "step " << step;
      ++answers;
      passes += static_cast<int>(parse(expected).at("NodeNames").as_array().size());
    }
  }
  // The run is worth something only if nodes both fit and were refused along the way.
  EXPECT_GT(passes, answers);
  EXPECT_LT(passes, answers * (kNodes - 2));
}

}  // namespace
}  // namespace vgpu::scheduler
