#pragma once
// The scale benchmark's parts (ctest -L scale, scale_test.cpp): Node objects with a vgpu
// inventory and a renewed Lease each (the agents, simulated), a paced stream of pods, a
// watcher that times each binding and confirms vgpu's binds as the agent would, and readings
// of a process's CPU and memory (/proc) and of the apiserver's request counters.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "real_cluster.h"
#include "scenario_support.h"

namespace vgpu::realk8s::scale {

using Clock = std::chrono::steady_clock;

/// An integer or decimal from the environment ($name), `fallback` when unset; a value that
/// is not a number is an error naming the variable.
Result<double> envNumber(const char* name, double fallback);
/// Comma-separated decimals from the environment ("0,0.5"), `fallback` when unset.
Result<std::vector<double>> envNumbers(const char* name, const std::vector<double>& fallback);

/// What /proc says of a process: user+system CPU seconds, resident set and its peak (KiB).
struct ProcessSample {
  double cpuSeconds = 0;
  std::uint64_t rssKiB = 0;
  std::uint64_t peakRssKiB = 0;
};
std::optional<ProcessSample> sampleProcess(int pid);
/// Resets the process's peak RSS (VmHWM) to its current RSS (/proc/<pid>/clear_refs "5").
bool resetPeakRss(int pid);

/// kube-apiserver's `apiserver_request_total`, summed by "VERB resource[/subresource]".
using RequestCounts = std::map<std::string, double>;
Result<RequestCounts> apiserverRequests(RealCluster& c);
/// `after - before`, zero entries left out.
RequestCounts requestsBetween(const RequestCounts& before, const RequestCounts& after);
/// The writes among them (POST, PUT, PATCH, DELETE, DELETECOLLECTION).
double writesOf(const RequestCounts& counts);
/// "POST pods/binding 3000, PATCH leases 12, ..., other requests 40": the writes, most first,
/// then the sum of the rest; with `everyRead` each read too ("WATCH pods 2").
std::string describe(const RequestCounts& counts, bool everyRead = false);
/// The series of a Prometheus text whose names start with one of `families`
/// (`name{labels}` -> value), e.g. vgpu-scheduler's bind results; compare two with
/// requestsBetween.
RequestCounts metricSeries(const std::string& text, const std::vector<std::string>& families);

/// The simulated agents: `count` Node objects `<prefix>-<i>`, each Ready, with `capacity`, the
/// `labels`, the inventory `annotations` a real agent published (copied), and a Lease
/// (vgpu/k8s/node_lease.h) in the chart's namespace renewed every `heartbeat` as the agent
/// renews it (spread evenly over the interval).
class NodePublisher {
 public:
  NodePublisher(RealCluster& c, std::string prefix, int count, std::map<std::string, std::string> capacity,
                std::map<std::string, std::string> labels, std::map<std::string, std::string> annotations,
                std::chrono::seconds heartbeat);
  ~NodePublisher();
  /// Creates every Node and Lease (`threads` at once), then renews the Leases until stopped,
  /// from as many threads (each its share of the nodes: one thread fell behind at 1,000
  /// nodes on a loaded machine).
  Status publish(int threads);
  void stop();
  std::size_t renewals() const { return renewals_; }
  std::size_t renewalFailures() const { return renewalFailures_; }

 private:
  Status publishOne(ApiClient& api, int i);
  void renewLoop(int part, int parts);

  RealCluster& c_;
  std::string prefix_;
  int count_;
  std::map<std::string, std::string> capacity_, labels_, annotations_;
  std::chrono::seconds heartbeat_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> renewals_{0}, renewalFailures_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> renewers_;
};

/// Watches the pods of one namespace: when each was first seen bound (spec.nodeName), and,
/// when `confirmDelay` is set, patches `vgpu.io/bind-phase: success` on each pod vgpu-scheduler
/// bound (bind-phase allocating) that long after seeing it, as the node agent does once the
/// kubelet's Allocate ended (as the agent's ServiceAccount, through the chart's webhook).
class BindWatcher {
 public:
  BindWatcher(RealCluster& c, std::string ns, std::optional<std::chrono::milliseconds> confirmDelay,
              int confirmThreads = 4);
  ~BindWatcher();
  void stop();
  std::size_t bound() const;
  std::map<std::string, Clock::time_point> bindTimes() const;
  std::size_t confirmed() const { return confirmed_; }
  std::vector<std::string> confirmErrors() const;

 private:
  void watchLoop();
  void confirmLoop();

  RealCluster& c_;
  std::string ns_;
  std::optional<std::chrono::milliseconds> delay_;
  ApiClient watchApi_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, Clock::time_point> bound_;
  std::set<std::string> queued_;
  using Due = std::pair<Clock::time_point, std::string>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  std::atomic<std::size_t> confirmed_{0};
  std::vector<std::string> confirmErrors_;
  std::thread watcher_;
  std::vector<std::thread> confirmers_;
};

/// Creates `count` pods (`make(i)`) in `ns` at `perSecond`, pod i sent at start + i/perSecond
/// from `threads` threads; records when each POST was sent. Errors name the first refused pod.
struct StreamResult {
  std::map<std::string, Clock::time_point> sent;
  Clock::time_point start, lastSent;
  std::vector<std::string> errors;
};
StreamResult createPodStream(RealCluster& c, const std::string& ns, int count, double perSecond, int threads,
                             const std::function<PodSpec(int)>& make);

/// Sorted `values`' `q` quantile (nearest rank); 0 when empty.
double quantile(std::vector<double> values, double q);

}  // namespace vgpu::realk8s::scale
