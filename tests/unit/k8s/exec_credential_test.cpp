// Exec credential plugins: real plugin processes (shell scripts written by each test) and,
// for the client, the apiserver double on loopback.

#include <sys/stat.h>

#include <atomic>
#include <thread>

#include "../../fakes/apiserver/tls_cert.h"
#include "test_support.h"
#include "vgpu/codec/base64.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/k8s/exec_credential.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using std::chrono::system_clock;
using testing::TempDir;

constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t lineCount(const std::string& path) {
  std::string text = readFile(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

system_clock::time_point at(const char* rfc3339) { return *parseTimestamp(rfc3339); }

// A plugin directory: `plugin` is a /bin/sh script; every run appends a line to `runs`;
// the answer is the file `answer` (so a test can change it between runs).
class PluginDir {
 public:
  std::string script(const std::string& body, const std::string& name = "plugin") {
    std::string path = dir_.write(name, "#!/bin/sh\nD='" + dir_.path() + "'\necho run >> \"$D/runs\"\n" + body);
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // A plugin that prints `answer` as it stands when it runs.
  std::string catAnswer() { return script("cat \"$D/answer\"\n"); }
  void answer(const json::object& o) { dir_.write("answer", json::serialize(o)); }
  void tokenAnswer(const std::string& token, const std::string& apiVersion = kV1,
                   const std::string& expiry = "") {
    json::object status{{"token", token}};
    if (!expiry.empty()) status["expirationTimestamp"] = expiry;
    answer({{"apiVersion", apiVersion}, {"kind", "ExecCredential"}, {"status", status}});
  }
  std::size_t runs() const { return lineCount(path("runs")); }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

ClientConfig execConfig(const std::string& command, const std::string& apiVersion = kV1) {
  ClientConfig cfg;
  cfg.server = "https://10.0.0.1:6443";
  cfg.source = "test";
  ExecConfig e;
  e.command = command;
  e.apiVersion = apiVersion;
  e.interactiveMode = "Never";
  cfg.exec = e;
  return cfg;
}

// A wall clock the test moves.
struct WallClock {
  std::shared_ptr<std::atomic<system_clock::rep>> ticks =
      std::make_shared<std::atomic<system_clock::rep>>(at("2030-01-01T00:00:00Z").time_since_epoch().count());
  void set(const char* t) { ticks->store(at(t).time_since_epoch().count()); }
  std::function<system_clock::time_point()> fn() const {
    auto t = ticks;
    return [t] { return system_clock::time_point(system_clock::duration(t->load())); };
  }
};

TEST(K8sExecCredential, RunsThePluginAndReturnsItsToken) {
  PluginDir p;
  p.tokenAnswer("tok-1");
  ExecCredentialPlugin plugin(execConfig(p.catAnswer()));
  auto c = plugin.get();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token, "tok-1");
  EXPECT_FALSE(c->expiry);
  EXPECT_EQ(c->generation, 1u);
  EXPECT_EQ(p.runs(), 1u);
}

TEST(K8sExecCredential, AcceptsV1beta1WhenTheKubeconfigAsksForIt) {
  PluginDir p;
  p.tokenAnswer("beta", kV1beta1);
  ExecCredentialPlugin plugin(execConfig(p.catAnswer(), kV1beta1));
  auto c = plugin.get();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token, "beta");
}

TEST(K8sExecCredential, GivesThePluginExecInfoArgsEnvAndNoTerminal) {
  PluginDir p;
  p.tokenAnswer("t");
  std::string cmd = p.script(
      "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$D/info\"\n"
      "printf '%s\\n' \"$@\" > \"$D/args\"\n"
      "printf '%s|%s|%s' \"$PLUGIN_REGION\" \"$SHARED\" \"${HOME:+home}\" > \"$D/env\"\n"
      "if [ -t 0 ]; then echo tty > \"$D/stdin\"; else cat > \"$D/stdin\"; echo notty >> \"$D/stdin\"; fi\n"
      "cat \"$D/answer\"\n");
  auto cfg = execConfig(cmd);
  cfg.exec->args = {"get-token", "--cluster", "a b"};
  cfg.exec->env = {{"PLUGIN_REGION", "eu-west-1"}, {"SHARED", "first"}, {"SHARED", "second"}};
  ExecCredentialPlugin plugin(cfg);
  ASSERT_TRUE(plugin.get());

  auto info = json::parse(readFile(p.path("info"))).as_object();
  EXPECT_EQ(info.at("kind"), "ExecCredential");
  EXPECT_EQ(info.at("apiVersion"), kV1);
  EXPECT_EQ(info.at("spec").as_object().at("interactive"), false);
  EXPECT_FALSE(info.at("spec").as_object().contains("cluster")) << "provideClusterInfo is false";
  EXPECT_EQ(readFile(p.path("args")), "get-token\n--cluster\na b\n") << "no shell splits the arguments";
  EXPECT_EQ(readFile(p.path("env")), "eu-west-1|second|home") << "the daemon's environment is kept";
  EXPECT_EQ(readFile(p.path("stdin")), "notty\n") << "stdin is /dev/null";
}

TEST(K8sExecCredential, ProvideClusterInfoPassesTheCluster) {
  PluginDir p;
  p.tokenAnswer("t");
  std::string cmd = p.script("printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$D/info\"\ncat \"$D/answer\"\n");
  auto cfg = execConfig(cmd);
  cfg.exec->provideClusterInfo = true;
  cfg.caPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  cfg.tlsServerName = "kubernetes.default.svc";
  ExecCredentialPlugin plugin(cfg);
  ASSERT_TRUE(plugin.get());
  auto info = json::parse(readFile(p.path("info"))).as_object();
  const auto& cluster = info.at("spec").as_object().at("cluster").as_object();
  EXPECT_EQ(cluster.at("server"), "https://10.0.0.1:6443");
  EXPECT_EQ(cluster.at("tls-server-name"), "kubernetes.default.svc");
  EXPECT_EQ(cluster.at("certificate-authority-data").as_string(), base64Encode(cfg.caPem).c_str());
  EXPECT_FALSE(cluster.contains("insecure-skip-tls-verify"));
}

TEST(K8sExecCredential, CachesUntilShortlyBeforeExpirationThenRunsAgain) {
  PluginDir p;
  p.tokenAnswer("first", kV1, "2030-01-01T01:00:00Z");
  WallClock clock;
  ExecPluginOptions o;
  o.now = clock.fn();
  o.expiryMargin = std::chrono::seconds(10);
  ExecCredentialPlugin plugin(execConfig(p.catAnswer()), o);
  auto c = plugin.get();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->token, "first");
  EXPECT_EQ(c->expiry, at("2030-01-01T01:00:00Z"));

  clock.set("2030-01-01T00:59:49Z");
  EXPECT_EQ(plugin.get()->token, "first");
  EXPECT_EQ(p.runs(), 1u) << "cached while more than the margin remains";

  p.tokenAnswer("second", kV1, "2030-01-01T02:00:00+01:00");
  clock.set("2030-01-01T00:59:51Z");
  auto renewed = plugin.get();
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_EQ(renewed->token, "second");
  EXPECT_EQ(renewed->generation, 2u);
  EXPECT_EQ(p.runs(), 2u);
}

TEST(K8sExecCredential, WithoutExpirationItIsCachedUntilAnUnauthorized) {
  PluginDir p;
  p.tokenAnswer("forever");
  WallClock clock;
  ExecPluginOptions o;
  o.now = clock.fn();
  ExecCredentialPlugin plugin(execConfig(p.catAnswer()), o);
  ASSERT_TRUE(plugin.get());
  clock.set("2040-01-01T00:00:00Z");
  EXPECT_EQ(plugin.get()->token, "forever");
  EXPECT_EQ(p.runs(), 1u);

  p.tokenAnswer("rotated");
  auto r = plugin.refreshAfterUnauthorized(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->token, "rotated");
  EXPECT_EQ(plugin.refreshAfterUnauthorized(1)->token, "rotated") << "already rotated: no second run";
  EXPECT_EQ(p.runs(), 2u);
}

TEST(K8sExecCredential, NeverRunsTwiceAtOnceAndWaitersShareTheRun) {
  PluginDir p;
  p.tokenAnswer("shared");
  std::string cmd = p.script(
      "mkdir \"$D/lock\" 2>/dev/null || echo overlap >> \"$D/overlaps\"\n"
      "sleep 0.3\nrmdir \"$D/lock\"\ncat \"$D/answer\"\n");
  ExecCredentialPlugin plugin(execConfig(cmd));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] { ok += plugin.get() && plugin.get()->token == "shared"; });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(p.runs(), 1u);
  EXPECT_EQ(plugin.runs(), 1u);
  EXPECT_EQ(readFile(p.path("overlaps")), "");
}

TEST(K8sExecCredential, ConcurrentUnauthorizedCallersRunThePluginOnce) {
  PluginDir p;
  p.tokenAnswer("t1");
  std::string cmd = p.script("sleep 0.2\ncat \"$D/answer\"\n");
  ExecCredentialPlugin plugin(execConfig(cmd));
  ASSERT_TRUE(plugin.get());
  p.tokenAnswer("t2");
  std::vector<std::thread> threads;
  std::atomic<int> rotated{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto r = plugin.refreshAfterUnauthorized(1);
      rotated += r && r->token == "t2";
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(rotated.load(), 6);
  EXPECT_EQ(p.runs(), 2u);
}

TEST(K8sExecCredential, ReturnsAClientCertificate) {
  PluginDir p;
  p.answer({{"apiVersion", kV1},
            {"kind", "ExecCredential"},
            {"status", {{"clientCertificateData", "CERT"}, {"clientKeyData", "KEY"},
                        {"expirationTimestamp", "2030-01-01T00:00:00.5Z"}}}});
  ExecCredentialPlugin plugin(execConfig(p.catAnswer()));
  auto c = plugin.get();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->clientCertPem, "CERT");
  EXPECT_EQ(c->clientKeyPem, "KEY");
  EXPECT_TRUE(c->token.empty());
}

struct BadPlugin {
  const char* description;
  std::string body;                    // the script after the run counter
  std::vector<std::string> mustMention;
};

TEST(K8sExecCredential, ErrorsSayWhatWasWrong) {
  auto out = [](const std::string& json) { return "cat <<'EOF'\n" + json + "\nEOF\n"; };
  const std::string v1 = std::string("\"apiVersion\":\"") + kV1 + "\",\"kind\":\"ExecCredential\"";
  const std::vector<BadPlugin> cases = {
      {"non-zero exit", "echo 'starting' >&2\necho 'error: SSO session expired, run aws sso login' >&2\nexit 3\n",
       {"failed with exit code 3", "error: SSO session expired, run aws sso login"}},
      {"killed", "kill -9 $$\n", {"killed by signal 9"}},
      {"not JSON", "echo 'Usage: plugin [flags]'\n", {"not a JSON ExecCredential", "Usage: plugin"}},
      {"wrong apiVersion",
       out("{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
           "\"status\":{\"token\":\"t\"}}"),
       {"answered apiVersion \"client.authentication.k8s.io/v1beta1\"", "asks for client.authentication.k8s.io/v1"}},
      {"wrong kind", out("{\"apiVersion\":\"" + std::string(kV1) + "\",\"kind\":\"Status\",\"status\":{\"token\":\"t\"}}"),
       {"answered kind \"Status\""}},
      {"no status", out("{" + v1 + "}"), {"no status"}},
      {"no token and no certificate", out("{" + v1 + ",\"status\":{}}"),
       {"neither status.token nor status.clientCertificateData"}},
      {"certificate without key", out("{" + v1 + ",\"status\":{\"clientCertificateData\":\"C\"}}"),
       {"only one of status.clientCertificateData and status.clientKeyData"}},
      {"token not a string", out("{" + v1 + ",\"status\":{\"token\":5}}"), {"status.token is not a string"}},
      {"bad expiration", out("{" + v1 + ",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}"),
       {"status.expirationTimestamp", "tomorrow"}},
  };
  for (const auto& c : cases) {
    PluginDir p;
    std::string cmd = p.script(c.body);
    ExecCredentialPlugin plugin(execConfig(cmd));
    auto r = plugin.get();
    ASSERT_FALSE(r) << c.description;
    EXPECT_NE(r.error().message.find("exec credential plugin " + cmd), std::string::npos)
        << c.description << ": " << r.error().message;
    for (const auto& m : c.mustMention) {
      EXPECT_NE(r.error().message.find(m), std::string::npos)
          << c.description << ": \"" << r.error().message << "\" lacks \"" << m << "\"";
    }
  }
}

TEST(K8sExecCredential, AMissingCommandShowsTheInstallHint) {
  auto cfg = execConfig("vgpu-no-such-credential-plugin");
  cfg.exec->installHint = "Install it with: brew install no-such-plugin";
  ExecCredentialPlugin plugin(cfg);
  auto r = plugin.get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("vgpu-no-such-credential-plugin: executable not found in $PATH"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("brew install no-such-plugin"), std::string::npos) << r.error().message;

  ExecCredentialPlugin byPath(execConfig("/nonexistent/dir/plugin"));
  auto r2 = byPath.get();
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message.find("/nonexistent/dir/plugin: executable not found"), std::string::npos)
      << r2.error().message;
}

TEST(K8sExecCredential, APluginThatHangsIsKilledAtTheTimeout) {
  PluginDir p;
  std::string cmd = p.script("sleep 30\n");
  ExecPluginOptions o;
  o.timeout = std::chrono::milliseconds(300);
  ExecCredentialPlugin plugin(execConfig(cmd), o);
  auto start = std::chrono::steady_clock::now();
  auto r = plugin.get();
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("did not finish within 300 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, std::chrono::seconds(5)) << "the sleep child was killed with the script";

  PluginDir quiet;
  ExecCredentialPlugin closesItsOutput(execConfig(quiet.script("exec >&- 2>&-\nsleep 30\n")), o);
  start = std::chrono::steady_clock::now();
  r = closesItsOutput.get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("did not finish within 300 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// ---- Through the client, against the apiserver double ----

class K8sClientExec : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::startServer();
    ASSERT_TRUE(server_);
    ASSERT_TRUE(server_->create("nodes", testing::makeNode("n1")));
  }
  std::unique_ptr<Client> client(const std::string& command, ClientOptions o = testing::fastOptions()) {
    auto cfg = execConfig(command);
    cfg.server = server_->url();
    cfg.caPem = server_->caPem();
    auto c = Client::create(cfg, std::move(o));
    if (!c) ADD_FAILURE() << c.error().message;
    return c ? std::move(*c) : nullptr;
  }
  std::vector<int> statuses() {
    std::vector<int> s;
    for (const auto& r : server_->requests()) s.push_back(r.status);
    return s;
  }

  std::unique_ptr<fakes::FakeApiServer> server_;
};

TEST_F(K8sClientExec, SendsThePluginTokenAsBearer) {
  PluginDir p;
  p.tokenAnswer("exec-token");
  server_->setToken("exec-token");
  auto c = client(p.catAnswer());
  auto r = c->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(c->get(kNodes, "", "n1"));
  EXPECT_EQ(p.runs(), 1u) << "the token is cached between requests";
}

TEST_F(K8sClientExec, RunsThePluginAgainAfterUnauthorizedAndRetriesOnce) {
  PluginDir p;
  p.tokenAnswer("old");
  server_->setToken("old");
  auto c = client(p.catAnswer());
  ASSERT_TRUE(c->get(kNodes, "", "n1"));
  server_->setToken("new");  // revoked early, before any expirationTimestamp
  p.tokenAnswer("new");
  auto r = c->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(statuses(), (std::vector<int>{200, 401, 200}));
  EXPECT_EQ(p.runs(), 2u);
}

TEST_F(K8sClientExec, APluginStillGivingARejectedTokenIsOneRetryNotALoop) {
  PluginDir p;
  p.tokenAnswer("wrong");
  server_->setToken("right");
  auto c = client(p.catAnswer());
  auto r = c->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().isUnauthorized()) << r.error().describe();
  EXPECT_EQ(statuses(), (std::vector<int>{401, 401}));
  EXPECT_EQ(p.runs(), 2u);
}

TEST_F(K8sClientExec, RunsThePluginAgainWhenTheTokenExpires) {
  PluginDir p;
  p.tokenAnswer("t1", kV1, "2030-01-01T00:10:00Z");
  server_->setToken("t1");
  WallClock wall;
  auto o = testing::fastOptions();
  o.wallClock = wall.fn();
  auto c = client(p.catAnswer(), o);
  ASSERT_TRUE(c->get(kNodes, "", "n1"));
  server_->setToken("t2");
  p.tokenAnswer("t2", kV1, "2030-01-01T00:20:00Z");
  wall.set("2030-01-01T00:10:00Z");
  auto r = c->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(statuses(), (std::vector<int>{200, 200})) << "renewed before the request, not after a 401";
  EXPECT_EQ(p.runs(), 2u);
}

TEST_F(K8sClientExec, APluginFailureFailsTheRequestWithItsMessage) {
  PluginDir p;
  auto c = client(p.script("echo 'token endpoint unreachable' >&2\nexit 1\n"));
  auto r = c->get(kNodes, "", "n1");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("getting credentials: exec credential plugin"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("token endpoint unreachable"), std::string::npos) << r.error().message;
  EXPECT_TRUE(server_->requests().empty()) << "nothing is sent without a credential";
}

TEST_F(K8sClientExec, AWatchAnsweredUnauthorizedRenewsTheCredentialForTheNextWatch) {
  PluginDir p;
  p.tokenAnswer("old");
  server_->setToken("new");
  auto c = client(p.catAnswer());
  WatchOptions w;
  w.timeoutSeconds = 1;
  auto s = c->watch(kNodes, w, [](WatchEvent) { return true; });
  ASSERT_FALSE(s);
  EXPECT_TRUE(s.error().isUnauthorized());
  EXPECT_EQ(p.runs(), 2u);
}

TEST(K8sClientExecTls, UsesTheClientCertificateThePluginReturns) {
  fakes::FakeApiServerOptions so;
  so.tls = true;
  auto server = testing::startServer(so);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->create("nodes", testing::makeNode("n1")));
  auto cert = fakes::detail::makeSelfSignedCert();
  ASSERT_TRUE(cert);
  PluginDir p;
  p.answer({{"apiVersion", kV1},
            {"kind", "ExecCredential"},
            {"status", {{"clientCertificateData", cert->certPem}, {"clientKeyData", cert->keyPem}}}});
  auto cfg = execConfig(p.catAnswer());
  cfg.server = server->url();
  cfg.caPem = server->caPem();
  auto c = Client::create(cfg, testing::fastOptions());
  ASSERT_TRUE(c) << c.error().message;
  auto r = (*c)->get(kNodes, "", "n1");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(p.runs(), 1u);

  PluginDir bad;
  bad.answer({{"apiVersion", kV1},
              {"kind", "ExecCredential"},
              {"status", {{"clientCertificateData", "not a certificate"}, {"clientKeyData", "nor a key"}}}});
  cfg.exec->command = bad.catAnswer();
  auto o = testing::fastOptions();
  o.maxRetries = 0;
  auto badClient = Client::create(cfg, o);
  ASSERT_TRUE(badClient);
  auto e = (*badClient)->get(kNodes, "", "n1");
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("client certificate is not valid PEM"), std::string::npos)
      << e.error().message;
}

}  // namespace
}  // namespace vgpu::k8s
