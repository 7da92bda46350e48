// The vgpu-scheduler binary end to end: flags, kubeconfig, device config, backends from a
// directory, HTTPS from files, readiness, a filter, and a clean exit on SIGTERM.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "../http/test_http_client.h"
#include "../http/test_tls_cert.h"
#include "scheduler_harness.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;
namespace fs = std::filesystem;

/// A child process whose stdout+stderr we read line by line.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_) std::fclose(out_);
  }
  /// The next output line matching `pattern` (its first group), or "" at EOF.
  std::string awaitLine(const std::regex& pattern, std::string* all = nullptr) {
    char line[4096];
    while (out_ && std::fgets(line, sizeof line, out_)) {
      if (all) *all += line;
      std::cmatch m;
      if (std::regex_search(line, m, pattern)) return m.size() > 1 ? m[1].str() : m[0].str();
    }
    return {};
  }
  int terminate() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
};

struct BinaryFixture : ::testing::Test {
  fs::path dir;
  std::unique_ptr<fakes::FakeApiServer> api;

  void SetUp() override {
    dir = fs::temp_directory_path() / ("vgpu-scheduler-bin-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    api = std::move(fakes::FakeApiServer::start()).value();
    std::ofstream(dir / "kubeconfig") << "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                                         "clusters:\n- name: fake\n  cluster:\n    server: " << api->url() << "\n"
                                         "contexts:\n- name: t\n  context: {cluster: fake, user: u}\n"
                                         "users:\n- name: u\n  user: {token: abc}\n";
    std::ofstream(dir / "device-config.yaml") << "version: 1\nbackends:\n  sim:\n    enabled: true\n    resources:\n"
                                                 "      count: nvidia.com/gpu\n      memory: nvidia.com/gpumem\n"
                                                 "      cores: nvidia.com/gpucores\n";
    ASSERT_TRUE(api->create("nodes", nodeJson("n1", gpus("n1", 2))).ok());
  }
  void TearDown() override { fs::remove_all(dir); }

  std::vector<std::string> args(std::vector<std::string> extra) {
    std::vector<std::string> a{VGPU_SCHEDULER_BIN, "--config", (dir / "device-config.yaml").string(), "--backend-dir",
                               VGPU_BACKEND_DIR, "--kubeconfig", (dir / "kubeconfig").string(), "--listen", "127.0.0.1:0",
                               "--extender-listen", "127.0.0.1:0"};
    for (size_t i = 0; i < extra.size(); ++i) {  // a flag given again replaces the default above
      auto same = std::find(a.begin(), a.end(), extra[i]);
      if (same != a.end() && i + 1 < extra.size()) {
        *(same + 1) = extra[++i];
      } else {
        a.push_back(extra[i]);
      }
    }
    return a;
  }
};

TEST_F(BinaryFixture, SchedulerBinaryServesHttpsFiltersAndStopsOnSigterm) {
  if (!kCanMakeCerts) GTEST_SKIP() << kNoCertsReason;
  ASSERT_TRUE(makeSelfSignedCert(dir, "x"));
  Child child(args({"--tls-cert", (dir / "tls.crt").string(), "--tls-key", (dir / "tls.key").string()}));
  std::string log;
  // The extender verbs on loopback (plain HTTP: only kube-scheduler in the pod reaches it),
  // the webhook and /readyz over HTTPS.
  const std::string verbsPort = child.awaitLine(std::regex("extender verbs on http://127\\.0\\.0\\.1:([0-9]+)"), &log);
  ASSERT_FALSE(verbsPort.empty()) << log;
  const std::string port = child.awaitLine(std::regex("serving on https://127\\.0\\.0\\.1:([0-9]+)"), &log);
  ASSERT_FALSE(port.empty()) << log;
  TestHttpClient http(static_cast<std::uint16_t>(std::stoi(port)), true);
  TestHttpClient verbs(static_cast<std::uint16_t>(std::stoi(verbsPort)));
  ASSERT_TRUE(eventually([&] { return http.get("/readyz").status == 200; }));
  EXPECT_EQ(http.post("/filter", extenderArgs(gpuPod("p", 1000), {"n1"})).status, 404) << "not on the webhook's port";
  ASSERT_TRUE(eventually([&] {
    auto r = verbs.post("/filter", extenderArgs(gpuPod("p", 1000), {"n1"}));
    return r.status == 200 && r.body.find("\"NodeNames\":[\"n1\"]") != std::string::npos;
  }));
  EXPECT_EQ(child.terminate(), 0);
}

TEST_F(BinaryFixture, SchedulerBinaryRefusesBadFlagsAndFilesWithAMessage) {
  struct Case {
    const char* description;
    std::vector<std::string> extra;
    const char* expect;
  } cases[] = {
      {"bad listen", {"--listen", "nope"}, "--listen must be address:port"},
      {"missing config", {"--config", "/nonexistent/device-config.yaml"}, "nonexistent"},
      {"key without cert", {"--tls-key", "/tmp/x.key"}, "both a certificate and a key"},
      {"unknown flag", {"--frobnicate"}, "frobnicate"},
      // Issue 27 item 4: /bind binds pods; off loopback only behind client certificates.
      {"extender verbs on the network without client certificates", {"--extender-listen", "0.0.0.0:0"},
       "--extender-client-ca"},
      {"bad extender listen", {"--extender-listen", "nope"}, "--extender-listen must be address:port"},
  };
  for (const auto& c : cases) {
    Child child(args(c.extra));
    std::string log;
    child.awaitLine(std::regex("^\\b$"), &log);  // read to EOF
    EXPECT_EQ(child.wait(), 2) << c.description << ": " << log;
    EXPECT_NE(log.find(c.expect), std::string::npos) << c.description << ": " << log;
  }
}

}  // namespace
}  // namespace vgpu::scheduler
