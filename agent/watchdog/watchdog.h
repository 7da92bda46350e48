#pragma once
// The node-side watchdog: the authority over device memory that does not live inside the
// tenant. libvgpu.so enforces a container's slice from inside its processes, where a
// hostile tenant can sidestep it (a static binary, its own ld.so, a user namespace...).
// The watchdog asks each backend's vendor library which processes hold memory on which
// device (backend ABI 1.3, ProcessReporter), finds each process's pod and container from
// its cgroup, and compares what each container holds on a device with its slice there plus
// a tolerance. A process whose container id (from its cgroup) is a container of the pod
// with a slice there is charged to that container; one in a container of the pod known to
// have no slice there is allowed nothing; the rest (ids the pod's status has not reported
// yet, a restarted container) is compared per pod with the slices not charged per
// container. Over in `confirmScans` consecutive scans is a violation; the agent then
// reports it (event, metric) and applies the action. A container over by its processes'
// sum is judged instead by what the driver itself charges its memory cgroup, where the
// backend can say (ABI 1.9, CgroupMemoryReporter): memory its processes share is counted once.
// Compute is checked the same way (per container, the same fallback) where the vendor
// library reports per-process utilization, by the limiter's own rule (compute_rule.h): the
// share applies with policy `force`, never with `disable`, and with `default` only while
// another tenant runs kernels on the device. "Another tenant" is what the limiter's
// `default` looks at too: a process on the device, outside what is checked, that the vendor
// library reports busy (above 0 %) (for a high-priority container with an activity board:
// such a process of a high-priority container). The agent sees that list itself, so a
// tenant cannot hide contention by not writing anything. Each scan's sample is compared
// with what the limiter allowed in it (the share where it applied, the whole device where
// not), both averaged over a sliding window of scans; a container over that plus a
// tolerance is a violation (a tenant refilling the limiter's credit in the shared region,
// or a bypass, under contention). As the limiter remembers a busy tenant for a second, a
// tenant seen busy in a scan shares the device in that scan and the next; the share
// applies from contention's second scan in a row (the limiter needs a moment to engage and
// the utilization samples to show it). The window lets the short bursts the limiter allows
// pass; unknown utilization and pods without a compute limit are never flagged.
// With action kill-process, a pod killed `escalateAfter` times within `escalateWindow`
// (a bypass that restarts) is evicted as well (watchdog_escalation.h).
// Processes in no pod the agent handed devices to are "foreign": their memory is
// published with the node's inventory so the scheduler stops offering it.

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compute_rule.h"
#include "vgpu/device_process.h"
#include "vgpu/result.h"
#include "watchdog_escalation.h"

namespace vgpu::deviceplugin {

enum class WatchdogAction : std::uint8_t { kReport, kKillProcess, kEvictPod };
/// "report", "kill-process", "evict-pod"; errors name the word and the choices.
Result<WatchdogAction> parseWatchdogAction(std::string_view word);
const char* toString(WatchdogAction action);

/// What a violation is about; the `resource` label of vgpu_watchdog_violations_total.
enum class WatchdogResource : std::uint8_t { kMemory, kCompute };
const char* toString(WatchdogResource resource);  ///< "memory", "compute"

struct WatchdogOptions {
  /// Time between scans; 0 = the watchdog is off. Two scans confirm a violation, so a
  /// bypass is acted on within about two intervals plus the time of a scan.
  std::chrono::milliseconds interval{500};
  /// Allowed above a container's slice on a device (MiB; above the pod's slices there when
  /// checked per pod): what NVML counts for a process beyond what libvgpu.so charges
  /// (driver bookkeeping of its context).
  std::uint64_t toleranceMiB = 128;
  WatchdogAction action = WatchdogAction::kKillProcess;
  std::string procRoot = "/proc";  ///< the host's /proc (the agent runs with hostPID)
  int confirmScans = 2;
  /// With action `report`, a pod still over its slice on a device is reported again only
  /// after this long (one event a second would drown the pod's events).
  std::chrono::seconds reportRepeat{60};
  /// Foreign memory is published rounded up to a multiple of this (MiB), so the node's
  /// inventory changes only when it really moves.
  std::uint64_t foreignStepMiB = 64;
  /// Allowed above a container's (or, checked per pod, a pod's) compute share on a device
  /// (percentage points of the device).
  std::uint32_t computeTolerancePercent = 10;
  /// A container's (or pod's) utilization is averaged over the scans of this long a window (at least one
  /// scan) before it is compared with its share: the limiter lets short bursts through.
  std::chrono::milliseconds computeWindow{2000};

  /// With action kill-process: the kill of a pod that makes `escalateAfter` kills of it
  /// within `escalateWindow` also asks for its eviction (a bypass that restarts is not
  /// bounded by killing); 0 = never.
  int escalateAfter = 3;
  std::chrono::seconds escalateWindow{60};

  /// The scans in computeWindow: ceil(computeWindow / interval), at least 1.
  std::size_t computeWindowScans() const;
};

/// One container's slice of one device: what the agent handed out.
struct Slice {
  std::string podUid, podNamespace, podName, container;
  std::string deviceId;
  std::uint64_t memoryMiB = 0;
  /// Percent of the device's compute; 0 (unset) or 100 = no compute limit.
  std::uint32_t computePercent = 0;
  /// The runtime's id of the container (as its cgroup names it); empty: not known yet.
  std::string containerId;
  /// When the limiter holds the container to computePercent (its limits file).
  ComputeRule computeRule = {};
};

/// Pod uid -> the runtime ids of its containers that its status reports (init containers
/// and those without a slice included).
using PodContainerIds = std::map<std::string, std::set<std::string>>;

/// Where the processes of one backend's devices come from; null reporter: the backend
/// cannot list them. `cgroupMemory`, where the backend has it (ABI 1.9): the driver's own
/// figure for a container's memory cgroup, taken over the sum of its processes' figures
/// (which counts memory the processes share, CUDA IPC or VMM exports, once per process).
struct ProcessSource {
  std::string backend;
  ProcessReporter* reporter = nullptr;
  CgroupMemoryReporter* cgroupMemory = nullptr;
};

/// A container (or, where its id is not known, a pod) holding more memory on a device than
/// its slices there allow, or keeping it busier than its limiter allows (averaged over the window).
struct Violation {
  WatchdogResource resource = WatchdogResource::kMemory;
  std::string podUid, podNamespace, podName;
  /// The container over its slice; checked per pod: the one container with a slice there,
  /// else the runtime's container id (12 digits) of the largest holder.
  std::string container;
  std::string backend, deviceId;
  std::uint64_t usedBytes = 0, allowedBytes = 0;  ///< memory
  std::uint64_t sliceBytes = 0;                   ///< memory: the slices compared, without the tolerance
  /// Compute: the average busy percent over the window, and what the limiter allowed
  /// (averaged over the window likewise) plus the tolerance.
  std::uint32_t usedPercent = 0, allowedPercent = 0;
  std::uint32_t sharePercent = 0;  ///< compute: the share compared
  /// Compute: the policy judged by; with `default`, another tenant was busy on the device.
  ComputePolicy computePolicy = ComputePolicy::kDefault;
  /// The processes compared (the container's, or the pod's) on the device, the largest first, with their bytes (memory) or
  /// their busy percent in the last scan (compute).
  std::vector<std::pair<std::uint32_t, std::uint64_t>> processes;
};

struct ScanResult {
  std::vector<Violation> confirmed;  ///< over in confirmScans consecutive scans
  /// Backend -> device id -> memory (MiB, rounded up to foreignStepMiB) held by processes in
  /// no pod the agent handed devices to, for every device of a backend that listed them.
  std::map<std::string, std::map<std::string, std::uint64_t>> foreignMiB;
  /// Things to tell the operator, each once (a backend that cannot list processes, a query
  /// failure, processes the agent cannot see in procRoot).
  std::vector<std::string> notices;
};

/// Sends SIGKILL to `pid` (host PID namespace). Errors name the pid and why.
using ProcessKiller = std::function<Status(std::uint32_t pid)>;
/// SIGKILL through a pidfd, so a pid reused since the check is not hit; kill(2) where
/// pidfd_open is missing.
Status killProcess(std::uint32_t pid);

/// Asks the apiserver to evict pod `ns`/`name` (in the background; it retries).
using PodEvictor = std::function<void(const std::string& ns, const std::string& name)>;

/// The body of an Eviction (policy/v1) of pod `ns`/`name`, POSTed to
/// /api/v1/namespaces/<ns>/pods/<name>/eviction.
std::string evictionBody(const std::string& ns, const std::string& name);

/// What enforce() did.
struct Enforcement {
  std::string said;  ///< in words, for the event and the log
  /// Killing did not bound the pod (escalateAfter kills within escalateWindow): its
  /// eviction was asked for now.
  bool escalated = false;
};

/// Not thread-safe: one scanning thread.
class Watchdog {
 public:
  /// `clock`: the time the escalation and report mode go by (tests inject one); empty: the
  /// steady clock.
  Watchdog(WatchdogOptions options, std::vector<ProcessSource> sources, ProcessKiller killer = killProcess,
           PodEvictor evictor = {}, SteadyClock clock = {});

  /// One scan against the slices handed out now; devices of `devicesOf` (backend -> device
  /// ids) get a foreign figure (0 included); `containerIds` tells which processes are in a
  /// container of their pod without a slice on their device.
  ScanResult scan(const std::vector<Slice>& slices,
                  const std::map<std::string, std::vector<std::string>>& devicesOf,
                  const PodContainerIds& containerIds = {});

  /// Applies the configured action to a confirmed violation; returns what was done (report:
  /// nothing; evict-pod: asked once per pod; kill-process: the kill, and the eviction once
  /// the kills reach escalateAfter within escalateWindow).
  Enforcement enforce(const Violation& violation);

  /// Kills the violation's processes, the largest first, until what is left fits (memory:
  /// bytes; compute: busy percent; each pid checked again to be in the pod just before). Returns what was done, in words.
  /// Errors: no process could be killed (the reasons).
  Result<std::string> killOver(const Violation& violation);

  const WatchdogOptions& options() const { return options_; }

 private:
  WatchdogOptions options_;
  std::vector<ProcessSource> sources_;
  ProcessKiller killer_;
  PodEvictor evictor_;
  SteadyClock clock_;
  KillEscalation escalation_;
  std::set<std::string> evictionsAsked_;  ///< pod uids
  /// Keys: pod uid + '/' + device, + '|' + container id when checked per container.
  std::map<std::string, int> overStreak_;      ///< key -> consecutive scans over
  /// One scan's compute sample: the busy percent, and what the limiter allowed then.
  struct BusySample {
    std::uint32_t used = 0, allowed = 0;
  };
  /// key -> the samples there in the last scans (at most the window)
  std::map<std::string, std::deque<BusySample>> busy_;
  /// Keys whose device another tenant was busy on in the last scan.
  std::set<std::string> othersSeen_;
  /// Keys whose device was shared in the last scan (another tenant busy then or the scan before).
  std::set<std::string> contended_;
  std::map<std::string, std::chrono::steady_clock::time_point> reported_;  ///< report mode: when last
  std::map<std::string, std::string> lastProblem_;  ///< backend -> the last query error said
  bool saidInvisible_ = false;

  /// Report mode: whether the violation under `key` was reported within reportRepeat (and
  /// if not, notes that it is now).
  bool reportedRecently(const std::string& key);
  /// Asks once for the eviction of the violation's pod; what was done, in words.
  std::string evictOnce(const Violation& violation, bool& asked);
  /// What a container whose processes sum to `summed` bytes on `deviceId` holds: the driver's
  /// figure for its cgroup (`procCgroup`) where backend `backend` has one, else `summed`. A
  /// query failure is said once in `out` (the sum is used).
  std::uint64_t driverFigure(const std::string& backend, const std::string& procCgroup, const std::string& deviceId,
                             std::uint64_t summed, ScanResult& out);
  std::set<std::string> cgroupProblemsSaid_;  ///< backend: its per-cgroup query failed, said
};

}  // namespace vgpu::deviceplugin
