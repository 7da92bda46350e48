// The REST client against the apiserver double: every verb, and each failure mode.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "test_support.h"
#include "vgpu/k8s/object.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using fakes::Fault;
using testing::FakeClock;
using testing::clientFor;
using testing::fastOptions;
using testing::makeNode;
using testing::makePod;
using testing::startServer;

class K8sClient : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = startServer();
    ASSERT_TRUE(server_);
    clock_ = std::make_shared<FakeClock>();
    client_ = clientFor(*server_, fastOptions(clock_));
    ASSERT_TRUE(client_);
  }
  void seedPod(const std::string& ns, const std::string& name, const std::string& node = "",
               json::object labels = {}) {
    ASSERT_TRUE(server_->create("pods", makePod(ns, name, node, std::move(labels))));
  }
  std::size_t requestsTo(const std::string& path) {
    std::size_t n = 0;
    for (const auto& r : server_->requests()) n += r.path == path;
    return n;
  }

  std::unique_ptr<fakes::FakeApiServer> server_;
  std::shared_ptr<FakeClock> clock_;
  std::unique_ptr<Client> client_;
};

TEST_F(K8sClient, GetsANodeAndAPodWithTypedAccessors) {
  ASSERT_TRUE(server_->create("nodes", makeNode("node1", {{"gpu", "on"}})));
  seedPod("team-a", "train", "node1");
  auto node = client_->get(kNodes, "", "node1");
  ASSERT_TRUE(node) << node.error().describe();
  EXPECT_EQ(name(*node), "node1");
  EXPECT_EQ(label(*node, "gpu"), "on");
  EXPECT_FALSE(uid(*node).empty());
  auto pod = client_->get(kPods, "team-a", "train");
  ASSERT_TRUE(pod) << pod.error().describe();
  EXPECT_EQ(namespaceOf(*pod), "team-a");
  EXPECT_EQ(nodeName(*pod), "node1");
  EXPECT_EQ(podPhase(*pod), "Pending");
  EXPECT_EQ(objectKey(*pod), "team-a/train");
  EXPECT_EQ(std::to_string(server_->resourceVersion()), resourceVersion(*pod));
}

TEST_F(K8sClient, ErrorsCarryVerbPathStatusReasonAndMessage) {
  auto r = client_->get(kPods, "default", "missing");
  ASSERT_FALSE(r);
  const ApiError& e = r.error();
  EXPECT_TRUE(e.isNotFound());
  EXPECT_EQ(e.verb, "GET");
  EXPECT_EQ(e.path, "/api/v1/namespaces/default/pods/missing");
  EXPECT_EQ(e.reason, "NotFound");
  EXPECT_EQ(e.message, "pods \"missing\" not found");
  EXPECT_EQ(e.describe(),
            "GET /api/v1/namespaces/default/pods/missing: HTTP 404 (NotFound): pods \"missing\" not found");
  EXPECT_EQ(requestsTo("/api/v1/namespaces/default/pods/missing"), 1u) << "4xx is not retried";
}

TEST_F(K8sClient, GetTextReturnsABodyThatIsNotJsonAndErrorsLikeGet) {
  auto version = client_->getText("/version");
  ASSERT_TRUE(version) << version.error().describe();
  EXPECT_NE(version->find("gitVersion"), std::string::npos) << *version;
  // A node proxy to a node without an address: the apiserver's 503, with its reason.
  ASSERT_TRUE(server_->create("nodes", makeNode("node1", {})));
  auto proxied = client_->getText("/api/v1/nodes/node1:31992/proxy/metrics");
  ASSERT_FALSE(proxied);
  EXPECT_EQ(proxied.error().httpStatus, 503);
  EXPECT_EQ(proxied.error().reason, "ServiceUnavailable");
  EXPECT_EQ(proxied.error().path, "/api/v1/nodes/node1:31992/proxy/metrics");
  auto missing = client_->getText("/api/v1/nodes/nope:31992/proxy/metrics");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().isNotFound()) << missing.error().describe();
}

TEST_F(K8sClient, ListsWithLabelAndFieldSelectors) {
  seedPod("a", "p1", "node1", {{"app", "x"}});
  seedPod("a", "p2", "node2", {{"app", "x"}});
  seedPod("b", "p3", "", {{"app", "y"}});
  ListOptions byNode;
  byNode.fieldSelector = "spec.nodeName=node1";
  auto r = client_->list(kPods, byNode);
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(name(r->items[0]), "p1");

  ListOptions unscheduled;
  unscheduled.fieldSelector = "spec.nodeName=";
  r = client_->list(kPods, unscheduled);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(name(r->items[0]), "p3");

  ListOptions byLabel;
  byLabel.labelSelector = "app=x";
  byLabel.fieldSelector = "spec.nodeName!=node1";
  r = client_->list(kPods, byLabel);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(name(r->items[0]), "p2");

  ListOptions inNs;
  inNs.ns = "a";
  r = client_->list(kPods, inNs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->resourceVersion, std::to_string(server_->resourceVersion()));
}

TEST_F(K8sClient, SetBasedLabelSelectorsAndUnsupportedFieldsAreServerChecked) {
  seedPod("a", "p1", "", {{"tier", "gold"}});
  seedPod("a", "p2", "", {{"tier", "silver"}});
  seedPod("a", "p3");
  auto names = [&](const std::string& sel) {
    ListOptions o;
    o.labelSelector = sel;
    auto r = client_->list(kPods, o);
    std::string out;
    if (!r) return "error: " + r.error().message;
    for (const auto& i : r->items) out += std::string(name(i)) + " ";
    return out;
  };
  EXPECT_EQ(names("tier in (gold,bronze)"), "p1 ");
  EXPECT_EQ(names("tier notin (gold)"), "p2 p3 ");
  EXPECT_EQ(names("!tier"), "p3 ");
  EXPECT_EQ(names("tier"), "p1 p2 ");
  EXPECT_EQ(names("tier!=gold"), "p2 p3 ");
  ListOptions bad;
  bad.fieldSelector = "spec.bogus=1";
  auto r = client_->list(kPods, bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().httpStatus, 400);
  EXPECT_EQ(r.error().message, "field label not supported: spec.bogus");
}

TEST_F(K8sClient, ListFollowsContinueTokensAcrossPages) {
  for (int i = 0; i < 23; ++i) seedPod("ns", "pod-" + std::to_string(100 + i));
  ListOptions o;
  o.limit = 5;
  auto first = client_->listPage(kPods, o);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->items.size(), 5u);
  EXPECT_FALSE(first->continueToken.empty());
  // A write between pages does not leak into the paged snapshot.
  seedPod("ns", "pod-late");
  auto all = client_->list(kPods, o);
  ASSERT_TRUE(all) << all.error().describe();
  EXPECT_EQ(all->items.size(), 24u);
  EXPECT_TRUE(all->continueToken.empty());
  EXPECT_EQ(requestsTo("/api/v1/pods"), 1u + 5u);
}

TEST_F(K8sClient, PagesAfterTheFirstSendOnlyTheContinueToken) {
  for (int i = 0; i < 7; ++i) seedPod("ns", "pod-" + std::to_string(i));
  const std::string at = std::to_string(server_->resourceVersion());
  seedPod("ns", "pod-later");
  // A version with a limit: the state at exactly that version, in pages. The apiserver
  // refuses a resourceVersion beside a continue token (400), so only the first page names it.
  ListOptions o;
  o.limit = 3;
  o.resourceVersion = at;
  auto all = client_->list(kPods, o);
  ASSERT_TRUE(all) << all.error().describe();
  EXPECT_EQ(all->items.size(), 7u) << "pod-later came after that version";
  EXPECT_EQ(all->resourceVersion, at);
  std::size_t pages = 0;
  for (const auto& r : server_->requests()) {
    if (r.path != "/api/v1/pods") continue;
    ++pages;
    EXPECT_EQ(r.query.find("continue=") == std::string::npos, r.query.find("resourceVersion=") != std::string::npos)
        << r.query;
  }
  EXPECT_EQ(pages, 3u);
}

TEST_F(K8sClient, ExpiredContinueTokenIsGoneForAPageAndRestartsAFullList) {
  for (int i = 0; i < 10; ++i) seedPod("ns", "p" + std::to_string(i));
  ListOptions o;
  o.limit = 4;
  auto first = client_->listPage(kPods, o);
  ASSERT_TRUE(first);
  server_->compactHistory();
  o.continueToken = first->continueToken;
  auto second = client_->listPage(kPods, o);
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error().isGone());
  EXPECT_EQ(second.error().reason, "Expired");

  Fault expire;
  expire.queryContains = "continue=";
  expire.status = 410;
  server_->addFault(expire);
  o.continueToken.clear();
  auto all = client_->list(kPods, o);
  ASSERT_TRUE(all) << all.error().describe();
  EXPECT_EQ(all->items.size(), 10u);
}

TEST_F(K8sClient, PatchMetadataSetsAndRemovesAnnotationsAndLabels) {
  seedPod("default", "p");
  ASSERT_TRUE(server_->patch("pods", "default", "p",
                             json::parse(R"({"metadata":{"annotations":{"old":"1","keep":"k"}}})").as_object()));
  MetadataPatch patch;
  patch.annotations["vgpu.io/assigned"] = "GPU-1,3000,30";
  patch.annotations["old"] = std::nullopt;
  patch.labels["vgpu.io/bound"] = "true";
  auto r = client_->patchMetadata(kPods, "default", "p", patch);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(annotation(*r, "vgpu.io/assigned"), "GPU-1,3000,30");
  EXPECT_EQ(annotation(*r, "keep"), "k");
  EXPECT_FALSE(annotation(*r, "old"));
  EXPECT_EQ(label(*r, "vgpu.io/bound"), "true");
  auto stored = server_->get("pods", "default", "p");
  ASSERT_TRUE(stored);
  EXPECT_EQ(*stored, *r);
  EXPECT_EQ(json::value_to<std::string>(stored->at("spec").at("containers").at(0).at("name")), "main")
      << "a metadata patch leaves the spec alone";
}

TEST_F(K8sClient, PatchWithStaleResourceVersionIsAConflictTheCallerSees) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  auto node = client_->get(kNodes, "", "n1");
  ASSERT_TRUE(node);
  std::string rv(resourceVersion(*node));
  MetadataPatch first;
  first.annotations["vgpu.io/devices"] = "a";
  first.resourceVersion = rv;
  auto ok = client_->patchMetadata(kNodes, "", "n1", first);
  ASSERT_TRUE(ok) << ok.error().describe();
  EXPECT_NE(resourceVersion(*ok), rv);

  MetadataPatch stale;
  stale.annotations["vgpu.io/devices"] = "b";
  stale.resourceVersion = rv;
  auto conflict = client_->patchMetadata(kNodes, "", "n1", stale);
  ASSERT_FALSE(conflict);
  EXPECT_TRUE(conflict.error().isConflict());
  EXPECT_EQ(conflict.error().verb, "PATCH");
  EXPECT_EQ(conflict.error().path, "/api/v1/nodes/n1");
  EXPECT_NE(conflict.error().message.find("the object has been modified"), std::string::npos);
  EXPECT_EQ(annotation(*server_->get("nodes", "", "n1"), "vgpu.io/devices"), "a");
  EXPECT_EQ(requestsTo("/api/v1/nodes/n1"), 3u) << "409 is the caller's decision, not retried";
}

TEST_F(K8sClient, NoOpPatchKeepsTheResourceVersion) {
  seedPod("default", "p");
  MetadataPatch patch;
  patch.annotations["a"] = "1";
  auto first = client_->patchMetadata(kPods, "default", "p", patch);
  ASSERT_TRUE(first);
  auto again = client_->patchMetadata(kPods, "default", "p", patch);
  ASSERT_TRUE(again);
  EXPECT_EQ(resourceVersion(*first), resourceVersion(*again));
}

TEST_F(K8sClient, BindSetsNodeNameAndAnnotationsAndRefusesASecondBind) {
  seedPod("default", "p");
  std::string podUid(uid(*server_->get("pods", "default", "p")));
  BindRequest bind{"default", "p", "node7", podUid, {{"vgpu.io/assignment", "x"}}};
  auto ok = client_->bind(bind);
  ASSERT_TRUE(ok) << ok.error().describe();
  auto pod = server_->get("pods", "default", "p");
  EXPECT_EQ(nodeName(*pod), "node7");
  EXPECT_EQ(annotation(*pod, "vgpu.io/assignment"), "x");

  bind.node = "node8";
  auto again = client_->bind(bind);
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().isConflict());
  EXPECT_EQ(again.error().verb, "POST");
  EXPECT_EQ(again.error().path, "/api/v1/namespaces/default/pods/p/binding");
  EXPECT_NE(again.error().message.find("already assigned to node \"node7\""), std::string::npos);
}

TEST_F(K8sClient, BindWithAStaleUidIsAConflict) {
  seedPod("default", "p");
  auto r = client_->bind({"default", "p", "n1", "not-the-uid", {}});
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isConflict());
  EXPECT_TRUE(nodeName(*server_->get("pods", "default", "p")).empty());
}

TEST_F(K8sClient, CreatesAnEventAboutAPod) {
  seedPod("team", "p");
  EventSpec e;
  e.kind = "Pod";
  e.ns = "team";
  e.name = "p";
  e.uid = "u-1";
  e.type = "Warning";
  e.reason = "FilteringFailed";
  e.message = "no node has 3000 MiB free";
  e.component = "vgpu-scheduler";
  e.host = "sched-0";
  auto r = client_->createEvent(e);
  ASSERT_TRUE(r) << r.error().describe();
  auto events = server_->list("events");
  ASSERT_EQ(events.size(), 1u);
  const auto& ev = events[0];
  EXPECT_EQ(namespaceOf(ev), "team");
  EXPECT_EQ(name(ev).rfind("p.", 0), 0u);
  EXPECT_EQ(ev.at("involvedObject").at("name"), "p");
  EXPECT_EQ(ev.at("involvedObject").at("uid"), "u-1");
  EXPECT_EQ(ev.at("reason"), "FilteringFailed");
  EXPECT_EQ(ev.at("type"), "Warning");
  EXPECT_EQ(ev.at("source").at("component"), "vgpu-scheduler");
  EXPECT_EQ(ev.at("count"), 1);

  EventSpec nodeEvent{"Node", "", "n1", "", "v1", "Normal", "Registered", "4 devices", "vgpu-agent", "n1"};
  auto r2 = client_->createEvent(nodeEvent);
  ASSERT_TRUE(r2) << r2.error().describe();
  EXPECT_EQ(namespaceOf(*r2), "default") << "events about cluster-scoped objects go to default";
}

TEST_F(K8sClient, CreatesAndRemovesPodsAndReportsDuplicates) {
  auto created = client_->create(kPods, "default", makePod("default", "p"));
  ASSERT_TRUE(created) << created.error().describe();
  EXPECT_FALSE(uid(*created).empty());
  auto dup = client_->create(kPods, "default", makePod("default", "p"));
  ASSERT_FALSE(dup);
  EXPECT_TRUE(dup.error().isConflict());
  EXPECT_EQ(dup.error().reason, "AlreadyExists");
  ASSERT_TRUE(client_->remove(kPods, "default", "p"));
  EXPECT_FALSE(server_->get("pods", "default", "p"));
  auto gone = client_->remove(kPods, "default", "p");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().isNotFound());
}

TEST_F(K8sClient, RetriesServerErrorsWithGrowingJitteredBackoff) {
  seedPod("default", "p");
  Fault f;
  f.pathPrefix = "/api/v1/namespaces/default/pods/p";
  f.status = 503;
  f.times = 3;
  server_->addFault(f);
  auto r = client_->get(kPods, "default", "p");
  ASSERT_TRUE(r) << r.error().describe();
  auto sleeps = clock_->sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  for (std::size_t i = 0; i < sleeps.size(); ++i) {
    auto cap = std::chrono::milliseconds(100 << i);
    EXPECT_GE(sleeps[i], cap / 2) << "attempt " << i;
    EXPECT_LE(sleeps[i], cap) << "attempt " << i;
  }
}

TEST(K8sClientErrors, ATooLargeResourceVersionIsKnownByItsCauseOrAnOlderServersMessage) {
  struct Case {
    const char* what;
    ApiError error;
    bool tooLarge;
  };
  const Case cases[] = {
      {"1.18.6 and later: the cause", {"GET", "/", 504, "Timeout", "Timeout: Too large resource version: 9, current: 5", {"ResourceVersionTooLarge"}}, true},
      {"before 1.18.6: only the message", {"GET", "/", 504, "Timeout", "Timeout: Too large resource version: 9, current: 5", {}}, true},
      {"a plain gateway timeout", {"GET", "/", 504, "Timeout", "the request timed out", {}}, false},
      {"another status with that cause", {"GET", "/", 500, "InternalError", "x", {"ResourceVersionTooLarge"}}, false},
  };
  for (const auto& c : cases) EXPECT_EQ(c.error.isResourceVersionTooLarge(), c.tooLarge) << c.what;
}

TEST_F(K8sClient, RetriesAGatewayTimeoutThatIsNotAboutTheVersion) {
  seedPod("default", "p");
  Fault f;
  f.status = 504;
  f.times = 2;
  server_->addFault(f);
  auto r = client_->get(kPods, "default", "p");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(server_->requestCount(), 3u) << "2 refused + 1 served";
}

TEST_F(K8sClient, GivesUpAfterMaxRetriesWithTheLastStatus) {
  Fault f;
  f.status = 500;
  f.times = -1;
  server_->addFault(f);
  auto r = client_->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().httpStatus, 500);
  EXPECT_EQ(r.error().reason, "InternalError");
  EXPECT_EQ(server_->requestCount(), 6u) << "1 attempt + maxRetries (5)";
  for (auto d : clock_->sleeps()) EXPECT_LE(d, std::chrono::milliseconds(2000)) << "backoffMax caps";
}

TEST_F(K8sClient, HonoursRetryAfterOnTooManyRequests) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  Fault f;
  f.status = 429;
  f.retryAfterSeconds = 3;
  server_->addFault(f);
  auto r = client_->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(clock_->sleeps().size(), 1u);
  EXPECT_EQ(clock_->sleeps()[0], std::chrono::seconds(3));
}

TEST_F(K8sClient, RetriesDroppedConnections) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  Fault f;
  f.action = Fault::Action::kDrop;
  f.times = 2;
  server_->addFault(f);
  auto r = client_->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(requestsTo("/api/v1/nodes/n1"), 3u);
}

TEST_F(K8sClient, ConnectionRefusedIsATransportErrorAfterRetries) {
  std::string url = server_->url();
  server_->stop();
  auto r = client_->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isTransport());
  EXPECT_NE(r.error().message.find("6 attempts"), std::string::npos) << r.error().message;
  EXPECT_EQ(clock_->sleeps().size(), 5u);
}

TEST_F(K8sClient, TimesOutWhenTheServerHangs) {
  Fault f;
  f.action = Fault::Action::kHang;
  server_->addFault(f);
  auto options = fastOptions();
  options.requestTimeout = std::chrono::milliseconds(200);
  options.maxRetries = 0;
  auto client = clientFor(*server_, options);
  auto start = std::chrono::steady_clock::now();
  auto r = client->get(kNodes, "", "n1");
  auto took = std::chrono::steady_clock::now() - start;
  server_->releaseHangs();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isTransport());
  EXPECT_NE(r.error().message.find("no response within 200 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST_F(K8sClient, RateLimitSpacesRequestsAfterTheBurst) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  auto options = fastOptions(clock_);
  options.qps = 10;
  options.burst = 2;
  auto client = clientFor(*server_, options);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(client->get(kNodes, "", "n1"));
  // Two free, then one every 100 ms.
  auto slept = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->slept());
  EXPECT_NEAR(static_cast<double>(slept.count()), 400.0, 1.0);
}

TEST_F(K8sClient, DefaultRateLimitDoesNotThrottleASchedulerBurst) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  ClientOptions defaults;
  defaults.clock = clock_;
  auto client = clientFor(*server_, defaults);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(client->get(kNodes, "", "n1"));
  EXPECT_TRUE(clock_->sleeps().empty()) << "300 back-to-back calls waited on the rate limiter";
}

TEST_F(K8sClient, ReusesKeepAliveConnections) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(client_->get(kNodes, "", "n1"));
  EXPECT_EQ(client_->connectionsOpened(), 1u);
  EXPECT_EQ(server_->connectionsAccepted(), 1u);
}

TEST_F(K8sClient, ConcurrentCallersGetTheirOwnConnections) {
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 30; ++i) {
        if (!client_->get(kNodes, "", "n1")) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(client_->connectionsOpened(), 6u) << "connections are pooled, not opened per call";
}

TEST_F(K8sClient, RereadsARotatedTokenFileOnUnauthorized) {
  testing::TempDir dir;
  std::string tokenFile = dir.write("token", "old-token\n");
  server_->setToken("old-token");
  ClientConfig cfg;
  cfg.server = server_->url();
  cfg.tokenFile = tokenFile;
  auto client = Client::create(cfg, fastOptions(clock_));
  ASSERT_TRUE(client);
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  ASSERT_TRUE((*client)->get(kNodes, "", "n1"));
  server_->setToken("new-token");
  dir.write("token", "new-token\n");
  auto r = (*client)->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  auto reqs = server_->requests();
  ASSERT_GE(reqs.size(), 2u);
  EXPECT_EQ(reqs[reqs.size() - 2].status, 401);
  EXPECT_EQ(reqs.back().status, 200);
  EXPECT_TRUE(clock_->sleeps().empty()) << "a token refresh is not a backoff";
}

TEST_F(K8sClient, RereadsTheTokenFilePeriodically) {
  testing::TempDir dir;
  std::string tokenFile = dir.write("token", "t1");
  server_->setToken("t1");
  ASSERT_TRUE(server_->create("nodes", makeNode("n1")));
  ClientConfig cfg;
  cfg.server = server_->url();
  cfg.tokenFile = tokenFile;
  auto client = Client::create(cfg, fastOptions(clock_));
  ASSERT_TRUE(client);
  ASSERT_TRUE((*client)->get(kNodes, "", "n1"));
  dir.write("token", "t2");
  server_->setToken("t2");
  clock_->advance(std::chrono::seconds(61));
  ASSERT_TRUE((*client)->get(kNodes, "", "n1"));
  for (const auto& r : server_->requests()) EXPECT_NE(r.status, 401) << r.path;
}

TEST_F(K8sClient, AWrongTokenIsUnauthorized) {
  server_->setToken("right");
  auto client = clientFor(*server_, fastOptions(), "wrong");
  auto r = client->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isUnauthorized());
  EXPECT_EQ(r.error().reason, "Unauthorized");
}

TEST(K8sClientTls, VerifiesTheServerAgainstTheGivenCa) {
  fakes::FakeApiServerOptions o;
  o.tls = true;
  o.token = "secret";
  auto server = startServer(o);
  ASSERT_TRUE(server);
  ASSERT_EQ(server->url().rfind("https://127.0.0.1:", 0), 0u);
  ASSERT_TRUE(server->create("nodes", makeNode("n1")));
  auto client = clientFor(*server, fastOptions(), "secret");
  auto r = client->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(name(*r), "n1");
}

TEST(K8sClientTls, RefusesAServerSignedByAnotherCa) {
  fakes::FakeApiServerOptions o;
  o.tls = true;
  auto server = startServer(o);
  auto other = startServer(o);
  ASSERT_TRUE(server && other);
  ClientConfig cfg;
  cfg.server = server->url();
  cfg.caPem = other->caPem();
  auto options = fastOptions();
  options.maxRetries = 0;
  auto client = Client::create(cfg, options);
  ASSERT_TRUE(client);
  auto r = (*client)->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isTransport());
  EXPECT_NE(r.error().message.find("TLS handshake"), std::string::npos) << r.error().message;
}

TEST(K8sClientTls, ChecksTheServerName) {
  fakes::FakeApiServerOptions o;
  o.tls = true;
  auto server = startServer(o);
  ASSERT_TRUE(server);
  ClientConfig cfg;
  cfg.server = server->url();
  cfg.caPem = server->caPem();
  cfg.tlsServerName = "kubernetes.default.svc";
  auto options = fastOptions();
  options.maxRetries = 0;
  auto client = Client::create(cfg, options);
  ASSERT_TRUE(client);
  EXPECT_FALSE((*client)->get(kNodes, "", "n1"));
  cfg.tlsServerName = "localhost";
  auto named = Client::create(cfg, options);
  ASSERT_TRUE(named);
  auto r = (*named)->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isNotFound()) << "the handshake passed: " << r.error().describe();
}

TEST(K8sClientConfig, RejectsAMalformedServerAndBadPem) {
  ClientConfig cfg;
  cfg.server = "ftp://example";
  cfg.source = "kubeconfig /x";
  auto c = Client::create(cfg);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("ftp://example"), std::string::npos);
  EXPECT_NE(c.error().message.find("kubeconfig /x"), std::string::npos);
  cfg.server = "https://127.0.0.1:6443";
  cfg.caPem = "not a pem";
  c = Client::create(cfg);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("CA certificate"), std::string::npos) << c.error().message;
}

TEST_F(K8sClient, TheDocumentedCallFormsWork) {
  // The forms shown in docs/kubernetes-client.md, so the examples stay compilable.
  seedPod("ml", "p");
  auto pod = client_->get(kPods, "ml", "p");
  ASSERT_TRUE(pod);
  MetadataPatch patch;
  patch.annotations["vgpu.io/assigned"] = "{}";
  patch.annotations["vgpu.io/bind-phase"] = std::nullopt;
  patch.resourceVersion = std::string(resourceVersion(*pod));
  ASSERT_TRUE(client_->patchMetadata(kPods, "ml", "p", patch));
  auto s = client_->bind({.ns = "ml", .pod = "p", .node = "gpu-1",
                          .uid = std::string(uid(*pod)),
                          .annotations = {{"vgpu.io/assigned", "{}"}}});
  ASSERT_TRUE(s) << s.error().describe();
  auto e = client_->createEvent({.kind = "Pod", .ns = "ml", .name = "p", .uid = std::string(uid(*pod)),
                                 .type = "Warning", .reason = "FilteringFailed",
                                 .message = "no node has 3000 MiB free on one GPU",
                                 .component = "vgpu-scheduler", .host = "sched-0"});
  ASSERT_TRUE(e) << e.error().describe();
  EXPECT_EQ(nodeName(*server_->get("pods", "ml", "p")), "gpu-1");
}

// ---- watch ----

TEST_F(K8sClient, WatchDeliversChangesAfterTheListVersion) {
  seedPod("default", "before");
  auto list = client_->list(kPods, {});
  ASSERT_TRUE(list);
  seedPod("default", "p");
  ASSERT_TRUE(server_->patch("pods", "default", "p", json::parse(R"({"metadata":{"labels":{"x":"1"}}})").as_object()));
  ASSERT_TRUE(server_->remove("pods", "default", "p"));
  std::vector<std::pair<WatchEventType, std::string>> seen;
  WatchOptions wo;
  wo.resourceVersion = list->resourceVersion;
  auto s = client_->watch(kPods, wo, [&](WatchEvent&& e) {
    seen.emplace_back(e.type, std::string(name(e.object)) + "@" + std::string(resourceVersion(e.object)));
    return seen.size() < 3;
  });
  ASSERT_TRUE(s) << s.error().describe();
  ASSERT_EQ(seen.size(), 3u);
  auto rv = std::stoull(list->resourceVersion);
  EXPECT_EQ(seen[0], std::make_pair(WatchEventType::kAdded, "p@" + std::to_string(rv + 1)));
  EXPECT_EQ(seen[1], std::make_pair(WatchEventType::kModified, "p@" + std::to_string(rv + 2)));
  EXPECT_EQ(seen[2], std::make_pair(WatchEventType::kDeleted, "p@" + std::to_string(rv + 3)));
}

TEST_F(K8sClient, WatchFromACompactedVersionIsGone) {
  seedPod("default", "p");
  std::string old = std::to_string(server_->resourceVersion() - 1);
  server_->compactHistory();
  WatchOptions wo;
  wo.resourceVersion = old;
  auto s = client_->watch(kPods, wo, [](WatchEvent&&) { return true; });
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error().isGone());
  EXPECT_EQ(s.error().reason, "Expired");
  EXPECT_NE(s.error().message.find("too old resource version"), std::string::npos);
}

TEST_F(K8sClient, WatchFailureStatusesComeBackAsErrors) {
  Fault f;
  f.watch = Fault::Watch::kOnly;
  f.status = 410;
  server_->addFault(f);
  WatchOptions wo;
  wo.resourceVersion = "1";
  auto s = client_->watch(kPods, wo, [](WatchEvent&&) { return true; });
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error().isGone());
  f.status = 500;
  server_->addFault(f);
  s = client_->watch(kPods, wo, [](WatchEvent&&) { return true; });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().httpStatus, 500);
  EXPECT_EQ(s.error().verb, "GET");
  EXPECT_NE(s.error().path.find("watch=true"), std::string::npos);
}

TEST_F(K8sClient, ABrokenWatchStreamIsATransportError) {
  WatchOptions wo;
  wo.resourceVersion = std::to_string(server_->resourceVersion());
  std::atomic<int> events{0};
  ApiStatus result;
  std::thread watcher([&] {
    result = client_->watch(kPods, wo, [&](WatchEvent&&) {
      ++events;
      return true;
    });
  });
  ASSERT_TRUE(testing::eventually([&] { return server_->openWatches() == 1; }));
  seedPod("default", "p");
  ASSERT_TRUE(testing::eventually([&] { return events.load() == 1; }));
  server_->breakWatches();
  watcher.join();
  ASSERT_FALSE(result);
  EXPECT_TRUE(result.error().isTransport()) << result.error().describe();
}

TEST_F(K8sClient, CancellingAWatchReturnsPromptly) {
  CancelToken cancel;
  ApiStatus result(ApiError{"x", "x", 1, "", "", {}});
  WatchOptions wo;
  wo.resourceVersion = std::to_string(server_->resourceVersion());
  std::thread watcher([&] {
    result = client_->watch(kPods, wo, [](WatchEvent&&) { return true; }, &cancel);
  });
  ASSERT_TRUE(testing::eventually([&] { return server_->openWatches() == 1; }));
  cancel.cancel();
  watcher.join();
  EXPECT_TRUE(result);
}

TEST_F(K8sClient, AHungWatchTimesOut) {
  Fault f;
  f.action = Fault::Action::kHang;
  f.watch = Fault::Watch::kOnly;
  server_->addFault(f);
  auto options = fastOptions();
  options.requestTimeout = std::chrono::milliseconds(200);
  auto client = clientFor(*server_, options);
  WatchOptions wo;
  wo.resourceVersion = "1";
  auto s = client->watch(kPods, wo, [](WatchEvent&&) { return true; });
  server_->releaseHangs();
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error().isTransport()) << s.error().describe();
}

TEST_F(K8sClient, WatchEndsCleanlyWhenTheServerTimesItOut) {
  WatchOptions wo;
  wo.resourceVersion = std::to_string(server_->resourceVersion());
  wo.timeoutSeconds = 1;
  auto s = client_->watch(kPods, wo, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(s) << s.error().describe();
}

TEST_F(K8sClient, AFieldSelectedWatchSeesBindingAsDeleted) {
  seedPod("default", "pending");
  WatchOptions wo;
  wo.fieldSelector = "spec.nodeName=";
  wo.resourceVersion = std::to_string(server_->resourceVersion());
  ASSERT_TRUE(client_->bind({"default", "pending", "n1", "", {}}));
  std::vector<WatchEventType> seen;
  auto s = client_->watch(kPods, wo, [&](WatchEvent&& e) {
    seen.push_back(e.type);
    EXPECT_EQ(nodeName(e.object), "n1");
    return false;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(seen, std::vector<WatchEventType>{WatchEventType::kDeleted});
}

TEST(K8sClientWatch, BookmarksCarryTheResourceVersion) {
  fakes::FakeApiServerOptions o;
  o.bookmarkInterval = std::chrono::milliseconds(20);
  auto server = startServer(o);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->create("nodes", makeNode("n1")));
  ASSERT_TRUE(server->create("pods", makePod("default", "p")));  // a later write of another kind
  auto client = clientFor(*server);
  WatchOptions wo;
  wo.resourceVersion = std::to_string(server->resourceVersion() - 1);
  WatchEvent got;
  auto s = client->watch(kNodes, wo, [&](WatchEvent&& e) {
    got = std::move(e);
    return false;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(got.type, WatchEventType::kBookmark);
  EXPECT_EQ(resourceVersion(got.object), std::to_string(server->resourceVersion()));
}

// ---- bounded input (issue 26 item 5) ----

/// A peer in the apiserver's place that answers every request with `head` and then sends
/// `'x'` bytes, never a newline, until the client hangs up or `cap` bytes were sent; counts
/// what it sent.
class EndlessPeer {
 public:
  EndlessPeer(std::string head, std::size_t cap) : head_(std::move(head)), cap_(cap) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "cannot listen";
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~EndlessPeer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::size_t sent() const { return sent_.load(); }

 private:
  void serve() {
    for (;;) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char req[4096];
      (void)::recv(c, req, sizeof req, 0);
      std::string chunk(64 * 1024, 'x');
      bool ok = ::send(c, head_.data(), head_.size(), MSG_NOSIGNAL) > 0;
      const bool chunked = head_.find("chunked") != std::string::npos;
      while (ok && sent_.load() < cap_) {
        std::string piece = chunked ? "10000\r\n" + chunk + "\r\n" : chunk;
        ok = ::send(c, piece.data(), piece.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(piece.size());
        if (ok) sent_ += chunk.size();
      }
      ::close(c);
    }
  }
  std::string head_;
  std::size_t cap_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<std::size_t> sent_{0};
  std::thread thread_;
};

std::unique_ptr<Client> clientOf(const std::string& url, ClientOptions o) {
  ClientConfig cfg;
  cfg.server = url;
  cfg.source = "test";
  o.maxRetries = 0;
  auto c = Client::create(cfg, std::move(o));
  if (!c) ADD_FAILURE() << c.error().message;
  return c ? std::move(*c) : nullptr;
}

constexpr std::size_t kCap = std::size_t{256} << 20;  // what the peer would send at most

TEST(K8sClientSecurity, AWatchLineWithoutEndIsCutAtTheLimitNamingIt) {
  EndlessPeer peer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", kCap);
  ClientOptions o = fastOptions();
  o.maxWatchEventBytes = 1 << 20;
  auto client = clientOf(peer.url(), o);
  WatchOptions wo;
  auto status = client->watch(kPods, wo, [](WatchEvent&&) { return true; }, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("1048576 bytes"), std::string::npos) << status.error().message;
  EXPECT_NE(status.error().message.find("maxWatchEventBytes"), std::string::npos) << status.error().message;
  EXPECT_LT(peer.sent(), std::size_t{16} << 20) << "the client read on past its limit";
}

TEST(K8sClientSecurity, AResponseBodyOverTheLimitFailsTheRequestNamingIt) {
  EndlessPeer peer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(kCap) +
                       "\r\n\r\n",
                   kCap);
  ClientOptions o = fastOptions();
  o.maxResponseBytes = 1 << 20;
  auto client = clientOf(peer.url(), o);
  auto r = client->get(kPods, "default", "big");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("larger than 1048576 bytes"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("maxResponseBytes"), std::string::npos) << r.error().message;
  EXPECT_LT(peer.sent(), std::size_t{16} << 20) << "the client read on past its limit";
}

}  // namespace
}  // namespace vgpu::k8s
