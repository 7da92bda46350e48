// The scale benchmark's parts: simulated agents (Nodes with inventories and Leases), a paced
// pod stream, a bind watcher that confirms as the agent does, and /proc and apiserver readings.
#include "scale_support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "vgpu/annotations.h"
#include "vgpu/k8s/node_lease.h"

namespace vgpu::realk8s::scale {

namespace json = boost::json;

Result<double> envNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !std::isfinite(d) || d < 0)
    return makeError(std::string("$") + name + " must be a number of at least 0, not \"" + v + "\"");
  return d;
}

Result<std::vector<double>> envNumbers(const char* name, const std::vector<double>& fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::vector<double> out;
  std::stringstream in(v);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(d) || d < 0)
      return makeError(std::string("$") + name + " must be comma-separated numbers of at least 0, not \"" + v + "\"");
    out.push_back(d);
  }
  return out;
}

// ---- /proc ----

std::optional<ProcessSample> sampleProcess(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  if (fields.size() < 13) return std::nullopt;
  ProcessSample s;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  s.cpuSeconds = (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    std::istringstream words(line);
    std::string key;
    std::uint64_t kib = 0;
    words >> key >> kib;
    if (key == "VmRSS:") s.rssKiB = kib;
    if (key == "VmHWM:") s.peakRssKiB = kib;
  }
  return s;
}

bool resetPeakRss(int pid) {
  std::ofstream f("/proc/" + std::to_string(pid) + "/clear_refs");
  f << "5";
  return static_cast<bool>(f.flush());
}

// ---- the apiserver's request counters ----

namespace {
std::string label(const std::string& series, const std::string& name) {
  const std::string key = name + "=\"";
  auto p = series.find("," + key);
  if (p == std::string::npos) p = series.find("{" + key);
  if (p == std::string::npos) return {};
  p += key.size() + 1;
  const auto end = series.find('"', p);
  return end == std::string::npos ? std::string() : series.substr(p, end - p);
}
}  // namespace

Result<RequestCounts> apiserverRequests(RealCluster& c) {
  auto r = c.api().get("/metrics");
  if (r.status != 200) return makeError("kube-apiserver's /metrics: " + r.describe());
  RequestCounts counts;
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("apiserver_request_total{", 0) != 0) continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string series = line.substr(0, space);
    std::string what = label(series, "verb") + " " + label(series, "resource");
    if (const auto sub = label(series, "subresource"); !sub.empty()) what += "/" + sub;
    counts[what] += std::stod(line.substr(space + 1));
  }
  if (counts.empty()) return makeError("kube-apiserver's /metrics has no apiserver_request_total");
  return counts;
}

RequestCounts requestsBetween(const RequestCounts& before, const RequestCounts& after) {
  RequestCounts d;
  for (const auto& [k, v] : after) {
    const auto b = before.find(k);
    const double delta = v - (b == before.end() ? 0 : b->second);
    if (delta != 0) d[k] = delta;
  }
  return d;
}

namespace {
bool isWrite(const std::string& what) {
  const std::string verb = what.substr(0, what.find(' '));
  return verb == "POST" || verb == "PUT" || verb == "PATCH" || verb == "DELETE" || verb == "DELETECOLLECTION" ||
         verb == "APPLY" || verb == "CREATE" || verb == "UPDATE";
}
}  // namespace

double writesOf(const RequestCounts& counts) {
  double n = 0;
  for (const auto& [k, v] : counts)
    if (isWrite(k)) n += v;
  return n;
}

std::string describe(const RequestCounts& counts, bool everyRead) {
  std::vector<std::pair<std::string, double>> items;
  double reads = 0;
  for (const auto& [k, v] : counts)
    if (isWrite(k) || everyRead)
      items.emplace_back(k, v);
    else
      reads += v;
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    if (isWrite(a.first) != isWrite(b.first)) return isWrite(a.first);
    return a.second > b.second;
  });
  std::ostringstream out;
  for (std::size_t i = 0; i < items.size(); ++i)
    out << (i ? ", " : "") << items[i].first << " " << static_cast<long long>(std::llround(items[i].second));
  if (!everyRead) out << (items.empty() ? "" : ", ") << "other requests " << static_cast<long long>(std::llround(reads));
  return out.str();
}

RequestCounts metricSeries(const std::string& text, const std::vector<std::string>& families) {
  RequestCounts out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    for (const auto& f : families)
      if (line.rfind(f, 0) == 0) {
        out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
        break;
      }
  }
  return out;
}

// ---- NodePublisher ----

NodePublisher::NodePublisher(RealCluster& c, std::string prefix, int count, std::map<std::string, std::string> capacity,
                             std::map<std::string, std::string> labels, std::map<std::string, std::string> annotations,
                             std::chrono::seconds heartbeat)
    : c_(c),
      prefix_(std::move(prefix)),
      count_(count),
      capacity_(std::move(capacity)),
      labels_(std::move(labels)),
      annotations_(std::move(annotations)),
      heartbeat_(heartbeat) {}

NodePublisher::~NodePublisher() { stop(); }

void NodePublisher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : renewers_)
    if (t.joinable()) t.join();
}

Status NodePublisher::publishOne(ApiClient& api, int i) {
  const std::string name = prefix_ + "-" + std::to_string(i);
  if (auto s = c_.createNode(name, capacity_, labels_, annotations_); !s.ok()) return s;
  const auto lease = nodeLeaseObject(name, kChartNamespace, std::chrono::system_clock::now(), 3 * heartbeat_);
  const auto r = api.post(std::string("/apis/coordination.k8s.io/v1/namespaces/") + kChartNamespace + "/leases",
                          json::serialize(lease));
  if (r.status != 201) return makeError("creating the Lease of " + name + ": " + r.describe());
  return {};
}

Status NodePublisher::publish(int threads) {
  std::atomic<int> next{0};
  std::mutex errMu;
  std::optional<Error> firstError;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      ApiClient api = c_.clientAs(c_.tokenFor("vgpu-device-plugin"));
      for (int i; (i = next++) < count_;) {
        if (auto s = publishOne(api, i); !s.ok()) {
          std::lock_guard lock(errMu);
          if (!firstError) firstError = s.error();
          next = count_;
        }
      }
    });
  for (auto& w : workers) w.join();
  if (firstError) return *firstError;
  for (int t = 0; t < threads; ++t) renewers_.emplace_back([this, t, threads] { renewLoop(t, threads); });
  return {};
}

void NodePublisher::renewLoop(int part, int parts) {
  // Nodes part, part + parts, ...: one every heartbeat/(their number), round robin, so each
  // is renewed once per heartbeat, as agents started at different times renew theirs.
  ApiClient api = c_.clientAs(c_.tokenFor("vgpu-device-plugin"));
  const int mine = (count_ - part + parts - 1) / parts;
  if (mine <= 0) return;
  const auto step = std::chrono::duration_cast<Clock::duration>(heartbeat_) / mine;
  auto due = Clock::now() + step * part / parts;
  for (int k = 0;; k = (k + 1) % mine) {
    due += step;
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, due, [this] { return stopping_.load(); })) return;
    }
    const std::string name = prefix_ + "-" + std::to_string(part + k * parts);
    const auto patch = nodeLeaseObject(name, kChartNamespace, std::chrono::system_clock::now(), 3 * heartbeat_, true);
    const auto r = api.patch(std::string("/apis/coordination.k8s.io/v1/namespaces/") + kChartNamespace +
                                 "/leases/" + nodeLeaseName(name),
                             json::serialize(patch));
    ++(r.status == 200 ? renewals_ : renewalFailures_);
    if (Clock::now() > due + heartbeat_) due = Clock::now();  // fell a whole round behind: no burst
  }
}

// ---- BindWatcher ----

BindWatcher::BindWatcher(RealCluster& c, std::string ns, std::optional<std::chrono::milliseconds> confirmDelay,
                         int confirmThreads)
    : c_(c), ns_(std::move(ns)), delay_(confirmDelay), watchApi_(c.clientAs(c.tokenFor("admin"))) {
  watcher_ = std::thread([this] { watchLoop(); });
  if (delay_)
    for (int i = 0; i < confirmThreads; ++i) confirmers_.emplace_back([this] { confirmLoop(); });
}

BindWatcher::~BindWatcher() { stop(); }

void BindWatcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  for (auto& t : confirmers_)
    if (t.joinable()) t.join();
}

std::size_t BindWatcher::bound() const {
  std::lock_guard lock(mu_);
  return bound_.size();
}

std::map<std::string, Clock::time_point> BindWatcher::bindTimes() const {
  std::lock_guard lock(mu_);
  return bound_;
}

std::vector<std::string> BindWatcher::confirmErrors() const {
  std::lock_guard lock(mu_);
  return confirmErrors_;
}

void BindWatcher::watchLoop() {
  const std::string base = "/api/v1/namespaces/" + ns_ + "/pods";
  std::string rv;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (rv.empty()) {
      // Start (or start over) from a list: pods bound meanwhile count as seen now.
      auto list = watchApi_.get(base);
      if (list.status != 200) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      const auto obj = list.json();
      rv = str(at(obj, {"metadata", "resourceVersion"}));
    }
    const auto reply = watchApi_.watch(
        base + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv,
        [&](const json::object& event) {
          const auto* objv = event.if_contains("object");
          if (!objv || !objv->is_object()) return true;
          const auto& pod = objv->as_object();
          if (str(event.if_contains("type")) == "ERROR") {
            rv.clear();  // 410: list again
            return false;
          }
          if (auto v = str(at(pod, {"metadata", "resourceVersion"})); !v.empty()) rv = v;
          if (str(event.if_contains("type")) == "BOOKMARK" || nodeOf(pod).empty()) {
            std::lock_guard lock(mu_);
            return !stopping_;
          }
          const auto now = Clock::now();
          const std::string name = str(at(pod, {"metadata", "name"}));
          std::lock_guard lock(mu_);
          bound_.emplace(name, now);
          if (delay_ && str(at(pod, {"metadata", "annotations", std::string(keys::kPodBindPhase)})) == "allocating" &&
              queued_.insert(name).second) {
            due_.emplace(now + *delay_, name);
            cv_.notify_one();
          }
          return !stopping_;
        },
        std::chrono::seconds(20));
    if (reply.status != 200 && reply.status != 0) rv.clear();
  }
}

void BindWatcher::confirmLoop() {
  ApiClient api = c_.clientAs(c_.tokenFor("vgpu-device-plugin"));
  const std::string patch = json::serialize(
      json::object{{"metadata", {{"annotations", {{std::string(keys::kPodBindPhase), "success"}}}}}});
  while (true) {
    std::string name;
    {
      std::unique_lock lock(mu_);
      while (true) {
        if (stopping_) return;
        if (!due_.empty() && due_.top().first <= Clock::now()) break;
        if (due_.empty())
          cv_.wait(lock);
        else
          cv_.wait_until(lock, due_.top().first);
      }
      name = due_.top().second;
      due_.pop();
    }
    const auto r = api.patch("/api/v1/namespaces/" + ns_ + "/pods/" + name, patch);
    if (r.status == 200) {
      ++confirmed_;
    } else {
      std::lock_guard lock(mu_);
      confirmErrors_.push_back(name + ": " + r.describe());
    }
  }
}

// ---- the pod stream ----

StreamResult createPodStream(RealCluster& c, const std::string& ns, int count, double perSecond, int threads,
                             const std::function<PodSpec(int)>& make) {
  StreamResult out;
  out.start = Clock::now();
  std::mutex mu;
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  const std::string path = "/api/v1/namespaces/" + ns + "/pods";
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      ApiClient api = c.clientAs(c.tokenFor("admin"));
      for (int i; (i = next++) < count;) {
        const PodSpec spec = make(i);
        const std::string body = json::serialize(podObject(spec));
        std::this_thread::sleep_until(out.start + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(i / perSecond)));
        const auto sent = Clock::now();
        const auto r = api.post(path, body);
        std::lock_guard lock(mu);
        if (r.status == 201) {
          out.sent[spec.name] = sent;
          out.lastSent = std::max(out.lastSent, sent);
        } else {
          out.errors.push_back(spec.name + ": " + r.describe());
        }
      }
    });
  for (auto& w : workers) w.join();
  return out;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace vgpu::realk8s::scale
