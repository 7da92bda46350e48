#pragma once
// Shared pieces of the K8s tests: a fake clock, object builders, a client for a double.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/k8s/client.h"

namespace vgpu::k8s::testing {

/// Time that moves only when someone sleeps; records every sleep.
class FakeClock final : public Clock {
 public:
  TimePoint now() override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void sleepFor(Duration d) override {
    std::lock_guard lock(mu_);
    sleeps_.push_back(d);
    now_ += d;
  }
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  std::vector<Duration> sleeps() {
    std::lock_guard lock(mu_);
    return sleeps_;
  }
  Duration slept() {
    std::lock_guard lock(mu_);
    Duration total{};
    for (auto d : sleeps_) total += d;
    return total;
  }

 private:
  std::mutex mu_;
  TimePoint now_{std::chrono::hours(1000)};
  std::vector<Duration> sleeps_;
};

inline boost::json::object makePod(const std::string& ns, const std::string& name,
                                   const std::string& node = "",
                                   boost::json::object labels = {}) {
  boost::json::object spec{{"containers", boost::json::array{boost::json::object{
                                              {"name", "main"},
                                              {"image", "busybox"},
                                              {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}};
  if (!node.empty()) spec["nodeName"] = node;
  return boost::json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}},
      {"spec", std::move(spec)}};
}

inline boost::json::object makeNode(const std::string& name, boost::json::object labels = {}) {
  return boost::json::object{{"apiVersion", "v1"},
                             {"kind", "Node"},
                             {"metadata", {{"name", name}, {"labels", std::move(labels)}}}};
}

/// Options that never wait in real time (the fake clock absorbs backoff) and time out fast.
inline ClientOptions fastOptions(std::shared_ptr<Clock> clock = nullptr) {
  ClientOptions o;
  o.clock = clock ? clock : std::make_shared<FakeClock>();
  o.requestTimeout = std::chrono::milliseconds(5000);
  o.backoffBase = std::chrono::milliseconds(100);
  o.backoffMax = std::chrono::milliseconds(2000);
  o.jitterSeed = 42;
  return o;
}

inline std::unique_ptr<fakes::FakeApiServer> startServer(fakes::FakeApiServerOptions o = {}) {
  auto s = fakes::FakeApiServer::start(std::move(o));
  if (!s) ADD_FAILURE() << s.error().message;
  return s ? std::move(*s) : nullptr;
}

inline std::unique_ptr<Client> clientFor(const fakes::FakeApiServer& server,
                                         ClientOptions options = fastOptions(),
                                         const std::string& token = "") {
  ClientConfig cfg;
  cfg.server = server.url();
  cfg.caPem = server.caPem();
  cfg.bearerToken = token;
  cfg.source = "test";
  auto c = Client::create(cfg, std::move(options));
  if (!c) ADD_FAILURE() << c.error().message;
  return c ? std::move(*c) : nullptr;
}

/// A fresh temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("vgpu-k8s-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string write(const std::string& name, const std::string& content) const {
    auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

/// Polls `pred` until true or `timeout` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace vgpu::k8s::testing
