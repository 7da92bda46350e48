// runSoak: the pod stream (one creating thread, eight deleting) held at its target population,
// the fault loop with a recovery probe after each fault, the checker, census and supervisor
// thread, then settling and the figures.
#include "soak_driver.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "fake_nodes.h"  // readText
#include "scenario_support.h"
#include "soak_faults.h"
#include "soak_invariants.h"
#include "vgpu/pod_info.h"

namespace vgpu::realk8s::soak {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The mixed shapes: count x memory (MiB) x compute (%). Sized so that the population the
/// stream keeps (at most kMaxTarget pods) fits 10 nodes of 8 x 80 GiB by memory, compute and
/// shares, so a probe pod always finds room.
struct Shape {
  const char* name;
  int count;
  std::uint64_t memoryMiB;
  int cores;
};
constexpr Shape kShapes[] = {{"tiny", 1, 4096, 5},   {"small", 1, 8192, 10}, {"medium", 1, 20480, 25},
                             {"large", 1, 40960, 50}, {"pair", 2, 16384, 20}};
/// The target population moves between these every 10 s: high enough to keep every node
/// busy, narrow enough that the RSS after the stream reached it compares with the end's.
constexpr int kMinTarget = 100, kMaxTarget = 160;

/// A process's resident memory in KiB (0 when unreadable): all of it (VmRSS, the figure
/// checked), and its anonymous part (RssAnon, the heap), reported to tell a growing heap from
/// mapped files (etcd maps its whole bbolt database). `pid` tells a restarted component.
struct Rss {
  int pid = 0;
  long total = 0, anon = 0;
};
Rss rssKiB(int pid) {
  Rss r{.pid = pid};
  if (pid == 0) return r;
  std::istringstream in(e2e::readText("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) r.total = std::stol(line.substr(6));
    if (line.rfind("RssAnon:", 0) == 0) r.anon = std::stol(line.substr(8));
  }
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

/// The shared state of the run's threads.
struct Run {
  RealCluster& c;
  const SoakOptions& o;
  Clock::time_point t0 = Clock::now();
  std::mutex mu;  // everything below
  std::condition_variable cv;
  std::vector<std::string> live;       // created, not asked to be deleted
  std::string creating;                // the pod whose creation is under way
  std::deque<std::string> toDelete;
  std::set<std::string> deleting, deleted;  // ns/name
  std::vector<Fault> faults;
  std::vector<std::string> violations;
  std::vector<std::string> exits;  // components found exited, with their log's last lines
  std::size_t created = 0, createFailed = 0, deletedCount = 0, deleteFailed = 0;
  std::map<std::string, Rss> rssBaseline, rssEnd;
  double rssBaselineAt = 0;  // seconds into the run
  int target = kMinTarget;
  bool targetReached = false;  // the population reached its target once after the first minute
  // The apiserver's view (census): pods not finished and not being deleted.
  std::size_t apiPending = 0, apiRunning = 0, peakApiPopulation = 0, adopted = 0, peakLingering = 0;
  std::map<std::string, Clock::time_point> partitionedUntil;  // node -> end of a hold, plus a margin
  bool stopWorkload = false, stopDeleters = false, stopChecker = false;

  Run(RealCluster& cluster, const SoakOptions& options) : c(cluster), o(options) {}

  std::string faultsSoFar() {  // with mu held
    std::ostringstream out;
    for (const auto& f : faults) out << "\n    " << f.describe();
    return out.str();
  }
  void violation(const std::string& what) {  // with mu held
    std::ostringstream v;
    v << "VIOLATION (soak seed " << o.seed << ", t=" << std::fixed << std::setprecision(1) << since(t0)
      << " s): " << what << "\n  faults so far:" << faultsSoFar();
    violations.push_back(v.str());
    std::cerr << v.str() << std::endl;
    std::ofstream(o.figuresFile + ".violations", std::ios::app) << v.str() << "\n";
  }
  std::size_t population() const {  // with mu held
    // Pods waiting for their deletion still hold their shares: they count until gone.
    return live.size() + toDelete.size() + deleting.size() + (creating.empty() ? 0 : 1);
  }
  // By value: a caller's `live[i]` would be shifted onto the next pod by the erase, which
  // then lost one pod (never deleted, no longer counted) per deletion: the old overshoot.
  void remove(const std::string name) {  // with mu held
    live.erase(std::find(live.begin(), live.end(), name));
    toDelete.push_back(name);
    deleted.insert(o.ns + "/" + name);
    cv.notify_all();
  }
};

/// The pod stream: at 5-20 operations per second, a creation while the population is below
/// its target, else the deletion of a random live pod, so the population stays at the
/// target and the churn goes on.
void workload(Run& run, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto nextTarget = Clock::now();
  for (std::size_t n = 0;; ++n) {
    const double rate = std::uniform_real_distribution<double>(5, 20)(rng);  // operations per second
    const Shape& s = kShapes[std::uniform_int_distribution<std::size_t>(0, std::size(kShapes) - 1)(rng)];
    const std::string name = std::string(s.name) + "-" + std::to_string(n);
    {
      std::unique_lock lock(run.mu);
      if (Clock::now() >= nextTarget) {
        run.target = std::uniform_int_distribution<int>(kMinTarget, kMaxTarget)(rng);
        nextTarget = Clock::now() + std::chrono::seconds(10);
      }
      if (run.cv.wait_for(lock, std::chrono::duration<double>(1.0 / rate), [&] { return run.stopWorkload; })) return;
      if (static_cast<int>(run.population()) >= run.target) {
        if (!run.live.empty())
          run.remove(run.live[std::uniform_int_distribution<std::size_t>(0, run.live.size() - 1)(rng)]);
        continue;
      }
      run.creating = name;
    }
    const auto st = createPod(run.c, run.o.ns, {.name = name, .limits = simLimits(s.count, s.memoryMiB, s.cores),
                                                .labels = {{"soak.vgpu.io/shape", s.name}}});
    std::lock_guard lock(run.mu);
    run.creating.clear();
    if (st.ok()) {
      ++run.created;
      run.live.push_back(name);
    } else {
      // The apiserver away: most often no pod, but one that answered too late may have
      // stored it; the census takes such a pod in.
      ++run.createFailed;
    }
  }
}

/// The apiserver's view of the stream, each checker pass: the pods neither finished nor
/// being deleted. A stream pod the driver does not track (its creation got no answer, yet
/// the apiserver stored it) is taken into `live`, so that it counts and gets deleted.
void census(Run& run) {
  auto list = listPods(run.c, run.o.ns);
  if (!list.ok()) return;  // the apiserver away: the next pass counts
  std::size_t pending = 0, running = 0;
  std::vector<std::string> names;
  for (const auto& obj : *list) {
    auto info = parsePod(boost::json::value(obj));
    if (!info.ok() || info->terminated() || info->deleting) continue;
    ++(info->phase == "Running" ? running : pending);
    names.push_back(info->name);
  }
  std::lock_guard lock(run.mu);
  std::size_t lingering = 0;  // asked to be deleted, reported gone, still listed
  for (const auto& name : names) {
    if (name.rfind("probe-", 0) == 0 || name == run.creating) continue;
    const std::string key = run.o.ns + "/" + name;
    if (run.deleted.count(key)) {
      if (!run.deleting.count(key) && std::find(run.toDelete.begin(), run.toDelete.end(), name) == run.toDelete.end())
        ++lingering;
      continue;
    }
    if (std::find(run.live.begin(), run.live.end(), name) != run.live.end()) continue;
    run.live.push_back(name);
    ++run.adopted;
    std::cout << "soak: t=" << std::fixed << std::setprecision(1) << since(run.t0) << " s: pod " << key
              << " exists though its creation failed; the stream tracks it now" << std::endl;
  }
  run.apiPending = pending;
  run.apiRunning = running;
  run.peakApiPopulation = std::max(run.peakApiPopulation, pending + running);
  run.peakLingering = std::max(run.peakLingering, lingering);
  if (!run.targetReached && since(run.t0) >= 60 && static_cast<int>(run.population()) >= run.target)
    run.targetReached = true;
}

void deleter(Run& run) {
  for (;;) {
    std::string name;
    {
      std::unique_lock lock(run.mu);
      run.cv.wait(lock, [&] { return run.stopDeleters || !run.toDelete.empty(); });
      if (run.toDelete.empty()) return;
      name = run.toDelete.front();
      run.toDelete.pop_front();
      run.deleting.insert(run.o.ns + "/" + name);
    }
    auto pod = run.c.getObject("/api/v1/namespaces/" + run.o.ns + "/pods/" + name);
    const auto s = run.c.deletePod(run.o.ns, name);
    // The Admitter may have admitted the pod after deletePod freed it: the kubelet frees it
    // again once it is gone, as a kubelet does on seeing the deletion.
    if (pod.ok())
      if (const std::string node = nodeOf(*pod); !node.empty())
        run.c.kubelet(node).removePod(str(at(*pod, {"metadata", "uid"})));
    std::lock_guard lock(run.mu);
    run.deleting.erase(run.o.ns + "/" + name);
    if (s.ok()) {
      ++run.deletedCount;
    } else {
      ++run.deleteFailed;
      run.toDelete.push_back(name);  // tried again: the apiserver was away
    }
  }
}

std::vector<std::string> componentNames(const SoakOptions& o) {
  std::vector<std::string> names{"etcd", "kube-apiserver", "kube-scheduler", "vgpu-scheduler"};
  for (const auto& n : o.nodes) names.push_back("vgpu-device-plugin@" + n);
  return names;
}

/// What a kubelet does for a crashed container: starts it again. Runs between faults only.
void supervise(Run& run, std::mutex& componentsMu) {
  std::unique_lock lock(componentsMu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (const auto& name : componentNames(run.o)) {
    if (run.c.componentPid(name) != 0) continue;
    const std::string logEnd = run.c.logTail(name, 3);
    Status s;
    if (name == "etcd") s = run.c.startEtcd();
    else if (name == "kube-apiserver") s = run.c.startApiServer();
    else if (name == "kube-scheduler") s = run.c.startKubeScheduler();
    else if (name == "vgpu-scheduler") s = run.c.startVgpuScheduler();
    else s = run.c.restartVgpuAgent(name.substr(name.find('@') + 1));
    std::lock_guard g(run.mu);
    std::ostringstream e;
    e << "t=" << std::fixed << std::setprecision(1) << since(run.t0) << "s " << name << " had exited"
      << (s.ok() ? ", started again" : ", failed to start again: " + s.error().message) << "; its log ended:\n" << logEnd;
    run.exits.push_back(e.str());
  }
}

void checker(Run& run, InvariantChecker& inv, std::mutex& componentsMu) {
  bool rssTaken = false;
  auto nextReport = Clock::now();
  for (;;) {
    std::set<std::string> deleting, deleted, partitioned;
    {
      std::unique_lock lock(run.mu);
      if (run.cv.wait_for(lock, std::chrono::seconds(3), [&] { return run.stopChecker; })) return;
      deleting = run.deleting;
      deleted = run.deleted;
      for (const auto& [node, until] : run.partitionedUntil)
        if (Clock::now() < until) partitioned.insert(node);
    }
    auto found = inv.check(deleting, deleted, partitioned);
    census(run);
    supervise(run, componentsMu);
    // The RSS baseline: after the first minute, once the population reached its target (the
    // components' memory follows the number of objects; the ramp-up is not growth).
    if (!rssTaken && run.targetReached) {
      rssTaken = true;
      std::lock_guard lock(componentsMu);
      for (const auto& name : componentNames(run.o)) run.rssBaseline[name] = rssKiB(run.c.componentPid(name));
      run.rssBaselineAt = since(run.t0);
    }
    std::lock_guard lock(run.mu);
    if (Clock::now() >= nextReport) {
      nextReport = Clock::now() + std::chrono::seconds(30);
      std::cout << "soak: t=" << std::fixed << std::setprecision(1) << since(run.t0) << " s: target " << run.target
                << ", population " << run.population() << " (apiserver: " << run.apiRunning << " Running, "
                << run.apiPending << " Pending), created " << run.created << ", deleted " << run.deletedCount
                << std::endl;
    }
    if (found.ok())
      for (const auto& v : *found) run.violation(v);
  }
}

/// A fresh small pod after a fault: seconds from the fault's start until it runs (bound,
/// admitted, reported Running); nullopt after two minutes.
std::optional<double> probe(Run& run, Clock::time_point faultStart, int n) {
  const std::string name = "probe-" + std::to_string(n);
  const auto deadline = Clock::now() + std::chrono::minutes(2);
  for (;;) {
    const auto s = createPod(run.c, run.o.ns, {.name = name, .limits = simLimits(1, 1024, 1)});
    // 409: an earlier try that got no answer stored it.
    if (s.ok() || s.error().message.find("HTTP 409") != std::string::npos) break;
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const auto running = waitForPod(
      run.c, run.o.ns, name, [](const auto& p) { return str(at(p, {"status", "phase"})) == "Running"; },
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  std::lock_guard lock(run.mu);
  run.live.push_back(name);
  run.remove(name);
  if (!running) return std::nullopt;
  return std::chrono::duration<double>(Clock::now() - faultStart).count();
}

}  // namespace

SoakResult runSoak(RealCluster& c, const SoakOptions& o) {
  std::cout << "soak: seed " << o.seed << " (replay with --soak-seed=" << o.seed << "), " << o.duration.count()
            << " s, " << o.nodes.size() << " nodes, release " << c.release() << std::endl;
  std::ofstream(o.figuresFile + ".violations", std::ios::trunc);
  Run run(c, o);
  std::mutex componentsMu;
  FaultInjector injector(c, o.nodes, o.proxies, componentsMu);
  Admitter admitter(c, o.ns);
  InvariantChecker inv(c, o.ns, o.nodes, admitter);
  std::thread creating([&] { workload(run, o.seed ^ 0x9e3779b97f4a7c15ULL); });
  std::vector<std::thread> deleting;
  // deletePod waits for the object to go (0.2-1 s on a loaded machine): 8 at once keep up
  // with 20 operations per second.
  for (int i = 0; i < 8; ++i) deleting.emplace_back([&] { deleter(run); });
  std::thread checking([&] { checker(run, inv, componentsMu); });

  std::mt19937_64 faultRng(o.seed);
  std::map<std::string, std::vector<double>> recovery;
  std::vector<std::string> unrecovered;
  const auto end = run.t0 + o.duration;
  for (int n = 0;; ++n) {
    const auto wait = std::chrono::seconds(std::uniform_int_distribution<int>(5, 30)(faultRng));
    Fault f = injector.pick(faultRng);
    if (Clock::now() + wait >= end) break;
    std::this_thread::sleep_for(wait);
    f.at = since(run.t0);
    const auto start = Clock::now();
    if (f.kind == FaultKind::kHoldAgentConnections) {
      // The hold, the agent's pod wait after it, and the checker's period.
      std::lock_guard lock(run.mu);
      run.partitionedUntil[f.target] = start + std::chrono::seconds(f.seconds + 10);
    }
    const auto s = injector.inject(f);
    f.outcome = s.ok() ? "ok" : s.error().message;
    std::cout << "soak: " << f.describe() << std::endl;
    {
      std::lock_guard lock(run.mu);
      run.faults.push_back(f);
    }
    if (auto r = probe(run, start, n))
      recovery[faultName(f.kind)].push_back(*r);
    else
      unrecovered.push_back(f.describe() + ": a new pod did not run within 2 minutes");
  }
  const auto lastFault = Clock::now();

  // Settling: the stream stops, the deletions asked for finish, and then everything must
  // hold within 60 s of the last fault's recovery probe.
  {
    std::lock_guard lock(run.mu);
    run.stopWorkload = true;
    run.cv.notify_all();
  }
  creating.join();
  SoakResult result;
  std::vector<std::string> problems;
  std::optional<double> settled;
  while (since(lastFault) < 60) {
    {
      std::lock_guard lock(run.mu);
      if (!run.toDelete.empty() || !run.deleting.empty()) {
        problems = {"deletions still under way"};
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
    }
    problems = inv.settleProblems();
    if (problems.empty()) {
      settled = std::chrono::duration<double>(Clock::now() - lastFault).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  {
    std::lock_guard lock(run.mu);
    run.stopDeleters = run.stopChecker = true;
    run.cv.notify_all();
  }
  for (auto& t : deleting) t.join();
  checking.join();
  // A component that exited in the last seconds (kube-scheduler losing its lease to a late
  // pause) is started again, as between faults: "not running at the end" means it cannot be.
  supervise(run, componentsMu);
  admitter.stop();
  for (const auto& p : problems) result.settleFailures.push_back("60 s after the last fault: " + p);
  for (const auto& u : unrecovered) result.settleFailures.push_back(u);
  // The stream's own books: only a failed creation can leave a pod untracked; more means
  // the driver lost pods (the overshoot of remove(live[i])), and the run measures nothing.
  if (run.adopted > run.createFailed)
    result.settleFailures.push_back("the census found " + std::to_string(run.adopted) +
                                    " stream pods untracked, more than the " + std::to_string(run.createFailed) +
                                    " failed creations: the driver lost pods");
  for (const auto& name : componentNames(o)) {
    run.rssEnd[name] = rssKiB(c.componentPid(name));
    if (run.rssEnd[name].total == 0) {  // exited since the pass above (a lost lease): started again
      supervise(run, componentsMu);
      run.rssEnd[name] = rssKiB(c.componentPid(name));
    }
    if (run.rssEnd[name].total == 0) result.settleFailures.push_back(name + " is not running at the end");
  }
  for (const auto& e : run.exits)
    if (e.find("eader") == std::string::npos)  // leader election lost: the documented exit
      result.settleFailures.push_back("a component exited on its own: " + e);

  // ---- the figures ----
  std::ostringstream fig;
  fig << std::fixed << std::setprecision(2);
  fig << "release " << c.kubernetesVersion() << ", seed " << o.seed << ", run length " << since(run.t0) << " s ("
      << o.duration.count() << " s of faults and pods, then settling), " << o.nodes.size() << " vgpu nodes\n";
  std::map<std::string, int> byKind;
  for (const auto& f : run.faults) ++byKind[faultName(f.kind)];
  fig << "faults " << run.faults.size() << ":";
  for (const auto& [k, n] : byKind) fig << " " << k << "=" << n;
  fig << "\npods created " << run.created << " (+" << run.faults.size() << " probes; " << run.createFailed
      << " creations refused while the apiserver was away), bound " << admitter.bindViews().size() << ", admitted "
      << admitter.admitted() << ", deleted " << run.deletedCount << "\n";
  fig << "population target " << kMinTarget << "-" << kMaxTarget << " (moved every 10 s); the apiserver's peak "
      << run.peakApiPopulation << " pods (pending + running, every 3 s); stream pods found untracked (creation "
      << "failed, pod stored) " << run.adopted << "; deleted pods still listed, peak " << run.peakLingering << "\n";
  fig << "invariant violations " << run.violations.size() << " (of which the agent's known pairing defect "
      << inv.agentPairingRefusals() << "), kubelet refusals " << inv.kubeletRefusals()
      << ", settle failures " << result.settleFailures.size() << "\n";
  fig << "kubelet-double cleanups of gone pods' devices " << inv.kubeletCleanups() << "\n";
  fig << "refusals while the node's agent was cut off (not violations) " << inv.partitionRefusals().size() << "\n";
  for (const auto& r : inv.partitionRefusals()) fig << "  " << r << "\n";
  fig << "longest creation-to-binding of a pod that was bound " << inv.longestPendingSeconds() << " s ("
      << inv.longestPendingPod() << ")\n";
  fig << "settled " << (settled ? std::to_string(*settled) + " s" : std::string("not within 60 s"))
      << " after the last fault's probe\n";
  fig << "recovery (fault start to a new pod running), seconds: kind n p50 p99 max\n";
  for (const auto& [k, v] : recovery)
    fig << "  " << k << " " << v.size() << " " << percentile(v, 0.5) << " " << percentile(v, 0.99) << " "
        << *std::max_element(v.begin(), v.end()) << "\n";
  // vgpu's components are checked; etcd and kube-* are reported only: their memory follows
  // the history etcd keeps between the apiserver's compactions (every 5 min), which the
  // stream's churn grows, a property of Kubernetes under this load, not of vgpu. A component
  // restarted since the baseline (a fault) is a new process: not compared.
  fig << "RSS KiB (anonymous part in brackets) once the population reached its target after the first "
      << "minute (t=" << run.rssBaselineAt << " s) -> at the end; vgpu's components checked (20 %):\n";
  if (run.rssBaseline.empty()) result.settleFailures.push_back("the population never reached its target");
  for (const auto& name : componentNames(o)) {
    const Rss a = run.rssBaseline[name], b = run.rssEnd[name];
    fig << "  " << name << " " << a.total << " (" << a.anon << ") -> " << b.total << " (" << b.anon << ")";
    const bool checked = name.rfind("vgpu-", 0) == 0;
    if (a.pid != b.pid) {
      fig << "  (restarted since the baseline: not compared)";
    } else if (a.total > 0 && b.total > a.total * 1.2) {
      fig << "  (+" << (b.total - a.total) * 100 / a.total << " %" << (checked ? "" : ", not checked") << ")";
      if (checked)
        result.settleFailures.push_back(name + " RSS grew from " + std::to_string(a.total) + " to " +
                                        std::to_string(b.total) + " KiB (more than 20 %)");
    }
    fig << "\n";
  }
  fig << "component exits found by the supervisor " << run.exits.size() << "\n";
  for (const auto& e : run.exits) fig << "  " << e << "\n";
  fig << "fault sequence:";
  for (const auto& f : run.faults) fig << "\n  " << f.describe();
  fig << "\n";
  result.figures = fig.str();
  result.violations = run.violations;
  std::ofstream(o.figuresFile) << result.figures;
  std::cout << result.figures;
  return result;
}

}  // namespace vgpu::realk8s::soak
