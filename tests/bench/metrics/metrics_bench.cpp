// What one scrape of vgpu-scheduler's /metrics costs on issue 19's cluster (5,000 nodes x 8
// GPUs, 50,000 pods placed), with and without HAMi's names (--hami-metrics), with nothing
// changed since the last scrape or after pods came and went: the collectors that set the
// per-device, per-namespace and (HAMi) per-container series from the cache, then the
// exposition text. The figure that must not grow when the exposition changes hands (issue
// 44: prometheus-cpp). Under valgrind --tool=callgrind --instr-atstart=no only the scrapes
// are measured, each phase a part of its own (below); callgrind needs only the runs with
// moved > 0. Run: taskset -c 0 bin/vgpu_metrics_bench (one core), figures in docs/metrics.md.
#include <benchmark/benchmark.h>

#include <ctime>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_DUMP_STATS_AT(name)
#endif

#include <spdlog/spdlog.h>

#include "cluster_builder.h"

namespace vgpu {
namespace {

using namespace vgpu::testing;

/// Sample lines of `text` (HELP and TYPE left out).
std::unordered_set<std::string_view> samples(const std::string& text) {
  std::unordered_set<std::string_view> out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    const std::string_view line(text.data() + at, (end == std::string::npos ? text.size() : end) - at);
    if (!line.empty() && line[0] != '#') out.insert(line);
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

/// Percent of `after`'s samples that `before` does not have (a new value or a new series).
double changedPercent(const std::string& before, const std::string& after) {
  const auto old = samples(before), now = samples(after);
  std::size_t changed = 0;
  for (const auto& line : now) changed += old.count(line) == 0 ? 1 : 0;
  return now.empty() ? 0 : 100.0 * static_cast<double>(changed) / static_cast<double>(now.size());
}

void BM_SchedulerScrape(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const int nodes = static_cast<int>(state.range(0));
  const int pods = static_cast<int>(state.range(1));
  const int moved = static_cast<int>(state.range(3));  // pods that go and come back elsewhere between scrapes
  scheduler::tuneAllocator();  // as vgpu-scheduler's main does
  scheduler::ServiceOptions options;
  options.http.threads = 1;
  options.hamiMetrics = state.range(2) != 0;
  SchedulerHarness h(options, NodePolicy::kBinpack, std::chrono::hours(24));
  const auto names = addNodes(h, nodes, 8, 81920, 10, std::chrono::minutes(10));
  std::vector<std::string> podNames(static_cast<std::size_t>(pods));
  std::vector<int> podGpu(static_cast<std::size_t>(pods));
  for (int i = 0; i < pods; ++i) {
    podNames[i] = "placed-" + std::to_string(i);
    podGpu[i] = (i / nodes) % 8;
    h.createPod(admittedPod(podNames[i], names[static_cast<std::size_t>(i % nodes)], 8000, 10, podGpu[i]));
  }
  if (!h.awaitPods(static_cast<std::size_t>(pods), std::chrono::minutes(10))) {
    state.SkipWithError("the scheduler's cache did not see every placed pod");
    return;
  }
  // Pods coming and going: `moved` pods (the next ones in turn) are deleted, then placed
  // again under a new name on their node's next GPU, and the cache has seen all of it.
  int round = 0, next = 0;
  auto churn = [&] {
    ++round;
    for (int k = 0; k < moved; ++k) {
      const int i = (next + k) % pods;
      if (!h.api->remove("pods", "default", podNames[i]).ok()) throw std::runtime_error("cannot delete " + podNames[i]);
    }
    if (!h.awaitPods(static_cast<std::size_t>(pods - moved), std::chrono::minutes(10)))
      throw std::runtime_error("the cache did not see the deletions");
    for (int k = 0; k < moved; ++k) {
      const int i = (next + k) % pods;
      podNames[i] = "moved-" + std::to_string(round) + "-" + std::to_string(i);
      podGpu[i] = (podGpu[i] + 1) % 8;
      h.createPod(admittedPod(podNames[i], names[static_cast<std::size_t>(i % nodes)], 8000, 10, podGpu[i]));
    }
    if (!h.awaitPods(static_cast<std::size_t>(pods), std::chrono::minutes(10)))
      throw std::runtime_error("the cache did not see the new pods");
    next = (next + moved) % pods;
  };
  metrics::Registry& registry = h.service->registry();
  // Three scrapes before the timed ones, each a part of its own under callgrind: the first
  // (every series written: what a scrape costs when every value changed since the last),
  // one with nothing changed, one after `moved` pods came and went (when `moved` > 0).
  // Each timed scrape follows such a churn, or nothing when `moved` is 0.
  auto measured = [&](const char* part) {
    CALLGRIND_START_INSTRUMENTATION;
    std::string text = registry.render();
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT(part);
    return text;
  };
  const std::clock_t started = std::clock();
  std::string before, last = measured("first scrape");
  const double firstMs = 1000.0 * static_cast<double>(std::clock() - started) / CLOCKS_PER_SEC;
  last = measured("nothing changed");
  if (moved > 0) {
    churn();
    before = std::move(last);
    last = measured("after churn");
    state.counters["changed_pct"] = changedPercent(before, last);
  }
  for (auto _ : state) {
    if (moved > 0) {
      state.PauseTiming();
      churn();
      state.ResumeTiming();
    }
    CALLGRIND_START_INSTRUMENTATION;
    last = registry.render();
    CALLGRIND_STOP_INSTRUMENTATION;
  }
  CALLGRIND_DUMP_STATS_AT("timed scrapes");
  state.counters["scrape_MiB"] = static_cast<double>(last.size()) / 1048576.0;
  state.counters["first_scrape_ms"] = firstMs;
}
BENCHMARK(BM_SchedulerScrape)
    ->ArgNames({"nodes", "pods", "hami", "moved"})
    ->Args({5000, 50000, 0, 0})
    ->Args({5000, 50000, 1, 0})
    ->Args({5000, 50000, 0, 1330})
    ->Args({5000, 50000, 1, 1330})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2)
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace vgpu

BENCHMARK_MAIN();
