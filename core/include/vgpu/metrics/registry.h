#pragma once
// The daemons' Prometheus families (counters, gauges, histograms with labels) on
// prometheus-cpp's core: each series is a prometheus::Counter, Gauge or Histogram, each
// family a prometheus::Collectable, and /metrics is prometheus::TextSerializer's output
// (text format 0.0.4). What prometheus-cpp 1.0.1's own Family and Registry would change in
// what we serve, and so is kept here (docs/metrics.md, "prometheus-cpp"): labels written in
// the order the family names them (Family keys series by a std::map, alphabetical), HELP
// and TYPE of a family with no series yet, untyped families, clearing a family in one step
// (Family::Remove is a linear search per series), and escaping HELP (the serializer writes
// it as given). A scrape serializes only the series whose value changed since the last one
// (each keeps its lines): prometheus-cpp 1.0.1's serializer costs more per series than the
// whole hand-written scrape did (docs/metrics.md, "Scrape cost").
//
// Names and label names are checked when a family is registered; a bad one, or a call with
// the wrong number of label values, is a programming error and aborts with a message.

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu::metrics {

/// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

/// One series of a family: its prometheus-cpp metric object, its lines as the serializer
/// wrote them the last time its value changed (empty: to be written), and the clear() it
/// was last set after (an older one: dropped at the next scrape).
template <class Value>
struct Series {
  template <class... Args>
  explicit Series(std::uint64_t setAfter, Args&&... args) : value(std::forward<Args>(args)...), generation(setAfter) {}
  Value value;
  std::string text;
  std::uint64_t generation;
};

/// What all families share: name, help, label names, a lock. Thread-safe.
class Family : public prometheus::Collectable {
 public:
  const std::string& name() const { return name_; }
  /// This family as prometheus-cpp's data model: one MetricFamily (also when it has no
  /// series, so that HELP and TYPE are served), series in the order of their label values,
  /// each series' labels in the order of the label names.
  std::vector<prometheus::MetricFamily> Collect() const final;
  /// Appends this family's exposition (prometheus::TextSerializer's text of Collect()):
  /// only the series whose value changed since the last scrape are serialized again.
  virtual void render(std::string& out) const = 0;
  /// Drops every series (e.g. before a collector sets the current set of devices). A series
  /// set again before the next scrape keeps its serialized text when its value is the same.
  void clear();
  /// Drops one series.
  void remove(const LabelValues& labels);

 protected:
  Family(std::string name, std::string help, std::vector<std::string> labelNames, prometheus::MetricType type);
  void checkArity(const LabelValues& labels) const;
  /// Appends one ClientMetric per live series to `family.metric` (called under mu_).
  virtual void collectSeries(prometheus::MetricFamily& family) const = 0;
  /// A new series in `family` with `labels` as its label pairs, in the order of the label names.
  prometheus::ClientMetric& addSeries(prometheus::MetricFamily& family, const LabelValues& labels) const;
  /// Appends the header and every live series' text to `out`, serializing (with `fill`
  /// setting the value of a ClientMetric) the series that have none and dropping those a
  /// clear() left unset. Called under mu_.
  template <class Map, class Fill>
  void renderSeries(Map& series, std::string& out, Fill fill) const;
  virtual void eraseAll() = 0;
  virtual void erase(const LabelValues& labels) = 0;

  std::string name_, help_;
  std::vector<std::string> labelNames_;
  prometheus::MetricType type_;
  std::string header_;           ///< HELP and TYPE, serialized once
  std::uint64_t generation_ = 0;  ///< clear() calls so far
  mutable std::mutex mu_;
};

/// A value that only goes up (name should end in `_total`).
class Counter : public Family {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> labelNames);
  /// `amount` must be >= 0 (a negative or NaN one is ignored).
  void inc(const LabelValues& labels = {}, double amount = 1);
  double value(const LabelValues& labels = {}) const;
  void render(std::string& out) const override;

 private:
  void collectSeries(prometheus::MetricFamily& family) const override;
  void eraseAll() override { ++generation_; }
  void erase(const LabelValues& labels) override { series_.erase(labels); }
  mutable std::map<LabelValues, Series<prometheus::Counter>> series_;  ///< render drops cleared ones
};

/// A value that goes up and down.
class Gauge : public Family {
 public:
  Gauge(std::string name, std::string help, std::vector<std::string> labelNames);
  /// `untyped`: exposed as TYPE untyped, for a name kept from another exporter that the
  /// gauge naming rules (promtool's lint) refuse, e.g. one ending in `_count`.
  Gauge(std::string name, std::string help, std::vector<std::string> labelNames, bool untyped);
  void set(const LabelValues& labels, double value);
  void set(double value) { set({}, value); }
  void add(const LabelValues& labels, double amount);
  double value(const LabelValues& labels = {}) const;
  void render(std::string& out) const override;

 private:
  void collectSeries(prometheus::MetricFamily& family) const override;
  void eraseAll() override { ++generation_; }
  void erase(const LabelValues& labels) override { series_.erase(labels); }
  mutable std::map<LabelValues, Series<prometheus::Gauge>> series_;  ///< render drops cleared ones
};

/// Observations counted into cumulative buckets, with their sum and count.
class Histogram : public Family {
 public:
  /// `bounds`: upper bounds in increasing order (+Inf is added).
  Histogram(std::string name, std::string help, std::vector<double> bounds, std::vector<std::string> labelNames);
  /// A NaN observation is ignored.
  void observe(const LabelValues& labels, double value);
  void observe(double value) { observe({}, value); }
  /// Observations so far for `labels` (for tests).
  std::uint64_t count(const LabelValues& labels = {}) const;
  void render(std::string& out) const override;

  /// Bounds for request latencies in seconds, 100 µs to 10 s.
  static std::vector<double> latencyBuckets();

 private:
  void collectSeries(prometheus::MetricFamily& family) const override;
  void eraseAll() override { ++generation_; }
  void erase(const LabelValues& labels) override { series_.erase(labels); }
  prometheus::Histogram::BucketBoundaries bounds_;
  mutable std::map<LabelValues, Series<prometheus::Histogram>> series_;  ///< render drops cleared ones
};

/// Owns the families; render() is what /metrics serves. Thread-safe.
class Registry {
 public:
  /// Registering a name twice is a programming error (aborts).
  Counter& counter(std::string name, std::string help, std::vector<std::string> labelNames = {});
  Gauge& gauge(std::string name, std::string help, std::vector<std::string> labelNames = {});
  /// A gauge exposed as TYPE untyped (see Gauge).
  Gauge& untypedGauge(std::string name, std::string help, std::vector<std::string> labelNames = {});
  Histogram& histogram(std::string name, std::string help, std::vector<double> bounds,
                       std::vector<std::string> labelNames = {});
  /// Runs before every render, e.g. to set gauges from current state.
  void addCollector(std::function<void()> collector);
  /// Every family, in registration order, as prometheus-cpp's data model (after the collectors ran).
  std::vector<prometheus::MetricFamily> collect() const;
  /// The exposition text (prometheus::TextSerializer's text of collect(), each series
  /// serialized again only when it changed), families in registration order.
  std::string render() const;

  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  Family& add(std::unique_ptr<Family> family);
  void runCollectors() const;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
  std::vector<std::function<void()>> collectors_;
  mutable std::atomic<std::size_t> lastSize_{0};  ///< the last scrape's size, reserved for the next
};

/// HELP text escaped per the text format (`\` and newline): prometheus-cpp 1.0.1's
/// serializer writes HELP as given, so families hand it this.
std::string escapeHelp(std::string_view text);

}  // namespace vgpu::metrics
