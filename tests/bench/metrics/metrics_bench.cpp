// What one scrape of vgpu-scheduler's /metrics costs on issue 19's cluster (5,000 nodes x 8
// GPUs, 50,000 pods placed), with and without HAMi's names (--hami-metrics): the collectors
// that set the per-device, per-namespace and (HAMi) per-container series from the cache,
// then the exposition text. The figure that must not grow when the exposition changes
// hands (issue 44: prometheus-cpp). Under valgrind --tool=callgrind --instr-atstart=no only
// the scrapes are measured (see the parts below).
// Run: taskset -c 0 bin/vgpu_metrics_bench (one core), figures in docs/metrics.md.
#include <benchmark/benchmark.h>

#include <ctime>
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

void BM_SchedulerScrape(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const int nodes = static_cast<int>(state.range(0));
  const int pods = static_cast<int>(state.range(1));
  scheduler::tuneAllocator();  // as vgpu-scheduler's main does
  scheduler::ServiceOptions options;
  options.http.threads = 1;
  options.hamiMetrics = state.range(2) != 0;
  SchedulerHarness h(options, NodePolicy::kBinpack, std::chrono::hours(24));
  const auto names = addNodes(h, nodes, 8, 81920, 10, std::chrono::minutes(10));
  for (int i = 0; i < pods; ++i)
    h.createPod(admittedPod("placed-" + std::to_string(i), names[static_cast<std::size_t>(i % nodes)], 8000, 10,
                            (i / nodes) % 8));
  if (!h.awaitPods(static_cast<std::size_t>(pods), std::chrono::minutes(10))) {
    state.SkipWithError("the scheduler's cache did not see every placed pod");
    return;
  }
  metrics::Registry& registry = h.service->registry();
  // The first scrape writes every series (what a scrape costs when every value changed
  // since the last one); the timed ones, with nothing changed between them, only what
  // changed. Under callgrind each phase is a part of its own: Google Benchmark first runs
  // this with one iteration, so part 1 is a first scrape and part 2 one later scrape.
  CALLGRIND_START_INSTRUMENTATION;
  const std::clock_t started = std::clock();
  std::size_t bytes = registry.render().size();
  const double firstMs = 1000.0 * static_cast<double>(std::clock() - started) / CLOCKS_PER_SEC;
  CALLGRIND_DUMP_STATS_AT("first scrape");
  for (auto _ : state) bytes = registry.render().size();
  CALLGRIND_DUMP_STATS_AT("later scrapes");
  CALLGRIND_STOP_INSTRUMENTATION;
  state.counters["scrape_MiB"] = static_cast<double>(bytes) / 1048576.0;
  state.counters["first_scrape_ms"] = firstMs;
}
BENCHMARK(BM_SchedulerScrape)
    ->ArgNames({"nodes", "pods", "hami"})
    ->Args({5000, 50000, 0})
    ->Args({5000, 50000, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2)
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace vgpu

BENCHMARK_MAIN();
