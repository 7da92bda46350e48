#pragma once
// Agent::Impl, the node agent's state that its parts share: what each backend serves, the
// handouts, the pod tracker, the pod writers, metrics, the watchdog. agent.h is the API.
// Its methods live by concern: allocate, container_match, pod_records, inventory,
// maintenance, agent_metrics, watchdog_wiring (.cpp); agent.cpp has the lifecycle.

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

#include "agent.h"
#include "cgroup_identity.h"
#include "daemon_support.h"
#include "device_metrics.h"
#include "hami_metrics.h"
#include "handout_store.h"
#include "health_feed.h"
#include "limiter_call.h"
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
#include "vgpu/k8s/node_lease.h"
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

inline void logLine(const char* level, const std::string& text) {
  std::fprintf(stderr, "%s vgpu-device-plugin %s: %s\n", formatTimestamp(std::chrono::system_clock::now()).c_str(),
               level, text.c_str());
}

inline constexpr const char* kComponent = "vgpu-device-plugin";

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
    std::unique_ptr<HealthFeed> health;  ///< while served
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
  DeviceGauges deviceGauges;
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
  std::map<std::string, std::string> readDirectly;  // "ns/name" -> uid: pods readUnwatched tracked

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

  explicit Impl(AgentOptions o);

  /// --region-tmpfs=best-effort: each reason said once (it is the node's set-up, the same for
  /// every container), each folder counted.
  void folderUnbounded(const std::string& folder, const std::string& why);

  // ---- PluginHandler: the kubelet's calls (allocate.cpp) ----
  std::vector<VirtualDevice> devices(const std::string& resource, std::uint64_t& version) override;

  /// Why the kubelet may not hand out `ids` under `resource`: one names a device its backend
  /// serves under another count resource (vgpu/served_resource.h). Empty when they may.
  std::string servedElsewhere(const std::string& resource, const std::vector<std::string>& ids) const;

  bool waitForDevices(const std::string& resource, std::uint64_t seen, std::chrono::milliseconds timeout) override;

  std::vector<std::string> preferred(const std::string& resource, const std::vector<std::string>& available,
                                     const std::vector<std::string>& mustInclude, std::size_t size) override;

  std::variant<ContainerSpec, RpcError> allocate(const std::string& resource,
                                                 const std::vector<std::string>& ids) override;

  /// The backend's limiter while it serves, else null (inventory.cpp).
  Limiter* limiterOf(const std::string& backend) const;

  bool isServing(const std::string& backend) const;  // inventory.cpp

  /// Undoes one handout: what the backend made for it, then its folder and record
  /// (maintenance.cpp).
  void releaseHandout(const Handout& h);
  /// The container's CDI spec (container_cdi.cpp): written when the backend's answer has OCI
  /// hooks, and then named in `spec`'s annotations; removed otherwise and with the handout.
  Status writeContainerCdi(const std::string& handoutId, ContainerSpec& spec);
  void removeContainerCdi(const std::string& handoutId);

  /// Whether `earlier` (a live handout of the IDs `claim` got) belongs to another container of
  /// the pod being admitted: the kubelet reuses an init container's devices for the containers
  /// after it, and hands IDs to another pod only once their holder is gone.
  static bool sameAdmission(const Handout& earlier, const Claim& claim);

  /// The pod annotations the backends asked for, over every handout `uid` holds. A pod
  /// carries one value per key: when two containers disagree the first one's is kept.
  Annotations podAnnotationsFor(const std::string& uid) const;

  /// Adds the backends' pod annotations to `patch`, never over a key the agent itself sets.
  void addPodAnnotations(k8s::MetadataPatch& patch, const std::string& uid) const;

  // ---- Which container an Allocate is for (container_match.cpp; answers in allocate.cpp) ----
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

  /// The pods the kubelet may be admitting a container of `resource` for (pod_tracker.h),
  /// from its PodResources view (asked once per call); nullopt when it does not answer.
  std::optional<KubeletAdmitting> admittingOf(const std::string& resource, KubeletView& kubelet, WatchWait& wait);

  /// When a wait for the watch gives way to reading the pods it has not shown (below).
  std::chrono::steady_clock::time_point readDirectlyAt(std::chrono::steady_clock::time_point start) const;
  /// Reads the pods the kubelet lists that the watch has not shown (`wait`'s) from the
  /// apiserver, one bounded GET each on the allocation client, and tracks them as the watch
  /// would: a watch that lags or lost its connection (issue 43) then costs no refusal. The
  /// answer is the apiserver's, never a guess; a pod it cannot read stays unknown. No GET
  /// starts past `deadline`.
  void readUnwatched(const WatchWait& wait, std::chrono::steady_clock::time_point deadline);
  /// Forgets a pod readUnwatched tracked once the watch has it (its events then keep it), or
  /// when the kubelet no longer lists it and the watch never showed it (deleted meanwhile:
  /// no delete event would ever come).
  void forgetUnwatched(const std::map<std::string, HeldDevices>& listed);

  /// A container the agent served that the kubelet admits again.
  struct Again {
    Handout handout;
    TrackedPod pod;
  };

  /// Whether the kubelet has lost its record of `h`'s devices: the holder pod is one of its
  /// active pods and none of its listed containers holds h's IDs (an init container is never
  /// listed). Without a PodResources API the pod's state alone decides.
  bool kubeletLost(const Handout& h, KubeletView& kubelet);

  /// Handouts of pods served in full that the kubelet may be admitting again: their pod
  /// known and running, what Allocate gave journalled.
  std::vector<Again> againCandidates(const std::vector<Handout>& handouts);

  /// An Allocate of exactly the IDs of a handout whose container the kubelet lost (its
  /// checkpoint missing or unreadable at a restart): answered again, not a new container.
  /// Of several handouts of the IDs (an init container's reused) the one answered again the
  /// fewest times, oldest first, as the kubelet admits containers in order.
  std::optional<Again> allocatedAgain(const std::string& resource, const std::vector<std::string>& ids,
                                      KubeletView& kubelet);

  /// The IDs of a container being admitted again, for GetPreferredAllocation: the oldest pod
  /// first, then its containers in the kubelet's order.
  std::optional<std::vector<std::string>> againHint(const std::string& resource,
                                                    const std::vector<std::string>& available,
                                                    const std::vector<std::string>& mustInclude, std::size_t size,
                                                    KubeletView& kubelet);

  unsigned answeredAgain(const std::string& id);

  /// The pod and container an Allocate is for: a waiting container whose assignment names
  /// these IDs; else a container the kubelet admits again; else a waiting container with
  /// the same request signature (tracker.claim). Waits for the watch only while it may
  /// still show the pod (WatchWait).
  std::variant<Claim, Again, ClaimError> match(const std::string& resource, const std::vector<std::string>& ids);

  /// The same answer as the first Allocate gave the container: the backend's limiter asked
  /// again with the same grant and key (its folder kept), which makes nothing new.
  std::variant<ContainerSpec, RpcError> answerAgain(const Again& again);

  std::variant<ContainerSpec, RpcError> allocateImpl(const std::string& resource, const std::vector<std::string>& ids);

  // ---- Writing pods' annotations (pod_records.cpp) ----
  /// Queues `patch` for pod `uid` (merged over what is still pending: a later value of a
  /// key wins) and returns at once. Writer threads send it, one write per pod at a time so the
  /// last wanted value lands last, retrying with backoff until the apiserver takes it or
  /// says the pod is gone. `onWritten` runs after it is on the apiserver.
  void writeLater(const std::string& uid, const std::string& ns, const std::string& name, k8s::MetadataPatch patch,
                  std::function<void()> onWritten = {});

  void writerLoop();

  /// Waits until nothing is left to write (or `timeout`); true when nothing is.
  bool flushWrites(std::chrono::milliseconds timeout);

  /// Marks a pod failed (bind phase, reason) and emits a Warning Event, in the background
  /// and retried: the apiserver may be the very thing that failed.
  void recordFailure(const std::string& uid, const std::string& reason, std::string ns = {}, std::string name = {});

  /// The backend's notes on the container (which component enforces its limits, ...) as
  /// Normal events on its pod, in the background and retried.
  void postNotices(const Claim& claim, const std::vector<PodNotice>& notices);

  void enqueue(std::function<bool()> task);

  void recorderLoop();

  // ---- Pods (pod_records.cpp) ----
  std::mutex hamiMu;  // hamiSeen: the informer's thread and an Allocate's direct read (readUnwatched)
  std::set<std::string> hamiSeen;  // uids of pods HAMi placed here, said once
  /// A pod HAMi placed on this node before the switch: HAMi-core limits it; said once.
  void noteHamiPod(const PodInfo& pod);

  void onPod(const boost::json::object& obj);

  /// Sidecars (spec.initContainers[].restartPolicy Always) and the init containers that exited
  /// with code 0 (status.initContainerStatuses[].state.terminated): the kubelet's PodResources
  /// never lists an init container, so the pod's status is what says one has ended.
  static void readInitContainers(const boost::json::object& obj, TrackedPod& p);

  /// The runtime's id of each container the pod's status reports (the watchdog matches
  /// processes to their container's slice by it).
  static void readContainerIds(const boost::json::object& obj, TrackedPod& p);

  void onPodDeleted(const boost::json::object& obj);

  // ---- Node (inventory.cpp) ----
  Status publishNode(bool remove);
  /// Renews (or creates) the node's Lease; false when there is none to renew (no namespace,
  /// or the apiserver refused: said once, and the Node's annotation is the heartbeat then).
  bool renewLease();
  void removeLease();
  std::string leaseProblem;  ///< the last reason the Lease could not be renewed (bgMu)

  /// `devices` with the foreign memory the watchdog last saw on each; under devMu.
  std::vector<Device> withForeign(const std::string& backend, std::vector<Device> devices) const;

  void nodeLoop();

  void markNodeDirty();

  /// A batch from `name`'s health feed: its devices' health, the kubelet's list, the Node.
  void onHealthEvents(const std::string& name, const std::vector<HealthEvent>& events);

  // ---- Maintenance (maintenance.cpp) ----
  /// What the kubelet's PodResources API says each pod's containers hold.
  struct Listing {
    bool asked = false;                                      ///< the socket is configured and exists
    std::optional<std::map<std::string, HeldDevices>> pods;  ///< unset when not asked or it failed
  };

  Listing listHeld(std::chrono::milliseconds timeout = std::chrono::seconds(2));
  std::string lastListProblem;  // guarded by bgMu

  /// Each handout is attributed to the pod and container the kubelet says hold its IDs.
  void attributeHandouts(const std::map<std::string, HeldDevices>& listed);

  /// The assignments PodResources says the known pods must carry. A handout matched to
  /// another pod tells the tracker that pod was served with IDs it never got (the match, which
  /// attributeHandouts leaves alone, so the order of the two does not matter).
  std::vector<PodOutcome> corrections(const std::map<std::string, HeldDevices>& listed);

  /// Writes the corrections, with the backends' pod annotations of the handouts each pod
  /// holds (so after attributeHandouts).
  void recordCorrections(const std::vector<PodOutcome>& outcomes);

  /// A handout goes once no container the kubelet reports holds its IDs and the pod it is
  /// attributed to is gone (or the kubelet reports that pod's container holding other IDs
  /// of the resource: the agent's guess was wrong and nobody holds these). Without an
  /// answer from a configured PodResources API nothing is removed (never on a guess); with
  /// no such API at all, the pod alone decides.
  void cleanup(const Listing& listing);

  /// One maintenance pass: handouts attributed and pods corrected from PodResources, then
  /// the cleanup when it is due.
  void maintain(bool withCleanup);

  void maintLoop();

  // ---- Metrics (agent_metrics.cpp) ----
  void collect();

  /// One info series per partition: those discovery serves as devices, and those the backends
  /// made for the containers holding handouts (reported in the pod annotations Allocate gave).
  void collectPartitions();
  std::set<std::string> unreadablePartitions;  // handout ids; guarded by bgMu

  /// The index of `p`'s parent among `devices`; a partition served in its parent's place
  /// carries the parent's index itself.
  static int parentIndex(const std::vector<Device>& devices, const Partition& p);

  /// Per-container usage the backends read from their vendor libraries (MLU, DCU: no
  /// libvgpu.so region), labelled like the regions' series.
  void collectBackendUsage();

  // ---- Watchdog (watchdog_wiring.cpp) ----
  void watchdogLoop();

  void watchdogPass();

  /// Reports a confirmed violation (log, metric, Warning event on the pod) and applies the
  /// configured action.
  void act(const Violation& v);

  /// POSTs an Eviction (policy/v1) for the pod, in the background and retried (a
  /// PodDisruptionBudget answers 429 until it allows it).
  void evict(const std::string& ns, const std::string& name);

  // ---- Rediscovery (inventory.cpp) ----
  /// One line per backend: how many devices it serves, or why none.
  void logServing();

  /// Starts the plugin servers and the health thread of a backend that now serves.
  Status startServing(const std::string& name);

  /// Asks every backend that serves nothing yet for its devices again: a driver loaded
  /// after the agent started (common after a reboot) is served from then on.
  void rediscover(const char* why);

  void rediscoverLoop();

  /// Ready: something serves devices and every plugin is registered, or no backend is
  /// enabled at all.
  std::pair<bool, std::string> readiness() const;

  /// Per-container usage from the one region each handout's backend created (region_metrics.h).
  void collectRegions();
};

}  // namespace vgpu::deviceplugin
