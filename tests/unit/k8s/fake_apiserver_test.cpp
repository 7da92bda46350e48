// The apiserver double's own contract: what other engineers' tests rely on.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mutex>
#include <thread>

#include "test_support.h"
#include "vgpu/k8s/object.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using testing::clientFor;
using testing::eventually;
using testing::makeNode;
using testing::makePod;
using testing::startServer;
using testing::TempDir;

// One HTTP/1.1 exchange over a plain socket, for requests the client never sends.
std::string rawHttp(std::uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  std::size_t sent = 0;
  while (sent < request.size()) {
    auto n = ::write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string request(const std::string& method, const std::string& path, const std::string& contentType,
                    const std::string& body) {
  return method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: " +
         contentType + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(K8sFakeApiServer, MergePatchFollowsRfc7386) {
  auto server = startServer();
  auto pod = makePod("ns", "p");
  pod["metadata"].as_object()["annotations"] = {{"drop", "x"}, {"keep", "y"}};
  pod["spec"].as_object()["tolerations"] = json::array{1, 2, 3};
  ASSERT_TRUE(server->create("pods", pod));
  auto r = server->patch("pods", "ns", "p", json::parse(R"({
      "metadata": {"annotations": {"drop": null, "add": "z"}, "name": "renamed", "uid": "forged"},
      "spec": {"tolerations": [9], "nodeName": "n1"}})").as_object());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("metadata").at("annotations"), json::parse(R"({"keep":"y","add":"z"})"));
  EXPECT_EQ(r->at("spec").at("tolerations"), json::parse("[9]")) << "lists are replaced whole";
  EXPECT_EQ(r->at("spec").at("nodeName"), "n1");
  EXPECT_EQ(name(*r), "p") << "identity is immutable";
  EXPECT_NE(uid(*r), "forged");
}

TEST(K8sFakeApiServer, OneResourceVersionCounterAcrossKinds) {
  auto server = startServer();
  auto node = server->create("nodes", makeNode("n"));
  auto pod = server->create("pods", makePod("ns", "p"));
  ASSERT_TRUE(node && pod);
  EXPECT_EQ(std::stoull(std::string(resourceVersion(*pod))),
            std::stoull(std::string(resourceVersion(*node))) + 1);
  EXPECT_EQ(server->resourceVersion(), std::stoull(std::string(resourceVersion(*pod))));
}

TEST(K8sFakeApiServer, LoadsYamlAndJsonFixturesIncludingLists) {
  TempDir dir;
  dir.write("10-nodes.yaml",
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels: {gpu: \"true\"}\n"
            "---\napiVersion: v1\nkind: Node\nmetadata: {name: gpu-2}\n"
            "status: {capacity: {nvidia.com/gpu: 4}, allocatable: {cpu: '8'}}\n");
  dir.write("20-pods.json", R"({"apiVersion":"v1","kind":"PodList","items":[
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ml"},"spec":{"nodeName":"gpu-1"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}]})");
  dir.write("README.txt", "ignored");
  auto server = startServer();
  auto s = server->loadFixtures(dir.path());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(server->list("nodes").size(), 2u);
  EXPECT_EQ(server->list("pods").size(), 2u);
  auto n1 = server->get("nodes", "", "gpu-1");
  ASSERT_TRUE(n1);
  EXPECT_EQ(label(*n1, "gpu"), "true") << "a quoted YAML scalar stays a string";
  auto n2 = server->get("nodes", "", "gpu-2");
  EXPECT_EQ(n2->at("status").at("capacity").at("nvidia.com/gpu"), 4);
  EXPECT_EQ(n2->at("status").at("allocatable").at("cpu"), "8");
  auto b = server->get("pods", "default", "b");
  ASSERT_TRUE(b) << "a pod without a namespace lands in default";
  EXPECT_EQ(podPhase(*b), "Pending");
}

TEST(K8sFakeApiServer, FixtureErrorsNameTheFile) {
  TempDir dir;
  auto server = startServer();
  dir.write("deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n");
  auto s = server->loadFixtures(dir.path());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("deploy.yaml"), std::string::npos);
  EXPECT_NE(s.error().message.find("Deployment"), std::string::npos);
  TempDir broken;
  broken.write("bad.yaml", "kind: [\n");
  s = server->loadFixtures(broken.path());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("bad.yaml"), std::string::npos);
  EXPECT_NE(s.error().message.find("line"), std::string::npos);
  s = server->loadFixtures(dir.path() + "/missing");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("missing"), std::string::npos);
}

TEST(K8sFakeApiServer, TheEvictionSubresourceDeletesThePodNamedByAPolicyV1Eviction) {
  auto server = startServer();
  ASSERT_TRUE(server->create("pods", makePod("ns", "p")));
  auto evict = [&](const std::string& pod, const std::string& body) {
    return rawHttp(server->port(),
                   request("POST", "/api/v1/namespaces/ns/pods/" + pod + "/eviction", "application/json", body));
  };
  auto otherName = evict("p", R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"q","namespace":"ns"}})");
  EXPECT_EQ(otherName.rfind("HTTP/1.1 400", 0), 0u) << otherName;
  auto notEviction = evict("p", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}})");
  EXPECT_EQ(notEviction.rfind("HTTP/1.1 400", 0), 0u) << notEviction;
  EXPECT_TRUE(server->get("pods", "ns", "p"));
  auto ok = evict("p", R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"ns"}})");
  EXPECT_EQ(ok.rfind("HTTP/1.1 201", 0), 0u) << ok;
  EXPECT_NE(ok.find(R"("status":"Success")"), std::string::npos) << ok;
  EXPECT_FALSE(server->get("pods", "ns", "p"));
  auto gone = evict("p", R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"ns"}})");
  EXPECT_EQ(gone.rfind("HTTP/1.1 404", 0), 0u) << gone;
}

TEST(K8sFakeApiServer, MalformedRequestsGetStatusObjects) {
  auto server = startServer();
  ASSERT_TRUE(server->create("pods", makePod("ns", "p")));
  auto jsonPatch = rawHttp(server->port(), request("PATCH", "/api/v1/namespaces/ns/pods/p",
                                                   "application/json-patch+json", "[]"));
  EXPECT_EQ(jsonPatch.rfind("HTTP/1.1 415", 0), 0u) << jsonPatch;
  EXPECT_NE(jsonPatch.find(R"("kind":"Status")"), std::string::npos);
  auto badJson = rawHttp(server->port(), request("POST", "/api/v1/namespaces/ns/pods",
                                                 "application/json", "{not json"));
  EXPECT_EQ(badJson.rfind("HTTP/1.1 400", 0), 0u) << badJson;
  auto noName = rawHttp(server->port(), request("POST", "/api/v1/namespaces/ns/pods",
                                                "application/json", R"({"kind":"Pod"})"));
  EXPECT_EQ(noName.rfind("HTTP/1.1 422", 0), 0u) << noName;
  auto unknown = rawHttp(server->port(), request("GET", "/api/v1/deployments", "application/json", ""));
  EXPECT_EQ(unknown.rfind("HTTP/1.1 404", 0), 0u) << unknown;
  auto badLimit = rawHttp(server->port(), request("GET", "/api/v1/pods?limit=x", "application/json", ""));
  EXPECT_EQ(badLimit.rfind("HTTP/1.1 400", 0), 0u) << badLimit;
  auto garbage = rawHttp(server->port(), "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(garbage.find("200 OK"), std::string::npos);
  // Still serving after all that.
  auto client = clientFor(*server);
  EXPECT_TRUE(client->get(kPods, "ns", "p"));
}

TEST(K8sFakeApiServer, WatchWithoutAVersionStartsWithTheCurrentObjects) {
  auto server = startServer();
  ASSERT_TRUE(server->create("nodes", makeNode("a")));
  ASSERT_TRUE(server->create("nodes", makeNode("b")));
  auto client = clientFor(*server);
  std::vector<std::string> seen;
  auto s = client->watch(kNodes, {}, [&](WatchEvent&& e) {
    EXPECT_EQ(e.type, WatchEventType::kAdded);
    seen.emplace_back(name(e.object));
    return seen.size() < 2;
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

// The body of a raw HTTP response (for one that is not chunked).
json::object statusBody(const std::string& raw) {
  return json::parse(raw.substr(raw.find("\r\n\r\n") + 4)).as_object();
}

void expectTooLargeStatus(const json::object& status, std::uint64_t asked, std::uint64_t current) {
  EXPECT_EQ(status.at("kind"), "Status");
  EXPECT_EQ(status.at("status"), "Failure");
  EXPECT_EQ(status.at("code"), 504);
  EXPECT_EQ(status.at("reason"), "Timeout");
  EXPECT_EQ(status.at("message"), json::value("Timeout: Too large resource version: " + std::to_string(asked) +
                                                  ", current: " + std::to_string(current)));
  EXPECT_EQ(status.at("details"), json::parse(R"({"causes":[{"reason":"ResourceVersionTooLarge",
      "message":"Too large resource version"}],"retryAfterSeconds":1})"));
}

fakes::FakeApiServerOptions tooLargeWait(std::chrono::milliseconds wait) {
  fakes::FakeApiServerOptions o;
  o.tooLargeResourceVersionWait = wait;
  return o;
}

TEST(K8sFakeApiServer, AListFromAVersionTheStoreLacksWaitsThenAnswersTooLarge) {
  auto server = startServer(tooLargeWait(std::chrono::milliseconds(100)));
  ASSERT_TRUE(server->create("pods", makePod("ns", "p")));
  auto rv = server->resourceVersion();
  for (std::string match : {"", "&resourceVersionMatch=NotOlderThan"}) {
    auto start = std::chrono::steady_clock::now();
    auto raw = rawHttp(server->port(), request("GET", "/api/v1/pods?resourceVersion=" + std::to_string(rv + 5) + match,
                                               "application/json", ""));
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100)) << "waits first";
    ASSERT_EQ(raw.rfind("HTTP/1.1 504", 0), 0u) << raw;
    EXPECT_NE(raw.find("Retry-After: 1\r\n"), std::string::npos) << raw;
    expectTooLargeStatus(statusBody(raw), rv + 5, rv);
  }

  auto client = clientFor(*server);
  ListOptions ahead;
  ahead.resourceVersion = std::to_string(rv + 1);
  auto before = server->requestCount();
  auto r = client->listPage(kPods, ahead);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isResourceVersionTooLarge()) << r.error().describe();
  EXPECT_EQ(r.error().causes, std::vector<std::string>{"ResourceVersionTooLarge"});
  EXPECT_EQ(server->requestCount() - before, 1u) << "the client does not ask again";

  for (std::string served : {std::string("0"), std::to_string(rv), std::to_string(rv - 1)}) {
    ListOptions lo;
    lo.resourceVersion = served;
    EXPECT_TRUE(client->listPage(kPods, lo)) << served;
  }
}

TEST(K8sFakeApiServer, AListWaitingForANewerVersionIsServedOnceTheStoreGetsThere) {
  auto server = startServer(tooLargeWait(std::chrono::seconds(5)));
  auto rv = server->resourceVersion();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(server->create("pods", makePod("ns", "a")));
    ASSERT_TRUE(server->create("pods", makePod("ns", "b")));
  });
  auto client = clientFor(*server);
  ListOptions lo;
  lo.resourceVersion = std::to_string(rv + 2);
  auto start = std::chrono::steady_clock::now();
  auto r = client->listPage(kPods, lo);
  writer.join();
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->resourceVersion, std::to_string(rv + 2));
  EXPECT_EQ(r->items.size(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(K8sFakeApiServer, AWatchListFromAVersionTheStoreLacksGetsTheTooLargeErrorEvent) {
  auto server = startServer(tooLargeWait(std::chrono::milliseconds(20)));
  auto rv = server->resourceVersion();
  auto raw = rawHttp(server->port(),
                     request("GET", "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                                    "&resourceVersionMatch=NotOlderThan&resourceVersion=" + std::to_string(rv + 3),
                             "application/json", ""));
  ASSERT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u) << raw;
  auto at = raw.find(R"({"type":"ERROR")");
  ASSERT_NE(at, std::string::npos) << raw;
  auto event = json::parse(raw.substr(at, raw.find('\n', at) - at)).as_object();
  expectTooLargeStatus(event.at("object").as_object(), rv + 3, rv);
}

// A streaming list (kube-apiserver's WatchList, on by default in 1.34 and 1.37): an ADDED
// event per object, then the BOOKMARK annotated k8s.io/initial-events-end at the list's
// version; with the gate off, 422 naming sendInitialEvents.
TEST(K8sFakeApiServer, AStreamingListSendsTheObjectsThenTheBookmarkThatEndsThem) {
  for (bool gate : {true, false}) {
    fakes::FakeApiServerOptions o;
    o.watchList = gate;
    auto server = startServer(o);
    ASSERT_TRUE(server->create("pods", makePod("ns", "a")));
    ASSERT_TRUE(server->create("pods", makePod("ns", "b")));
    auto raw = rawHttp(server->port(),
                       request("GET", "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                                      "&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1",
                               "application/json", ""));
    if (!gate) {
      EXPECT_EQ(raw.rfind("HTTP/1.1 422", 0), 0u) << raw;
      EXPECT_NE(raw.find("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
                std::string::npos)
          << raw;
      continue;
    }
    ASSERT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u) << raw;
    std::vector<json::object> events;
    for (auto at = raw.find(R"({"type")"); at != std::string::npos; at = raw.find(R"({"type")", at + 1))
      events.push_back(json::parse(raw.substr(at, raw.find('\n', at) - at)).as_object());
    ASSERT_EQ(events.size(), 3u) << raw;
    EXPECT_EQ(events[0].at("type"), "ADDED");
    EXPECT_EQ(events[1].at("type"), "ADDED");
    EXPECT_EQ(events[2].at("type"), "BOOKMARK");
    const auto& md = events[2].at("object").at("metadata").as_object();
    EXPECT_EQ(md.at("resourceVersion"), json::value(std::to_string(server->resourceVersion())));
    EXPECT_EQ(md.at("annotations").at("k8s.io/initial-events-end"), "true");
  }
}

TEST(K8sFakeApiServer, APlainWatchFromAVersionTheStoreLacksStaysSilentUntilTheStorePassesIt) {
  fakes::FakeApiServerOptions o;
  o.bookmarkInterval = std::chrono::milliseconds(10);
  auto server = startServer(o);
  auto rv = server->resourceVersion();
  std::mutex mu;
  std::vector<WatchEvent> seen;
  std::size_t seenBeforeWrites = 99;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    {
      std::lock_guard lock(mu);
      seenBeforeWrites = seen.size();
    }
    for (int i = 1; i <= 4; ++i) ASSERT_TRUE(server->create("pods", makePod("ns", "p" + std::to_string(i))));
  });
  auto client = clientFor(*server);
  WatchOptions wo;
  wo.resourceVersion = std::to_string(rv + 3);
  auto s = client->watch(kPods, wo, [&](WatchEvent&& e) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(e));
    return seen.back().type == WatchEventType::kBookmark;
  });
  writer.join();
  ASSERT_TRUE(s) << s.error().describe();
  EXPECT_EQ(seenBeforeWrites, 0u) << "no event and no bookmark while the store is behind";
  ASSERT_FALSE(seen.empty());
  for (const auto& e : seen) {
    EXPECT_GE(std::stoull(std::string(resourceVersion(e.object))), rv + 3);
  }
  EXPECT_EQ(seen.back().type, WatchEventType::kAdded);
  EXPECT_EQ(name(seen.back().object), "p4") << "events up to the asked version are not sent";
}

TEST(K8sFakeApiServer, RestoringABackupTurnsVersionsBackAndForgetsHistory) {
  auto server = startServer();
  ASSERT_TRUE(server->create("pods", makePod("ns", "a")));
  auto backup = server->backup();
  auto backupRv = server->resourceVersion();
  auto aBefore = *server->get("pods", "ns", "a");
  ASSERT_TRUE(server->create("pods", makePod("ns", "lost")));
  ASSERT_TRUE(server->patch("pods", "ns", "a", json::parse(R"({"metadata":{"labels":{"x":"y"}}})").as_object()));

  auto client = clientFor(*server);
  std::thread restorer([&] {
    ASSERT_TRUE(eventually([&] { return server->openWatches() == 1; }));
    ASSERT_TRUE(server->restoreBackup(backup));
  });
  WatchOptions wo;
  wo.resourceVersion = std::to_string(server->resourceVersion());
  auto cut = client->watch(kPods, wo, [](WatchEvent&&) { return true; });
  restorer.join();
  EXPECT_FALSE(cut) << "open watches are dropped";

  EXPECT_EQ(server->resourceVersion(), backupRv);
  EXPECT_EQ(server->list("pods"), std::vector<json::object>{aBefore});
  auto next = server->create("pods", makePod("ns", "new"));
  ASSERT_TRUE(next);
  EXPECT_EQ(resourceVersion(*next), std::to_string(backupRv + 1)) << "a version clients have seen, reused";
  wo.resourceVersion = std::to_string(backupRv - 1);
  auto gone = client->watch(kPods, wo, [](WatchEvent&&) { return true; });
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().isGone()) << "the restored store's watch cache starts empty";
}

TEST(K8sFakeApiServer, TheBinaryServesAFixtureFolder) {
  TempDir dir;
  dir.write("nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: fixture-node}\n");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl(VGPU_FAKE_APISERVER_BIN, VGPU_FAKE_APISERVER_BIN, "--fixtures", dir.path().c_str(),
            "--token", "t0k", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  ::close(out[0]);
  ASSERT_EQ(line.rfind("listening on http://127.0.0.1:", 0), 0u) << line;
  ClientConfig cfg;
  cfg.server = line.substr(std::string("listening on ").size());
  cfg.bearerToken = "t0k";
  auto client = Client::create(cfg, testing::fastOptions());
  ASSERT_TRUE(client);
  auto node = (*client)->get(kNodes, "", "fixture-node");
  EXPECT_TRUE(node) << node.error().describe();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(K8sFakeApiServer, TheBinaryRejectsBadArguments) {
  std::string cmd = std::string(VGPU_FAKE_APISERVER_BIN) + " --port 99999 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
  cmd = std::string(VGPU_FAKE_APISERVER_BIN) + " --fixtures /nonexistent/dir 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
}

// Status code and JSON body of a GET the client would not send as it is.
struct RawAnswer {
  int status = 0;
  json::object body;
};
RawAnswer rawGet(std::uint16_t port, const std::string& target) {
  auto raw = rawHttp(port, request("GET", target, "application/json", ""));
  RawAnswer out;
  if (raw.rfind("HTTP/1.1 ", 0) == 0) out.status = std::stoi(raw.substr(9, 3));
  boost::system::error_code ec;
  auto v = json::parse(raw.substr(raw.find("\r\n\r\n") + 4), ec);
  if (!ec && v.is_object()) out.body = v.as_object();
  return out;
}

std::vector<std::string> itemNames(const json::object& list) {
  std::vector<std::string> out;
  for (const auto& item : list.at("items").as_array()) out.emplace_back(name(item.as_object()));
  return out;
}

// What the real apiserver answers for each combination of resourceVersion,
// resourceVersionMatch, limit and continue (k8s.io/apiserver storage/cacher/delegator.go,
// watch_cache.go, storage/interfaces.go ValidateListOptions, etcd3/store.go and errors.go;
// apimachinery meta/internalversion/validation).
TEST(K8sFakeApiServer, ListsAnswerEachResourceVersionCombinationAsTheApiserverDoes) {
  auto server = startServer(tooLargeWait(std::chrono::milliseconds(20)));
  ASSERT_TRUE(server->create("pods", makePod("ns", "a")));
  ASSERT_TRUE(server->create("pods", makePod("ns", "b")));
  const std::string old = std::to_string(server->resourceVersion());  // a and b
  ASSERT_TRUE(server->create("pods", makePod("ns", "c")));
  ASSERT_TRUE(server->remove("pods", "ns", "a"));
  const std::string now = std::to_string(server->resourceVersion());  // b and c
  const std::string ahead = std::to_string(server->resourceVersion() + 5);
  const std::string path = "/api/v1/namespaces/ns/pods";
  auto first = rawGet(server->port(), path + "?limit=1");
  ASSERT_EQ(first.status, 200);
  const std::string token(first.body.at("metadata").at("continue").as_string());

  struct Case {
    const char* description;
    std::string query;
    int status;
    std::vector<std::string> items;  // 200: the names listed
    std::string listVersion;         // 200: metadata.resourceVersion
    bool more = false;               // 200: a continue token follows
    std::string message;             // otherwise: the Status message (exactly)
  };
  const std::string invalid = "ListOptions.meta.k8s.io \"\" is invalid: ";
  const std::vector<Case> cases = {
      {"no version: the most recent, paged", "?limit=1", 200, {"b"}, now, true, ""},
      {"0: any version, from the watch cache, which ignores limit", "?resourceVersion=0&limit=1", 200, {"b", "c"}, now, false, ""},
      {"0 NotOlderThan: the same", "?resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1", 200, {"b", "c"}, now, false, ""},
      {"a version and a limit: exact, the legacy meaning", "?resourceVersion=" + old + "&limit=1", 200, {"a"}, old, true, ""},
      {"a version alone: not older than it", "?resourceVersion=" + old, 200, {"b", "c"}, now, false, ""},
      {"NotOlderThan with a limit: the current state, paged",
       "?resourceVersion=" + old + "&resourceVersionMatch=NotOlderThan&limit=1", 200, {"b"}, now, true, ""},
      {"Exact: the state at that version", "?resourceVersion=" + old + "&resourceVersionMatch=Exact", 200, {"a", "b"}, old, false, ""},
      {"continue with 0 beside it", "?continue=" + token + "&resourceVersion=0", 200, {"c"}, now, false, ""},
      {"match without a version", "?resourceVersionMatch=NotOlderThan", 422, {}, "", false,
       invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"},
      {"Exact at 0", "?resourceVersion=0&resourceVersionMatch=Exact", 422, {}, "", false,
       invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""},
      {"an unknown match", "?resourceVersion=" + old + "&resourceVersionMatch=Newest", 422, {}, "", false,
       invalid + "resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""},
      {"match with continue (two errors)", "?continue=" + token + "&resourceVersionMatch=NotOlderThan", 422, {}, "", false,
       invalid + "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                 "provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]"},
      {"sendInitialEvents on a list", "?sendInitialEvents=true", 422, {}, "", false,
       invalid + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"},
      {"a version beside continue", "?continue=" + token + "&resourceVersion=" + old, 400, {}, "", false,
       "specifying resource version is not allowed when using continue"},
      {"a token never handed out", "?continue=bogus", 400, {}, "", false,
       "invalid continue token: continue key is not valid: bogus"},
      {"a version that is no number", "?resourceVersion=abc", 400, {}, "", false,
       "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": "
       "invalid syntax"},
      {"exact ahead of the store", "?resourceVersion=" + ahead + "&limit=1", 504, {}, "", false,
       "Timeout: Too large resource version: " + ahead + ", current: " + now},
      {"not older than ahead of the store", "?resourceVersion=" + ahead, 504, {}, "", false,
       "Timeout: Too large resource version: " + ahead + ", current: " + now},
  };
  for (const auto& c : cases) {
    auto r = rawGet(server->port(), path + c.query);
    EXPECT_EQ(r.status, c.status) << c.description << ": " << json::serialize(r.body);
    if (c.status == 200) {
      EXPECT_EQ(itemNames(r.body), c.items) << c.description;
      EXPECT_EQ(r.body.at("metadata").at("resourceVersion"), json::value(c.listVersion)) << c.description;
      EXPECT_EQ(r.body.at("metadata").as_object().contains("continue"), c.more) << c.description;
    } else {
      EXPECT_EQ(r.body.at("kind"), "Status") << c.description;
      EXPECT_EQ(r.body.at("code"), c.status) << c.description;
      EXPECT_EQ(r.body.at("message"), json::value(c.message)) << c.description;
    }
  }
  auto causes = rawGet(server->port(), path + "?resourceVersionMatch=Exact").body.at("details");
  EXPECT_EQ(causes, json::parse(R"({"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden",
      "message":"Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
      "field":"resourceVersionMatch"}]})"));
  auto watchMatch = rawGet(server->port(), path + "?watch=true&resourceVersion=" + now + "&resourceVersionMatch=NotOlderThan");
  EXPECT_EQ(watchMatch.status, 422);
  EXPECT_EQ(watchMatch.body.at("message"),
            json::value(invalid + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                                  "sendInitialEvents is provided"));

  // Once etcd compacted: an exact read of the old version is gone for good (410, and asking
  // again with the same version can never succeed), not-older-than reads are served, and a
  // continue token answers 410 with a token for the rest at the current version.
  auto paged = rawGet(server->port(), path + "?limit=1");  // b, then a token for c
  ASSERT_EQ(itemNames(paged.body), std::vector<std::string>{"b"});
  const std::string pending(paged.body.at("metadata").at("continue").as_string());
  server->compactHistory();
  for (std::string query : {"?resourceVersion=" + old + "&limit=1", "?resourceVersion=" + old + "&resourceVersionMatch=Exact"}) {
    auto r = rawGet(server->port(), path + query);
    EXPECT_EQ(r.status, 410) << query;
    EXPECT_EQ(r.body.at("reason"), "Expired") << query;
    EXPECT_EQ(r.body.at("message"), "The resourceVersion for the provided list is too old.") << query;
  }
  auto notOlder = rawGet(server->port(), path + "?resourceVersion=" + old + "&resourceVersionMatch=NotOlderThan&limit=1");
  EXPECT_EQ(notOlder.status, 200);
  EXPECT_EQ(itemNames(notOlder.body), std::vector<std::string>{"b"});
  auto expired = rawGet(server->port(), path + "?continue=" + pending);
  ASSERT_EQ(expired.status, 410);
  EXPECT_EQ(expired.body.at("reason"), "Expired");
  EXPECT_NE(std::string(expired.body.at("message").as_string()).find("use the continue token in this response"),
            std::string::npos);
  const std::string fresh(expired.body.at("metadata").at("continue").as_string());
  ASSERT_TRUE(server->create("pods", makePod("ns", "d")));
  auto rest = rawGet(server->port(), path + "?continue=" + fresh);
  ASSERT_EQ(rest.status, 200) << json::serialize(rest.body);
  EXPECT_EQ(itemNames(rest.body), (std::vector<std::string>{"c", "d"})) << "after b, read now";
}

TEST(K8sFakeApiServer, RecordsWhenEachRequestArrived) {
  auto server = startServer();
  auto client = clientFor(*server);
  auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(client->listPage(kPods, {}));
  auto after = std::chrono::steady_clock::now();
  auto log = server->requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_GE(log[0].at, before);
  EXPECT_LE(log[0].at, after);
}

TEST(K8sFakeApiServer, ALostReplyAppliesTheRequestAndADelayedOneIsServedLate) {
  auto server = startServer();
  ASSERT_TRUE(server->create("pods", makePod("ns", "p")));
  fakes::Fault lose;
  lose.method = "POST";
  lose.action = fakes::Fault::Action::kLoseReply;
  server->addFault(lose);
  ClientOptions once = testing::fastOptions();
  once.maxRetries = 0;
  auto client = clientFor(*server, once);
  auto bound = client->bind({"ns", "p", "n1", "", {}});
  ASSERT_FALSE(bound);
  EXPECT_TRUE(bound.error().isTransport()) << bound.error().describe();
  EXPECT_EQ(nodeName(*server->get("pods", "ns", "p")), "n1") << "applied all the same";

  fakes::Fault slow;
  slow.method = "GET";
  slow.action = fakes::Fault::Action::kDelay;
  slow.delay = std::chrono::milliseconds(150);
  server->addFault(slow);
  auto start = std::chrono::steady_clock::now();
  auto got = client->get(kPods, "ns", "p");
  EXPECT_TRUE(got);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
}

}  // namespace
}  // namespace vgpu::k8s
