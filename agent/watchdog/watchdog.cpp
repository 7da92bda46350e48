// The node-side watchdog's scans (watchdog.h): each process's device memory and compute
// against its container's share, confirmed violations and the actions taken on them.

#include "watchdog.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/json.hpp>

#include "cgroup_identity.h"

namespace vgpu::deviceplugin {
namespace {

constexpr std::uint64_t kMiB = 1048576;

std::string mib(std::uint64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

std::uint64_t roundUp(std::uint64_t bytes, std::uint64_t stepMiB) {
  const std::uint64_t m = (bytes + kMiB - 1) / kMiB;
  if (stepMiB <= 1) return m;
  return (m + stepMiB - 1) / stepMiB * stepMiB;
}

/// What some processes hold on one device in one scan.
struct Usage {
  std::uint64_t usedBytes = 0;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> processes;
  std::string largestContainerId;
  std::uint64_t largestBytes = 0;
  /// Compute: the busy percent of its processes whose utilization the backend knows.
  bool busyKnown = false;
  std::uint32_t busyPercent = 0;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> busyProcesses;
  std::string procCgroup;  ///< /proc/<pid>/cgroup of its first process

  void add(const DeviceProcess& p, const std::string& containerId, const std::string& cgroupText = {}) {
    if (procCgroup.empty()) procCgroup = cgroupText;
    const std::uint64_t bytes = p.memoryUsedBytes.value_or(0);
    usedBytes += bytes;
    processes.emplace_back(p.pid, bytes);
    if (p.utilizationPercent) {
      busyKnown = true;
      busyPercent += *p.utilizationPercent;
      busyProcesses.emplace_back(p.pid, *p.utilizationPercent);
    }
    if (bytes >= largestBytes) {
      largestBytes = bytes;
      largestContainerId = containerId;
    }
  }
  void add(const Usage& u) {
    usedBytes += u.usedBytes;
    processes.insert(processes.end(), u.processes.begin(), u.processes.end());
    busyKnown = busyKnown || u.busyKnown;
    busyPercent += u.busyPercent;
    busyProcesses.insert(busyProcesses.end(), u.busyProcesses.begin(), u.busyProcesses.end());
    if (u.largestBytes >= largestBytes && !u.processes.empty()) {
      largestBytes = u.largestBytes;
      largestContainerId = u.largestContainerId;
    }
  }
};

/// What one pod holds on one device: per runtime container id ("" where the cgroup names none).
struct PodOnDevice {
  std::string backend;
  std::map<std::string, Usage> byContainer;
};

/// How strict a policy is: disable < default < force.
int strictness(ComputePolicy p) {
  return p == ComputePolicy::kDisable ? 0 : p == ComputePolicy::kForce ? 2 : 1;
}

/// What was handed out on one device to one container, or to the containers checked together.
struct Allowance {
  bool sliced = false;  ///< there is a slice at all
  std::uint64_t memoryMiB = 0;
  std::uint32_t computePercent = 0;
  bool computeUnlimited = false;  ///< one of its slices there has no compute limit
  std::set<std::string> containers;
  /// The rule of its slices; checked together, the most lenient one (never flag what the
  /// limiter of any of them lets through).
  ComputePolicy policy = ComputePolicy::kForce;
  bool othersMustBeHighPriority = false;

  void addRule(ComputePolicy p, bool onlyHighPriority) {
    if (strictness(p) < strictness(policy)) policy = p;
    othersMustBeHighPriority = othersMustBeHighPriority || onlyHighPriority;
  }
  void add(const Allowance& a) {
    sliced = sliced || a.sliced;
    memoryMiB += a.memoryMiB;
    computePercent += a.computePercent;
    computeUnlimited = computeUnlimited || a.computeUnlimited;
    containers.insert(a.containers.begin(), a.containers.end());
    if (a.sliced) addRule(a.policy, a.othersMustBeHighPriority);
  }
};

/// A process the vendor library reports busy on a device (it ran kernels lately).
struct BusyProcess {
  std::uint32_t pid = 0;
  bool highPriority = false;  ///< in a container the agent handed out with priority 0
};

/// What is compared in one scan: some processes of a pod on a device with their allowance.
struct Checked {
  std::string key;  ///< uid/device, + '|' + container id when per container
  std::string backend, container;
  Usage usage;
  Allowance allowance;
  bool perContainer = false;  ///< its processes are one container's (one cgroup)
};

/// uid, device of a "uid/device" or "uid/device|container id" key.
std::pair<std::string, std::string> splitKey(const std::string& key) {
  const auto slash = key.find('/');
  const auto bar = key.find('|', slash);
  return {key.substr(0, slash), key.substr(slash + 1, bar == std::string::npos ? std::string::npos : bar - slash - 1)};
}

void sortLargestFirst(std::vector<std::pair<std::uint32_t, std::uint64_t>>& processes) {
  std::sort(processes.begin(), processes.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
}

}  // namespace

Result<WatchdogAction> parseWatchdogAction(std::string_view word) {
  if (word == "report") return WatchdogAction::kReport;
  if (word == "kill-process") return WatchdogAction::kKillProcess;
  if (word == "evict-pod") return WatchdogAction::kEvictPod;
  return makeError("unknown watchdog action \"" + std::string(word) + "\": use report, kill-process or evict-pod");
}

const char* toString(WatchdogAction action) {
  switch (action) {
    case WatchdogAction::kReport: return "report";
    case WatchdogAction::kKillProcess: return "kill-process";
    case WatchdogAction::kEvictPod: return "evict-pod";
  }
  return "report";
}

const char* toString(WatchdogResource resource) {
  return resource == WatchdogResource::kCompute ? "compute" : "memory";
}

std::size_t WatchdogOptions::computeWindowScans() const {
  if (interval.count() <= 0) return 1;
  return std::max<std::size_t>(1, static_cast<std::size_t>((computeWindow.count() + interval.count() - 1) / interval.count()));
}

Status killProcess(std::uint32_t pid) {
  if (pid == 0) return makeError("refusing to signal pid 0");
#ifdef SYS_pidfd_open
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd >= 0) {
    const long r = syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
    const int err = errno;
    close(fd);
    if (r == 0) return {};
    return makeError("SIGKILL to pid " + std::to_string(pid) + " failed: " + std::strerror(err));
  }
  if (errno != ENOSYS)
    return makeError("pid " + std::to_string(pid) + " cannot be signalled: " + std::strerror(errno));
#endif
  if (kill(static_cast<pid_t>(pid), SIGKILL) != 0)
    return makeError("SIGKILL to pid " + std::to_string(pid) + " failed: " + std::strerror(errno));
  return {};
}

std::string evictionBody(const std::string& ns, const std::string& name) {
  boost::json::object body{{"apiVersion", "policy/v1"},
                           {"kind", "Eviction"},
                           {"metadata", {{"name", name}, {"namespace", ns}}}};
  return boost::json::serialize(body);
}

Watchdog::Watchdog(WatchdogOptions options, std::vector<ProcessSource> sources, ProcessKiller killer,
                   PodEvictor evictor, SteadyClock clock)
    : options_(std::move(options)),
      sources_(std::move(sources)),
      killer_(std::move(killer)),
      evictor_(std::move(evictor)),
      clock_(clock ? std::move(clock) : SteadyClock(std::chrono::steady_clock::now)),
      escalation_(options_.escalateAfter, options_.escalateWindow, clock_) {}

std::string Watchdog::evictOnce(const Violation& v, bool& asked) {
  asked = evictionsAsked_.insert(v.podUid).second;
  if (!asked) return "its eviction was asked for already";
  if (evictor_) evictor_(v.podNamespace, v.podName);
  return "the pod is being evicted";
}

Enforcement Watchdog::enforce(const Violation& v) {
  Enforcement out;
  switch (options_.action) {
    case WatchdogAction::kReport:
      out.said = "reported only (watchdog action: report)";
      break;
    case WatchdogAction::kKillProcess: {
      auto killed = killOver(v);
      if (!killed.ok()) {
        out.said = "no process could be killed: " + killed.error().message;
        break;
      }
      out.said = *killed;
      const int kills = escalation_.recordKill(v.podUid);
      if (!escalation_.due(kills)) break;
      const std::string why =
          v.resource == WatchdogResource::kCompute
              ? "keeping the device " + std::to_string(v.usedPercent) + "% busy at a " +
                    std::to_string(v.sharePercent) + "% share"
              : "using " + mib(v.usedBytes) + " of a " + mib(v.sliceBytes) + " slice";
      bool asked = false;
      const std::string evicted = evictOnce(v, asked);
      out.escalated = asked;
      out.said += "; killed " + std::to_string(kills) + " times in " + std::to_string(escalation_.window().count()) +
                  " s for " + why + "; " + (asked ? std::string("evicting") : evicted);
      break;
    }
    case WatchdogAction::kEvictPod: {
      bool asked = false;
      out.said = evictOnce(v, asked);
      break;
    }
  }
  return out;
}

std::uint64_t Watchdog::driverFigure(const std::string& backend, const std::string& procCgroup,
                                     const std::string& deviceId, std::uint64_t summed, ScanResult& out) {
  if (procCgroup.empty()) return summed;
  auto source = std::find_if(sources_.begin(), sources_.end(), [&](const ProcessSource& s) { return s.backend == backend; });
  if (source == sources_.end() || source->cgroupMemory == nullptr) return summed;
  auto used = source->cgroupMemory->cgroupMemoryUsed(procCgroup, deviceId);
  if (!used.ok()) {
    if (cgroupProblemsSaid_.insert(backend).second)
      out.notices.push_back("watchdog: backend " + backend + " cannot say what the driver charges a container's cgroup (" +
                            used.error().message + "); the processes' own figures are compared instead");
    return summed;
  }
  cgroupProblemsSaid_.erase(backend);
  return used->value_or(summed);
}

ScanResult Watchdog::scan(const std::vector<Slice>& slices,
                          const std::map<std::string, std::vector<std::string>>& devicesOf,
                          const PodContainerIds& containerIds) {
  ScanResult out;
  std::map<std::string, std::pair<std::string, std::string>> pods;  // uid -> namespace, name
  // uid + '/' + device -> container id ("": not known) -> what it was handed there
  std::map<std::string, std::map<std::string, Allowance>> allowances;
  PodContainerIds known = containerIds;  // the pod's containers, with a slice or not
  std::set<std::string> highPriority;    // uid + '|' + container id of high-priority containers
  for (const auto& s : slices) {
    if (s.podUid.empty()) continue;  // held by a pod the agent never saw: nothing to attribute
    pods.emplace(s.podUid, std::make_pair(s.podNamespace, s.podName));
    auto& a = allowances[s.podUid + "/" + s.deviceId][s.containerId];
    a.sliced = true;
    a.memoryMiB += s.memoryMiB;
    a.computePercent += s.computePercent;
    a.computeUnlimited = a.computeUnlimited || s.computePercent == 0 || s.computePercent >= 100;
    a.containers.insert(s.container);
    a.addRule(s.computeRule.policy, s.computeRule.othersMustBeHighPriority());
    if (!s.containerId.empty()) known[s.podUid].insert(s.containerId);
    if (s.computeRule.highPriority && !s.containerId.empty()) highPriority.insert(s.podUid + "|" + s.containerId);
  }

  std::set<std::string> scanned;  // keys of the backends that answered this scan
  std::map<std::string, PodOnDevice> held;
  std::map<std::string, std::vector<BusyProcess>> busyOn;  // device -> every process busy there
  std::size_t listed = 0, invisible = 0;
  for (const auto& source : sources_) {
    if (source.reporter == nullptr) {
      if (lastProblem_.emplace(source.backend, "unsupported").second)
        out.notices.push_back("watchdog: not supported by backend " + source.backend +
                              ": it does not list the processes on its devices (backend ABI 1.3 device_processes); "
                              "its devices are not watched and no foreign memory is published for them");
      continue;
    }
    auto processes = source.reporter->deviceProcesses();
    if (!processes.ok()) {
      auto& last = lastProblem_[source.backend];
      if (last != processes.error().message)
        out.notices.push_back("watchdog: backend " + source.backend +
                              " cannot list the processes on its devices: " + processes.error().message);
      last = processes.error().message;
      continue;
    }
    if (auto it = lastProblem_.find(source.backend); it != lastProblem_.end()) {
      out.notices.push_back("watchdog: backend " + source.backend + " lists the processes on its devices again");
      lastProblem_.erase(it);
    }
    auto& foreign = out.foreignMiB[source.backend];
    std::map<std::string, std::uint64_t> foreignBytes;
    if (auto d = devicesOf.find(source.backend); d != devicesOf.end())
      for (const auto& id : d->second) foreignBytes[id] = 0;
    for (const auto& p : *processes) {
      ++listed;
      const ProcessCgroup cg = readProcessCgroup(options_.procRoot, p.pid);
      // Whoever it is (ours, foreign, not visible here): a tenant the limiter sees as well.
      if (p.utilizationPercent.value_or(0) > 0)
        busyOn[p.deviceId].push_back(
            {p.pid, cg.identity && highPriority.contains(cg.identity->podUid + "|" + cg.identity->containerId)});
      if (!cg.readable) {
        ++invisible;  // gone since the list, or not in our view of /proc
        continue;
      }
      const std::uint64_t bytes = p.memoryUsedBytes.value_or(0);
      if (!cg.identity || !pods.contains(cg.identity->podUid)) {
        foreignBytes[p.deviceId] += bytes;
        continue;
      }
      auto& h = held[cg.identity->podUid + "/" + p.deviceId];
      h.backend = source.backend;
      h.byContainer[cg.identity->containerId].add(p, cg.identity->containerId, cg.text);
    }
    for (const auto& [id, bytes] : foreignBytes) foreign[id] = roundUp(bytes, options_.foreignStepMiB);
    if (auto d = devicesOf.find(source.backend); d != devicesOf.end())
      for (const auto& id : d->second) scanned.insert(id);
    for (const auto& [id, bytes] : foreignBytes) scanned.insert(id);
  }
  if (listed > 0 && invisible == listed && !saidInvisible_) {
    saidInvisible_ = true;
    out.notices.push_back("watchdog: none of the " + std::to_string(listed) + " processes on the devices is visible in " +
                          options_.procRoot + "; run the agent in the host's PID namespace (hostPID: true) or point "
                          "--watchdog-proc-root at the host's /proc");
  }

  // Per container where the process's container id is one of the pod's; the rest per pod,
  // with the slices no container was checked against. Each process is in one check only.
  std::vector<Checked> checks;
  for (const auto& [key, h] : held) {
    const std::string uid = splitKey(key).first;
    const auto a = allowances.find(key);
    const auto ids = known.find(uid);
    Checked rest{key, h.backend, "", {}, {}};
    std::set<std::string> perContainer;
    for (const auto& [cid, usage] : h.byContainer) {
      const Allowance* own = nullptr;
      if (!cid.empty() && a != allowances.end())
        if (auto it = a->second.find(cid); it != a->second.end()) own = &it->second;
      if (own == nullptr && (cid.empty() || ids == known.end() || !ids->second.contains(cid))) {
        rest.usage.add(usage);  // not known to be one of the pod's containers (yet)
        continue;
      }
      perContainer.insert(cid);
      Checked c{key + "|" + cid, h.backend, cid.substr(0, 12), usage, {}, true};
      if (own != nullptr) {
        c.allowance = *own;  // else: a container of the pod without a slice here, allowed nothing
        if (own->containers.size() == 1) c.container = *own->containers.begin();
      }
      checks.push_back(std::move(c));
    }
    if (rest.usage.processes.empty()) continue;
    if (a != allowances.end())
      for (const auto& [cid, allowance] : a->second)
        if (!perContainer.contains(cid)) rest.allowance.add(allowance);
    rest.container = rest.allowance.containers.size() == 1 ? *rest.allowance.containers.begin()
                                                           : rest.usage.largestContainerId.substr(0, 12);
    checks.push_back(std::move(rest));
  }

  // A violation of what `c` compares, with what its processes hold.
  auto violation = [&](WatchdogResource resource, const Checked& c) {
    const auto [uid, device] = splitKey(c.key);
    Violation v;
    v.resource = resource;
    v.podUid = uid;
    v.podNamespace = pods[uid].first;
    v.podName = pods[uid].second;
    v.container = c.container;
    v.backend = c.backend;
    v.deviceId = device;
    return v;
  };

  std::set<std::string> over;
  for (const auto& c : checks) {
    const auto& key = c.key;
    const auto& h = c.usage;
    const std::uint64_t allowed =
        c.allowance.memoryMiB == 0 ? 0 : (c.allowance.memoryMiB + options_.toleranceMiB) * kMiB;
    std::uint64_t used = h.usedBytes;
    if (used > allowed && c.perContainer) used = driverFigure(c.backend, h.procCgroup, splitKey(key).second, used, out);
    if (used <= allowed) continue;
    over.insert(key);
    if (++overStreak_[key] < std::max(options_.confirmScans, 1)) continue;
    overStreak_.erase(key);
    if (reportedRecently(key)) continue;
    Violation v = violation(WatchdogResource::kMemory, c);
    v.usedBytes = used;
    v.allowedBytes = allowed;
    v.sliceBytes = c.allowance.memoryMiB * kMiB;
    v.processes = h.processes;
    sortLargestFirst(v.processes);
    out.confirmed.push_back(std::move(v));
  }

  // Compute: the busy percent of what is checked against what the limiter allowed in each
  // scan, both averaged over the last window of scans.
  const std::size_t window = options_.computeWindowScans();
  std::set<std::string> sampled, seen, contended;
  for (const auto& c : checks) {
    const auto& key = c.key;
    const auto& h = c.usage;
    const Allowance& a = c.allowance;
    // Unknown utilization, no compute limit there (no slice there: the memory check's), or
    // a limiter that never applies it.
    if (!h.busyKnown || !a.sliced || a.computeUnlimited || a.policy == ComputePolicy::kDisable) continue;
    sampled.insert(key);
    bool limited = a.policy == ComputePolicy::kForce;
    if (a.policy == ComputePolicy::kDefault) {
      std::set<std::uint32_t> own;
      for (const auto& [pid, bytes] : h.processes) own.insert(pid);
      const auto& busy = busyOn[splitKey(key).second];
      const bool others = std::any_of(busy.begin(), busy.end(), [&](const BusyProcess& p) {
        return !own.contains(p.pid) && (!a.othersMustBeHighPriority || p.highPriority);
      });
      if (others) seen.insert(key);
      // The limiter counts a tenant busy within the last second: this scan or the one before.
      const bool shared = others || othersSeen_.contains(key);
      if (shared) contended.insert(key);
      // From contention's second scan: the limiter engages, and the samples show it.
      limited = shared && contended_.contains(key);
    }
    auto& samples = busy_[key];
    samples.push_back({h.busyPercent, limited ? a.computePercent : std::max<std::uint32_t>(100, h.busyPercent)});
    while (samples.size() > window) samples.pop_front();
    if (samples.size() < window) continue;
    std::uint64_t usedSum = 0, allowedSum = 0;
    for (const auto& sample : samples) {
      usedSum += sample.used;
      allowedSum += sample.allowed;
    }
    const auto average = static_cast<std::uint32_t>(usedSum / window);
    const auto allowed = static_cast<std::uint32_t>(allowedSum / window) + options_.computeTolerancePercent;
    if (average <= allowed) continue;
    busy_.erase(key);  // a fresh window after acting
    if (reportedRecently(key + "/compute")) continue;
    Violation v = violation(WatchdogResource::kCompute, c);
    v.usedPercent = average;
    v.allowedPercent = allowed;
    v.sharePercent = a.computePercent;
    v.computePolicy = a.policy;
    v.processes = h.busyProcesses;
    sortLargestFirst(v.processes);
    out.confirmed.push_back(std::move(v));
  }
  // A backend that could not answer leaves what was seen on its devices as it was.
  for (const auto& key : othersSeen_)
    if (!scanned.contains(splitKey(key).second)) seen.insert(key);
  for (const auto& key : contended_)
    if (!scanned.contains(splitKey(key).second)) contended.insert(key);
  othersSeen_ = std::move(seen);
  contended_ = std::move(contended);
  // A window is only of consecutive known samples: unknown, gone or unlimited starts it again.
  for (auto it = busy_.begin(); it != busy_.end();)
    it = scanned.contains(splitKey(it->first).second) && !sampled.contains(it->first) ? busy_.erase(it)
                                                                                        : std::next(it);
  // A streak ends with a scan that saw the pod within its slices on that device; a backend
  // that could not answer leaves its streaks as they were.
  for (auto it = overStreak_.begin(); it != overStreak_.end();)
    it = scanned.contains(splitKey(it->first).second) && !over.contains(it->first) ? overStreak_.erase(it)
                                                                                    : std::next(it);
  return out;
}

bool Watchdog::reportedRecently(const std::string& key) {
  if (options_.action != WatchdogAction::kReport) return false;
  const auto now = clock_();
  auto [last, first] = reported_.emplace(key, now);
  if (!first && now - last->second < options_.reportRepeat) return true;
  last->second = now;
  return false;
}

Result<std::string> Watchdog::killOver(const Violation& v) {
  const bool compute = v.resource == WatchdogResource::kCompute;
  std::uint64_t left = compute ? v.usedPercent : v.usedBytes;
  const std::uint64_t allowed = compute ? v.allowedPercent : v.allowedBytes;
  std::string done, problems;
  for (const auto& [pid, bytes] : v.processes) {
    if (left <= allowed) break;
    // The pid may have exited and been reused since the scan: only a process still in the pod.
    const ProcessCgroup cg = readProcessCgroup(options_.procRoot, pid);
    if (!cg.identity || cg.identity->podUid != v.podUid) {
      problems += (problems.empty() ? "" : "; ") + ("pid " + std::to_string(pid) + " is no longer in the pod");
      left -= std::min(left, bytes);
      continue;
    }
    if (auto s = killer_(pid); !s.ok()) {
      problems += (problems.empty() ? "" : "; ") + s.error().message;
      continue;
    }
    left -= std::min(left, bytes);
    done += (done.empty() ? "killed pid " : ", pid ") + std::to_string(pid) + " (" +
            (compute ? std::to_string(bytes) + "% busy" : mib(bytes)) + ")";
  }
  if (done.empty())
    return makeError(problems.empty() ? std::string("no process to kill") : problems);
  return problems.empty() ? done : done + "; " + problems;
}

}  // namespace vgpu::deviceplugin
