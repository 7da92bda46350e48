// The families behind vgpu/metrics/registry.h: series are prometheus-cpp's metric objects,
// the exposition is prometheus::TextSerializer's. Here: name checks, label order, and the
// few things prometheus-cpp 1.0.1 leaves to its user (see the header).
#include "vgpu/metrics/registry.h"

#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <ostream>
#include <set>
#include <streambuf>

namespace vgpu::metrics {
namespace {

// Where the serializer writes: straight into the scrape's string (std::ostringstream would
// go through its own buffer and copy the text out at the end: 15 MiB at 5,000 nodes).
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<std::size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The series for `labels`, made anew (from `args`) when there is none or a clear() since
/// left it unset.
template <class Map, class... Args>
typename Map::mapped_type& liveSeries(Map& series, const LabelValues& labels, std::uint64_t generation,
                                      const Args&... args) {
  auto it = series.lower_bound(labels);
  if (it != series.end() && !(labels < it->first)) {
    if (it->second.generation == generation) return it->second;
    it = series.erase(it);
  }
  return series.emplace_hint(it, std::piecewise_construct, std::forward_as_tuple(labels),
                             std::forward_as_tuple(generation, args...))
      ->second;
}

[[noreturn]] void invariant(const std::string& message) {
  std::fprintf(stderr, "vgpu metrics: %s\n", message.c_str());
  std::abort();
}

/// Lines of text one series makes: one sample, or a histogram's _count, _sum and buckets
/// (+Inf added when its bounds lack it).
std::size_t linesOf(prometheus::MetricType type, const prometheus::ClientMetric& metric) {
  if (type != prometheus::MetricType::Histogram) return 1;
  const auto& buckets = metric.histogram.bucket;
  return 2 + buckets.size() + (buckets.empty() || !std::isinf(buckets.back().upper_bound) ? 1 : 0);
}

}  // namespace

std::string escapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Family::Family(std::string name, std::string help, std::vector<std::string> labelNames, prometheus::MetricType type)
    : name_(std::move(name)), help_(escapeHelp(help)), labelNames_(std::move(labelNames)), type_(type) {
  if (!prometheus::CheckMetricName(name_)) invariant("invalid metric name \"" + name_ + "\"");
  std::set<std::string> seen;
  for (const auto& l : labelNames_) {
    if (!prometheus::CheckLabelName(l) || l == "le" || l == "quantile")
      invariant("invalid or reserved label name \"" + l + "\" for " + name_);
    if (!seen.insert(l).second) invariant("label \"" + l + "\" given twice for " + name_);
  }
  prometheus::MetricFamily empty;
  empty.name = name_;
  empty.help = help_;
  empty.type = type_;
  StringSink sink(header_);
  std::ostream out(&sink);
  prometheus::TextSerializer().Serialize(out, {empty});
}

void Family::checkArity(const LabelValues& labels) const {
  if (labels.size() != labelNames_.size())
    invariant(name_ + " takes " + std::to_string(labelNames_.size()) + " label values, got " +
              std::to_string(labels.size()));
}

template <class Map, class Fill>
void Family::renderSeries(Map& series, std::string& out, Fill fill) const {
  // The series without text are serialized together: one Serialize call (setting the
  // stream's locale, twice) costs about what writing one series does.
  std::vector<prometheus::MetricFamily> unwritten(1);
  std::vector<std::string*> texts;
  for (auto it = series.begin(); it != series.end();) {
    if (it->second.generation != generation_) {
      it = series.erase(it);
      continue;
    }
    if (it->second.text.empty()) {
      fill(addSeries(unwritten[0], it->first), it->second.value);
      texts.push_back(&it->second.text);
    }
    ++it;
  }
  if (!texts.empty()) {
    unwritten[0].name = name_;  // no help: the serializer writes no HELP line, only TYPE
    unwritten[0].type = type_;
    std::string lines;
    StringSink sink(lines);
    std::ostream stream(&sink);
    prometheus::TextSerializer().Serialize(stream, unwritten);
    // Cut the text after TYPE into each series' lines (a label value's newline is escaped).
    std::size_t at = lines.find('\n') + 1;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      std::size_t end = at;
      for (std::size_t n = linesOf(type_, unwritten[0].metric[i]); n > 0 && end != 0; --n) end = lines.find('\n', end) + 1;
      if (end == 0) invariant("the serializer wrote fewer lines than " + name_ + "'s series make");
      texts[i]->assign(lines, at, end - at);
      at = end;
    }
  }
  out += header_;
  for (const auto& entry : series) out += entry.second.text;
}

void Family::clear() {
  std::lock_guard lock(mu_);
  eraseAll();
}

void Family::remove(const LabelValues& labels) {
  std::lock_guard lock(mu_);
  erase(labels);
}

std::vector<prometheus::MetricFamily> Family::Collect() const {
  prometheus::MetricFamily family;
  family.name = name_;
  family.help = help_;
  family.type = type_;
  std::lock_guard lock(mu_);
  collectSeries(family);
  return {std::move(family)};
}

prometheus::ClientMetric& Family::addSeries(prometheus::MetricFamily& family, const LabelValues& labels) const {
  prometheus::ClientMetric& metric = family.metric.emplace_back();
  metric.label.resize(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    metric.label[i].name = labelNames_[i];
    metric.label[i].value = labels[i];
  }
  return metric;
}

Counter::Counter(std::string name, std::string help, std::vector<std::string> labelNames)
    : Family(std::move(name), std::move(help), std::move(labelNames), prometheus::MetricType::Counter) {}

void Counter::inc(const LabelValues& labels, double amount) {
  checkArity(labels);
  if (!(amount >= 0)) return;
  std::lock_guard lock(mu_);
  auto& series = liveSeries(series_, labels, generation_);
  series.value.Increment(amount);
  series.text.clear();
}

double Counter::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(labels);
  return it == series_.end() || it->second.generation != generation_ ? 0 : it->second.value.Value();
}

void Counter::collectSeries(prometheus::MetricFamily& family) const {
  family.metric.reserve(series_.size());
  for (const auto& [labels, series] : series_)
    if (series.generation == generation_) addSeries(family, labels).counter.value = series.value.Value();
}

void Counter::render(std::string& out) const {
  std::lock_guard lock(mu_);
  renderSeries(series_, out, [](prometheus::ClientMetric& m, const prometheus::Counter& c) { m.counter.value = c.Value(); });
}

Gauge::Gauge(std::string name, std::string help, std::vector<std::string> labelNames)
    : Gauge(std::move(name), std::move(help), std::move(labelNames), false) {}

Gauge::Gauge(std::string name, std::string help, std::vector<std::string> labelNames, bool untyped)
    : Family(std::move(name), std::move(help), std::move(labelNames),
             untyped ? prometheus::MetricType::Untyped : prometheus::MetricType::Gauge) {}

void Gauge::set(const LabelValues& labels, double value) {
  checkArity(labels);
  std::lock_guard lock(mu_);
  auto it = series_.lower_bound(labels);
  if (it == series_.end() || labels < it->first) {
    it = series_.emplace_hint(it, std::piecewise_construct, std::forward_as_tuple(labels),
                              std::forward_as_tuple(generation_));
  } else {
    // Set again (after a clear() too) to the same value: its text stays. Compared as bits:
    // -0 and 0 are written differently, and a NaN stays a NaN.
    it->second.generation = generation_;
    if (sameBits(it->second.value.Value(), value)) return;
  }
  it->second.value.Set(value);
  it->second.text.clear();
}

void Gauge::add(const LabelValues& labels, double amount) {
  checkArity(labels);
  std::lock_guard lock(mu_);
  auto& series = liveSeries(series_, labels, generation_);
  series.value.Increment(amount);
  series.text.clear();
}

double Gauge::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(labels);
  return it == series_.end() || it->second.generation != generation_ ? 0 : it->second.value.Value();
}

// prometheus-cpp has no untyped metric object: an untyped family's series are gauges whose
// value goes where the serializer reads an untyped one.
void Gauge::collectSeries(prometheus::MetricFamily& family) const {
  family.metric.reserve(series_.size());
  const bool untyped = type_ == prometheus::MetricType::Untyped;
  for (const auto& [labels, series] : series_) {
    if (series.generation != generation_) continue;
    prometheus::ClientMetric& metric = addSeries(family, labels);
    (untyped ? metric.untyped.value : metric.gauge.value) = series.value.Value();
  }
}

void Gauge::render(std::string& out) const {
  std::lock_guard lock(mu_);
  const bool untyped = type_ == prometheus::MetricType::Untyped;
  renderSeries(series_, out, [untyped](prometheus::ClientMetric& m, const prometheus::Gauge& g) {
    (untyped ? m.untyped.value : m.gauge.value) = g.Value();
  });
}

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds, std::vector<std::string> labelNames)
    : Family(std::move(name), std::move(help), std::move(labelNames), prometheus::MetricType::Histogram),
      bounds_(std::move(bounds)) {
  if (bounds_.empty() || std::any_of(bounds_.begin(), bounds_.end(), [](double b) { return std::isnan(b); }) ||
      !std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end())
    invariant("histogram " + name_ + " needs strictly increasing bucket bounds");
  if (std::isinf(bounds_.back())) bounds_.pop_back();  // prometheus::Histogram adds +Inf
}

std::vector<double> Histogram::latencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

void Histogram::observe(const LabelValues& labels, double value) {
  checkArity(labels);
  if (std::isnan(value)) return;  // prometheus::Histogram would count it in +Inf and make the sum NaN
  std::lock_guard lock(mu_);
  auto& series = liveSeries(series_, labels, generation_, bounds_);
  series.value.Observe(value);
  series.text.clear();
}

std::uint64_t Histogram::count(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(labels);
  return it == series_.end() || it->second.generation != generation_
             ? 0
             : it->second.value.Collect().histogram.sample_count;
}

void Histogram::collectSeries(prometheus::MetricFamily& family) const {
  family.metric.reserve(series_.size());
  for (const auto& [labels, series] : series_)
    if (series.generation == generation_) addSeries(family, labels).histogram = series.value.Collect().histogram;
}

void Histogram::render(std::string& out) const {
  std::lock_guard lock(mu_);
  renderSeries(series_, out, [](prometheus::ClientMetric& m, const prometheus::Histogram& h) {
    m.histogram = h.Collect().histogram;
  });
}

Family& Registry::add(std::unique_ptr<Family> family) {
  std::lock_guard lock(mu_);
  for (const auto& f : families_)
    if (f->name() == family->name()) invariant("metric " + family->name() + " registered twice");
  families_.push_back(std::move(family));
  return *families_.back();
}

Counter& Registry::counter(std::string name, std::string help, std::vector<std::string> labelNames) {
  return static_cast<Counter&>(add(std::make_unique<Counter>(std::move(name), std::move(help), std::move(labelNames))));
}

Gauge& Registry::gauge(std::string name, std::string help, std::vector<std::string> labelNames) {
  return static_cast<Gauge&>(add(std::make_unique<Gauge>(std::move(name), std::move(help), std::move(labelNames))));
}

Gauge& Registry::untypedGauge(std::string name, std::string help, std::vector<std::string> labelNames) {
  return static_cast<Gauge&>(
      add(std::make_unique<Gauge>(std::move(name), std::move(help), std::move(labelNames), true)));
}

Histogram& Registry::histogram(std::string name, std::string help, std::vector<double> bounds,
                               std::vector<std::string> labelNames) {
  return static_cast<Histogram&>(
      add(std::make_unique<Histogram>(std::move(name), std::move(help), std::move(bounds), std::move(labelNames))));
}

void Registry::addCollector(std::function<void()> collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

void Registry::runCollectors() const {
  std::vector<std::function<void()>> collectors;
  {
    std::lock_guard lock(mu_);
    collectors = collectors_;
  }
  for (const auto& c : collectors) c();
}

std::vector<prometheus::MetricFamily> Registry::collect() const {
  runCollectors();
  std::vector<prometheus::MetricFamily> out;
  std::lock_guard lock(mu_);
  out.reserve(families_.size());
  for (const auto& f : families_)
    for (auto& family : f->Collect()) out.push_back(std::move(family));
  return out;
}

std::string Registry::render() const {
  runCollectors();
  std::string text;
  text.reserve(lastSize_.load(std::memory_order_relaxed));
  std::lock_guard lock(mu_);
  for (const auto& f : families_) f->render(text);
  lastSize_.store(text.size(), std::memory_order_relaxed);
  return text;
}

}  // namespace vgpu::metrics
