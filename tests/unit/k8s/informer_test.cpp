// The informer keeps an exact mirror of the double through watch breaks, 410s and restarts.

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "test_support.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using testing::clientFor;
using testing::eventually;
using testing::fastOptions;
using testing::makePod;
using testing::startServer;

InformerOptions quick(std::string fieldSelector = "") {
  InformerOptions o;
  o.fieldSelector = std::move(fieldSelector);
  o.backoffMin = std::chrono::milliseconds(5);
  o.backoffMax = std::chrono::milliseconds(50);
  o.pageSize = 7;  // several pages even for small tests
  return o;
}

/// A map maintained only from callbacks; flags duplicates and impossible transitions.
class Mirror {
 public:
  InformerHandlers handlers() {
    InformerHandlers h;
    h.onAdd = [this](const ObjectPtr& o) {
      std::lock_guard lock(mu_);
      auto key = objectKey(*o);
      if (state_.count(key)) problems_.push_back("duplicate add " + key);
      state_[key] = std::string(resourceVersion(*o));
      log_.push_back("add " + key);
    };
    h.onUpdate = [this](const ObjectPtr& before, const ObjectPtr& after) {
      std::lock_guard lock(mu_);
      auto key = objectKey(*after);
      auto it = state_.find(key);
      if (it == state_.end()) {
        problems_.push_back("update of unknown " + key);
      } else if (it->second != resourceVersion(*before)) {
        problems_.push_back("update of " + key + " from a version never delivered");
      }
      if (resourceVersion(*before) == resourceVersion(*after)) problems_.push_back("no-op update " + key);
      state_[key] = std::string(resourceVersion(*after));
      log_.push_back("update " + key);
    };
    h.onDelete = [this](const ObjectPtr& last) {
      std::lock_guard lock(mu_);
      auto key = objectKey(*last);
      if (!state_.erase(key)) problems_.push_back("delete of unknown " + key);
      log_.push_back("delete " + key);
    };
    return h;
  }
  std::map<std::string, std::string> state() {
    std::lock_guard lock(mu_);
    return state_;
  }
  std::vector<std::string> problems() {
    std::lock_guard lock(mu_);
    return problems_;
  }
  std::vector<std::string> takeLog() {
    std::lock_guard lock(mu_);
    return std::exchange(log_, {});
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> state_;
  std::vector<std::string> problems_;
  std::vector<std::string> log_;
};

std::map<std::string, std::string> serverState(const fakes::FakeApiServer& server,
                                               const std::string& node = "*") {
  std::map<std::string, std::string> out;
  for (const auto& p : server.list("pods")) {
    if (node != "*" && nodeName(p) != node) continue;
    out[objectKey(p)] = std::string(resourceVersion(p));
  }
  return out;
}

std::map<std::string, std::string> cacheState(const Informer& informer) {
  std::map<std::string, std::string> out;
  for (const auto& o : informer.list()) out[objectKey(*o)] = std::string(resourceVersion(*o));
  return out;
}

TEST(K8sInformer, MirrorsTheListAndLaterChangesInOrder) {
  auto server = startServer();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(server->create("pods", makePod("ns", "p" + std::to_string(i))));
  auto client = clientFor(*server);
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(informer.size(), 10u);
  EXPECT_EQ(mirror.takeLog().size(), 10u);
  ASSERT_TRUE(server->create("pods", makePod("ns", "new")));
  ASSERT_TRUE(server->patch("pods", "ns", "p1", json::parse(R"({"metadata":{"annotations":{"a":"b"}}})").as_object()));
  ASSERT_TRUE(server->remove("pods", "ns", "p2"));
  ASSERT_TRUE(eventually([&] { return informer.resourceVersion() == std::to_string(server->resourceVersion()); }));
  EXPECT_EQ(mirror.takeLog(), (std::vector<std::string>{"add ns/new", "update ns/p1", "delete ns/p2"}));
  EXPECT_EQ(annotation(*informer.get("ns/p1"), "a"), "b");
  EXPECT_EQ(informer.get("ns/p2"), nullptr);
  EXPECT_EQ(cacheState(informer), serverState(*server));
  EXPECT_TRUE(mirror.problems().empty());
}

TEST(K8sInformer, AFieldSelectedInformerSeesPodsArriveAndLeaveItsNode) {
  auto server = startServer();
  auto client = clientFor(*server);
  ASSERT_TRUE(server->create("pods", makePod("ns", "mine", "n1")));
  ASSERT_TRUE(server->create("pods", makePod("ns", "other", "n2")));
  ASSERT_TRUE(server->create("pods", makePod("ns", "pending")));
  Mirror mirror;
  Informer informer(*client, kPods, quick("spec.nodeName=n1"), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(mirror.takeLog(), std::vector<std::string>{"add ns/mine"});
  ASSERT_TRUE(client->bind({"ns", "pending", "n1", "", {{"vgpu.io/a", "1"}}}));
  ASSERT_TRUE(eventually([&] { return informer.size() == 2; }));
  EXPECT_EQ(annotation(*informer.get("ns/pending"), "vgpu.io/a"), "1");
  ASSERT_TRUE(server->remove("pods", "ns", "mine"));
  ASSERT_TRUE(eventually([&] { return informer.size() == 1; }));
  EXPECT_EQ(mirror.takeLog(), (std::vector<std::string>{"add ns/pending", "delete ns/mine"}));
}

// Both ways of listing: a streaming list (the apiserver's default) and paged lists.
void relistAfterGoneReportsExactlyWhatWasMissed(bool streaming) {
  auto server = startServer();
  auto client = clientFor(*server);
  for (const char* n : {"keep", "change", "drop"}) ASSERT_TRUE(server->create("pods", makePod("ns", n)));
  Mirror mirror;
  InformerOptions o = quick();
  o.streamingList = streaming;
  Informer informer(*client, kPods, o, mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  mirror.takeLog();
  // Keep the informer disconnected while things change and history is compacted.
  fakes::Fault down;
  down.watch = fakes::Fault::Watch::kOnly;
  down.status = 503;
  down.times = -1;
  server->addFault(down);
  server->breakWatches();
  ASSERT_TRUE(eventually([&] { return informer.stats().watchErrors >= 2; }));
  ASSERT_TRUE(server->remove("pods", "ns", "drop"));
  ASSERT_TRUE(server->patch("pods", "ns", "change", json::parse(R"({"metadata":{"labels":{"v":"2"}}})").as_object()));
  ASSERT_TRUE(server->create("pods", makePod("ns", "born")));
  server->compactHistory();
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return cacheState(informer) == serverState(*server); }));
  auto log = mirror.takeLog();
  std::sort(log.begin(), log.end());
  EXPECT_EQ(log, (std::vector<std::string>{"add ns/born", "delete ns/drop", "update ns/change"}));
  EXPECT_EQ(informer.stats().lists, 2u);
  EXPECT_EQ(informer.stats().streamedLists, streaming ? 2u : 0u);
  EXPECT_TRUE(mirror.problems().empty());
}

TEST(K8sInformer, RelistAfterGoneReportsExactlyWhatWasMissed) { relistAfterGoneReportsExactlyWhatWasMissed(true); }
TEST(K8sInformer, APagedRelistAfterGoneReportsExactlyWhatWasMissed) { relistAfterGoneReportsExactlyWhatWasMissed(false); }

// Keeps the informer's watches failing (its lists still work) while a test changes things.
void holdWatchesDown(fakes::FakeApiServer& server, const Informer& informer) {
  // Its watch open first: one still on its way in could slip past the fault and the break.
  ASSERT_TRUE(eventually([&] { return server.openWatches() >= 1; }));
  fakes::Fault down;
  down.watch = fakes::Fault::Watch::kOnly;
  down.status = 503;
  down.times = -1;
  server.addFault(down);
  auto errors = informer.stats().watchErrors;
  server.breakWatches();
  ASSERT_TRUE(eventually([&] { return informer.stats().watchErrors >= errors + 2; }));
}

// InformerOptions::retain: callbacks get whole objects, the store keeps what retain gives
// once they have run (here: bound pods cut to their metadata), through list, watch and a
// relist whose diff reads the retained versions.
TEST(K8sInformer, TheStoreKeepsTheRetainedVersionOnceTheCallbacksHaveRun) {
  auto server = startServer();
  for (const char* n : {"bound-a", "bound-b"}) ASSERT_TRUE(server->create("pods", makePod("ns", n, "n1")));
  ASSERT_TRUE(server->create("pods", makePod("ns", "pending")));
  auto client = clientFor(*server);
  InformerOptions o = quick();
  o.pageSize = 2;
  std::atomic<int> retained{0}, listed{0};
  o.retain = [&](const ObjectPtr& p) -> ObjectPtr {
    if (nodeName(*p).empty()) return p;
    ++retained;
    return std::make_shared<const json::object>(json::object{{"metadata", p->at("metadata")}});
  };
  o.onListed = [&] { ++listed; };
  Mirror mirror;
  InformerHandlers h = mirror.handlers();
  std::mutex mu;
  std::vector<std::string> seen;  // "<key> <had a spec> [before had a spec]"
  auto record = [&](const std::string& what) {
    std::lock_guard lock(mu);
    seen.push_back(what);
  };
  h.onAdd = [&, add = h.onAdd](const ObjectPtr& p) {
    add(p);
    record(objectKey(*p) + (p->contains("spec") ? " whole" : " cut"));
  };
  h.onUpdate = [&, update = h.onUpdate](const ObjectPtr& before, const ObjectPtr& after) {
    update(before, after);
    record(objectKey(*after) + (after->contains("spec") ? " whole" : " cut") +
           (before->contains("spec") ? " from whole" : " from cut"));
  };
  Informer informer(*client, kPods, o, h);
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(listed.load(), 1);
  EXPECT_FALSE(informer.get("ns/bound-a")->contains("spec"));
  EXPECT_FALSE(informer.get("ns/bound-b")->contains("spec"));
  EXPECT_TRUE(informer.get("ns/pending")->contains("spec"));

  // A watched update: the callback gets the whole new object and the retained old one.
  ASSERT_TRUE(server->patch("pods", "ns", "bound-a", json::parse(R"({"metadata":{"annotations":{"a":"b"}}})").as_object()));
  ASSERT_TRUE(client->bind({"ns", "pending", "n1", "", {}}));
  ASSERT_TRUE(eventually([&] { return informer.resourceVersion() == std::to_string(server->resourceVersion()); }));
  EXPECT_FALSE(informer.get("ns/bound-a")->contains("spec"));
  EXPECT_EQ(annotation(*informer.get("ns/bound-a"), "a"), "b");
  EXPECT_FALSE(informer.get("ns/pending")->contains("spec"));

  // A relist compares versions with the retained objects: only what changed is reported.
  holdWatchesDown(*server, informer);
  ASSERT_TRUE(server->patch("pods", "ns", "bound-b", json::parse(R"({"metadata":{"annotations":{"a":"c"}}})").as_object()));
  server->compactHistory();
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return cacheState(informer) == serverState(*server); }));
  ASSERT_TRUE(eventually([&] { return listed.load() == 2; }));
  EXPECT_FALSE(informer.get("ns/bound-b")->contains("spec"));
  EXPECT_TRUE(mirror.problems().empty());
  std::lock_guard lock(mu);
  std::sort(seen.begin(), seen.begin() + 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"ns/bound-a whole", "ns/bound-b whole", "ns/pending whole",
                                            "ns/bound-a whole from cut", "ns/pending whole from whole",
                                            "ns/bound-b whole from cut"}));
  // The first list's two bound pods, the two watched changes, the relist's one change (the
  // store keeps what it holds of an object the relist shows unchanged).
  EXPECT_EQ(retained.load(), 5);
}

bool isList(const fakes::RequestRecord& r) {
  return r.method == "GET" && r.query.find("watch=true") == std::string::npos;
}
std::string queryParam(const std::string& query, const std::string& key) {
  for (std::size_t at = 0; at < query.size();) {
    auto amp = query.find('&', at);
    auto part = query.substr(at, amp == std::string::npos ? std::string::npos : amp - at);
    if (part.rfind(key + "=", 0) == 0) return part.substr(key.size() + 1);
    if (amp == std::string::npos) break;
    at = amp + 1;
  }
  return {};
}

// Issue 19 item 1: after etcd compacts past the informer's version, its check after a
// broken stream must not be an exact read (limit + resourceVersion), which the apiserver
// answers 410 for ever after.
TEST(K8sInformer, GetsPastACompactionOfItsVersionWhileItsStreamWasBroken) {
  auto server = startServer();
  auto client = clientFor(*server);
  for (const char* n : {"keep", "change"}) ASSERT_TRUE(server->create("pods", makePod("ns", n)));
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  holdWatchesDown(*server, informer);
  ASSERT_TRUE(server->patch("pods", "ns", "change", json::parse(R"({"metadata":{"labels":{"v":"2"}}})").as_object()));
  ASSERT_TRUE(server->create("pods", makePod("ns", "born")));
  server->compactHistory();
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return cacheState(informer) == serverState(*server); }))
      << "wedged on a version etcd has compacted";
  EXPECT_TRUE(mirror.problems().empty());
  for (const auto& r : server->requests()) {
    if (!isList(r)) continue;
    EXPECT_NE(r.status, 410) << r.query;
    const auto rv = queryParam(r.query, "resourceVersion");
    if (!rv.empty() && rv != "0" && !queryParam(r.query, "limit").empty()) {
      EXPECT_EQ(queryParam(r.query, "resourceVersionMatch"), "NotOlderThan") << "an exact read: " << r.query;
    }
  }
}

// Issue 19 item 2: no list is a quorum read ("" goes to etcd, from every client at once
// after an apiserver restart); where lists are not streamed (issue 42) each is paged from
// the watch cache: the first not older than 1 (the cache would ignore a limit with "0"), a
// relist after 410 not older than the last version seen, after a jittered backoff.
TEST(K8sInformer, ListsAreServedFromTheWatchCacheAndRelistsWaitTheirTurn) {
  auto server = startServer();
  auto client = clientFor(*server);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(server->create("pods", makePod("ns", "p" + std::to_string(i))));
  InformerOptions o = quick();
  o.streamingList = false;
  o.backoffMin = std::chrono::milliseconds(100);
  o.backoffMax = std::chrono::milliseconds(1000);
  Informer informer(*client, kPods, o, {});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(eventually([&] { return server->openWatches() == 1; }));
  const std::string seen = informer.resourceVersion();
  holdWatchesDown(*server, informer);
  ASSERT_TRUE(server->create("pods", makePod("ns", "late")));
  server->compactHistory();
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return informer.stats().lists == 2 && informer.get("ns/late"); }));

  std::vector<fakes::RequestRecord> lists;  // first pages; not the one-item checks
  std::optional<std::chrono::steady_clock::time_point> gone;
  for (const auto& r : server->requests()) {
    if (isList(r) && queryParam(r.query, "continue").empty() && queryParam(r.query, "limit") != "1") lists.push_back(r);
    if (!isList(r) && r.status == 200 && queryParam(r.query, "resourceVersion") == seen) gone = r.at;
  }
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(queryParam(lists[0].query, "resourceVersion"), "1") << lists[0].query;
  EXPECT_EQ(queryParam(lists[1].query, "resourceVersion"), seen) << lists[1].query;
  for (const auto& l : lists) {
    EXPECT_EQ(queryParam(l.query, "resourceVersionMatch"), "NotOlderThan") << "else an exact read: " << l.query;
    EXPECT_EQ(queryParam(l.query, "limit"), "7") << l.query;
  }
  for (const auto& r : server->requests()) {
    if (isList(r)) {
      EXPECT_NE(queryParam(r.query, "resourceVersion") + queryParam(r.query, "continue"), "") << "a quorum read: " << r.query;
    }
  }
  ASSERT_TRUE(gone) << "the re-watch that met the compaction";
  EXPECT_GE(lists[1].at - *gone, std::chrono::milliseconds(50)) << "relisted without waiting";
}

// Issue 42 item 1: where the apiserver serves it (WatchList, on by default in 1.34 and
// 1.37) the list is a watch with sendInitialEvents, one object at a time, and the same
// stream goes on as the watch once the bookmark that ends the initial events came.
TEST(K8sInformer, StreamsItsListWhereServedAndWatchesOnTheSameStream) {
  auto server = startServer();
  auto client = clientFor(*server);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(server->create("pods", makePod("ns", "p" + std::to_string(i))));
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(mirror.takeLog().size(), 10u);
  EXPECT_EQ(informer.resourceVersion(), std::to_string(server->resourceVersion()));
  ASSERT_TRUE(server->create("pods", makePod("ns", "new")));
  ASSERT_TRUE(server->remove("pods", "ns", "p3"));
  ASSERT_TRUE(eventually([&] { return informer.resourceVersion() == std::to_string(server->resourceVersion()); }));
  EXPECT_EQ(mirror.takeLog(), (std::vector<std::string>{"add ns/new", "delete ns/p3"}));
  EXPECT_EQ(cacheState(informer), serverState(*server));
  EXPECT_TRUE(mirror.problems().empty());
  const auto stats = informer.stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.streamedLists, 1u);
  EXPECT_EQ(stats.watches, 1u) << "the list's stream is the watch";
  int watches = 0;
  for (const auto& r : server->requests()) {
    if (r.path != "/api/v1/pods") continue;
    EXPECT_FALSE(isList(r)) << "listed: " << r.query;
    ++watches;
    EXPECT_EQ(queryParam(r.query, "sendInitialEvents"), "true") << r.query;
    EXPECT_EQ(queryParam(r.query, "resourceVersionMatch"), "NotOlderThan") << r.query;
    EXPECT_EQ(queryParam(r.query, "allowWatchBookmarks"), "true") << r.query;
    EXPECT_EQ(queryParam(r.query, "resourceVersion"), "0") << r.query;
  }
  EXPECT_EQ(watches, 1);
}

// With the WatchList gate off the apiserver refuses sendInitialEvents (422); the informer
// lists instead, at once and page by page, and does not ask for a streaming list again.
TEST(K8sInformer, ListsPageByPageWhereStreamingListsAreRefused) {
  fakes::FakeApiServerOptions so;
  so.watchList = false;
  auto server = startServer(so);
  auto client = clientFor(*server);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(server->create("pods", makePod("ns", "p" + std::to_string(i))));
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  EXPECT_EQ(mirror.takeLog().size(), 20u);
  ASSERT_TRUE(server->create("pods", makePod("ns", "new")));
  ASSERT_TRUE(eventually([&] { return informer.get("ns/new") != nullptr; }));
  server->breakWatches();  // a re-watch is a plain watch again
  ASSERT_TRUE(server->remove("pods", "ns", "p1"));
  ASSERT_TRUE(eventually([&] { return informer.get("ns/p1") == nullptr; }));
  EXPECT_EQ(cacheState(informer), serverState(*server));
  EXPECT_TRUE(mirror.problems().empty());
  EXPECT_EQ(informer.stats().lists, 1u);
  EXPECT_EQ(informer.stats().streamedLists, 0u);
  int refused = 0;
  int pages = 0;
  for (const auto& r : server->requests()) {
    if (r.path != "/api/v1/pods") continue;
    if (!queryParam(r.query, "sendInitialEvents").empty()) {
      ++refused;
      EXPECT_EQ(r.status, 422) << r.query;
    } else if (isList(r) && queryParam(r.query, "limit") != "1") {  // not the checks after a break
      ++pages;
      EXPECT_EQ(r.status, 200) << r.query;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(pages, 3) << "20 pods in pages of 7";
}

TEST(K8sInformer, RelistsBackOffExponentiallyWithJitterAcrossClients) {
  auto server = startServer();
  auto client = clientFor(*server);
  constexpr int kInformers = 6;
  std::vector<std::unique_ptr<Informer>> informers;
  for (int i = 0; i < kInformers; ++i) {
    ASSERT_TRUE(server->create("pods", makePod("ns" + std::to_string(i), "p")));
    InformerOptions o = quick();
    o.streamingList = false;  // relists as lists, which the watches' 410 leaves alone
    o.ns = "ns" + std::to_string(i);
    o.backoffMin = std::chrono::milliseconds(40);
    o.backoffMax = std::chrono::milliseconds(5000);
    informers.push_back(std::make_unique<Informer>(*client, kPods, o, InformerHandlers{}));
    informers.back()->start();
  }
  for (auto& i : informers) ASSERT_TRUE(i->waitForSync(std::chrono::seconds(10)));
  // Every watch from now on is told its version is gone: each informer relists again and
  // again, never seeing an event, so its backoff keeps growing.
  fakes::Fault gone;
  gone.watch = fakes::Fault::Watch::kOnly;
  gone.status = 410;
  gone.times = -1;
  server->addFault(gone);
  const auto since = std::chrono::steady_clock::now();
  server->breakWatches();
  ASSERT_TRUE(eventually([&] {
    for (auto& i : informers)
      if (i->stats().lists < 6) return false;
    return true;
  }, std::chrono::seconds(20)));
  server->clearFaults();

  std::vector<std::vector<double>> gaps(kInformers);  // ms between one informer's relists
  for (int i = 0; i < kInformers; ++i) {
    std::vector<std::chrono::steady_clock::time_point> at;
    for (const auto& r : server->requests())
      if (isList(r) && r.at > since && r.path == "/api/v1/namespaces/ns" + std::to_string(i) + "/pods") at.push_back(r.at);
    ASSERT_GE(at.size(), 5u) << i;
    for (std::size_t k = 1; k < at.size(); ++k)
      gaps[i].push_back(std::chrono::duration<double, std::milli>(at[k] - at[k - 1]).count());
    // Equal jitter: the k-th wait is within [d/2, d] with d doubling, so each wait is at
    // least the one before it (a few ms of slack for the round trips), and they grow.
    for (std::size_t k = 1; k < gaps[i].size(); ++k) EXPECT_GE(gaps[i][k], gaps[i][k - 1] - 5) << i << " " << k;
    EXPECT_GE(gaps[i][3], 2.5 * gaps[i][0]) << i;
  }
  // And clients cut off at the same instant do not come back in step.
  double lo = 1e9, hi = 0;
  for (const auto& g : gaps) {
    lo = std::min(lo, g[2]);
    hi = std::max(hi, g[2]);
  }
  EXPECT_GE(hi - lo, 5.0) << "the third waits of " << kInformers << " clients are all within 5 ms";
}

// Issue 27 item 2: a pod deleted and created again under its name while the informer was
// not watching shows up only in a relist, with a new uid. That is a delete of the old
// object and an add of the new one, not an update: whoever keys by uid must hear of both.
TEST(K8sInformer, ANameReusedByANewObjectIsADeleteAndAnAdd) {
  auto server = startServer();
  auto client = clientFor(*server);
  auto old = server->create("pods", makePod("ns", "p"));
  ASSERT_TRUE(old);
  std::mutex mu;
  std::vector<std::string> log;
  InformerHandlers h;
  h.onAdd = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    log.push_back("add " + std::string(uid(*o)));
  };
  h.onUpdate = [&](const ObjectPtr& b, const ObjectPtr& a) {
    std::lock_guard lock(mu);
    log.push_back("update " + std::string(uid(*b)) + " -> " + std::string(uid(*a)));
  };
  h.onDelete = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    log.push_back("delete " + std::string(uid(*o)));
  };
  Informer informer(*client, kPods, quick(), h);
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  holdWatchesDown(*server, informer);
  ASSERT_TRUE(server->remove("pods", "ns", "p"));
  auto again = server->create("pods", makePod("ns", "p"));
  ASSERT_TRUE(again);
  server->compactHistory();
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return informer.get("ns/p") && uid(*informer.get("ns/p")) == uid(*again); }));
  std::lock_guard lock(mu);
  EXPECT_EQ(log, (std::vector<std::string>{"add " + std::string(uid(*old)), "delete " + std::string(uid(*old)),
                                           "add " + std::string(uid(*again))}));
}

TEST(K8sInformer, ResumesFromItsVersionAfterAnApiserverRestart) {
  auto server = startServer();
  auto client = clientFor(*server);
  ASSERT_TRUE(server->create("pods", makePod("ns", "a")));
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(eventually([&] { return server->openWatches() == 1; }));
  ASSERT_TRUE(server->restart(/*keepHistory=*/true));
  ASSERT_TRUE(server->create("pods", makePod("ns", "b")));
  ASSERT_TRUE(eventually([&] { return informer.size() == 2; }));
  EXPECT_EQ(informer.stats().lists, 1u) << "history was kept: no relist needed";
  EXPECT_TRUE(mirror.problems().empty());
}

TEST(K8sInformer, RelistsWhenTheApiserverComesBackOnAnOlderRestoredStore) {
  fakes::FakeApiServerOptions o;
  o.tooLargeResourceVersionWait = std::chrono::milliseconds(50);
  auto server = startServer(o);
  auto client = clientFor(*server);
  for (const char* n : {"keep", "change", "drop"}) ASSERT_TRUE(server->create("pods", makePod("ns", n)));
  auto backup = server->backup();
  // Written after the backup: the informer sees them, the restore loses them.
  ASSERT_TRUE(server->create("pods", makePod("ns", "lost")));
  for (int i = 0; i < 4; ++i) {
    json::object patch{{"metadata", {{"annotations", {{"i", std::to_string(i)}}}}}};
    ASSERT_TRUE(server->patch("pods", "ns", "keep", patch));
  }
  Mirror mirror;
  Informer informer(*client, kPods, quick(), mirror.handlers());
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(eventually([&] { return server->openWatches() == 1; }));
  auto seenRv = std::stoull(informer.resourceVersion());
  mirror.takeLog();

  // Held off while the restored store moves on, reusing versions the informer has seen
  // but staying below its version: a watch from there would wait in silence.
  fakes::Fault down;
  down.status = 503;
  down.times = -1;
  server->addFault(down);
  ASSERT_TRUE(server->restoreBackup(backup));
  ASSERT_TRUE(server->remove("pods", "ns", "drop"));
  ASSERT_TRUE(server->patch("pods", "ns", "change", json::parse(R"({"metadata":{"labels":{"v":"2"}}})").as_object()));
  ASSERT_TRUE(server->create("pods", makePod("ns", "born")));
  ASSERT_LT(server->resourceVersion(), seenRv);
  server->clearFaults();

  ASSERT_TRUE(eventually([&] { return cacheState(informer) == serverState(*server); }));
  auto log = mirror.takeLog();
  std::sort(log.begin(), log.end());
  EXPECT_EQ(log, (std::vector<std::string>{"add ns/born", "delete ns/drop", "delete ns/lost",
                                           "update ns/change", "update ns/keep"}));
  EXPECT_EQ(informer.stats().resourceVersionsTooLarge, 1u);
  EXPECT_EQ(informer.stats().lists, 2u);
  // And it watches again from the restored store's versions.
  ASSERT_TRUE(server->create("pods", makePod("ns", "after")));
  ASSERT_TRUE(eventually([&] { return informer.get("ns/after") != nullptr; }));
  EXPECT_EQ(cacheState(informer), serverState(*server));
  EXPECT_TRUE(mirror.problems().empty()) << mirror.problems().front();
}

TEST(K8sInformer, WorksOverTlsWithABearerToken) {
  fakes::FakeApiServerOptions o;
  o.tls = true;
  o.token = "sa-token";
  auto server = startServer(o);
  ASSERT_TRUE(server->create("nodes", testing::makeNode("gpu-1")));
  auto client = clientFor(*server, fastOptions(), "sa-token");
  Informer nodes(*client, kNodes, quick(), {});
  nodes.start();
  ASSERT_TRUE(nodes.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(server->create("nodes", testing::makeNode("gpu-2")));
  ASSERT_TRUE(eventually([&] { return nodes.size() == 2; }));
  EXPECT_NE(nodes.get("gpu-2"), nullptr);
}

TEST(K8sInformer, StopIsPromptAndSafeTwice) {
  auto server = startServer();
  auto client = clientFor(*server);
  Informer informer(*client, kPods, quick(), {});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(eventually([&] { return server->openWatches() == 1; }));
  auto start = std::chrono::steady_clock::now();
  informer.stop();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(K8sInformer, StopInterruptsAListTheServerNeverAnswers) {
  for (bool streaming : {true, false}) {
    SCOPED_TRACE(streaming ? "a streaming list" : "a list");
    auto server = startServer();
    fakes::Fault hang;
    hang.action = fakes::Fault::Action::kHang;
    hang.watch = streaming ? fakes::Fault::Watch::kOnly : fakes::Fault::Watch::kNever;
    server->addFault(hang);
    auto client = clientFor(*server);  // 5 s request timeout: stop must not wait for it
    InformerOptions o = quick();
    o.streamingList = streaming;
    Informer informer(*client, kPods, o, {});
    informer.start();
    ASSERT_TRUE(eventually([&] { return server->requestCount() == 1; }));
    auto start = std::chrono::steady_clock::now();
    informer.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    EXPECT_FALSE(informer.hasSynced());
    server->releaseHangs();
  }
}

TEST(K8sInformer, RandomizedRunKeepsAnExactMirrorThroughBreaksGoneAndRestarts) {
  auto server = startServer();
  auto client = clientFor(*server);  // its backoff runs on a fake clock: instant retries
  std::mt19937 rng(20261202);
  const std::vector<std::string> namespaces = {"a", "b", "c"};
  const std::vector<std::string> nodes = {"", "n1", "n2"};
  int counter = 0;
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  auto createPod = [&] {
    auto ns = namespaces[pick(3)];
    ASSERT_TRUE(server->create("pods", makePod(ns, "pod-" + std::to_string(counter++), nodes[pick(3)])));
  };
  for (int i = 0; i < 30; ++i) createPod();

  Mirror all;
  Mirror onN1;
  Informer everything(*client, kPods, quick(), all.handlers());
  Informer nodeAgent(*client, kPods, quick("spec.nodeName=n1"), onN1.handlers());
  everything.start();
  nodeAgent.start();
  ASSERT_TRUE(everything.waitForSync(std::chrono::seconds(10)));
  ASSERT_TRUE(nodeAgent.waitForSync(std::chrono::seconds(10)));

  int breaks = 0, compactions = 0, restarts = 0, faults = 0;
  for (int step = 0; step < 600; ++step) {
    auto pods = server->list("pods");
    int op = static_cast<int>(pick(100));
    if (op < 30 || pods.empty()) {
      createPod();
    } else if (op < 55) {
      const auto& p = pods[pick(pods.size())];
      json::object patch{{"metadata", {{"annotations", {{"step", std::to_string(step)}}}}}};
      ASSERT_TRUE(server->patch("pods", namespaceOf(p), name(p), patch));
    } else if (op < 70) {
      const auto& p = pods[pick(pods.size())];
      ASSERT_TRUE(server->remove("pods", namespaceOf(p), name(p)));
    } else if (op < 80) {
      const auto& p = pods[pick(pods.size())];
      if (nodeName(p).empty()) {
        ASSERT_TRUE(client->bind({std::string(namespaceOf(p)), std::string(name(p)), nodes[1 + pick(2)], "", {}}));
      }
    } else if (op < 85) {
      server->breakWatches();
      ++breaks;
    } else if (op < 89) {
      server->compactHistory();
      if (pick(2) == 0) server->breakWatches();
      ++compactions;
    } else if (op < 91) {
      ASSERT_TRUE(server->restart(/*keepHistory=*/pick(2) == 0));
      ++restarts;
    } else if (op < 94) {
      fakes::Fault f;
      f.watch = pick(2) == 0 ? fakes::Fault::Watch::kOnly : fakes::Fault::Watch::kNever;
      f.method = "GET";
      f.status = pick(2) == 0 ? 500 : 429;
      f.times = 2;
      server->addFault(f);
      server->breakWatches();
      ++faults;
    }
    if (step % 50 == 49) {
      // Let both catch up now and then so faults also land on settled streams.
      ASSERT_TRUE(eventually([&] { return cacheState(everything) == serverState(*server); }))
          << "step " << step;
    }
  }
  server->clearFaults();
  ASSERT_TRUE(eventually([&] { return cacheState(everything) == serverState(*server); }));
  ASSERT_TRUE(eventually([&] { return cacheState(nodeAgent) == serverState(*server, "n1"); }));
  everything.stop();
  nodeAgent.stop();

  EXPECT_EQ(all.state(), serverState(*server)) << "callbacks alone rebuild the exact state";
  EXPECT_EQ(onN1.state(), serverState(*server, "n1"));
  EXPECT_TRUE(all.problems().empty()) << all.problems().front();
  EXPECT_TRUE(onN1.problems().empty()) << onN1.problems().front();
  for (const auto& p : server->list("pods")) {
    auto cached = everything.get(objectKey(p));
    ASSERT_TRUE(cached);
    EXPECT_EQ(*cached, p) << objectKey(p);
  }
  auto stats = everything.stats();
  EXPECT_GT(stats.lists, 1u) << "410s forced relists";
  EXPECT_GT(stats.watchErrors, 5u);
  EXPECT_GT(breaks + compactions + restarts + faults, 40);
  EXPECT_GT(restarts, 2);
}

}  // namespace
}  // namespace vgpu::k8s
