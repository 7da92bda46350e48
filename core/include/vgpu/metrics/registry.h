#pragma once
// Prometheus text exposition (format 0.0.4) without a client library: counters, gauges and
// histograms with labels, rendered with # HELP / # TYPE and correct escaping. Small on
// purpose: the daemons export a few dozen families.
//
// Names and label names are checked when a family is registered; a bad one, or a call with
// the wrong number of label values, is a programming error and aborts with a message.

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

/// What all families share: name, help, label names, a lock. Thread-safe.
class Family {
 public:
  virtual ~Family() = default;
  const std::string& name() const { return name_; }
  /// Appends this family's exposition text (HELP and TYPE even when it has no series).
  virtual void render(std::string& out) const = 0;
  /// Drops every series (e.g. before a collector sets the current set of devices).
  void clear();
  /// Drops one series.
  void remove(const LabelValues& labels);

 protected:
  Family(std::string name, std::string help, std::vector<std::string> labelNames, const char* type);
  void checkArity(const LabelValues& labels) const;
  void renderHeader(std::string& out) const;
  /// `name{a="x",b="y"` + extra (e.g. `le="0.5"`) + `}`; no braces when both are empty.
  std::string seriesName(std::string_view suffix, const LabelValues& labels, std::string_view extra = {}) const;
  virtual void eraseAll() = 0;
  virtual void erase(const LabelValues& labels) = 0;

  std::string name_, help_;
  std::vector<std::string> labelNames_;
  const char* type_;
  mutable std::mutex mu_;
};

/// A value that only goes up (name should end in `_total`).
class Counter : public Family {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> labelNames);
  /// `amount` must be >= 0 (a negative one is ignored).
  void inc(const LabelValues& labels = {}, double amount = 1);
  double value(const LabelValues& labels = {}) const;
  void render(std::string& out) const override;

 private:
  void eraseAll() override { values_.clear(); }
  void erase(const LabelValues& labels) override { values_.erase(labels); }
  std::map<LabelValues, double> values_;
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
  void eraseAll() override { values_.clear(); }
  void erase(const LabelValues& labels) override { values_.erase(labels); }
  std::map<LabelValues, double> values_;
};

/// Observations counted into cumulative buckets, with their sum and count.
class Histogram : public Family {
 public:
  /// `bounds`: upper bounds in increasing order (+Inf is added).
  Histogram(std::string name, std::string help, std::vector<double> bounds, std::vector<std::string> labelNames);
  void observe(const LabelValues& labels, double value);
  void observe(double value) { observe({}, value); }
  /// Observations so far for `labels` (for tests).
  std::uint64_t count(const LabelValues& labels = {}) const;
  void render(std::string& out) const override;

  /// Bounds for request latencies in seconds, 100 µs to 10 s.
  static std::vector<double> latencyBuckets();

 private:
  struct Series {
    std::vector<std::uint64_t> buckets;  // per bound, not cumulative; last = +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  void eraseAll() override { series_.clear(); }
  void erase(const LabelValues& labels) override { series_.erase(labels); }
  std::vector<double> bounds_;
  std::map<LabelValues, Series> series_;
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
  /// The exposition text, families in registration order.
  std::string render() const;

  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  Family& add(std::unique_ptr<Family> family);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
  std::vector<std::function<void()>> collectors_;
};

/// Escaping per the text format: HELP escapes `\` and newline; label values also `"`.
std::string escapeHelp(std::string_view text);
std::string escapeLabelValue(std::string_view text);
/// Sample values: shortest round-trip form, and +Inf / -Inf / NaN.
std::string formatValue(double value);

}  // namespace vgpu::metrics
