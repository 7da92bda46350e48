// The scrape compared with one captured before the exposition moved to prometheus-cpp
// (issue 44): a registry with every kind of family, labels that need escaping, empty
// families, NaN and infinities and per-scrape values renders the same text as
// representative.prom (main's hand-written exposition) but for what docs/metrics.md
// ("What the text writes differently") lists: a value is compared as the number it parses
// to (`Nan` for `NaN`, 16 significant digits), a histogram's `le` bound likewise (`0.0001`
// for `1e-04`), and a histogram family's lines as a set (`_count` and `_sum` before the
// buckets). Everything else is compared exactly and in order: families, HELP, TYPE, series,
// label order and escapes.
//
// VGPU_METRICS_WRITE_GOLDEN=<file> writes this registry's scrape there instead of comparing
// (how representative.prom was made, from the hand-written exposition).
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "promtool_check.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::metrics {
namespace {

/// Every kind of family the daemons register, with the values and label text that stress
/// the exposition. `scrapes` counts the collector's runs (per-scrape values).
struct Representative {
  Registry registry;
  int scrapes = 0;

  Representative() {
    auto& placed = registry.counter("vgpu_scheduler_pods_placed_total", "Pods bound with a device assignment.");
    placed.inc();
    placed.inc({}, 41);
    auto& refused = registry.counter("vgpu_scheduler_pods_refused_total",
                                     "Filter or bind requests that placed nothing, by reason.", {"reason"});
    refused.inc({"no node has a device with \"enough\" memory\nsecond line \\ slash"});
    refused.inc({"node \"gpu-7\" is stale"}, 3);
    refused.inc({"ünïcode ✓"}, 0.5);
    refused.inc({"never negative"}, -4);
    registry.counter("vgpu_scheduler_events_dropped_total", "Pod events not sent.");  // no series
    registry.counter("vgpu_allocate_total", "Allocate calls answered, by resource and result.", {"resource", "result"});

    auto& memory = registry.gauge("vgpu_device_memory_allocated_bytes", "Device memory given to pods.",
                                  {"node", "device", "backend"});
    memory.set({"node-1", "GPU-0", "nvidia"}, 85899345920.0);
    memory.set({"node-1", "GPU-1", "nvidia"}, 0);
    memory.set({"node-2", "GPU-0", "sim"}, 1e21);
    memory.set({"node-2", "GPU-9", "sim"}, 7);
    memory.remove({"node-2", "GPU-9", "sim"});
    auto& odd = registry.gauge("vgpu_odd_values", "Help with a back\\slash and a\nnewline.", {"kind"});
    odd.set({"nan"}, std::numeric_limits<double>::quiet_NaN());
    odd.set({"inf"}, std::numeric_limits<double>::infinity());
    odd.set({"-inf"}, -std::numeric_limits<double>::infinity());
    odd.set({"negative"}, -3.5);
    odd.set({"fraction"}, 0.1);
    odd.set({"small"}, 2.5e-7);
    odd.set({""}, 1);  // an empty label value
    odd.add({"fraction"}, 0.25);
    registry.gauge("vgpu_scheduler_pods_in_flight", "Pods bound and waiting for the node agent's Allocate.").set(3);
    registry.gauge("vgpu_empty_gauge", "A gauge with no series yet.", {"node"});
    auto& shared = registry.untypedGauge("hami_gpu_shared_count", "Number of containers sharing this GPU",
                                         {"node", "device_uuid", "zone"});
    shared.set({"node-1", "GPU-0", "vGPU"}, 2);
    registry.untypedGauge("hami_empty_count", "An untyped family with no series.");

    auto& filter = registry.histogram("vgpu_scheduler_filter_duration_seconds", "Time to answer a filter request.",
                                      Histogram::latencyBuckets());
    for (double v : {0.00005, 0.0001, 0.0003, 0.002, 0.02, 0.7, 11.0}) filter.observe(v);
    filter.observe(std::numeric_limits<double>::quiet_NaN());  // ignored
    auto& bind = registry.histogram("vgpu_scheduler_bind_duration_seconds", "Time to answer a bind request, by result.",
                                    {0.001, 0.01, 0.1}, {"result"});
    bind.observe({"ok"}, 0.004);
    bind.observe({"ok"}, 0.01);
    bind.observe({"error \"apiserver\""}, 12);
    registry.histogram("vgpu_allocate_duration_seconds", "Time to answer one Allocate call.", {0.5, 1}, {"resource"});

    // Per-scrape values: a collector replaces the series on every scrape, as the daemons' do.
    auto& perScrape = registry.gauge("vgpu_device_shares_allocated", "Containers sharing the device.",
                                     {"node", "device", "backend"});
    registry.addCollector([this, &perScrape] {
      ++scrapes;
      perScrape.clear();
      perScrape.set({"node-" + std::to_string(scrapes), "GPU-0", "nvidia"}, scrapes);
      perScrape.set({"node-z", "GPU-3", "nvidia"}, 4);
    });
  }
};

struct CanonicalFamily {
  std::string name, help, type;
  std::vector<std::string> samples;  ///< in order; a histogram's sorted
};
using Canonical = std::vector<CanonicalFamily>;

std::string canonicalValue(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);  // takes NaN, Nan, +Inf, -Inf
  if (end == text.c_str() || *end != '\0') return "unparsable value \"" + text + "\"";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

/// A sample's series with its `le` bound as a number: the same bound may be written `1e-04` or
/// `0.0001` (Prometheus 3 reads both as one series; client_golang writes the second).
std::string canonicalSeries(std::string series) {
  auto at = series.find(",le=\"");
  if (at == std::string::npos) at = series.find("{le=\"");
  if (at == std::string::npos) return series;
  ++at;  // the label's name
  const auto end = series.find('"', at + 4);
  return series.substr(0, at + 4) + canonicalValue(series.substr(at + 4, end - at - 4)) + series.substr(end);
}

/// Exposition text as families of samples, in order; a family starts at a HELP or TYPE line
/// naming another family than the last.
Canonical canonical(const std::string& text) {
  Canonical out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const auto nameEnd = line.find(' ', 7);
      const std::string name = line.substr(7, nameEnd - 7);
      const std::string rest = nameEnd == std::string::npos ? "" : line.substr(nameEnd + 1);
      if (out.empty() || out.back().name != name) out.push_back({name, "", "", {}});
      (line[2] == 'H' ? out.back().help : out.back().type) = rest;
      continue;
    }
    if (out.empty()) out.push_back({"(before any HELP or TYPE)", "", "", {}});
    // The value follows the last space (label values may hold spaces, never a bare one at the end).
    const auto space = line.rfind(' ');
    out.back().samples.push_back(space == std::string::npos ? "no value: " + line
                                                            : canonicalSeries(line.substr(0, space)) + " " +
                                                                  canonicalValue(line.substr(space + 1)));
  }
  for (auto& family : out)
    if (family.type == "histogram") std::sort(family.samples.begin(), family.samples.end());
  return out;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string describe(const Canonical& c) {
  std::string s;
  for (const auto& f : c) {
    s += f.name + " [" + f.type + "] " + f.help + "\n";
    for (const auto& sample : f.samples) s += "  " + sample + "\n";
  }
  return s;
}

TEST(MetricsGolden, ScrapeIsTheCapturedTextButForTheDocumentedDifferences) {
  Representative r;
  const std::string text = r.registry.render();
  if (const char* path = std::getenv("VGPU_METRICS_WRITE_GOLDEN")) {
    std::ofstream(path) << text;
    GTEST_SKIP() << "wrote " << path;
  }
  const std::string golden = readFile(VGPU_METRICS_GOLDEN);
  ASSERT_FALSE(golden.empty()) << "cannot read " << VGPU_METRICS_GOLDEN;
  const Canonical want = canonical(golden), got = canonical(text);
  EXPECT_EQ(describe(got), describe(want)) << "scrape:\n" << text;
  EXPECT_EQ(got.size(), 14u);
}

TEST(MetricsGolden, EverySampleLineIsWellFormed) {
  Representative r;
  const std::string text = r.registry.render();
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) continue;
    const auto space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_EQ(canonicalValue(line.substr(space + 1)).rfind("unparsable", 0), std::string::npos) << line;
  }
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsGolden, PerScrapeValuesAreThoseOfTheLatestScrape) {
  Representative r;
  r.registry.render();
  const std::string second = r.registry.render();
  EXPECT_EQ(second.find("node=\"node-1\",device=\"GPU-0\",backend=\"nvidia\"} 1\n"), std::string::npos);
  EXPECT_NE(second.find("vgpu_device_shares_allocated{node=\"node-2\",device=\"GPU-0\",backend=\"nvidia\"} 2\n"),
            std::string::npos)
      << second;
}

#ifdef VGPU_PROMTOOL
TEST(MetricsGolden, PromtoolAcceptsTheRepresentativeScrape) {
  Representative r;
  const std::string text = r.registry.render();
  EXPECT_EQ(testing::promtoolProblems(text), "") << text;
}
#endif

}  // namespace
}  // namespace vgpu::metrics
