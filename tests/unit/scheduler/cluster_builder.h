#pragma once
// A cluster of many nodes and pods scheduled through filter + bind by concurrent clients,
// as kube-scheduler would drive the extender: shared by the stress test and the benchmark.

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../http/test_http_client.h"
#include "scheduler_harness.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"

namespace vgpu::testing {

/// Plays the node agent's part that the scheduler waits for: a pod bound "allocating"
/// becomes "success" (as after the kubelet's Allocate). With its own client, as the agents
/// are other processes: its patches do not share the scheduler's client-side rate limit.
class AgentDouble {
 public:
  explicit AgentDouble(const std::string& apiServerUrl) : client_(connect(apiServerUrl)) {
    informer_ = std::make_unique<k8s::Informer>(
        *client_, k8s::kPods, k8s::InformerOptions{},
        k8s::InformerHandlers{[this](const k8s::ObjectPtr& p) { ack(*p); },
                              [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { ack(*p); }, nullptr});
    informer_->start();
  }
  ~AgentDouble() { informer_->stop(); }
  AgentDouble(const AgentDouble&) = delete;
  AgentDouble& operator=(const AgentDouble&) = delete;

 private:
  static std::unique_ptr<k8s::Client> connect(const std::string& url) {
    k8s::ClientConfig config;
    config.server = url;
    auto c = k8s::Client::create(config, {});
    if (!c.ok()) throw std::runtime_error(c.error().message);
    return std::move(c).value();
  }
  void ack(const json::object& pod) {
    if (k8s::annotation(pod, keys::kPodBindPhase) != "allocating") return;
    k8s::MetadataPatch patch;
    patch.annotations[std::string(keys::kPodBindPhase)] = "success";
    (void)client_->patchMetadata(k8s::kPods, k8s::namespaceOf(pod), k8s::name(pod), patch);
  }
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> informer_;
};

/// Creates `count` nodes "node-<i>" with `gpus` sim devices each and waits until the
/// scheduler's cache has them all. Returns their names.
inline std::vector<std::string> addNodes(SchedulerHarness& h, int count, int gpuCount, std::uint64_t memoryMiB = 81920,
                                         std::uint32_t split = 10,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<std::string> names;
  for (int n = 0; n < count; ++n) {
    names.push_back("node-" + std::to_string(n));
    h.createNode(nodeJson(names.back(), gpus(names.back(), gpuCount, memoryMiB, split)));
  }
  if (!h.awaitNodes(static_cast<std::size_t>(count), timeout))
    throw std::runtime_error("the scheduler's cache did not see all " + std::to_string(count) + " nodes");
  return names;
}

/// ExtenderArgs for many pods over one candidate list: the NodeNames part is written once.
class ExtenderArgsWriter {
 public:
  explicit ExtenderArgsWriter(const std::vector<std::string>& names) {
    json::array list;
    for (const auto& n : names) list.emplace_back(n);
    tail_ = ",\"Nodes\":null,\"NodeNames\":" + json::serialize(list) + "}";
  }
  std::string operator()(const json::object& pod) const { return "{\"Pod\":" + json::serialize(pod) + tail_; }

 private:
  std::string tail_;
};

struct ScheduleOptions {
  int clients = 16;
  int attempts = 10;     ///< filter + bind tries per pod before it counts as unplaced
  size_t pickAmong = 8;  ///< each bind picks at random among the first fitting nodes, so clients race
};
struct ScheduleOutcome {
  int placed = 0, unplaced = 0, bindErrors = 0;
};

/// Schedules `pods` through /filter and /bind by concurrent clients, as kube-scheduler
/// would: filter, pick a fitting node, bind; a refused bind is retried from filter.
inline ScheduleOutcome scheduleAll(std::uint16_t port, const std::vector<json::object>& pods,
                                   const std::vector<std::string>& nodeNames, const ScheduleOptions& options = {}) {
  const ExtenderArgsWriter args(nodeNames);
  std::atomic<size_t> next{0};
  std::atomic<int> placed{0}, unplaced{0}, bindErrors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < options.clients; ++t) {
    threads.emplace_back([&, t] {
      TestHttpClient http(port);
      std::mt19937 pick(static_cast<unsigned>(t));
      for (size_t i = next.fetch_add(1); i < pods.size(); i = next.fetch_add(1)) {
        bool done = false;
        for (int attempt = 0; attempt < options.attempts && !done; ++attempt) {
          auto f = http.post("/filter", args(pods[i]));
          if (f.status != 200) break;
          boost::system::error_code ec;
          auto answer = json::parse(f.body, ec);
          const json::value* fit = ec || !answer.is_object() ? nullptr : answer.as_object().if_contains("NodeNames");
          if (!fit || !fit->is_array() || fit->as_array().empty()) break;
          const auto& list = fit->as_array();
          const std::string node(list[pick() % std::min(list.size(), options.pickAmong)].as_string());
          auto b = http.post("/bind", bindingArgs(pods[i], node));
          if (b.status == 200 && b.body == R"({"Error":""})")
            done = true;
          else
            bindErrors.fetch_add(1);
        }
        (done ? placed : unplaced).fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return {placed.load(), unplaced.load(), bindErrors.load()};
}

}  // namespace vgpu::testing
