// vgpu_metrics: exposition text (prometheus-cpp's serializer), escaping, label order,
// histogram buckets, and promtool's verdict.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include <prometheus/text_serializer.h>

#include "promtool_check.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::metrics {
namespace {

TEST(MetricsText, CounterWithLabelsRendersHelpTypeAndSeries) {
  Registry r;
  auto& c = r.counter("vgpu_pods_placed_total", "Pods placed.", {"backend"});
  c.inc({"nvidia"});
  c.inc({"nvidia"}, 2);
  c.inc({"sim"});
  c.inc({"sim"}, -5);  // counters never go down
  EXPECT_EQ(r.render(),
            "# HELP vgpu_pods_placed_total Pods placed.\n"
            "# TYPE vgpu_pods_placed_total counter\n"
            "vgpu_pods_placed_total{backend=\"nvidia\"} 3\n"
            "vgpu_pods_placed_total{backend=\"sim\"} 1\n");
  EXPECT_EQ(c.value({"nvidia"}), 3);
}

TEST(MetricsText, EscapesHelpAndLabelValues) {
  Registry r;
  auto& g = r.gauge("vgpu_x", "a \\ b\nc \"q\"", {"reason"});
  g.set({"say \"no\"\\\nnow"}, 1.5);
  EXPECT_EQ(r.render(),
            "# HELP vgpu_x a \\\\ b\\nc \"q\"\n"
            "# TYPE vgpu_x gauge\n"
            "vgpu_x{reason=\"say \\\"no\\\"\\\\\\nnow\"} 1.5\n");
}

// Values are written by prometheus::TextSerializer: 16 significant digits, +Inf, -Inf, and
// NaN spelled "Nan" (Prometheus parses either spelling).
TEST(MetricsText, ValuesAreWrittenInShortFormWithInfinitiesAndNaN) {
  Registry r;
  auto& g = r.gauge("vgpu_v", "Values.", {"k"});
  const std::vector<std::pair<double, std::string>> cases{
      {0, "0"},           {42, "42"},
      {0.1, "0.1"},       {1e21, "1e+21"},
      {85899345920.0, "85899345920"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::nan(""), "Nan"}};
  for (const auto& [value, text] : cases) {
    g.clear();
    g.set({"x"}, value);
    EXPECT_EQ(r.render(), "# HELP vgpu_v Values.\n# TYPE vgpu_v gauge\nvgpu_v{k=\"x\"} " + text + "\n") << text;
  }
}

TEST(MetricsText, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  auto& h = r.histogram("vgpu_filter_duration_seconds", "Filter latency.", {0.001, 0.01}, {"verb"});
  h.observe({"filter"}, 0.0005);
  h.observe({"filter"}, 0.001);  // on the bound: counts in that bucket (le)
  h.observe({"filter"}, 0.005);
  h.observe({"filter"}, 3);
  EXPECT_EQ(r.render(),
            "# HELP vgpu_filter_duration_seconds Filter latency.\n"
            "# TYPE vgpu_filter_duration_seconds histogram\n"
            "vgpu_filter_duration_seconds_count{verb=\"filter\"} 4\n"
            "vgpu_filter_duration_seconds_sum{verb=\"filter\"} 3.0065\n"
            "vgpu_filter_duration_seconds_bucket{verb=\"filter\",le=\"0.001\"} 2\n"
            "vgpu_filter_duration_seconds_bucket{verb=\"filter\",le=\"0.01\"} 3\n"
            "vgpu_filter_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 4\n");
  EXPECT_EQ(h.count({"filter"}), 4u);
}

TEST(MetricsText, CollectorsRunBeforeRenderAndClearDropsSeries) {
  Registry r;
  auto& g = r.gauge("vgpu_device_memory_allocated_bytes", "Allocated.", {"node", "device"});
  int calls = 0;
  r.addCollector([&] {
    ++calls;
    g.clear();
    g.set({"n1", "GPU-" + std::to_string(calls)}, calls);
  });
  EXPECT_NE(r.render().find("device=\"GPU-1\"} 1"), std::string::npos);
  const std::string second = r.render();
  EXPECT_EQ(second.find("GPU-1"), std::string::npos);
  EXPECT_NE(second.find("device=\"GPU-2\"} 2"), std::string::npos);
  g.remove({"n1", "GPU-3"});  // absent: nothing happens
}

// A scrape serializes again only the series that changed (each keeps its text): after every
// kind of change, and a clear() followed by setting some series again to the same or
// another value, render() is still the serializer's text of the whole registry.
TEST(MetricsText, EachScrapeIsTheSerializerTextOfTheWholeRegistryAfterEveryChange) {
  Registry r;
  auto& g = r.gauge("vgpu_g_bytes", "G.", {"node", "device"});
  auto& u = r.untypedGauge("vgpu_u_count", "U.", {"k"});
  auto& c = r.counter("vgpu_c_total", "C.", {"k"});
  auto& h = r.histogram("vgpu_h_seconds", "H.", {0.5, 1}, {"k"});
  int step = 0;
  auto same = [&] {
    ++step;
    const std::string whole = prometheus::TextSerializer().Serialize(r.collect());
    EXPECT_EQ(r.render(), whole) << "after step " << step;
    EXPECT_EQ(r.render(), whole) << "again after step " << step;
  };
  same();
  g.set({"n1", "GPU-0"}, 1);
  g.set({"n1", "GPU-1"}, 2);
  u.set({"a"}, 3);
  c.inc({"a"});
  h.observe({"a"}, 0.7);
  same();
  g.set({"n1", "GPU-0"}, 1);  // same value
  g.set({"n1", "GPU-1"}, 5);
  g.add({"n1", "GPU-0"}, 0.5);
  c.inc({"a"}, 2);
  c.inc({"b"});
  h.observe({"a"}, 0.1);
  u.set({"a"}, 0.0);
  same();
  u.set({"a"}, -0.0);  // equal to 0, written "-0"
  g.set({"n1", "GPU-0"}, std::nan(""));
  same();
  EXPECT_NE(r.render().find("vgpu_u_count{k=\"a\"} -0\n"), std::string::npos);
  g.set({"n1", "GPU-0"}, std::nan(""));
  same();
  g.clear();  // a collector's scrape: the current set again, one series gone, one changed
  g.set({"n1", "GPU-0"}, 1.5);
  g.set({"n2", "GPU-0"}, 7);
  g.clear();
  g.set({"n1", "GPU-1"}, 5);
  g.set({"n0", "GPU-3"}, 4);
  same();
  EXPECT_EQ(g.value({"n1", "GPU-0"}), 0);
  c.clear();
  h.clear();
  c.inc({"a"});       // after a clear, counts start again
  h.observe({"b"}, 2);
  g.clear();
  g.add({"n1", "GPU-1"}, 1);
  same();
  EXPECT_EQ(c.value({"a"}), 1);
  EXPECT_EQ(h.count({"a"}), 0u);
  g.remove({"n1", "GPU-1"});
  u.clear();
  same();
}

TEST(MetricsText, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  auto& c = r.counter("vgpu_things_total", "Things.");
  auto& h = r.histogram("vgpu_wait_seconds", "Waits.", Histogram::latencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(0.002);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000);
  EXPECT_EQ(h.count(), 40000u);
}

TEST(MetricsDeath, BadNamesAndWrongLabelCountsAbortWithAMessage) {
  Registry r;
  EXPECT_DEATH(r.counter("9bad", "x"), "invalid metric name");
  EXPECT_DEATH(r.gauge("ok_name", "x", {"__reserved"}), "reserved label");
  EXPECT_DEATH(r.histogram("h_seconds", "x", {1, 1}), "strictly increasing");
  EXPECT_DEATH(r.histogram("h2_seconds", "x", {1, std::nan(""), 2}), "strictly increasing");
  auto& c = r.counter("vgpu_c_total", "x", {"a"});
  EXPECT_DEATH(c.inc({}), "takes 1 label values");
  EXPECT_DEATH(r.counter("vgpu_c_total", "again"), "registered twice");
}

#ifdef VGPU_PROMTOOL
TEST(MetricsPromtool, CheckMetricsAcceptsOurOutput) {
  Registry r;
  r.counter("vgpu_scheduler_pods_refused_total", "Pods refused, by reason.", {"reason"})
      .inc({"no node has a device with \"enough\" memory\nsecond line \\ slash"});
  r.gauge("vgpu_device_compute_allocated_percent", "Compute allocated.", {"node", "device"}).set({"n", "d"}, 30);
  auto& h = r.histogram("vgpu_scheduler_bind_duration_seconds", "Bind latency.", Histogram::latencyBuckets(), {"result"});
  h.observe({"ok"}, 0.004);
  h.observe({"error"}, 12);
  r.gauge("vgpu_empty_family", "No series yet.");
  auto result = testing::promtoolCheck(VGPU_PROMTOOL, r.render());
  EXPECT_EQ(result.exitCode, 0) << result.output << "\n" << r.render();
  EXPECT_EQ(result.output, "");
}

// A name kept from another exporter (HAMi's hami_gpu_shared_count, issue 28) that promtool's
// lint refuses for a gauge passes as untyped, and reads like a gauge.
TEST(MetricsPromtool, AnUntypedGaugeMayEndInCount) {
  Registry r;
  r.gauge("hami_gpu_count", "A gauge named like a histogram's count.").set(2);
  EXPECT_NE(testing::promtoolCheck(VGPU_PROMTOOL, r.render()).output.find("_count"), std::string::npos);
  Registry kept;
  auto& g = kept.untypedGauge("hami_gpu_shared_count", "Containers sharing the device.", {"node"});
  g.set({"n"}, 3);
  g.add({"n"}, 1);
  EXPECT_EQ(kept.render(), "# HELP hami_gpu_shared_count Containers sharing the device.\n"
                           "# TYPE hami_gpu_shared_count untyped\n"
                           "hami_gpu_shared_count{node=\"n\"} 4\n");
  auto result = testing::promtoolCheck(VGPU_PROMTOOL, kept.render());
  EXPECT_EQ(result.exitCode, 0) << result.output;
  EXPECT_EQ(result.output, "");
}

TEST(MetricsPromtool, ComplainsAboutALintProblemSoTheCheckIsReal) {
  Registry r;
  r.counter("vgpu_requests", "Counter without _total.").inc();
  auto result = testing::promtoolCheck(VGPU_PROMTOOL, r.render());
  EXPECT_NE(result.output.find("_total"), std::string::npos) << result.output;
}
#endif

}  // namespace
}  // namespace vgpu::metrics
