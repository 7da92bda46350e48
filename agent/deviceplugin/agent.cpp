#include "agent.h"

#include <sys/stat.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#include <boost/json.hpp>

#include "cgroup_identity.h"
#include "daemon_support.h"
#include "hami_metrics.h"
#include "handout_store.h"
#include "plugin_server.h"
#include "pod_resources_client.h"
#include "region_metrics.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/hami_allocation.h"
#include "vgpu/backend_loader.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/config.h"
#include "vgpu/http/server.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/informer.h"
#include "vgpu/k8s/object.h"
#include "vgpu/k8s/trim.h"
#include "vgpu/metrics/registry.h"
#include "vgpu/partition.h"
#include "vgpu/pod_info.h"
#include "vgpu/served_resource.h"
#include "vgpu/shared_region.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;
namespace {

void logLine(const char* level, const std::string& text) {
  std::fprintf(stderr, "%s vgpu-device-plugin %s: %s\n", formatTimestamp(std::chrono::system_clock::now()).c_str(),
               level, text.c_str());
}

constexpr const char* kComponent = "vgpu-device-plugin";

}  // namespace

std::string pluginSocketName(const std::string& resource) {
  std::string name = "vgpu-";
  for (char c : resource) name += (c == '/' ? '-' : c);
  return name + ".sock";
}

struct Agent::Impl final : PluginHandler {
  /// One loaded backend with node-side discovery. The map of them is fixed after create();
  /// a backend whose driver is not there yet waits, unserved, for a rediscovery to find
  /// its devices (devices, serving, problem and resources under devMu).
  struct BackendState {
    Backend* backend = nullptr;
    bool serving = false;      ///< its devices are published and its resources served
    std::string problem;       ///< why it serves nothing (discovery's error, no devices)
    std::vector<Device> devices;
    std::uint64_t version = 1;
    std::vector<std::string> resources;
    std::thread health;
  };

  AgentOptions options;
  BackendSet backends;
  std::vector<std::string> warnings;
  std::size_t enabledBackends = 0;                     // in the config, loaded or not
  std::size_t draBackends = 0;                         // loaded, left to vgpu-dra-plugin here
  std::map<std::string, BackendState> served;          // backend -> state; keys fixed after create()
  std::map<std::string, std::string> resourceToBackend;  // serving backends' resources; under devMu
  mutable std::mutex devMu;
  std::condition_variable devCv;

  std::unique_ptr<k8s::Client> client;       // watch, node publishing, corrections
  std::unique_ptr<k8s::Client> allocClient;  // bounded writes (the node's annotations at shutdown)
  std::unique_ptr<k8s::Client> writeClient;  // pods' annotations, off the Allocate path; retried by the writers
  std::unique_ptr<k8s::Informer> informer;
  PodTracker tracker;
  HandoutStore handouts;
  /// Allocate holds it shared from making a handout until the backend has set it up; the
  /// cleanup pass holds it alone, so reconcile never sees a backend's half-made container.
  std::shared_mutex limiterMu;
  mutable std::mutex pluginsMu;
  std::map<std::string, std::unique_ptr<PluginServer>> plugins;  // resource -> its plugin; under pluginsMu
  std::unique_ptr<http::Server> httpServer;

  metrics::Registry registry;
  metrics::Gauge& devMemory;
  metrics::Gauge& devCompute;
  metrics::Gauge& devSplit;
  metrics::Gauge& devHealthy;
  metrics::Gauge& devMemAllocated;
  metrics::Gauge& devComputeAllocated;
  metrics::Gauge& ctrMemUsed;
  metrics::Gauge& ctrMemLimit;
  metrics::Gauge& ctrComputeLimit;
  metrics::Gauge& ctrBusy;
  metrics::Gauge& ctrUnenforced;
  metrics::Gauge& ctrProcs;
  metrics::Gauge& ctrUtilization;
  metrics::Gauge& backendDevices;
  metrics::Counter& allocateTotal;
  metrics::Histogram& allocateSeconds;
  metrics::Gauge& pluginRegistered;
  metrics::Counter& watchdogViolations;
  metrics::Gauge& hamiContainers;
  metrics::Gauge& devForeignMemory;
  metrics::Gauge& devPartition;
  metrics::Counter& foldersUnbounded;
  std::mutex unboundedMu;
  std::set<std::string> saidUnbounded;  // why folders stay on the disk, the folder left out; under unboundedMu

  std::unique_ptr<HamiNodeMetrics> hami;  // --hami-metrics; null when off
  std::unique_ptr<Watchdog> watchdog;  // null when off
  std::mutex watchdogMu;               // one scan at a time; guards the three below
  ComputeRuleCache computeRules;       // the handouts' limiter rules (their limits files)
  bool foreignPending = false;         // foreign memory changed since the node was last marked dirty for it
  std::chrono::steady_clock::time_point foreignPublished{};
  static constexpr std::chrono::seconds kForeignPublishEvery{5};
  std::thread watchdogThread;
  /// Backend -> device id -> MiB held by processes outside our pods (the watchdog's last
  /// look), published with the inventory; under devMu.
  std::map<std::string, std::map<std::string, std::uint64_t>> foreignMiB;

  /// What is still to be written on one pod: the latest value of each key.
  struct PendingWrite {
    std::string ns, name;
    k8s::MetadataPatch patch;
    std::vector<std::function<void()>> onWritten;
    int failures = 0;
    bool queued = false;
    bool writing = false;
    std::chrono::steady_clock::time_point notBefore{};
  };

  std::mutex writeMu;  // the fields below
  std::condition_variable writeCv;
  std::map<std::string, PendingWrite> pendingWrites;  // pod uid -> what is left to write
  std::deque<std::string> writeQueue;                 // pods with something to write, in order
  bool writersStop = false;
  std::vector<std::thread> writers;

  std::mutex waitMu;  // the fields below
  std::set<std::string> gaveUpOn;  // pods the kubelet named that the watch did not show within podWait
  std::chrono::steady_clock::time_point fruitlessUntil{};
  std::uint64_t podsAtFruitless = 0;
  std::map<std::string, unsigned> againCount;  // handout id -> Allocates answered again

  std::mutex maintainMu;
  std::mutex bgMu;
  std::condition_variable bgCv;
  bool stopping = false;
  bool started = false;
  bool nodeDirty = true;
  bool cleanupSoon = false;  // a pod went away: clean up on the next pass, not at the interval
  bool rediscoverSoon = false;  // SIGHUP: look for drivers that appeared, now
  std::deque<std::pair<int, std::function<bool()>>> tasks;  // attempts left, task
  std::thread nodeThread, maintThread, recorderThread, rediscoverThread;
  std::mutex rediscoverMu;  // one rediscovery at a time
  std::string lastUsageProblem;  // guarded by bgMu: usage query errors are said once per change
  AgentStats stats;

  explicit Impl(AgentOptions o)
      : options(std::move(o)),
        tracker(options.nodeName),
        handouts(fs::path(options.stateDir) / "containers", fs::path(options.stateDir) / "containers.journal",
                 FolderBound{.mode = options.regionTmpfs,
                             .unbounded = [this](const std::string& folder, const std::string& why) {
                               folderUnbounded(folder, why);
                             }}),
        devMemory(registry.gauge("vgpu_device_memory_bytes", "Device memory offered to containers (after scaling).",
                                 {"backend", "device_id", "device_index", "model"})),
        devCompute(registry.gauge("vgpu_device_compute_units", "Compute units of the device (100 = whole device).",
                                  {"backend", "device_id", "device_index", "model"})),
        devSplit(registry.gauge("vgpu_device_split_slots", "How many containers may share the device.",
                                {"backend", "device_id", "device_index", "model"})),
        devHealthy(registry.gauge("vgpu_device_healthy", "1 when the device is healthy.",
                                  {"backend", "device_id", "device_index", "model"})),
        devMemAllocated(registry.gauge("vgpu_device_memory_allocated_bytes",
                                       "Device memory granted to containers this agent allocated.",
                                       {"backend", "device_id", "device_index", "model"})),
        devComputeAllocated(registry.gauge("vgpu_device_compute_allocated_units",
                                           "Compute granted to containers this agent allocated.",
                                           {"backend", "device_id", "device_index", "model"})),
        ctrMemUsed(registry.gauge("vgpu_container_memory_used_bytes",
                                  "Device memory a container's processes hold (libvgpu.so shared region).",
                                  {"namespace", "pod", "container", "device_uuid", "device_index"})),
        ctrMemLimit(registry.gauge("vgpu_container_memory_limit_bytes", "A container's device memory limit.",
                                   {"namespace", "pod", "container", "device_uuid", "device_index"})),
        ctrComputeLimit(registry.gauge("vgpu_container_compute_limit_percent",
                                       "A container's compute share of the device (0 = not limited).",
                                       {"namespace", "pod", "container", "device_uuid", "device_index"})),
        ctrBusy(registry.gauge("vgpu_container_compute_busy_seconds",
                               "Kernel time a container used on the device since its region was created.",
                               {"namespace", "pod", "container", "device_uuid", "device_index"})),
        ctrUnenforced(registry.gauge("vgpu_container_limit_unenforced",
                                     "1 when a container's limit is set but libvgpu.so cannot enforce it with this "
                                     "driver (it says so on the container's stderr at start).",
                                     {"namespace", "pod", "container", "device_uuid", "device_index", "limit"})),
        ctrProcs(registry.gauge("vgpu_container_processes", "Processes of the container attached to libvgpu.so.",
                                {"namespace", "pod", "container"})),
        ctrUtilization(registry.gauge("vgpu_container_compute_utilization_percent",
                                      "How busy the container keeps the device, as the vendor library reports it "
                                      "for the container's partition or whole device.",
                                      {"namespace", "pod", "container", "device_uuid", "device_index"})),
        backendDevices(registry.gauge("vgpu_backend_devices",
                                      "Devices the backend serves on this node (0: its driver or devices are missing).",
                                      {"backend"})),
        allocateTotal(registry.counter("vgpu_allocate_total", "Allocate calls answered, by resource and result.",
                                       {"resource", "result"})),
        allocateSeconds(registry.histogram("vgpu_allocate_duration_seconds", "Time to answer one Allocate call.",
                                           metrics::Histogram::latencyBuckets(), {"resource"})),
        pluginRegistered(registry.gauge(
            "vgpu_plugin_registered", "1 when the resource's plugin is registered with the kubelet.", {"resource"})),
        watchdogViolations(registry.counter(
            "vgpu_watchdog_violations_total",
            "Pods the watchdog found holding more device memory than their slices (plus the tolerance) in two "
            "scans in a row (resource memory), or busier than their compute share (plus the tolerance) on "
            "average over its window (resource compute), by the action it took.",
            {"node", "pod", "namespace", "container", "device", "resource", "action"})),
        hamiContainers(registry.gauge("vgpu_hami_container_memory_bytes",
                                      "Device memory HAMi's scheduler gave a container on this node (a pod placed "
                                      "before the switch to vgpu, limited by HAMi-core; the agent leaves it alone).",
                                      {"namespace", "pod", "container", "device_uuid"})),
        devForeignMemory(registry.gauge("vgpu_device_foreign_memory_bytes",
                                        "Device memory held by processes in no container vgpu gave the device to "
                                        "(host processes, other pods), as the watchdog last saw it.",
                                        {"backend", "device_id", "device_index", "model"})),
        devPartition(registry.gauge("vgpu_device_partition_info",
                                    "1 for each partition of a device on this node (an NVIDIA MIG device): one "
                                    "discovery serves as a device (mode static) or one a backend made for a "
                                    "container at Allocate (mode dynamic).",
                                    {"backend", "device_id", "parent_id", "kind", "profile", "placement",
                                     "instance_id", "sub_instance_id", "mode"})),
        foldersUnbounded(registry.counter("vgpu_container_folders_unbounded_total",
                                          "Container folders left on the host's disk instead of a size-limited tmpfs "
                                          "(--region-tmpfs=best-effort; the agent's log says why once).")) {}

  /// --region-tmpfs=best-effort: each reason said once (it is the node's set-up, the same for
  /// every container), each folder counted.
  void folderUnbounded(const std::string& folder, const std::string& why) {
    foldersUnbounded.inc();
    std::string reason = why;
    for (auto at = reason.find(folder); at != std::string::npos; at = reason.find(folder, at + 1))
      reason.replace(at, folder.size(), "<folder>");
    {
      std::lock_guard lock(unboundedMu);
      if (!saidUnbounded.insert(reason).second) return;
    }
    logLine("warning", why + "; containers' folders stay on the host's disk, where a tenant can grow its region file "
                             "until the disk is full (each such folder is counted in "
                             "vgpu_container_folders_unbounded_total)");
  }

  // ---- PluginHandler ----
  std::vector<VirtualDevice> devices(const std::string& resource, std::uint64_t& version) override {
    std::lock_guard lock(devMu);
    std::vector<VirtualDevice> out;
    auto b = resourceToBackend.find(resource);
    if (b == resourceToBackend.end()) return out;
    const auto& st = served.at(b->second);
    version = st.version;
    for (const auto& d : st.devices) {
      if (!servedUnder(d, resource)) continue;
      for (std::uint32_t slot = 0; slot < std::max<std::uint32_t>(d.splitCount, 1); ++slot)
        out.push_back({formatVirtualDeviceId(d.id, static_cast<int>(slot)), d.health != Health::kUnhealthy, d.numaNode});
    }
    return out;
  }

  /// Why the kubelet may not hand out `ids` under `resource`: one names a device its backend
  /// serves under another count resource (vgpu/served_resource.h). Empty when they may.
  std::string servedElsewhere(const std::string& resource, const std::vector<std::string>& ids) const {
    std::lock_guard lock(devMu);
    auto b = resourceToBackend.find(resource);
    if (b == resourceToBackend.end()) return "";
    for (const auto& id : ids) {
      auto v = parseVirtualDeviceId(id);
      if (!v) continue;
      for (const auto& d : served.at(b->second).devices)
        if (d.id == v->deviceId && !servedUnder(d, resource))
          return "device " + d.id + " (ID " + id + ") is served as " + std::string(countResourceOf(d)) + ", not as " +
                 resource + ": the kubelet may hand out only the IDs it lists under " + resource;
    }
    return "";
  }

  bool waitForDevices(const std::string& resource, std::uint64_t seen, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(devMu);
    auto b = resourceToBackend.find(resource);
    if (b == resourceToBackend.end()) return false;
    const auto& st = served.at(b->second);
    return devCv.wait_for(lock, timeout, [&] { return st.version != seen; });
  }

  std::vector<std::string> preferred(const std::string& resource, const std::vector<std::string>& available,
                                     const std::vector<std::string>& mustInclude, std::size_t size) override {
    // The kubelet may ask before our watch shows the pod: wait a little for it, since a
    // hint that names the assignment saves a correction later.
    const auto deadline =
        std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(options.podWait, std::chrono::seconds(1));
    KubeletView kubelet(*this);
    WatchWait wait(*this);
    bool lastLook = false;
    for (;;) {
      const auto seen = tracker.generation();
      auto ids = tracker.preferred(resource, available, mustInclude, size);
      if (!ids.empty()) return ids;
      // The kubelet admits again a container the agent served (it lost its record of the
      // devices): steer it to the IDs that container holds.
      if (auto again = againHint(resource, available, mustInclude, size, kubelet)) return *again;
      if (!wait.worthIt(kubelet) || std::chrono::steady_clock::now() >= deadline) {
        // The watch may have shown the pod since the look above (while PodResources was
        // asked): worthIt then finds it known and gives up. Look once more before an empty
        // hint sends the kubelet to other IDs than the assignment.
        if (lastLook || tracker.generation() == seen) return {};
        lastLook = true;
        continue;
      }
      tracker.waitForChange(seen, deadline);
    }
  }

  std::variant<ContainerSpec, RpcError> allocate(const std::string& resource,
                                                 const std::vector<std::string>& ids) override {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = allocateImpl(resource, ids);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    allocateSeconds.observe({resource}, secs);
    const bool ok = std::holds_alternative<ContainerSpec>(result);
    allocateTotal.inc({resource, ok ? "success" : "failure"});
    std::lock_guard lock(bgMu);
    ++(ok ? stats.allocations : stats.allocateFailures);
    return result;
  }

  Limiter* limiterOf(const std::string& backend) const {
    auto it = served.find(backend);
    if (it == served.end()) return nullptr;
    std::lock_guard lock(devMu);
    return it->second.serving ? it->second.backend->limiter() : nullptr;
  }

  bool isServing(const std::string& backend) const {
    auto it = served.find(backend);
    std::lock_guard lock(devMu);
    return it != served.end() && it->second.serving;
  }

  /// Undoes one handout: what the backend made for it, then its folder and record.
  void releaseHandout(const Handout& h) {
    if (Limiter* lim = limiterOf(h.backend))
      if (auto s = lim->release(h.backendRef()); !s.ok()) logLine("warning", s.error().message);
    handouts.remove(h.id);
    std::lock_guard lock(waitMu);
    againCount.erase(h.id);
  }

  /// Whether `earlier` (a live handout of the IDs `claim` got) belongs to another container of
  /// the pod being admitted: the kubelet reuses an init container's devices for the containers
  /// after it, and hands IDs to another pod only once their holder is gone.
  static bool sameAdmission(const Handout& earlier, const Claim& claim) {
    const bool samePod = earlier.matchedPodUid == claim.podUid || earlier.podUid == claim.podUid;
    return samePod && earlier.matchedContainer != claim.container;
  }

  /// The pod annotations the backends asked for, over every handout `uid` holds. A pod
  /// carries one value per key: when two containers disagree the first one's is kept.
  Annotations podAnnotationsFor(const std::string& uid) const {
    Annotations out;
    for (const auto& h : handouts.heldBy(uid))
      for (const auto& [k, v] : h.podAnnotations) {
        auto [it, added] = out.emplace(k, v);
        if (!added && it->second != v)
          logLine("warning", "pod " + h.podNamespace + "/" + h.podName +
                                 ": its containers' backends ask for different values of the pod annotation " + k +
                                 " (\"" + it->second + "\" and \"" + v + "\"); a pod carries one, the first is kept");
      }
    return out;
  }

  /// Adds the backends' pod annotations to `patch`, never over a key the agent itself sets.
  void addPodAnnotations(k8s::MetadataPatch& patch, const std::string& uid) const {
    for (const auto& [k, v] : podAnnotationsFor(uid)) patch.annotations.emplace(k, v);
  }

  // ---- Which container an Allocate is for ----
  /// What the kubelet's PodResources API says, asked at most once per Allocate (or hint)
  /// and only when needed.
  struct KubeletView {
    explicit KubeletView(Impl& im) : impl(im) {}
    /// "ns/name" -> what its containers hold; nullopt when not configured or not answering.
    const std::optional<std::map<std::string, HeldDevices>>& pods() {
      if (!asked) {
        asked = true;
        configured = !impl.options.podResourcesSocket.empty();
        listed = impl.listHeld(std::chrono::milliseconds(500)).pods;
      }
      return listed;
    }
    bool isConfigured() {
      pods();
      return configured;
    }
    Impl& impl;
    bool asked = false;
    bool configured = false;
    std::optional<std::map<std::string, HeldDevices>> listed;
  };

  /// Waiting for the watch to show the pod the kubelet admits (issue 27 item 13): only for
  /// pods the kubelet names that the watch has not shown, each at most podWait in all;
  /// without PodResources, not again right after a wait that found nothing.
  struct WatchWait {
    explicit WatchWait(Impl& im) : impl(im) {}
    /// Whether waiting may help; decided once, then until every pod waited for is known.
    bool worthIt(KubeletView& kubelet) {
      if (decided) return worth && !allKnown();
      decided = true;
      std::set<std::string> known;
      for (const auto& p : impl.tracker.pods()) known.insert(p.info.key());
      const auto& listed = kubelet.pods();  // before the lock: a gRPC call
      std::lock_guard lock(impl.waitMu);
      if (listed) {
        for (const auto& [key, held] : *listed)
          if (!known.contains(key) && !impl.gaveUpOn.contains(key)) waitingFor.insert(key);
        worth = !waitingFor.empty();
      } else {
        worth = !(std::chrono::steady_clock::now() < impl.fruitlessUntil &&
                  impl.tracker.podsSeen() == impl.podsAtFruitless);
      }
      return worth;
    }
    bool allKnown() const {
      if (waitingFor.empty()) return false;
      std::set<std::string> known;
      for (const auto& p : impl.tracker.pods()) known.insert(p.info.key());
      return std::all_of(waitingFor.begin(), waitingFor.end(), [&](const std::string& k) { return known.contains(k); });
    }
    /// The wait ran out: do not wait for the same pods (or, blind, at once) again.
    void inVain() {
      if (!worth) return;
      std::lock_guard lock(impl.waitMu);
      if (impl.gaveUpOn.size() > 1000) impl.gaveUpOn.clear();
      impl.gaveUpOn.insert(waitingFor.begin(), waitingFor.end());
      impl.fruitlessUntil = std::chrono::steady_clock::now() + impl.options.podWait;
      impl.podsAtFruitless = impl.tracker.podsSeen();
    }
    Impl& impl;
    bool decided = false;
    bool worth = false;
    std::set<std::string> waitingFor;
  };

  /// A container the agent served that the kubelet admits again.
  struct Again {
    Handout handout;
    TrackedPod pod;
  };

  /// Whether the kubelet has lost its record of `h`'s devices: the holder pod is one of its
  /// active pods and none of its listed containers holds h's IDs (an init container is never
  /// listed). Without a PodResources API the pod's state alone decides.
  bool kubeletLost(const Handout& h, KubeletView& kubelet) {
    if (!kubelet.isConfigured()) return true;
    const auto& listed = kubelet.pods();
    if (!listed) return false;
    auto pod = listed->find(h.podNamespace + "/" + h.podName);
    if (pod == listed->end()) return false;  // not active: gone for the kubelet, the IDs free
    for (const auto& [container, byResource] : pod->second)
      if (auto ids = byResource.find(h.resource); ids != byResource.end())
        for (const auto& id : ids->second)
          if (std::find(h.ids.begin(), h.ids.end(), id) != h.ids.end()) return false;
    return true;
  }

  /// Handouts of pods served in full that the kubelet may be admitting again: their pod
  /// known and running, what Allocate gave journalled.
  std::vector<Again> againCandidates(const std::vector<Handout>& handouts) {
    std::vector<Again> out;
    for (const auto& h : handouts) {
      if (h.devices.empty()) continue;
      if (auto pod = tracker.servedPod(h.podUid)) out.push_back({h, std::move(*pod)});
    }
    return out;
  }

  /// An Allocate of exactly the IDs of a handout whose container the kubelet lost (its
  /// checkpoint missing or unreadable at a restart): answered again, not a new container.
  /// Of several handouts of the IDs (an init container's reused) the one answered again the
  /// fewest times, oldest first, as the kubelet admits containers in order.
  std::optional<Again> allocatedAgain(const std::string& resource, const std::vector<std::string>& ids,
                                      KubeletView& kubelet) {
    auto candidates = againCandidates(handouts.withIds(resource, ids));
    std::optional<Again> best;
    unsigned bestCount = 0;
    for (auto& c : candidates) {
      if (!kubeletLost(c.handout, kubelet)) continue;
      const unsigned n = answeredAgain(c.handout.id);
      if (!best || n < bestCount) {
        bestCount = n;
        best = std::move(c);
      }
    }
    return best;
  }

  /// The IDs of a container being admitted again, for GetPreferredAllocation: the oldest pod
  /// first, then its containers in the kubelet's order.
  std::optional<std::vector<std::string>> againHint(const std::string& resource,
                                                    const std::vector<std::string>& available,
                                                    const std::vector<std::string>& mustInclude, std::size_t size,
                                                    KubeletView& kubelet) {
    const std::set<std::string> avail(available.begin(), available.end());
    std::vector<Handout> fits;
    for (const auto& h : handouts.all()) {
      if (h.resource != resource || h.ids.size() != size) continue;
      if (!std::all_of(h.ids.begin(), h.ids.end(), [&](const std::string& id) { return avail.contains(id); })) continue;
      if (!std::all_of(mustInclude.begin(), mustInclude.end(), [&](const std::string& id) {
            return std::find(h.ids.begin(), h.ids.end(), id) != h.ids.end();
          }))
        continue;
      fits.push_back(h);
    }
    auto candidates = againCandidates(fits);
    auto order = [](const Again& a) {
      int index = 0;
      for (size_t i = 0; i < a.pod.info.containers.size(); ++i)
        if (a.pod.info.containers[i].name == a.handout.container) index = static_cast<int>(i);
      return std::make_tuple(a.pod.created, a.pod.info.key(), index);
    };
    std::sort(candidates.begin(), candidates.end(), [&](const Again& a, const Again& b) { return order(a) < order(b); });
    for (const auto& c : candidates)
      if (kubeletLost(c.handout, kubelet)) return c.handout.ids;
    return std::nullopt;
  }

  unsigned answeredAgain(const std::string& id) {
    std::lock_guard lock(waitMu);
    auto it = againCount.find(id);
    return it == againCount.end() ? 0 : it->second;
  }

  /// The pod and container an Allocate is for: a waiting container whose assignment names
  /// these IDs; else a container the kubelet admits again; else a waiting container with
  /// the same request signature (tracker.claim). Waits for the watch only while it may
  /// still show the pod (WatchWait).
  std::variant<Claim, Again, ClaimError> match(const std::string& resource, const std::vector<std::string>& ids) {
    const auto deadline = std::chrono::steady_clock::now() + options.podWait;
    KubeletView kubelet(*this);
    WatchWait wait(*this);
    bool lastLook = false;
    for (;;) {
      const auto seen = tracker.generation();
      auto got = tracker.claim(resource, ids);
      if (auto* c = std::get_if<Claim>(&got); c && c->exact) return std::move(*c);
      if (auto again = allocatedAgain(resource, ids, kubelet)) {
        if (auto* c = std::get_if<Claim>(&got)) tracker.abort(*c, /*failPod=*/false);
        return std::move(*again);
      }
      if (auto* c = std::get_if<Claim>(&got)) return std::move(*c);
      auto& err = std::get<ClaimError>(got);
      if (err.failure != ClaimFailure::kNoPod) return std::move(err);
      if (!wait.worthIt(kubelet)) {
        // As in preferred(): the watch may have shown the pod meanwhile; look once more.
        if (lastLook || tracker.generation() == seen) return std::move(err);
        lastLook = true;
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        wait.inVain();
        return std::move(err);
      }
      tracker.waitForChange(seen, deadline);
    }
  }

  /// The same answer as the first Allocate gave the container: the backend's limiter asked
  /// again with the same grant and key (its folder kept), which makes nothing new.
  std::variant<ContainerSpec, RpcError> answerAgain(const Again& again) {
    const Handout& h = again.handout;
    const std::string who = "pod " + h.podNamespace + "/" + h.podName + " container " + h.container;
    ContainerSpec spec;
    {
      std::shared_lock limiterLock(limiterMu);
      if (Limiter* limiter = limiterOf(h.backend)) {
        ContainerGrant grant;
        grant.container = h.backendRef();
        grant.podNamespace = h.podNamespace;
        grant.podName = h.podName;
        for (size_t i = 0; i < again.pod.info.containers.size(); ++i)
          if (again.pod.info.containers[i].name == h.container) grant.containerIndex = static_cast<int>(i);
        grant.devices = h.devices;
        grant.podAnnotations = again.pod.info.annotations;
        grant.podUid = h.podUid;
        auto dir = handouts.prepare(h.id);
        if (!dir.ok()) {
          const std::string msg = who + ": " + dir.error().message;
          logLine("error", "Allocate " + h.resource + ": " + msg);
          return RpcError{RpcCode::kFailedPrecondition, msg};
        }
        grant.hostDir = *dir;
        auto s = limiter->containerSpec(grant);
        if (!s.ok()) {
          const std::string msg = who + ": backend " + h.backend + " cannot set up the devices again: " + s.error().message;
          logLine("error", "Allocate " + h.resource + ": " + msg);
          return RpcError{RpcCode::kFailedPrecondition, msg};
        }
        spec = std::move(s).value();
      }
    }
    handouts.setRegion(h.id, spec.region);
    {
      std::lock_guard lock(waitMu);
      ++againCount[h.id];
    }
    logLine("info", "Allocate " + h.resource + " for " + who +
                        " again (the kubelet lost its record of the devices): answered with the devices it holds, " +
                        h.id);
    return spec;
  }

  std::variant<ContainerSpec, RpcError> allocateImpl(const std::string& resource, const std::vector<std::string>& ids) {
    if (auto why = servedElsewhere(resource, ids); !why.empty()) {
      logLine("error", "Allocate " + resource + ": " + why);
      return RpcError{RpcCode::kInvalidArgument, why};
    }
    auto matched = match(resource, ids);
    if (auto* again = std::get_if<Again>(&matched)) return answerAgain(*again);
    std::variant<Claim, ClaimError> got;
    if (auto* c = std::get_if<Claim>(&matched)) got = std::move(*c);
    else got = std::get<ClaimError>(std::move(matched));
    if (auto* err = std::get_if<ClaimError>(&got)) {
      logLine("error", "Allocate " + resource + ": " + err->message);
      if (err->failure == ClaimFailure::kBadRequest) return RpcError{RpcCode::kInvalidArgument, err->message};
      if (err->failure == ClaimFailure::kPodUnusable) {
        tracker.failPod(err->podUid);
        recordFailure(err->podUid, err->message);
      }
      return RpcError{RpcCode::kFailedPrecondition, err->message};
    }
    const Claim claim = std::get<Claim>(std::move(got));
    const std::string who = "pod " + claim.podNamespace + "/" + claim.podName + " container " + claim.container;
    Backend* backend = served.at(claim.backend).backend;

    // The folder is named by what the kubelet handed out, not by the guessed pod, which
    // the PodResources pass may correct later (handout_store.h).
    std::shared_lock limiterLock(limiterMu);
    Handout handout = handoutOf(claim);
    // The kubelet hands IDs out again once their earlier holder is gone, or within one pod
    // from an init container to the containers after it: that one keeps its own handout.
    for (const auto& earlier : handouts.withIds(resource, ids))
      if (!sameAdmission(earlier, claim)) releaseHandout(earlier);
    auto hostDir = handouts.create(handout);
    if (hostDir.ok()) handout.id = fs::path(*hostDir).filename().string();
    if (!hostDir.ok()) {
      tracker.abort(claim, true);
      const std::string msg = who + ": " + hostDir.error().message;
      recordFailure(claim.podUid, msg);
      return RpcError{RpcCode::kInternal, msg};
    }
    ContainerSpec spec;
    if (Limiter* limiter = backend->limiter()) {
      ContainerGrant grant;
      grant.container = handout.backendRef();
      grant.podNamespace = claim.podNamespace;
      grant.podName = claim.podName;
      grant.containerIndex = claim.containerIndex;
      grant.devices = claim.devices;
      grant.hostDir = *hostDir;
      grant.podAnnotations = claim.podAnnotations;
      grant.podUid = claim.podUid;
      auto s = limiter->containerSpec(grant);
      if (!s.ok()) {
        tracker.abort(claim, true);
        releaseHandout(handout);
        const std::string msg = who + ": backend " + claim.backend + " cannot set up the devices: " + s.error().message;
        recordFailure(claim.podUid, msg);
        return RpcError{RpcCode::kFailedPrecondition, msg};
      }
      spec = std::move(s).value();
    }
    limiterLock.unlock();
    handouts.setRegion(handout.id, spec.region);
    if (!spec.podAnnotations.empty()) handouts.setPodAnnotations(handout.id, spec.podAnnotations);
    postNotices(claim, spec.notices);
    if (auto outcome = tracker.commit(claim)) {
      // The pod's last container: its outcome is written after the answer, off the kubelet's
      // path (issue 27 item 15). The scheduler counts the pod in flight until it reads it, or
      // until the pod runs; the PodResources pass writes it too should this agent stop first.
      k8s::MetadataPatch patch;
      patch.annotations[std::string(keys::kPodBindPhase)] = "success";
      patch.annotations[std::string(keys::kPodAllocateError)] = std::nullopt;
      if (outcome->changed) patch.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(outcome->assignment);
      addPodAnnotations(patch, claim.podUid);
      writeLater(claim.podUid, claim.podNamespace, claim.podName, std::move(patch));
    }
    return spec;
  }

  // ---- Writing pods' annotations ----
  /// Queues `patch` for pod `uid` (merged over what is still pending: a later value of a
  /// key wins) and returns at once. Writer threads send it, one write per pod at a time so the
  /// last wanted value lands last, retrying with backoff until the apiserver takes it or
  /// says the pod is gone. `onWritten` runs after it is on the apiserver.
  void writeLater(const std::string& uid, const std::string& ns, const std::string& name, k8s::MetadataPatch patch,
                  std::function<void()> onWritten = {}) {
    std::lock_guard lock(writeMu);
    PendingWrite& w = pendingWrites[uid];
    w.ns = ns;
    w.name = name;
    for (auto& [k, v] : patch.annotations) w.patch.annotations[k] = std::move(v);
    if (onWritten) w.onWritten.push_back(std::move(onWritten));
    if (!w.queued && !w.writing) {
      w.queued = true;
      writeQueue.push_back(uid);
    }
    writeCv.notify_one();
  }

  void writerLoop() {
    std::unique_lock lock(writeMu);
    for (;;) {
      // The first pod whose backoff is over.
      auto ready = writeQueue.end();
      auto next = std::chrono::steady_clock::time_point::max();
      const auto now = std::chrono::steady_clock::now();
      for (auto it = writeQueue.begin(); it != writeQueue.end(); ++it) {
        const auto at = pendingWrites.at(*it).notBefore;
        if (at <= now) {
          ready = it;
          break;
        }
        next = std::min(next, at);
      }
      if (ready == writeQueue.end()) {
        if (writersStop) return;
        if (next == std::chrono::steady_clock::time_point::max()) writeCv.wait(lock);
        else writeCv.wait_until(lock, next);
        continue;
      }
      const std::string uid = *ready;
      writeQueue.erase(ready);
      PendingWrite& w = pendingWrites.at(uid);
      w.queued = false;
      w.writing = true;
      const std::string ns = w.ns, name = w.name;
      k8s::MetadataPatch patch = std::move(w.patch);
      w.patch = {};
      auto callbacks = std::move(w.onWritten);
      w.onWritten.clear();
      lock.unlock();
      auto r = writeClient->patchMetadata(k8s::kPods, ns, name, patch);
      if (r.ok())
        for (auto& f : callbacks) f();
      lock.lock();
      PendingWrite& after = pendingWrites.at(uid);
      after.writing = false;
      if (!r.ok() && !r.error().isNotFound()) {
        // Put it back under anything newer, and try again later.
        for (auto& [k, v] : patch.annotations) after.patch.annotations.try_emplace(k, std::move(v));
        after.onWritten.insert(after.onWritten.begin(), std::make_move_iterator(callbacks.begin()),
                               std::make_move_iterator(callbacks.end()));
        ++after.failures;
        if (after.failures == 1 || after.failures % 20 == 0)
          logLine("warning", "recording the allocation on pod " + ns + "/" + name + " (attempt " +
                                 std::to_string(after.failures) + ", retried until the apiserver takes it): " +
                                 r.error().describe());
        after.notBefore = std::chrono::steady_clock::now() +
                          std::min<std::chrono::milliseconds>(std::chrono::milliseconds(100 << std::min(after.failures, 6)),
                                                             std::chrono::seconds(5));
      } else {
        after.failures = 0;
        after.notBefore = {};
      }
      if (!after.patch.annotations.empty() || !after.onWritten.empty()) {
        after.queued = true;
        writeQueue.push_back(uid);
      } else {
        pendingWrites.erase(uid);
      }
      writeCv.notify_all();
    }
  }

  /// Waits until nothing is left to write (or `timeout`); true when nothing is.
  bool flushWrites(std::chrono::milliseconds timeout) {
    std::unique_lock lock(writeMu);
    return writeCv.wait_for(lock, timeout, [&] { return pendingWrites.empty(); });
  }

  /// Marks a pod failed (bind phase, reason) and emits a Warning Event, in the background
  /// and retried: the apiserver may be the very thing that failed.
  void recordFailure(const std::string& uid, const std::string& reason, std::string ns = {}, std::string name = {}) {
    if (ns.empty())
      for (const auto& p : tracker.pods())
        if (p.info.uid == uid) {
          ns = p.info.podNamespace;
          name = p.info.name;
        }
    if (name.empty()) return;
    auto patched = std::make_shared<bool>(false);
    enqueue([this, ns, name, uid, reason, patched] {
      if (!*patched) {
        k8s::MetadataPatch patch;
        patch.annotations[std::string(keys::kPodBindPhase)] = "failed";
        patch.annotations[std::string(keys::kPodAllocateError)] = reason;
        auto r = client->patchMetadata(k8s::kPods, ns, name, patch);
        if (!r.ok()) return r.error().isNotFound();
        *patched = true;
      }
      k8s::EventSpec ev{"Pod", ns, name, uid, "v1", "Warning", "VgpuAllocateFailed", reason, kComponent,
                        options.nodeName};
      auto e = client->createEvent(ev);
      return e.ok();
    });
  }

  /// The backend's notes on the container (which component enforces its limits, ...) as
  /// Normal events on its pod, in the background and retried.
  void postNotices(const Claim& claim, const std::vector<PodNotice>& notices) {
    for (const auto& n : notices) {
      k8s::EventSpec ev{"Pod", claim.podNamespace, claim.podName, claim.podUid, "v1", "Normal", n.reason,
                        "container " + claim.container + ": " + n.message, kComponent, options.nodeName};
      enqueue([this, ev] { return client->createEvent(ev).ok(); });
    }
  }

  void enqueue(std::function<bool()> task) {
    std::lock_guard lock(bgMu);
    tasks.emplace_back(20, std::move(task));
    bgCv.notify_all();
  }

  void recorderLoop() {
    std::unique_lock lock(bgMu);
    while (!stopping) {
      if (tasks.empty()) {
        bgCv.wait(lock, [&] { return stopping || !tasks.empty(); });
        continue;
      }
      auto [left, task] = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      const bool done = task();
      lock.lock();
      if (!done && left > 1) {
        tasks.emplace_back(left - 1, std::move(task));
        bgCv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping; });
      }
    }
  }

  // ---- Pods ----
  std::set<std::string> hamiSeen;  // uids of pods HAMi placed here, said once (informer thread)
  /// A pod HAMi placed on this node before the switch: HAMi-core limits it; said once.
  void noteHamiPod(const PodInfo& pod) {
    if (pod.nodeName != options.nodeName || pod.annotations.contains(std::string(keys::kPodAssignment)) ||
        hamiSeen.contains(pod.uid))
      return;
    for (const auto& [key, value] : pod.annotations)
      if (hami::isAllocatedKey(key)) {
        hamiSeen.insert(pod.uid);
        logLine("info", "pod " + pod.key() + " was placed by HAMi (" + key + ": " + value +
                            "): HAMi-core limits its containers; the agent leaves them alone "
                            "(vgpu_hami_container_memory_bytes)");
        return;
      }
  }

  void onPod(const boost::json::object& obj) {
    auto info = parsePod(boost::json::value(obj));
    if (!info.ok()) {
      logLine("warning", "ignoring a pod the agent cannot read: " + info.error().message);
      return;
    }
    TrackedPod p;
    p.info = std::move(info).value();
    noteHamiPod(p.info);
    if (const auto* ts = k8s::findPath(obj, {"metadata", "creationTimestamp"}); ts && ts->is_string())
      if (auto t = parseTimestamp(ts->as_string()); t.ok()) p.created = *t;
    readInitContainers(obj, p);
    readContainerIds(obj, p);
    // An init container that finished gives its handout back now, not at the next interval.
    bool released = false;
    for (const auto& h : handouts.heldBy(p.info.uid)) released = released || p.initFinished(h.container);
    tracker.upsert(std::move(p));
    if (released) {
      std::lock_guard lock(bgMu);
      cleanupSoon = true;
      bgCv.notify_all();
    }
  }

  /// Sidecars (spec.initContainers[].restartPolicy Always) and the init containers that exited
  /// with code 0 (status.initContainerStatuses[].state.terminated): the kubelet's PodResources
  /// never lists an init container, so the pod's status is what says one has ended.
  static void readInitContainers(const boost::json::object& obj, TrackedPod& p) {
    if (const auto* spec = k8s::findPath(obj, {"spec", "initContainers"}); spec && spec->is_array())
      for (const auto& c : spec->as_array()) {
        const auto* o = c.if_object();
        const auto* name = o ? o->if_contains("name") : nullptr;
        const auto* policy = o ? o->if_contains("restartPolicy") : nullptr;
        if (name && name->is_string() && policy && policy->is_string() && policy->as_string() == "Always")
          p.sidecars.insert(std::string(name->as_string()));
      }
    const auto* statuses = k8s::findPath(obj, {"status", "initContainerStatuses"});
    if (!statuses || !statuses->is_array()) return;
    for (const auto& st : statuses->as_array()) {
      const auto* o = st.if_object();
      const auto* name = o ? o->if_contains("name") : nullptr;
      const auto* code = o ? k8s::findPath(*o, {"state", "terminated", "exitCode"}) : nullptr;
      if (name && name->is_string() && code && code->is_int64() && code->as_int64() == 0)
        p.initDone.insert(std::string(name->as_string()));
    }
  }

  /// The runtime's id of each container the pod's status reports (the watchdog matches
  /// processes to their container's slice by it).
  static void readContainerIds(const boost::json::object& obj, TrackedPod& p) {
    for (const char* field : {"initContainerStatuses", "containerStatuses"}) {
      const auto* statuses = k8s::findPath(obj, {"status", field});
      if (!statuses || !statuses->is_array()) continue;
      for (const auto& st : statuses->as_array()) {
        const auto* o = st.if_object();
        const auto* name = o ? o->if_contains("name") : nullptr;
        const auto* id = o ? o->if_contains("containerID") : nullptr;
        if (!name || !name->is_string() || !id || !id->is_string()) continue;
        if (auto cid = runtimeContainerId(id->as_string()); !cid.empty())
          p.containerIds[std::string(name->as_string())] = std::move(cid);
      }
    }
  }

  void onPodDeleted(const boost::json::object& obj) {
    tracker.remove(std::string(k8s::uid(obj)));
    // Its folders go in the cleanup pass, once the kubelet no longer reports their devices
    // held: the container attributed to this pod may really be another pod's.
    std::lock_guard lock(bgMu);
    cleanupSoon = true;
    bgCv.notify_all();
  }

  // ---- Node ----
  Status publishNode(bool remove) {
    k8s::MetadataPatch patch;
    {
      std::lock_guard lock(devMu);
      for (const auto& [name, st] : served) {
        if (remove) patch.annotations[keys::nodeDevices(name)] = std::nullopt;
        else if (st.serving) patch.annotations[keys::nodeDevices(name)] = encodeInventory(withForeign(name, st.devices));
      }
    }
    if (remove) patch.annotations[std::string(keys::kNodeHeartbeat)] = std::nullopt;
    else patch.annotations[std::string(keys::kNodeHeartbeat)] = formatTimestamp(std::chrono::system_clock::now());
    auto* c = remove ? allocClient.get() : client.get();
    auto r = c->patchMetadata(k8s::kNodes, "", options.nodeName, patch);
    if (!r.ok()) return makeError("publishing the devices of node " + options.nodeName + ": " + r.error().describe());
    std::lock_guard lock(bgMu);
    ++stats.nodePublishes;
    return {};
  }

  /// `devices` with the foreign memory the watchdog last saw on each; under devMu.
  std::vector<Device> withForeign(const std::string& backend, std::vector<Device> devices) const {
    auto b = foreignMiB.find(backend);
    if (b == foreignMiB.end()) return devices;
    for (auto& d : devices)
      if (auto f = b->second.find(d.id); f != b->second.end()) d.foreignUsedMiB = f->second;
    return devices;
  }

  void nodeLoop() {
    std::string lastError;
    std::unique_lock lock(bgMu);
    while (!stopping) {
      bgCv.wait_for(lock, nodeDirty ? std::chrono::milliseconds(0) : options.heartbeatInterval,
                    [&] { return stopping || nodeDirty; });
      if (stopping) return;
      nodeDirty = false;
      lock.unlock();
      auto s = publishNode(false);
      lock.lock();
      if (!s.ok()) {
        if (s.error().message != lastError) logLine("error", s.error().message);
        lastError = s.error().message;
        nodeDirty = true;
        bgCv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
      } else {
        lastError.clear();
      }
    }
  }

  void markNodeDirty() {
    std::lock_guard lock(bgMu);
    nodeDirty = true;
    bgCv.notify_all();
  }

  void healthLoop(const std::string& name) {
    Discovery* discovery = served.at(name).backend->discovery();
    std::string lastError;
    for (;;) {
      {
        std::lock_guard lock(bgMu);
        if (stopping) return;
      }
      auto events = discovery->waitForHealthEvents(std::chrono::milliseconds(300));
      if (!events.ok()) {
        if (events.error().message != lastError) logLine("warning", "health of " + name + ": " + events.error().message);
        lastError = events.error().message;
        std::unique_lock lock(bgMu);
        bgCv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; });
        continue;
      }
      if (events->empty()) continue;
      std::vector<Device> copy;
      {
        std::lock_guard lock(devMu);
        auto& st = served.at(name);
        for (const auto& e : *events) {
          for (auto& d : st.devices)
            if (d.id == e.deviceId) d.health = e.health;
          logLine("info", "device " + e.deviceId + " of " + name + " is now " + toString(e.health) +
                              (e.reason.empty() ? "" : " (" + e.reason + ")"));
        }
        ++st.version;
        copy = st.devices;
      }
      devCv.notify_all();
      tracker.setDevices(name, copy);
      markNodeDirty();
    }
  }

  // ---- Maintenance ----
  /// What the kubelet's PodResources API says each pod's containers hold.
  struct Listing {
    bool asked = false;                                      ///< the socket is configured and exists
    std::optional<std::map<std::string, HeldDevices>> pods;  ///< unset when not asked or it failed
  };

  Listing listHeld(std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
    Listing out;
    if (options.podResourcesSocket.empty()) return out;
    out.asked = true;
    std::string problem;
    if (!fs::exists(options.podResourcesSocket)) {
      problem = "the kubelet's PodResources socket " + options.podResourcesSocket + " does not exist";
    } else if (auto listed = listPodResources(options.podResourcesSocket, timeout); !listed.ok()) {
      problem = listed.error().message;
    } else {
      out.pods = std::move(listed).value();
    }
    // Said once per change, not every pass.
    std::lock_guard lock(bgMu);
    if (problem != lastListProblem && !problem.empty())
      logLine("warning", problem + " (pods are not corrected and no container folder is removed until it answers)");
    lastListProblem = problem;
    return out;
  }
  std::string lastListProblem;  // guarded by bgMu

  /// Each handout is attributed to the pod and container the kubelet says hold its IDs.
  void attributeHandouts(const std::map<std::string, HeldDevices>& listed) {
    std::map<std::string, std::string> uidByKey;
    for (const auto& p : tracker.pods()) uidByKey[p.info.key()] = p.info.uid;
    for (const auto& [key, held] : listed) {
      const auto slash = key.find('/');
      const std::string ns = slash == std::string::npos ? std::string() : key.substr(0, slash);
      const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
      auto uid = uidByKey.find(key);
      const std::string podUid = uid == uidByKey.end() ? std::string() : uid->second;
      for (const auto& [container, byResource] : held)
        for (const auto& [resource, ids] : byResource) {
          if (ids.empty()) continue;
          auto h = handouts.listedAs(resource, ids, podUid, container);
          if (h && handouts.attribute(h->id, podUid, ns, name, container))
            logLine("info", "the devices handed out as " + h->id + " are held by pod " + key + " container " + container);
        }
    }
  }

  /// The assignments PodResources says the known pods must carry. A handout matched to
  /// another pod tells the tracker that pod was served with IDs it never got (the match, which
  /// attributeHandouts leaves alone, so the order of the two does not matter).
  std::vector<PodOutcome> corrections(const std::map<std::string, HeldDevices>& listed) {
    std::map<std::string, std::string> uidByKey;
    for (const auto& p : tracker.pods()) uidByKey[p.info.key()] = p.info.uid;
    std::vector<PodOutcome> out;
    for (const auto& [key, held] : listed) {
      auto uid = uidByKey.find(key);
      if (uid == uidByKey.end()) continue;
      if (auto outcome = tracker.correction(uid->second, held, handouts)) out.push_back(std::move(*outcome));
    }
    return out;
  }

  /// Writes the corrections, with the backends' pod annotations of the handouts each pod
  /// holds (so after attributeHandouts).
  void recordCorrections(const std::vector<PodOutcome>& outcomes) {
    for (const auto& outcome : outcomes) {
      const std::string key = outcome.podNamespace + "/" + outcome.podName;
      k8s::MetadataPatch patch;
      patch.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(outcome.assignment);
      patch.annotations[std::string(keys::kPodBindPhase)] = "success";
      patch.annotations[std::string(keys::kPodAllocateError)] = std::nullopt;
      addPodAnnotations(patch, outcome.podUid);
      // Through the same queue as Allocate's outcomes, so the later of the two lands last.
      writeLater(outcome.podUid, outcome.podNamespace, outcome.podName, std::move(patch), [this, key] {
        logLine("info", "pod " + key + ": assignment corrected to the devices the kubelet gave it");
        std::lock_guard lock(bgMu);
        ++stats.corrections;
      });
    }
  }

  /// A handout goes once no container the kubelet reports holds its IDs and the pod it is
  /// attributed to is gone (or the kubelet reports that pod's container holding other IDs
  /// of the resource: the agent's guess was wrong and nobody holds these). Without an
  /// answer from a configured PodResources API nothing is removed (never on a guess); with
  /// no such API at all, the pod alone decides.
  void cleanup(const Listing& listing) {
    if (!informer || !informer->hasSynced()) return;
    if (listing.asked && !listing.pods) return;
    std::map<std::string, std::string> uidByKey;
    std::map<std::string, TrackedPod> livePods;
    for (auto& p : tracker.pods()) {
      uidByKey[p.info.key()] = p.info.uid;
      if (!p.info.terminated()) livePods.emplace(p.info.uid, std::move(p));
    }
    std::set<std::string> held;  // handouts a listed container holds
    if (listing.pods)
      for (const auto& [key, containers] : *listing.pods) {
        auto uid = uidByKey.find(key);
        for (const auto& [container, byResource] : containers)
          for (const auto& [resource, ids] : byResource)
            if (!ids.empty())
              if (auto h = handouts.listedAs(resource, ids, uid == uidByKey.end() ? "" : uid->second, container))
                held.insert(h->id);
      }

    // Whether the kubelet reports h's container holding other IDs of h's resource.
    auto holdsOthers = [&](const Handout& h) {
      if (!listing.pods) return false;
      auto pod = listing.pods->find(h.podNamespace + "/" + h.podName);
      if (pod == listing.pods->end()) return false;
      auto c = pod->second.find(h.container);
      if (c == pod->second.end()) return false;
      auto ids = c->second.find(h.resource);
      return ids != c->second.end() && !ids->second.empty() && handoutId(h.resource, ids->second) != h.id;
    };

    std::unique_lock lock(limiterMu);
    std::uint64_t removed = 0;
    for (const auto& h : handouts.all()) {
      auto pod = livePods.find(h.podUid);
      // An init container that ran to completion: PodResources never lists one, its pod's
      // status says it ended. Its IDs may be held by the container after it, under its own handout.
      const bool initEnded = pod != livePods.end() && pod->second.initFinished(h.container);
      if (!initEnded) {
        if (held.contains(h.id)) continue;
        if (!h.podUid.empty() && pod != livePods.end() && !holdsOthers(h)) continue;
      }
      logLine("info", std::string(initEnded ? "init container " : "container ") + h.container + " of pod " +
                          h.podNamespace + "/" + h.podName + (initEnded ? " has finished" : " is gone") +
                          ": removing its folder " + handouts.folder(h.id).string());
      releaseHandout(h);
      ++removed;
    }
    removed += handouts.removeStrays();
    std::map<std::string, std::vector<ContainerRef>> liveByBackend;
    for (const auto& h : handouts.all()) liveByBackend[h.backend].push_back(h.backendRef());
    for (const auto& [name, st] : served)
      if (auto* lim = limiterOf(name))
        if (auto s = lim->reconcile(liveByBackend[name]); !s.ok())
          logLine("warning", "reconcile " + name + ": " + s.error().message);
    lock.unlock();
    std::lock_guard statsLock(bgMu);
    stats.regionsCleaned += removed;
  }

  /// One maintenance pass: handouts attributed and pods corrected from PodResources, then
  /// the cleanup when it is due.
  void maintain(bool withCleanup) {
    // One pass at a time: a pass asked for (maintainNow) while the loop's is running waits
    // for it, so that when it returns every earlier pass's corrections are written too.
    std::lock_guard pass(maintainMu);
    const Listing listing = listHeld();
    if (listing.pods) {
      attributeHandouts(*listing.pods);
      recordCorrections(corrections(*listing.pods));
    }
    if (withCleanup) cleanup(listing);
  }

  void maintLoop() {
    auto nextCleanup = std::chrono::steady_clock::now();
    std::unique_lock lock(bgMu);
    while (!stopping) {
      const bool due = cleanupSoon || std::chrono::steady_clock::now() >= nextCleanup;
      cleanupSoon = false;
      lock.unlock();
      maintain(due);
      if (due) nextCleanup = std::chrono::steady_clock::now() + options.cleanupInterval;
      lock.lock();
      bgCv.wait_for(lock, options.podResourcesInterval, [&] { return stopping || cleanupSoon; });
    }
  }

  // ---- Metrics ----
  void collect() {
    for (auto* g : {&devMemory, &devCompute, &devSplit, &devHealthy, &devMemAllocated, &devComputeAllocated,
                    &ctrMemUsed, &ctrMemLimit, &ctrComputeLimit, &ctrBusy, &ctrUnenforced, &ctrProcs, &ctrUtilization,
                    &backendDevices, &devForeignMemory, &hamiContainers, &devPartition})
      g->clear();
    for (const auto& h : tracker.hamiContainers())
      hamiContainers.set({h.podNamespace, h.pod, h.container, h.deviceId}, static_cast<double>(h.memoryMiB) * 1048576.0);
    const auto usage = tracker.usageByDevice();
    {
      std::lock_guard lock(devMu);
      for (const auto& [name, st] : served) backendDevices.set({name}, st.serving ? st.devices.size() : 0);
      for (const auto& [name, st] : served)
        for (const auto& d : st.devices) {
          const metrics::LabelValues l{name, d.id, std::to_string(d.index), d.model};
          devMemory.set(l, static_cast<double>(d.memoryMiB) * 1048576.0);
          devCompute.set(l, d.computeUnits);
          devSplit.set(l, d.splitCount);
          devHealthy.set(l, d.health == Health::kUnhealthy ? 0 : 1);
          auto u = usage.find(d.id);
          devMemAllocated.set(l, u == usage.end() ? 0.0 : static_cast<double>(u->second.first) * 1048576.0);
          devComputeAllocated.set(l, u == usage.end() ? 0.0 : static_cast<double>(u->second.second));
          if (auto b = foreignMiB.find(name); b != foreignMiB.end())
            if (auto f = b->second.find(d.id); f != b->second.end())
              devForeignMemory.set(l, static_cast<double>(f->second) * 1048576.0);
        }
    }
    {
      std::lock_guard lock(pluginsMu);
      for (const auto& [resource, plugin] : plugins) pluginRegistered.set({resource}, plugin->registered() ? 1 : 0);
    }
    if (hami) hami->begin();
    collectPartitions();
    collectRegions();
    collectBackendUsage();
    if (hami) hami->end();
  }

  /// One info series per partition: those discovery serves as devices, and those the backends
  /// made for the containers holding handouts (reported in the pod annotations Allocate gave).
  void collectPartitions() {
    std::map<std::string, std::vector<std::pair<Partition, const char*>>> byBackend;
    for (const auto& h : handouts.all())
      for (const auto& [key, value] : h.podAnnotations) {
        if (!isMadePartitionsKey(key)) continue;
        auto made = decodePartitions(value);
        if (!made.ok()) {
          std::lock_guard lock(bgMu);  // said once per container, not at every scrape
          if (unreadablePartitions.insert(h.id).second)
            logLine("warning", "backend " + h.backend + " reported partitions the agent cannot read (" + key +
                                   " of " + h.id + "), left out of vgpu_device_partition_info: " + made.error().message);
          continue;
        }
        for (auto& p : *made) byBackend[h.backend].emplace_back(std::move(p), "dynamic");
      }
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served)
      for (const auto& d : st.devices)
        if (auto p = partitionOf(d)) byBackend[name].emplace_back(std::move(*p), "static");
    for (const auto& [name, partitions] : byBackend) {
      auto st = served.find(name);
      for (const auto& [p, mode] : partitions) {
        devPartition.set({name, p.id, p.parent, p.kind, p.profile, p.placement, p.instanceId, p.subInstanceId, mode}, 1);
        if (hami) hami->partition(options.nodeName, p, st == served.end() ? 0 : parentIndex(st->second.devices, p));
      }
    }
  }
  std::set<std::string> unreadablePartitions;  // handout ids; guarded by bgMu

  /// The index of `p`'s parent among `devices`; a partition served in its parent's place
  /// carries the parent's index itself.
  static int parentIndex(const std::vector<Device>& devices, const Partition& p) {
    int own = 0;
    for (const auto& d : devices) {
      if (d.id == p.parent) return d.index;
      if (d.id == p.id) own = d.index;
    }
    return own;
  }

  /// Per-container usage the backends read from their vendor libraries (MLU, DCU: no
  /// libvgpu.so region), labelled like the regions' series.
  void collectBackendUsage() {
    std::map<ContainerRef, Handout> byRef;
    for (const auto& h : handouts.all()) byRef.emplace(h.backendRef(), h);
    std::string problems;
    for (const auto& [name, st] : served) {
      if (!isServing(name)) continue;
      UsageReporter* reporter = st.backend->usageReporter();
      if (!reporter) continue;
      auto usage = reporter->containerUsage();
      if (!usage.ok()) {
        problems += (problems.empty() ? "" : "; ") + name + ": " + usage.error().message;
        continue;
      }
      for (const auto& u : *usage) {
        auto h = byRef.find(u.container);
        if (h == byRef.end()) continue;  // made by an earlier agent and not yet reconciled
        const metrics::LabelValues l{h->second.podNamespace, h->second.podName, h->second.container, u.deviceId,
                                     std::to_string(u.deviceIndex)};
        ctrMemLimit.set(l, static_cast<double>(u.memoryLimitBytes));
        ctrComputeLimit.set(l, u.computeLimitPercent);
        if (u.memoryUsedBytes) ctrMemUsed.set(l, static_cast<double>(*u.memoryUsedBytes));
        if (u.utilizationPercent) ctrUtilization.set(l, *u.utilizationPercent);
        if (hami) {
          hami->memoryLimit(l, static_cast<double>(u.memoryLimitBytes));
          if (u.memoryUsedBytes) hami->memory(l, static_cast<double>(*u.memoryUsedBytes));
          if (u.utilizationPercent) hami->utilization(l, *u.utilizationPercent);
        }
      }
    }
    std::lock_guard lock(bgMu);
    if (problems != lastUsageProblem && !problems.empty())
      logLine("warning", "per-container usage cannot be read: " + problems);
    lastUsageProblem = problems;
  }

  // ---- Watchdog ----
  void watchdogLoop() {
    std::unique_lock lock(bgMu);
    while (!stopping) {
      bgCv.wait_for(lock, options.watchdog.interval, [&] { return stopping; });
      if (stopping) return;
      lock.unlock();
      watchdogPass();
      lock.lock();
    }
  }

  void watchdogPass() {
    std::lock_guard pass(watchdogMu);
    std::map<std::string, std::map<std::string, std::string>> idsOf;  // pod uid -> container name -> id
    PodContainerIds containerIds;
    for (auto& pod : tracker.pods()) {
      for (const auto& [name, id] : pod.containerIds) containerIds[pod.info.uid].insert(id);
      idsOf[pod.info.uid] = std::move(pod.containerIds);
    }
    std::vector<Slice> slices;
    std::set<std::string> live;  // handout ids
    for (const auto& h : handouts.all()) {
      std::string containerId;
      if (auto pod = idsOf.find(h.podUid); pod != idsOf.end())
        if (auto id = pod->second.find(h.container); id != pod->second.end()) containerId = id->second;
      // The compute rule the container's limiter obeys, from the limits file in its folder.
      const ComputeRule rule = computeRules.of(h.id, handouts.folder(h.id));
      live.insert(h.id);
      for (const auto& d : h.devices)
        slices.push_back(
            {h.podUid, h.podNamespace, h.podName, h.container, d.deviceId, d.memoryMiB, d.compute, containerId, rule});
    }
    computeRules.keepOnly(live);
    std::map<std::string, std::vector<std::string>> devicesOf;
    {
      std::lock_guard lock(devMu);
      for (const auto& [name, st] : served)
        if (st.serving)
          for (const auto& d : st.devices) devicesOf[name].push_back(d.id);
    }
    ScanResult r = watchdog->scan(slices, devicesOf, containerIds);
    for (const auto& n : r.notices) logLine("warning", n);
    for (const auto& v : r.confirmed) act(v);
    bool changed = false;
    {
      std::lock_guard lock(devMu);
      for (auto& [backend, devices] : r.foreignMiB) {
        auto& known = foreignMiB[backend];
        if (known != devices) {
          known = std::move(devices);
          changed = true;
        }
      }
    }
    // The scheduler rebuilds a node's inventory on every change: foreign memory that moves
    // is published at most every kForeignPublishEvery (the heartbeat carries it too).
    foreignPending = foreignPending || changed;
    const auto now = std::chrono::steady_clock::now();
    if (foreignPending && now - foreignPublished >= kForeignPublishEvery) {
      foreignPending = false;
      foreignPublished = now;
      markNodeDirty();
    }
    std::lock_guard lock(bgMu);
    ++stats.watchdogScans;
    stats.watchdogViolations += r.confirmed.size();
  }

  /// Reports a confirmed violation (log, metric, Warning event on the pod) and applies the
  /// configured action.
  void act(const Violation& v) {
    auto mib = [](std::uint64_t bytes) { return std::to_string((bytes + 1048575) / 1048576) + " MiB"; };
    const WatchdogAction action = options.watchdog.action;
    const auto& o = options.watchdog;
    const std::string what =
        v.resource == WatchdogResource::kCompute
            ? "container " + v.container + " keeps " + v.backend + " device " + v.deviceId + " " +
                  std::to_string(v.usedPercent) + "% busy on average over " + std::to_string(o.computeWindow.count()) +
                  " ms, more than its compute share allows (" + std::to_string(v.allowedPercent) +
                  "% with the watchdog's tolerance of " + std::to_string(o.computeTolerancePercent) + " points; a " +
                  std::to_string(v.sharePercent) + "% share, " +
                  (v.computePolicy == ComputePolicy::kForce
                       ? std::string("policy force)")
                       : std::string("policy default: applied while another tenant runs kernels there, as one did)"))
            : "container " + v.container + " holds " + mib(v.usedBytes) + " on " + v.backend + " device " +
                  v.deviceId + ", more than its slice allows (" + mib(v.allowedBytes) +
                  " with the watchdog's tolerance of " + std::to_string(o.toleranceMiB) + " MiB)";
    const Enforcement done = watchdog->enforce(v);
    const std::string& outcome = done.said;
    watchdogViolations.inc(
        {options.nodeName, v.podName, v.podNamespace, v.container, v.deviceId, toString(v.resource), toString(action)});
    // Killing did not bound the pod: the eviction it escalated to is counted as well.
    if (done.escalated)
      watchdogViolations.inc({options.nodeName, v.podName, v.podNamespace, v.container, v.deviceId,
                              toString(v.resource), toString(WatchdogAction::kEvictPod)});
    logLine("warning", "watchdog: pod " + v.podNamespace + "/" + v.podName + ": " + what + "; " + outcome);
    k8s::EventSpec ev{"Pod", v.podNamespace, v.podName, v.podUid, "v1", "Warning", "VgpuSliceExceeded",
                      what + "; " + outcome, kComponent, options.nodeName};
    enqueue([this, ev] { return client->createEvent(ev).ok(); });
  }

  /// POSTs an Eviction (policy/v1) for the pod, in the background and retried (a
  /// PodDisruptionBudget answers 429 until it allows it).
  void evict(const std::string& ns, const std::string& name) {
    enqueue([this, ns, name] {
      const std::string subresource = "pods/" + k8s::urlEncode(name) + "/eviction";
      const k8s::ResourceType eviction{"/api/v1", subresource, "Eviction", true};
      auto r = client->create(eviction, ns, boost::json::parse(evictionBody(ns, name)).as_object());
      if (!r.ok() && !r.error().isNotFound()) {
        logLine("warning", "watchdog: evicting pod " + ns + "/" + name + ": " + r.error().describe());
        return false;
      }
      return true;
    });
  }

  // ---- Rediscovery ----
  /// One line per backend: how many devices it serves, or why none.
  void logServing() {
    std::lock_guard lock(devMu);
    for (const auto& [name, st] : served) {
      std::string resources;
      for (const auto& r : st.resources) resources += (resources.empty() ? "" : ", ") + r;
      if (st.serving)
        logLine("info", "backend " + name + " serves " + std::to_string(st.devices.size()) + " device(s) as " +
                            resources);
      else
        logLine("info", "backend " + name + " serves no devices: " + st.problem);
    }
  }

  /// Starts the plugin servers and the health thread of a backend that now serves.
  Status startServing(const std::string& name) {
    std::vector<std::string> resources;
    {
      std::lock_guard lock(devMu);
      resources = served.at(name).resources;
    }
    for (const auto& resource : resources) {
      PluginServerOptions po;
      po.resource = resource;
      po.pluginDir = options.pluginDir;
      po.socketName = pluginSocketName(resource);
      auto server = std::make_unique<PluginServer>(po, *this);
      if (auto s = server->start(); !s.ok()) return s;
      std::lock_guard lock(pluginsMu);
      plugins[resource] = std::move(server);
    }
    served.at(name).health = std::thread([this, name] { healthLoop(name); });
    return {};
  }

  /// Asks every backend that serves nothing yet for its devices again: a driver loaded
  /// after the agent started (common after a reboot) is served from then on.
  void rediscover(const char* why) {
    std::lock_guard pass(rediscoverMu);
    bool changed = false;
    for (auto& [name, st] : served) {
      {
        std::lock_guard lock(devMu);
        if (st.serving) continue;  // the health loop follows what it serves
      }
      auto devices = st.backend->discovery()->discover();
      std::string problem;
      if (!devices.ok()) problem = devices.error().message;
      else if (devices->empty()) problem = "found no devices on this node";
      if (!problem.empty()) {
        std::lock_guard lock(devMu);
        if (problem != st.problem) logLine("info", "backend " + name + " (" + why + "): " + problem);
        st.problem = problem;
        continue;
      }
      for (auto& d : *devices) d.backend = name;
      std::vector<std::string> resources;
      for (const auto& r : st.backend->allocator().resources())
        if (r.advertised) resources.push_back(r.name);
      std::map<std::string, std::string> routes;
      {
        std::lock_guard lock(devMu);
        std::string conflict;
        for (const auto& r : resources)
          if (auto owner = resourceToBackend.find(r); owner != resourceToBackend.end() && owner->second != name)
            conflict = "resource " + r + " is already served by backend " + owner->second;
        if (!conflict.empty()) {
          st.problem = conflict;
          continue;
        }
        st.devices = *devices;
        st.resources = resources;
        st.serving = true;
        st.problem.clear();
        ++st.version;
        for (const auto& r : resources) resourceToBackend[r] = name;
        routes = resourceToBackend;
      }
      devCv.notify_all();
      tracker.setDevices(name, *devices);
      tracker.setResources(routes);
      bool running;
      {
        std::lock_guard lock(bgMu);
        running = started && !stopping;
      }
      if (!running) continue;  // start() serves what create() found
      logLine("info", "backend " + name + " (" + why + "): found " + std::to_string(devices->size()) +
                          " device(s); serving them now");
      if (auto s = startServing(name); !s.ok()) logLine("error", "backend " + name + ": " + s.error().message);
      changed = true;
    }
    if (changed) {
      markNodeDirty();
      logServing();
    }
  }

  void rediscoverLoop() {
    std::unique_lock lock(bgMu);
    while (!stopping) {
      const auto interval = options.rediscoverInterval.count() > 0 ? options.rediscoverInterval
                                                                   : std::chrono::milliseconds(std::chrono::hours(24));
      bgCv.wait_for(lock, interval, [&] { return stopping || rediscoverSoon; });
      if (stopping) return;
      const bool asked = rediscoverSoon;
      rediscoverSoon = false;
      if (!asked && options.rediscoverInterval.count() <= 0) continue;
      lock.unlock();
      rediscover(asked ? "asked to rediscover" : "periodic rediscovery");
      lock.lock();
    }
  }

  /// Ready: something serves devices and every plugin is registered, or no backend is
  /// enabled at all.
  std::pair<bool, std::string> readiness() const {
    if (enabledBackends == 0) return {true, "no backend is enabled\n"};
    if (served.empty() && draBackends > 0 && draBackends == enabledBackends)
      return {true, "every enabled backend is served by vgpu-dra-plugin on this node (frontEnd: dra)\n"};
    bool anyServing = false;
    std::string why;
    {
      std::lock_guard lock(devMu);
      for (const auto& [name, st] : served) {
        anyServing = anyServing || st.serving;
        if (!st.serving) why += "backend " + name + " serves no devices: " + st.problem + "\n";
      }
    }
    for (const auto& w : warnings)
      if (w.rfind("backend skipped: ", 0) == 0) why += w + "\n";
    if (!anyServing) return {false, "no backend serves devices\n" + why};
    std::lock_guard lock(pluginsMu);
    for (const auto& [resource, plugin] : plugins)
      if (!plugin->registered()) return {false, "resource " + resource + " is not registered with the kubelet\n"};
    return {true, "ok\n" + why};
  }

  /// Per-container usage from the one region each handout's backend created (region_metrics.h).
  void collectRegions() {
    exportRegions(handouts, {ctrMemUsed, ctrMemLimit, ctrComputeLimit, ctrBusy, ctrUnenforced, ctrProcs}, hami.get());
  }
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() { stop(); }

Result<std::unique_ptr<Agent>> Agent::create(AgentOptions options) {
  if (options.nodeName.empty()) return makeError("no node name (NODE_NAME or --node-name)");
  auto config = loadDeviceConfig(options.configPath);
  if (!config.ok()) return config.error();
  auto impl = std::make_unique<Impl>(std::move(options));
  auto& o = impl->options;
  const fs::path dir = o.backendDir.empty() ? defaultBackendDir() : fs::path(o.backendDir);
  impl->enabledBackends = config->enabledBackends().size();
  auto loaded = loadEnabledBackends(*config, dir, o.nodeName);
  for (const auto& f : loaded.failures) impl->warnings.push_back("backend skipped: " + f.message);
  impl->backends = std::move(loaded.backends);
  if (impl->backends.empty() && impl->enabledBackends > 0)
    return makeError("no backend could be loaded from " + dir.string() + " (enabled in " + o.configPath + ")" +
                     (impl->warnings.empty() ? "" : ": " + impl->warnings.front()));
  if (impl->enabledBackends == 0) logLine("warning", "no backend is enabled in " + o.configPath + "; serving nothing");
  for (const auto& b : impl->backends.all()) {
    // The DRA front end (vgpu-dra-plugin) serves this backend's devices on this node.
    if (config->settingsFor(b->name(), o.nodeName).frontEnd == FrontEnd::kDra) {
      logLine("info", "backend " + b->name() + " is in DRA mode on this node (frontEnd: dra); vgpu-dra-plugin serves it");
      ++impl->draBackends;
      continue;
    }
    if (!b->discovery()) {
      impl->warnings.push_back("backend " + b->name() + " has no discovery on the node side; skipped");
      continue;
    }
    Impl::BackendState st;
    st.backend = b.get();
    st.problem = "not discovered yet";
    impl->served.emplace(b->name(), std::move(st));
  }
  if (o.watchdog.interval.count() > 0) {
    std::vector<ProcessSource> sources;
    for (const auto& [name, st] : impl->served) sources.push_back({name, st.backend->processReporter()});
    Impl* im = impl.get();
    impl->watchdog = std::make_unique<Watchdog>(
        o.watchdog, std::move(sources), o.watchdogKiller ? o.watchdogKiller : ProcessKiller(killProcess),
        [im](const std::string& ns, const std::string& name) { im->evict(ns, name); });
  }
  // A backend whose driver or devices are missing now waits for a rediscovery (periodic,
  // or on SIGHUP) instead of being dropped.
  impl->rediscover("start");
  {
    std::lock_guard lock(impl->devMu);
    for (const auto& [name, st] : impl->served)
      if (!st.serving)
        impl->warnings.push_back(st.problem.rfind("found no devices", 0) == 0
                                     ? "backend " + name + " found no devices on this node; rediscovered later"
                                     : "backend " + name + " serves nothing for now: " + st.problem);
  }
  for (const auto& w : impl->warnings) logLine("warning", w);

  k8s::ClientConfig api = o.apiConfig;
  if (api.server.empty()) {
    auto loadedApi = k8s::loadDefaultConfig(o.kubeconfig);
    if (!loadedApi.ok()) return makeError("Kubernetes API: " + loadedApi.error().message);
    api = std::move(loadedApi).value();
  }
  auto client = k8s::Client::create(api);
  if (!client.ok()) return makeError("Kubernetes API client: " + client.error().message);
  impl->client = std::move(client).value();
  k8s::ClientOptions bounded;
  bounded.requestTimeout = o.apiTimeout;
  bounded.maxRetries = o.apiRetries;
  bounded.backoffBase = std::chrono::milliseconds(100);
  bounded.backoffMax = std::chrono::milliseconds(500);
  auto allocClient = k8s::Client::create(api, bounded);
  if (!allocClient.ok()) return makeError("Kubernetes API client: " + allocClient.error().message);
  impl->allocClient = std::move(allocClient).value();
  // One attempt per write, long enough for an apiserver slowed by a burst; the writers retry
  // with their own backoff, and stop() waits for at most one attempt.
  k8s::ClientOptions writes;
  writes.requestTimeout = std::max<std::chrono::milliseconds>(o.apiTimeout, std::chrono::seconds(10));
  writes.maxRetries = 0;
  auto writeClient = k8s::Client::create(api, writes);
  if (!writeClient.ok()) return makeError("Kubernetes API client: " + writeClient.error().message);
  impl->writeClient = std::move(writeClient).value();
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Status Agent::start() {
  auto& im = *impl_;
  std::error_code ec;
  fs::create_directories(fs::path(im.options.stateDir) / "containers", ec);
  if (ec) return makeError("cannot create the state folder " + im.options.stateDir + ": " + ec.message());
  // Handouts from before a restart: kept while the kubelet reports their devices held.
  auto replayed = im.handouts.load();
  if (!replayed.ok()) return replayed.error();
  for (const auto& problem : *replayed)
    logLine("warning", "a container journal entry cannot be used (its folder will be removed): " + problem);

  k8s::InformerOptions io;
  io.fieldSelector = "spec.nodeName=" + im.options.nodeName;
  io.transform = k8s::trimPod;  // what onPod reads, no more
  k8s::InformerHandlers handlers;
  handlers.onAdd = [&im](const k8s::ObjectPtr& o) { im.onPod(*o); };
  handlers.onUpdate = [&im](const k8s::ObjectPtr&, const k8s::ObjectPtr& o) { im.onPod(*o); };
  handlers.onDelete = [&im](const k8s::ObjectPtr& o) { im.onPodDeleted(*o); };
  im.informer = std::make_unique<k8s::Informer>(*im.client, k8s::kPods, io, handlers);
  im.informer->start();

  {
    std::lock_guard lock(im.bgMu);
    im.started = true;
  }
  im.recorderThread = std::thread([&im] { im.recorderLoop(); });
  for (int i = 0; i < 4; ++i) im.writers.emplace_back([&im] { im.writerLoop(); });
  im.nodeThread = std::thread([&im] { im.nodeLoop(); });
  im.maintThread = std::thread([&im] { im.maintLoop(); });

  if (!im.options.metricsAddress.empty()) {
    if (im.options.hamiMetrics) im.hami = std::make_unique<HamiNodeMetrics>(im.registry);
    im.registry.addCollector([&im] { im.collect(); });
    auto server = node::startMetricsEndpoint(im.options.metricsAddress, "--metrics-address", im.registry,
                                             [&im] { return im.readiness(); });
    if (!server.ok()) return server.error();
    im.httpServer = std::move(server).value();
  }

  {
    // Rediscovery may make a backend serve from here on; it starts its plugins itself then.
    std::lock_guard pass(im.rediscoverMu);
    for (const auto& [name, st] : im.served)
      if (im.isServing(name))
        if (auto s = im.startServing(name); !s.ok()) return s;
  }
  im.rediscoverThread = std::thread([&im] { im.rediscoverLoop(); });
  if (im.watchdog) im.watchdogThread = std::thread([&im] { im.watchdogLoop(); });
  im.logServing();
  return {};
}

void Agent::stop() {
  auto& im = *impl_;
  {
    std::lock_guard lock(im.bgMu);
    if (im.stopping) return;
    im.stopping = true;
  }
  im.bgCv.notify_all();
  im.devCv.notify_all();
  if (im.rediscoverThread.joinable()) im.rediscoverThread.join();
  if (im.watchdogThread.joinable()) im.watchdogThread.join();
  { std::lock_guard pass(im.rediscoverMu); }  // a rediscoverNow() in progress: no plugin starts after this
  {
    std::lock_guard lock(im.pluginsMu);
    for (auto& [resource, p] : im.plugins) p->stop();
  }
  if (im.httpServer) im.httpServer->stop(std::chrono::milliseconds(500));
  for (auto* t : {&im.nodeThread, &im.maintThread, &im.recorderThread})
    if (t->joinable()) t->join();
  // What Allocate answered is written before the agent goes, if the apiserver lets it soon;
  // else the next agent's PodResources pass writes it.
  if (!im.flushWrites(std::chrono::seconds(2))) logLine("warning", "on shutdown: some pods' outcomes were not written yet");
  {
    std::lock_guard lock(im.writeMu);
    im.writersStop = true;
    im.writeQueue.clear();
  }
  im.writeCv.notify_all();
  for (auto& t : im.writers)
    if (t.joinable()) t.join();
  for (auto& [name, st] : im.served)
    if (st.health.joinable()) st.health.join();
  if (im.informer) im.informer->stop();
  bool started;
  {
    std::lock_guard lock(im.bgMu);
    started = im.started;
  }
  if (started)
    if (auto s = im.publishNode(true); !s.ok()) logLine("warning", "on shutdown: " + s.error().message);
}

std::vector<std::string> Agent::resources() const {
  std::vector<std::string> out;
  std::lock_guard lock(impl_->devMu);
  for (const auto& [r, b] : impl_->resourceToBackend) out.push_back(r);
  return out;
}

bool Agent::watchdogScanNow() {
  if (!impl_->watchdog) return false;
  impl_->watchdogPass();
  return true;
}
void Agent::rediscoverNow() { impl_->rediscover("asked to rediscover"); }

void Agent::requestRediscovery() {
  std::lock_guard lock(impl_->bgMu);
  impl_->rediscoverSoon = true;
  impl_->bgCv.notify_all();
}

bool Agent::ready() const { return impl_->readiness().first; }

std::map<std::string, std::size_t> Agent::servedDevices() const {
  std::map<std::string, std::size_t> out;
  std::lock_guard lock(impl_->devMu);
  for (const auto& [name, st] : impl_->served) out[name] = st.serving ? st.devices.size() : 0;
  return out;
}

std::vector<std::string> Agent::warnings() const { return impl_->warnings; }
std::string Agent::metricsUrl() const { return impl_->httpServer ? impl_->httpServer->url() : ""; }
std::string Agent::renderMetrics() {
  if (!impl_->httpServer) impl_->collect();
  return impl_->registry.render();
}
void Agent::maintainNow() {
  impl_->maintain(/*withCleanup=*/true);
  impl_->flushWrites(std::chrono::seconds(10));
}
bool Agent::flushWrites(std::chrono::milliseconds timeout) { return impl_->flushWrites(timeout); }
bool Agent::podsSynced() const { return impl_->informer && impl_->informer->hasSynced(); }
PodTracker& Agent::tracker() { return impl_->tracker; }
AgentStats Agent::stats() const {
  std::lock_guard lock(impl_->bgMu);
  return impl_->stats;
}
bool Agent::registered() const {
  std::lock_guard lock(impl_->pluginsMu);
  for (const auto& [resource, p] : impl_->plugins)
    if (!p->registered()) return false;
  return !impl_->plugins.empty();
}

}  // namespace vgpu::deviceplugin
