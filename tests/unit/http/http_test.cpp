// vgpu_http: routing, limits, timeouts, TLS and graceful stop, over real loopback sockets.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "test_http_client.h"
#include "test_tls_cert.h"
#include "vgpu/http/server.h"

namespace vgpu::http {
namespace {

using testing::kCanMakeCerts;
using testing::kNoCertsReason;
using testing::makeSelfSignedCert;
using testing::TestHttpClient;
namespace fs = std::filesystem;

std::unique_ptr<Server> startOrDie(Router router, ServerOptions options = {}) {
  auto server = Server::start(std::move(options), std::move(router));
  if (!server.ok()) {
    ADD_FAILURE() << server.error().message;
    return nullptr;
  }
  return std::move(server).value();
}

Router echoRouter() {
  Router r;
  r.post("/echo", [](const Request& req) {
    return Response::json("{\"path\":\"" + req.path + "\",\"query\":\"" + req.query + "\",\"body\":\"" + req.body +
                          "\",\"ctype\":\"" + std::string(req.header("content-type")) + "\"}");
  });
  r.get("/healthz", [](const Request&) { return Response::text("ok\n"); });
  r.get("/boom", [](const Request&) -> Response { throw std::runtime_error("kaboom"); });
  return r;
}

/// Raw bytes to the server and whatever comes back until it closes (or 5 s pass).
std::string rawExchange(std::uint16_t port, const std::string& bytes) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ip::tcp::socket sock(ioc);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  struct timeval tv{5, 0};
  setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  net::write(sock, net::buffer(bytes));
  std::string out;
  char buf[4096];
  for (;;) {
    boost::system::error_code ec;
    size_t n = sock.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("vgpu-http-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(HttpServer, RoutesByMethodAndExactPath) {
  auto server = startOrDie(echoRouter());
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  auto ok = client.post("/echo?timeout=5s", "hello");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"path":"/echo","query":"timeout=5s","body":"hello","ctype":"application/json"})");
  EXPECT_EQ(ok.headers["Content-Type"], "application/json");
  EXPECT_EQ(client.get("/healthz").body, "ok\n");
  EXPECT_EQ(client.get("/nothing").status, 404);
  EXPECT_EQ(client.post("/echo/", "").status, 404);
  auto wrongMethod = client.get("/echo");
  EXPECT_EQ(wrongMethod.status, 405);
  EXPECT_EQ(wrongMethod.headers["Allow"], "POST");
}

TEST(HttpServer, HandlerExceptionBecomes500AndServerKeepsServing) {
  auto server = startOrDie(echoRouter());
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  auto r = client.get("/boom");
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("kaboom"), std::string::npos);
  EXPECT_EQ(client.get("/healthz").status, 200);
}

TEST(HttpServer, KeepAliveReusesOneConnection) {
  auto server = startOrDie(echoRouter());
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  for (int i = 0; i < 20; ++i) ASSERT_EQ(client.get("/healthz").status, 200);
  EXPECT_EQ(server->stats().connections, 1u);
  EXPECT_EQ(server->stats().requests, 20u);
}

TEST(HttpServer, BodyOverTheCapIsAnswered413) {
  ServerOptions options;
  options.maxBodyBytes = 1024;
  auto server = startOrDie(echoRouter(), options);
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  EXPECT_EQ(client.post("/echo", std::string(1024, 'a')).status, 200);
  auto big = client.post("/echo", std::string(2 << 20, 'a'));
  EXPECT_EQ(big.status, 413) << big.error;
  EXPECT_EQ(client.get("/healthz").status, 200);  // a fresh connection still works
}

TEST(HttpServer, MalformedRequestIsAnswered400) {
  auto server = startOrDie(echoRouter());
  ASSERT_TRUE(server);
  std::string reply = rawExchange(server->port(), "GARBAGE\x01\x02 / HTTP/9\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  reply = rawExchange(server->port(), "POST /echo HTTP/1.1\r\nContent-Length: nope\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  TestHttpClient client(server->port());
  EXPECT_EQ(client.get("/healthz").status, 200);
}

TEST(HttpServer, SlowClientIsCutAfterReadTimeout) {
  ServerOptions options;
  options.readTimeout = std::chrono::milliseconds(200);
  auto server = startOrDie(echoRouter(), options);
  ASSERT_TRUE(server);
  const auto start = std::chrono::steady_clock::now();
  std::string reply = rawExchange(server->port(), "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply, "");
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::seconds(4));
}

// Issue 42: kube-apiserver's webhook client (Go's http.Transport) keeps an idle connection
// 90 s; the server closed it after its 10 s read timeout, and a POST the apiserver sent on
// it just then failed ("broken pipe", the pod's create refused). A kept-alive connection
// now waits idleTimeout (longer than 90 s by default) between requests, over TLS as in
// plain HTTP, while a request that has begun still gets only readTimeout.
TEST(HttpServer, KeptAliveConnectionOutlivesTheReadTimeoutAndGoClientsIdleLimit) {
  EXPECT_GT(ServerOptions{}.idleTimeout, std::chrono::seconds(90));
  TempDir dir;
  const bool tls = kCanMakeCerts && makeSelfSignedCert(dir.path());
  for (bool useTls : {false, tls}) {
    ServerOptions options;
    options.readTimeout = std::chrono::milliseconds(200);
    options.idleTimeout = std::chrono::seconds(5);
    if (useTls) {
      options.certFile = (dir.path() / "tls.crt").string();
      options.keyFile = (dir.path() / "tls.key").string();
    }
    auto server = startOrDie(echoRouter(), options);
    ASSERT_TRUE(server);
    TestHttpClient client(server->port(), useTls);
    ASSERT_EQ(client.post("/echo", "first").status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // idle past readTimeout
    auto again = client.post("/echo", "second");
    EXPECT_EQ(again.status, 200) << again.error << (useTls ? " (TLS)" : " (plain)");
    EXPECT_EQ(server->stats().connections, 1u) << "the idle connection was closed" << (useTls ? " (TLS)" : " (plain)");
    if (!useTls) {
      // A request that has begun is still cut at readTimeout on a kept-alive connection.
      const auto start = std::chrono::steady_clock::now();
      std::string reply = rawExchange(server->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
      EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    }
    if (!tls) break;
  }
}

TEST(HttpServer, ServesHttpsFromCertAndKeyFiles) {
  TempDir dir;
  if (!kCanMakeCerts) GTEST_SKIP() << kNoCertsReason;
  ASSERT_TRUE(makeSelfSignedCert(dir.path()));
  ServerOptions options;
  options.certFile = (dir.path() / "tls.crt").string();
  options.keyFile = (dir.path() / "tls.key").string();
  auto server = startOrDie(echoRouter(), options);
  ASSERT_TRUE(server);
  EXPECT_TRUE(server->tls());
  EXPECT_EQ(server->url().rfind("https://127.0.0.1:", 0), 0u);
  TestHttpClient client(server->port(), true);
  auto r = client.post("/echo", "over tls");
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("over tls"), std::string::npos);
  // Plain HTTP to the TLS port gets no answer, and the server carries on.
  TestHttpClient plain(server->port());
  EXPECT_EQ(plain.get("/healthz").status, 0);
  EXPECT_EQ(client.get("/healthz").status, 200);
}

TEST(HttpServer, RefusesUnusableTlsMaterialNamingTheFile) {
  TempDir dir;
  if (!kCanMakeCerts) GTEST_SKIP() << kNoCertsReason;
  ASSERT_TRUE(makeSelfSignedCert(dir.path()));
  std::ofstream(dir.path() / "junk.pem") << "not a pem\n";
  struct Case {
    const char* description;
    std::string cert, key, expect;
  } cases[] = {
      {"missing certificate", (dir.path() / "absent.crt").string(), (dir.path() / "tls.key").string(), "absent.crt"},
      {"garbage key", (dir.path() / "tls.crt").string(), (dir.path() / "junk.pem").string(), "junk.pem"},
      {"key without certificate", "", (dir.path() / "tls.key").string(), "both a certificate and a key"},
  };
  for (const auto& c : cases) {
    ServerOptions options;
    options.certFile = c.cert;
    options.keyFile = c.key;
    auto server = Server::start(options, echoRouter());
    ASSERT_FALSE(server.ok()) << c.description;
    EXPECT_NE(server.error().message.find(c.expect), std::string::npos) << c.description << ": " << server.error().message;
  }
}

TEST(HttpServer, RefusesBadAddressAndTakenPort) {
  ServerOptions bad;
  bad.address = "not-an-ip";
  EXPECT_FALSE(Server::start(bad, echoRouter()).ok());
  auto first = startOrDie(echoRouter());
  ASSERT_TRUE(first);
  ServerOptions same;
  same.port = first->port();
  auto second = Server::start(same, echoRouter());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find(std::to_string(first->port())), std::string::npos);
}

TEST(HttpServer, StopLetsTheRequestInFlightFinishAndIsSafeTwice) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  Router r;
  r.get("/slow", [&](const Request&) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return Response::text("done");
  });
  auto server = startOrDie(std::move(r));
  ASSERT_TRUE(server);
  TestHttpClient idle(server->port());
  ASSERT_EQ(idle.get("/nothing").status, 404);  // an idle keep-alive connection to close
  auto inFlight = std::async(std::launch::async, [port = server->port()] { return TestHttpClient(port).get("/slow"); });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  auto stopping = std::async(std::launch::async, [&] { server->stop(); });
  EXPECT_EQ(stopping.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  auto reply = inFlight.get();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "done");
  EXPECT_EQ(reply.headers["Connection"], "close");
  stopping.get();
  server->stop();
  EXPECT_EQ(TestHttpClient(server->port()).get("/slow").status, 0);
}

TEST(HttpServer, ManyClientsConcurrently) {
  std::atomic<int> handled{0};
  Router r;
  r.post("/count", [&](const Request& req) {
    handled.fetch_add(1);
    return Response::json(req.body);
  });
  auto server = startOrDie(std::move(r));
  ASSERT_TRUE(server);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      TestHttpClient client(server->port());
      for (int i = 0; i < 50; ++i) {
        std::string body = std::to_string(t * 1000 + i);
        auto reply = client.post("/count", body);
        if (reply.status == 200 && reply.body == body) good.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 400);
  EXPECT_EQ(handled.load(), 400);
}

// ---- blocking routes ----

/// Holds blocking handlers until opened, or until their request's stop is requested.
struct Gate {
  std::mutex mu;
  std::condition_variable_any cv;
  int entered = 0;
  bool open = false;

  Response pass(const Request& request) {
    std::unique_lock lock(mu);
    ++entered;
    cv.notify_all();
    return cv.wait(lock, request.stop, [&] { return open; }) ? Response::text("passed") : Response::text("gave up", 500);
  }
  bool awaitEntered(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return entered >= n; });
  }
  void openUp() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

/// One I/O thread and one blocking worker: whatever else is answered is answered beside a
/// handler that waits.
Router gatedRouter(Gate& gate) {
  Router r;
  r.postBlocking("/slow", [&gate](const Request& req) { return gate.pass(req); });
  r.get("/healthz", [](const Request&) { return Response::text("ok\n"); });
  return r;
}
ServerOptions oneThreadEach(std::size_t queue = 8) {
  ServerOptions o;
  o.threads = 1;
  o.blockingThreads = 1;
  o.blockingQueue = queue;
  return o;
}

TEST(HttpServer, PlainRoutesAnswerWhileABlockingHandlerWaits) {
  Gate gate;
  auto server = startOrDie(gatedRouter(gate), oneThreadEach());
  ASSERT_TRUE(server);
  auto slow = std::async(std::launch::async, [port = server->port()] { return TestHttpClient(port).post("/slow", ""); });
  ASSERT_TRUE(gate.awaitEntered(1));
  TestHttpClient other(server->port());
  other.setTimeout(std::chrono::seconds(2));
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto reply = other.get("/healthz");
    EXPECT_EQ(reply.status, 200) << reply.error;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  }
  gate.openUp();
  auto reply = slow.get();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "passed");
}

TEST(HttpServer, BlockingAnswerKeepsItsPlaceOnAKeepAliveConnection) {
  Gate gate;
  auto server = startOrDie(gatedRouter(gate), oneThreadEach());
  ASSERT_TRUE(server);
  // Pipelined: the second request is already there while the first one waits.
  auto exchange = std::async(std::launch::async, [port = server->port()] {
    return rawExchange(port,
                       "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                       "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  });
  ASSERT_TRUE(gate.awaitEntered(1));
  EXPECT_EQ(exchange.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  gate.openUp();
  const std::string out = exchange.get();
  const auto first = out.find("passed"), second = out.find("ok\n");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second) << out;
}

TEST(HttpServer, BlockingRouteIsAnswered503WhenEveryWorkerAndQueueSlotIsTaken) {
  Gate gate;
  auto server = startOrDie(gatedRouter(gate), oneThreadEach(/*queue=*/0));
  ASSERT_TRUE(server);
  auto slow = std::async(std::launch::async, [port = server->port()] { return TestHttpClient(port).post("/slow", ""); });
  ASSERT_TRUE(gate.awaitEntered(1));
  TestHttpClient other(server->port());
  other.setTimeout(std::chrono::seconds(2));
  auto busy = other.post("/slow", "");
  EXPECT_EQ(busy.status, 503) << busy.error;
  EXPECT_NE(busy.body.find("server busy"), std::string::npos) << busy.body;
  EXPECT_EQ(busy.headers["Retry-After"], "1");
  EXPECT_EQ(server->stats().busy, 1u);
  EXPECT_EQ(other.get("/healthz").status, 200);  // the refused connection goes on serving
  gate.openUp();
  EXPECT_EQ(slow.get().status, 200);
  // The worker gives its slot back just after its answer is written (seen: one 503 in a
  // loaded run): the next request gets the slot once it is back.
  int status = 0;
  for (int i = 0; i < 200 && (status = other.post("/slow", "").status) == 503; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(status, 200);
}

TEST(HttpServer, StopDoesNotHangOnABlockingHandlerThatWaits) {
  Gate gate;  // never opened: the handler returns only when told to stop
  auto server = startOrDie(gatedRouter(gate), oneThreadEach());
  ASSERT_TRUE(server);
  auto post = [port = server->port()] {
    TestHttpClient client(port);
    client.setTimeout(std::chrono::seconds(5));
    return client.post("/slow", "");
  };
  auto slow = std::async(std::launch::async, post);
  ASSERT_TRUE(gate.awaitEntered(1));
  auto queued = std::async(std::launch::async, post);
  const auto start = std::chrono::steady_clock::now();
  auto stopping = std::async(std::launch::async, [&] { server->stop(std::chrono::milliseconds(200)); });
  ASSERT_EQ(stopping.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));  // the grace was given
  // Both connections are closed unanswered (the handler gave up after the grace), not left
  // open to the clients' own timeout.
  EXPECT_NE(slow.get().body, "passed");
  EXPECT_NE(queued.get().status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  server->stop();
}

// ---- the test client's timeout ----

/// A listener that never answers: the kernel completes connections into its backlog, and
/// nobody reads or writes them.
struct SilentServer {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor{ioc, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }
};

TEST(TestHttpClient, RequestToAServerThatNeverAnswersFailsAtItsTimeout) {
  constexpr auto kTimeout = std::chrono::milliseconds(300);
  SilentServer silent;
  for (const bool tls : {false, true}) {  // TLS: the handshake is what goes unanswered
    TestHttpClient client(silent.port(), tls);
    client.setTimeout(kTimeout);
    const auto start = std::chrono::steady_clock::now();
    const auto reply = client.get("/healthz");
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(reply.status, 0) << (tls ? "tls" : "plain");
    EXPECT_NE(reply.error.find("timeout"), std::string::npos) << (tls ? "tls: " : "plain: ") << reply.error;
    EXPECT_GE(waited, kTimeout) << (tls ? "tls" : "plain");
    EXPECT_LT(waited, kTimeout + std::chrono::seconds(1)) << (tls ? "tls" : "plain");
  }
}

TEST(TestHttpClient, HandlerSlowerThanTheTimeoutFailsAndTheNextRequestSucceeds) {
  std::atomic<bool> slow{true};
  Router r;
  r.get("/maybe-slow", [&](const Request&) {
    if (slow) std::this_thread::sleep_for(std::chrono::seconds(1));
    return Response::text("done");
  });
  auto server = startOrDie(std::move(r));
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  client.setTimeout(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.get("/maybe-slow").status, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  slow = false;
  const auto reply = client.get("/maybe-slow");  // on a new connection
  EXPECT_EQ(reply.status, 200) << reply.error;
  EXPECT_EQ(reply.body, "done");
}

TEST(TestHttpClient, RequestsWithinTheTimeoutSucceedOverPlainAndTls) {
  TempDir dir;
  if (!kCanMakeCerts) GTEST_SKIP() << kNoCertsReason;
  ASSERT_TRUE(makeSelfSignedCert(dir.path()));
  ServerOptions tlsOptions;
  tlsOptions.certFile = (dir.path() / "tls.crt").string();
  tlsOptions.keyFile = (dir.path() / "tls.key").string();
  auto plain = startOrDie(echoRouter());
  auto secure = startOrDie(echoRouter(), tlsOptions);
  ASSERT_TRUE(plain && secure);
  for (Server* server : {plain.get(), secure.get()}) {
    TestHttpClient client(server->port(), server->tls());
    client.setTimeout(std::chrono::seconds(5));
    for (int i = 0; i < 3; ++i) {
      const auto reply = client.post("/echo", "hello " + std::to_string(i));
      EXPECT_EQ(reply.status, 200) << server->url() << ": " << reply.error;
      EXPECT_NE(reply.body.find("hello " + std::to_string(i)), std::string::npos) << server->url();
    }
    EXPECT_EQ(server->stats().connections, 1u) << server->url() << ": the connection is kept alive";
  }
}

TEST(TestHttpClient, WithATimeoutReconnectsWhenTheServerClosedAnIdleConnection) {
  ServerOptions options;
  options.idleTimeout = std::chrono::milliseconds(100);
  auto server = startOrDie(echoRouter(), options);
  ASSERT_TRUE(server);
  TestHttpClient client(server->port());
  client.setTimeout(std::chrono::seconds(5));
  ASSERT_EQ(client.get("/healthz").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto reply = client.get("/healthz");
  EXPECT_EQ(reply.status, 200) << reply.error;
  EXPECT_EQ(server->stats().connections, 2u);
}

// Issue 26: "--metrics-address :70000" listened on 4464 (the port cast to 16 bits) and
// "8080x" on 8080. Every daemon's listen flag goes through this one parser.
TEST(ListenAddressSecurity, PortsAbove65535AndTrailingJunkAreRefusedNamingTheFlag) {
  const struct {
    const char* text;
    const char* says;
  } kBad[] = {{":70000", "above 65535"},       {":65536", "above 65535"},
              {":99999999999999999999", "above 65535"}, {":8080x", "not a number"},
              {"127.0.0.1:80 ", "not a number"},   {":-1", "not a number"},
              {"127.0.0.1", "no ':port'"},         {"127.0.0.1:", "no port"}};
  for (const auto& c : kBad) {
    ServerOptions o;
    auto s = parseListenAddress(c.text, "--metrics-address", o);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.error().message.find("--metrics-address"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find(c.says), std::string::npos) << s.error().message;
  }
}

TEST(ListenAddress, AcceptsHostPortIpv6AndAnyAddress) {
  const struct {
    const char* text;
    const char* address;
    std::uint16_t port;
  } kGood[] = {{"127.0.0.1:8080", "127.0.0.1", 8080}, {"[::1]:65535", "::1", 65535}, {":0", "0.0.0.0", 0},
               {"0.0.0.0:9400", "0.0.0.0", 9400}};
  for (const auto& c : kGood) {
    ServerOptions o;
    auto s = parseListenAddress(c.text, "--listen", o);
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.error().message;
    EXPECT_EQ(o.address, c.address);
    EXPECT_EQ(o.port, c.port);
  }
}

}  // namespace
}  // namespace vgpu::http
