#include "vgpu/metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace vgpu::metrics {
namespace {

[[noreturn]] void invariant(const std::string& message) {
  std::fprintf(stderr, "vgpu metrics: %s\n", message.c_str());
  std::abort();
}

bool validName(std::string_view name, bool metric) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return metric || name.substr(0, 2) != "__";
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

std::string escapeLabelValue(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else out += c;
  }
  return out;
}

std::string formatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

Family::Family(std::string name, std::string help, std::vector<std::string> labelNames, const char* type)
    : name_(std::move(name)), help_(std::move(help)), labelNames_(std::move(labelNames)), type_(type) {
  if (!validName(name_, true)) invariant("invalid metric name \"" + name_ + "\"");
  std::set<std::string> seen;
  for (const auto& l : labelNames_) {
    if (!validName(l, false) || l == "le" || l == "quantile")
      invariant("invalid or reserved label name \"" + l + "\" for " + name_);
    if (!seen.insert(l).second) invariant("label \"" + l + "\" given twice for " + name_);
  }
}

void Family::checkArity(const LabelValues& labels) const {
  if (labels.size() != labelNames_.size())
    invariant(name_ + " takes " + std::to_string(labelNames_.size()) + " label values, got " +
              std::to_string(labels.size()));
}

void Family::clear() {
  std::lock_guard lock(mu_);
  eraseAll();
}

void Family::remove(const LabelValues& labels) {
  std::lock_guard lock(mu_);
  erase(labels);
}

void Family::renderHeader(std::string& out) const {
  out += "# HELP " + name_ + " " + escapeHelp(help_) + "\n";
  out += "# TYPE " + name_ + " " + type_ + "\n";
}

std::string Family::seriesName(std::string_view suffix, const LabelValues& labels, std::string_view extra) const {
  std::string s = name_;
  s += suffix;
  if (labels.empty() && extra.empty()) return s;
  s += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) s += ',';
    s += labelNames_[i] + "=\"" + escapeLabelValue(labels[i]) + "\"";
  }
  if (!extra.empty()) {
    if (!labels.empty()) s += ',';
    s += extra;
  }
  s += '}';
  return s;
}

Counter::Counter(std::string name, std::string help, std::vector<std::string> labelNames)
    : Family(std::move(name), std::move(help), std::move(labelNames), "counter") {}

void Counter::inc(const LabelValues& labels, double amount) {
  checkArity(labels);
  if (!(amount >= 0)) return;
  std::lock_guard lock(mu_);
  values_[labels] += amount;
}

double Counter::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Counter::render(std::string& out) const {
  std::lock_guard lock(mu_);
  renderHeader(out);
  for (const auto& [labels, v] : values_) out += seriesName("", labels) + " " + formatValue(v) + "\n";
}

Gauge::Gauge(std::string name, std::string help, std::vector<std::string> labelNames)
    : Gauge(std::move(name), std::move(help), std::move(labelNames), false) {}

Gauge::Gauge(std::string name, std::string help, std::vector<std::string> labelNames, bool untyped)
    : Family(std::move(name), std::move(help), std::move(labelNames), untyped ? "untyped" : "gauge") {}

void Gauge::set(const LabelValues& labels, double value) {
  checkArity(labels);
  std::lock_guard lock(mu_);
  values_[labels] = value;
}

void Gauge::add(const LabelValues& labels, double amount) {
  checkArity(labels);
  std::lock_guard lock(mu_);
  values_[labels] += amount;
}

double Gauge::value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Gauge::render(std::string& out) const {
  std::lock_guard lock(mu_);
  renderHeader(out);
  for (const auto& [labels, v] : values_) out += seriesName("", labels) + " " + formatValue(v) + "\n";
}

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds, std::vector<std::string> labelNames)
    : Family(std::move(name), std::move(help), std::move(labelNames), "histogram"), bounds_(std::move(bounds)) {
  if (bounds_.empty() || !std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end())
    invariant("histogram " + name_ + " needs strictly increasing bucket bounds");
  if (std::isinf(bounds_.back())) bounds_.pop_back();  // +Inf is always added
}

std::vector<double> Histogram::latencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

void Histogram::observe(const LabelValues& labels, double value) {
  checkArity(labels);
  if (std::isnan(value)) return;
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size() + 1, 0);
  ++s.buckets[bucket];
  s.sum += value;
  ++s.count;
}

std::uint64_t Histogram::count(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

void Histogram::render(std::string& out) const {
  std::lock_guard lock(mu_);
  renderHeader(out);
  for (const auto& [labels, s] : series_) {
    std::uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      const std::string le = i < bounds_.size() ? formatValue(bounds_[i]) : "+Inf";
      out += seriesName("_bucket", labels, "le=\"" + le + "\"") + " " + std::to_string(cumulative) + "\n";
    }
    out += seriesName("_sum", labels) + " " + formatValue(s.sum) + "\n";
    out += seriesName("_count", labels) + " " + std::to_string(s.count) + "\n";
  }
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

std::string Registry::render() const {
  std::vector<std::function<void()>> collectors;
  {
    std::lock_guard lock(mu_);
    collectors = collectors_;
  }
  for (const auto& c : collectors) c();
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& f : families_) f->render(out);
  return out;
}

}  // namespace vgpu::metrics
