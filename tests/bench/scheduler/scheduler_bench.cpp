// The extender measured at the HTTP level on loopback, against the apiserver double:
//  - BM_FilterNodeCacheCapable: one filter request over N nodes x 8 GPUs (NodeNames in,
//    NodeNames out; or, with fits:0, every node in FailedNodes with its category; gzip:1
//    the client accepts gzip as kube-scheduler does), one client,
//    server on one thread; p50/p99 per request; placed:N, N pods already admitted on the
//    cluster (8,000 MiB and 10 percent each, spread over the nodes and their devices). Under valgrind --tool=callgrind each
//    measured loop is dumped on its own (instructions per request = dump total / iterations).
//  - BM_FilterRetriedPod: the same pod again and again on the loaded cluster while some nodes
//    change between requests: what filter's memo of verdicts (filter_memo.h) saves.
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

#include "cluster_builder.h"

namespace vgpu {
namespace {

using namespace vgpu::testing;

/// `placed` pods admitted on the nodes before any request (round-robin over the nodes, then
/// over each node's devices), as the scheduler finds them in its informer after a restart;
/// kept in `placedPods` when given.
std::unique_ptr<SchedulerHarness> cluster(int nodes, int threads, std::vector<std::string>& names, int placed = 0,
                                          std::vector<json::object>* placedPods = nullptr) {
  scheduler::tuneAllocator();  // as vgpu-scheduler's main does
  scheduler::ServiceOptions options;
  options.http.threads = threads;
  // Heartbeats a day long: under callgrind the cluster takes minutes to build, and stale
  // nodes would be refused without being evaluated.
  auto h = std::make_unique<SchedulerHarness>(options, NodePolicy::kBinpack, std::chrono::hours(24));
  // Generous: under valgrind the informers take minutes.
  names = addNodes(*h, nodes, 8, 81920, 10, std::chrono::minutes(10));
  for (int i = 0; i < placed; ++i) {
    json::object pod = h->createPod(admittedPod("placed-" + std::to_string(i), names[static_cast<std::size_t>(i % nodes)],
                                                8000, 10, (i / nodes) % 8));
    if (placedPods) placedPods->push_back(std::move(pod));
  }
  if (!h->awaitPods(static_cast<std::size_t>(placed), std::chrono::minutes(10)))
    throw std::runtime_error("the scheduler's cache did not see all " + std::to_string(placed) + " placed pods");
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
  auto h = cluster(static_cast<int>(state.range(0)), 1, names, static_cast<int>(state.range(3)));
  // range(1) = 0: a pod no node can take (more memory than any GPU has): every node is in
  // FailedNodes with its reason in words.
  const bool fits = state.range(1) != 0;
  // range(2) = 1: the client asks for gzip, as kube-scheduler's (Go's transport) does.
  const bool gzip = state.range(2) != 0;
  // A pod that exists (with its uid), as kube-scheduler sends: a refused one is remembered
  // for waking up when capacity frees.
  const std::string body = extenderArgs(h->createPod(gpuPod("bench", fits ? 10000 : 100000, 20)), names);
  TestHttpClient http(h->service->extenderPort());
  if (gzip) http.setHeader("Accept-Encoding", "gzip");
  std::vector<double> latencies;
  std::size_t answerBytes = 0;
  // Under callgrind, each run of the loop is dumped on its own: only the requests count.
  CALLGRIND_ZERO_STATS;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto r = http.post("/filter", body);
    latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    const bool packed = r.headers.count("Content-Encoding") > 0;
    if (r.status != 200 || (!packed && r.body.find("node-0\"") == std::string::npos)) state.SkipWithError("filter failed");
    answerBytes = r.body.size();
  }
  CALLGRIND_DUMP_STATS_AT("filter requests");
  state.counters["p50_ms"] = percentile(latencies, 0.50);
  state.counters["p99_ms"] = percentile(latencies, 0.99);
  state.counters["request_KiB"] = static_cast<double>(body.size()) / 1024.0;
  state.counters["answer_KiB"] = static_cast<double>(answerBytes) / 1024.0;
  // Handler time inside the server (JSON in to JSON out), without the socket round trip.
  state.counters["handler_ms"] =
      1000 * meanOf(h->service->registry().render(), "vgpu_scheduler_filter_duration_seconds");
}
BENCHMARK(BM_FilterNodeCacheCapable)
    ->ArgNames({"nodes", "fits", "gzip", "placed"})
    ->Args({1000, 1, 0, 0})
    ->Args({5000, 1, 0, 0})
    ->Args({5000, 0, 0, 0})
    ->Args({5000, 0, 1, 0})
    ->Args({5000, 1, 0, 50000})
    ->Args({5000, 0, 0, 50000})
    ->Args({5000, 0, 1, 50000})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(3)
    ->MeasureProcessCPUTime();

/// A pod kube-scheduler retries on issue 19's loaded cluster (5,000 nodes x 8 GPUs, 50,000
/// pods placed) while the cluster moves: before each request `changed` nodes each see one of
/// their pods go and come back (the scheduler's cache counts both, so the node is as it was
/// but its state is new to filter's memo, as after any pod event there). fits:0 is the pod
/// no node can take, fits:1 one every node can. changed:5000 is every node new to the memo
/// on every request: the cost of a pod's first request. Under callgrind as above.
void BM_FilterRetriedPod(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  constexpr int kNodes = 5000;
  std::vector<std::string> names;
  std::vector<json::object> placed;
  auto h = cluster(kNodes, 1, names, 50000, &placed);
  const bool fits = state.range(0) != 0;
  const auto changed = static_cast<std::size_t>(state.range(1));
  const std::string body = extenderArgs(h->createPod(gpuPod("bench", fits ? 10000 : 100000, 20)), names);
  TestHttpClient http(h->service->extenderPort());
  scheduler::ClusterCache& cache = h->service->cache();
  std::vector<double> latencies;
  std::size_t next = 0;  // the placed pods are round-robin over the nodes: kNodes in a row are on kNodes nodes
  CALLGRIND_ZERO_STATS;
  for (auto _ : state) {
    state.PauseTiming();
    for (std::size_t k = 0; k < changed; ++k, next = (next + 1) % placed.size()) {
      cache.removePod(placed[next]);
      cache.upsertPod(placed[next]);
    }
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    auto r = http.post("/filter", body);
    latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (r.status != 200 || r.body.find("node-0\"") == std::string::npos) state.SkipWithError("filter failed");
  }
  CALLGRIND_DUMP_STATS_AT("filter requests");
  state.counters["p50_ms"] = percentile(latencies, 0.50);
  state.counters["p99_ms"] = percentile(latencies, 0.99);
  state.counters["handler_ms"] =
      1000 * meanOf(h->service->registry().render(), "vgpu_scheduler_filter_duration_seconds");
}
BENCHMARK(BM_FilterRetriedPod)
    ->ArgNames({"fits", "changed"})
    ->ArgsProduct({{0, 1}, {0, 50, 500, 5000}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(3)
    ->MeasureProcessCPUTime();

/// The transport's floor: the same connection and server thread, a handler that does no work.
void BM_HealthzRoundTrip(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  std::vector<std::string> names;
  auto h = cluster(10, 1, names);
  TestHttpClient http(h->service->port());
  std::vector<double> latencies;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto r = http.get("/healthz");
    latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (r.status != 200) state.SkipWithError("healthz failed");
  }
  state.counters["p50_ms"] = percentile(latencies, 0.50);
  state.counters["p99_ms"] = percentile(latencies, 0.99);
}
BENCHMARK(BM_HealthzRoundTrip)->Unit(benchmark::kMicrosecond)->MinTime(1)->MeasureProcessCPUTime();

void BM_FilterBindThroughput(benchmark::State& state) {
  spdlog::set_level(spdlog::level::err);
  std::vector<std::string> names;
  auto h = cluster(1000, 16, names);
  AgentDouble agent(h->api->url());
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
    const ScheduleOutcome out = scheduleAll(h->service->extenderPort(), pods, names, {16, 10, 8});
    placed += out.placed;
    failed += out.unplaced;
  }
  state.counters["pods_per_s"] = benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
  state.counters["unplaced"] = static_cast<double>(failed);
}
BENCHMARK(BM_FilterBindThroughput)->Arg(2000)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vgpu

BENCHMARK_MAIN();
