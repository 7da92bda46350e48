// The extender measured at the HTTP level on loopback, against the apiserver double:
//  - BM_FilterNodeCacheCapable: one filter request over N nodes x 8 GPUs (NodeNames in,
//    NodeNames out), one client, server on one thread; p50/p99 per request.
//  - BM_FilterBindThroughput: pods scheduled through filter + bind by 16 concurrent
//    clients onto 1,000 nodes, with a node-agent double acknowledging Allocate.
// Run: taskset -c 0 bin/vgpu_scheduler_bench (one core), figures in docs/scheduler.md.
#include <benchmark/benchmark.h>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(what)
#endif

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "scheduler_harness.h"
#include "test_http_client.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"

namespace vgpu {
namespace {

using namespace vgpu::testing;

std::unique_ptr<SchedulerHarness> cluster(int nodes, int threads, std::vector<std::string>& names) {
  scheduler::tuneAllocator();  // as vgpu-scheduler's main does
  scheduler::ServiceOptions options;
  options.http.threads = threads;
  auto h = std::make_unique<SchedulerHarness>(options);
  names.clear();
  for (int n = 0; n < nodes; ++n) {
    names.push_back("node-" + std::to_string(n));
    h->createNode(nodeJson(names.back(), gpus(names.back(), 8)));
  }
  // Generous: under valgrind the informers take minutes.
  if (!h->awaitNodes(static_cast<size_t>(nodes), std::chrono::minutes(10))) throw std::runtime_error("nodes not synced");
  return h;
}

/// Mean seconds of a histogram family in the scheduler's /metrics text.
double meanOf(const std::string& text, const std::string& family) {
  auto value = [&](const std::string& series) {
    auto at = text.find("\n" + series + " ");
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + series.size() + 2));
  };
  const double count = value(family + "_count");
  return count > 0 ? value(family + "_sum") / count : 0.0;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void BM_FilterNodeCacheCapable(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<std::string> names;
  auto h = cluster(static_cast<int>(state.range(0)), 1, names);
  const std::string body = extenderArgs(gpuPod("bench", 10000, 20), names);
  TestHttpClient http(h->service->port());
  std::vector<double> latencies;
  // Under callgrind, each run of the loop is dumped on its own: only the requests count.
  CALLGRIND_ZERO_STATS;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto r = http.post("/filter", body);
    latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (r.status != 200 || r.body.find("node-0\"") == std::string::npos) state.SkipWithError("filter failed");
  }
  CALLGRIND_DUMP_STATS_AT("filter requests");
  state.counters["p50_ms"] = percentile(latencies, 0.50);
  state.counters["p99_ms"] = percentile(latencies, 0.99);
  state.counters["request_KiB"] = static_cast<double>(body.size()) / 1024.0;
  // Handler time inside the server (JSON in to JSON out), without the socket round trip.
  state.counters["handler_ms"] = 1000 * meanOf(h->service->registry().render(), "vgpu_scheduler_filter_duration_seconds");
}
BENCHMARK(BM_FilterNodeCacheCapable)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond)->MinTime(3)->MeasureProcessCPUTime();

/// Acknowledges Allocate for every pod bound "allocating", as the node agent would.
class AgentDouble {
 public:
  explicit AgentDouble(k8s::Client& client)
      : client_(client),
        informer_(client, k8s::kPods, {}, {[this](const k8s::ObjectPtr& p) { ack(*p); },
                                           [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { ack(*p); }, nullptr}) {
    informer_.start();
  }
  ~AgentDouble() { informer_.stop(); }

 private:
  void ack(const json::object& pod) {
    if (k8s::annotation(pod, keys::kPodBindPhase) != "allocating") return;
    k8s::MetadataPatch patch;
    patch.annotations[std::string(keys::kPodBindPhase)] = "success";
    (void)client_.patchMetadata(k8s::kPods, k8s::namespaceOf(pod), k8s::name(pod), patch);
  }
  k8s::Client& client_;
  k8s::Informer informer_;
};

void BM_FilterBindThroughput(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  std::vector<std::string> names;
  auto h = cluster(1000, 16, names);
  AgentDouble agent(*h->client);
  const int podsPerRound = static_cast<int>(state.range(0));
  int round = 0;
  std::int64_t placed = 0, failed = 0;
  std::mt19937 rng(1);
  for (auto _ : state) {
    state.PauseTiming();  // users create pods; the scheduler's work starts at filter
    std::vector<json::object> pods;
    for (int i = 0; i < podsPerRound; ++i)
      pods.push_back(h->createPod(gpuPod("r" + std::to_string(round) + "-" + std::to_string(i),
                                         1000 + static_cast<int>(rng() % 4000), static_cast<int>(rng() % 10))));
    ++round;
    state.ResumeTiming();
    std::atomic<int> next{0};
    std::atomic<std::int64_t> ok{0}, bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        TestHttpClient http(h->service->port());
        std::mt19937 pick(static_cast<unsigned>(t));
        for (int i = next.fetch_add(1); i < podsPerRound; i = next.fetch_add(1)) {
          bool done = false;
          for (int attempt = 0; attempt < 10 && !done; ++attempt) {
            auto f = http.post("/filter", extenderArgs(pods[i], names));
            auto fit = json::parse(f.body).as_object().at("NodeNames").as_array();
            if (fit.empty()) break;
            const std::string node(fit[pick() % std::min<size_t>(fit.size(), 8)].as_string());
            auto b = http.post("/bind", bindingArgs(pods[i], node));
            done = b.status == 200 && b.body == R"({"Error":""})";
          }
          (done ? ok : bad).fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    placed += ok.load();
    failed += bad.load();
  }
  state.counters["pods_per_s"] = benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
  state.counters["unplaced"] = static_cast<double>(failed);
}
BENCHMARK(BM_FilterBindThroughput)->Arg(2000)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vgpu

BENCHMARK_MAIN();
