// The apiserver double's own contract: what other engineers' tests rely on.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"
#include "vgpu/k8s/object.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using testing::clientFor;
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

}  // namespace
}  // namespace vgpu::k8s
