#pragma once
// Which pod the kubelet is admitting (DESIGN.md 6a). The kubelet's Allocate names device
// IDs, never the pod; this class keeps the pods bound to this node (fed by the agent's
// watch) and answers three questions without any I/O:
//  - GetPreferredAllocation: which IDs to steer the kubelet to (the assignment of the
//    oldest pod still waiting whose next container asks for that many devices);
//  - Allocate: which pod and container those IDs belong to (exact IDs first, else the
//    oldest pod whose next container's request signature matches) and which devices it
//    really gets (the devices the kubelet handed over, never more than a device holds);
//  - PodResources: what the assignment annotation must say, given the IDs each container
//    actually holds.
// Thread-safe; every method takes one short lock, so pods are matched concurrently and no
// pod waits for another's Allocate to finish.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "handout_store.h"
#include "vgpu/assignment.h"
#include "vgpu/device.h"
#include "vgpu/pod_info.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// A pod bound to this node, as the watch last saw it.
struct TrackedPod {
  PodInfo info;
  std::chrono::system_clock::time_point created{};  ///< metadata.creationTimestamp
  std::optional<Assignment> assignment;  ///< decoded once, at upsert
  std::string assignmentError;           ///< why the annotation did not decode
  std::string bindTime;                  ///< the bind-time annotation, kept for ordering
  std::string bindPhase;                 ///< the bind-phase annotation
  /// Init containers that exited with code 0 (status.initContainerStatuses): done for good,
  /// unless the pod's sandbox is made again.
  std::set<std::string> initDone;
  /// Init containers with restartPolicy Always (sidecars): they keep their devices.
  std::set<std::string> sidecars;
  /// Container (and init container) name -> the runtime's id of it, from the pod's status
  /// (containerID without its "<runtime>://"); absent until the kubelet reports it.
  std::map<std::string, std::string> containerIds;

  /// Whether `container` is an init container that ran to completion (a sidecar never is).
  bool initFinished(const std::string& container) const;
};

/// Why a claim failed, for the gRPC status and for whom to blame.
enum class ClaimFailure : std::uint8_t {
  kBadRequest,    ///< IDs that are not ours
  kNoPod,         ///< no waiting pod matches (yet: the watch may be behind)
  kPodUnusable,   ///< the matching pod cannot be served (no or bad assignment, no room)
};

struct ClaimError {
  ClaimFailure failure = ClaimFailure::kNoPod;
  std::string message;
  std::string podUid;  ///< the pod to mark failed (kPodUnusable), else empty
};

/// What the kubelet's PodResources API says about the admission under way: the pods it lists
/// ("namespace/name") with a container holding none of the resource asked for. The kubelet
/// adds a pod to the pods it lists before admitting it and admits one pod at a time, in the
/// order the pods reach it (not their creation order), so the container an Allocate or a
/// GetPreferredAllocation is for belongs to one of these.
struct KubeletAdmitting {
  std::set<std::string> pods;
  /// One of them (or another pod the kubelet lists) is not known to the watch yet: the
  /// admission may be for a pod this tracker cannot see.
  bool unknownPod = false;
};

/// One container of one pod, chosen for one Allocate call.
struct Claim {
  std::string podUid;
  std::string podNamespace;
  std::string podName;
  std::string container;
  int containerIndex = 0;
  std::string resource;
  std::string backend;
  std::vector<std::string> ids;      ///< the kubelet's IDs
  std::vector<DeviceGrant> devices;  ///< what the container really gets, in the kubelet's ID order
  bool exact = false;                ///< the IDs were the assignment's own
  Annotations podAnnotations;
};

/// What the agent records for a claim before answering the kubelet: the handout, held by
/// and matched to the claimed pod's container, with the devices it gets.
Handout handoutOf(const Claim& claim);

/// What to record on a pod once every container of it was allocated.
struct PodOutcome {
  std::string podUid;
  std::string podNamespace;
  std::string podName;
  Assignment assignment;  ///< the annotation's, with the devices actually given
  bool changed = false;   ///< differs from the annotation the scheduler wrote
  /// Set by a correction whose assignment no reader could decode (why): it is not written,
  /// the devices count as the pod's here all the same.
  std::string unrecordable;
};

class PodTracker {
 public:
  explicit PodTracker(std::string nodeName) : node_(std::move(nodeName)) {}

  /// The kubelet-visible resources this agent serves and the backend owning each.
  void setResources(std::map<std::string, std::string> resourceToBackend);
  /// A backend's devices on this node (for device indices and the room check).
  void setDevices(const std::string& backend, const std::vector<Device>& devices);

  /// Adds or replaces a pod (decoding its assignment annotation).
  void upsert(TrackedPod pod);
  void remove(const std::string& uid);
  std::vector<TrackedPod> pods() const;

  /// Preferred IDs for a container of `size` devices of `resource`, or empty for no hint.
  /// With `admitting`, only the pods the kubelet lists are candidates when one of them waits
  /// for such a container; when none does and it lists a pod the watch has not shown, the
  /// hint keeps off the IDs promised to waiting pods.
  std::vector<std::string> preferred(const std::string& resource, const std::vector<std::string>& available,
                                     const std::vector<std::string>& mustInclude, std::size_t size,
                                     const KubeletAdmitting* admitting = nullptr) const;
  /// Whether a pod in `admitting` waits for a container of `count` devices of `resource`.
  bool awaitsListed(const std::string& resource, std::size_t count, const KubeletAdmitting& admitting) const;

  /// Picks the pod and container for an Allocate of `ids`; reserves it until commit/abort.
  /// With `admitting`, only the pods the kubelet lists are candidates when one of them waits
  /// for a container of that many devices (whatever the pods' creation order).
  std::variant<Claim, ClaimError> claim(const std::string& resource, const std::vector<std::string>& ids,
                                        const KubeletAdmitting* admitting = nullptr);
  /// The container got its devices. Returns the pod's outcome when it was the pod's last.
  std::optional<PodOutcome> commit(const Claim& claim);
  /// The Allocate failed: the reservation is dropped; `failPod` keeps the pod from being
  /// matched again (the kubelet rejects a pod whose Allocate failed).
  void abort(const Claim& claim, bool failPod);
  /// Marks a pod failed so it is not matched again.
  void failPod(const std::string& uid);

  /// The pod, when the agent served it in full (it waits for no Allocate: this agent
  /// committed it, or its annotation says success) and it has not finished; else nullopt.
  std::optional<TrackedPod> servedPod(const std::string& uid) const;
  /// How many pods the watch has shown so far (a pod not seen before counts once).
  std::uint64_t podsSeen() const;
  /// A container on this node that HAMi placed (hami.io/*-devices-allocated, no vgpu
  /// assignment): HAMi-core limits it, the agent leaves it alone (docs/node-agent.md).
  struct HamiContainer {
    std::string podNamespace, pod, container, deviceId;
    std::uint64_t memoryMiB = 0;
    std::uint32_t cores = 0;
  };
  std::vector<HamiContainer> hamiContainers() const;

  /// Waits until the set of pods changes or `deadline`; false on timeout.
  bool waitForChange(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const;
  std::uint64_t generation() const;

  /// The assignment pod `uid` should carry given the IDs its containers hold
  /// (container -> resource -> ids, from PodResources), with the devices `handouts` says
  /// Allocate gave those IDs (also before an agent restart). A handout matched to another
  /// pod's container sets that one waiting again and is rematched to `uid`. nullopt when the
  /// annotation (or what this agent last wrote) already says so, the pod is unknown, an
  /// Allocate matched to it is in flight, or some of its containers hold nothing yet: the
  /// kubelet is still admitting it, so what it holds counts as served (its remaining
  /// containers are matched to it) and it is corrected once every container is listed.
  /// What no assignment can say (two slots of one device in one container) comes back
  /// once, with `unrecordable` set, to be logged rather than written.
  /// Takes the store's lock inside the tracker's: the store must never call back into the
  /// tracker.
  std::optional<PodOutcome> correction(
      const std::string& uid, const std::map<std::string, std::map<std::string, std::vector<std::string>>>& held,
      HandoutStore& handouts);
  /// A pod's assignment as this agent last recorded it (for tests and metrics).
  std::optional<Assignment> recorded(const std::string& uid) const;
  /// Containers this agent gave devices to: (pod uid, container) of pods still known.
  std::vector<std::pair<std::string, std::string>> liveContainers() const;
  /// Memory and compute given on each device: device id -> (MiB, compute).
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> usageByDevice() const;

 private:
  struct Progress {
    std::set<std::pair<std::string, std::string>> reserved;  // (container, resource)
    std::set<std::pair<std::string, std::string>> served;
    std::map<std::string, std::vector<DeviceGrant>> given;  // container -> devices (all backends)
    bool failed = false;
    bool done = false;
  };
  struct Candidate {
    const TrackedPod* pod;
    const ContainerResources* container;
    int index;
  };

  std::vector<const TrackedPod*> waitingLocked() const;
  /// The waiting pods an admission of a container of `count` devices of `resource` can be
  /// for: those `admitting` names when one of them waits for such a container, else all.
  std::vector<const TrackedPod*> candidatesLocked(const std::string& resource, std::size_t count,
                                                  const KubeletAdmitting* admitting, bool* listed = nullptr) const;
  bool waitingLocked(const TrackedPod& pod) const;
  std::optional<Candidate> nextContainerLocked(const TrackedPod& pod, const std::string& resource) const;
  bool podCompleteLocked(const TrackedPod& pod, const Progress& progress) const;
  /// Whether PodResources lists every container that asks for a served resource holding it
  /// (else the kubelet, which records each container's devices as its Allocate returns, is
  /// still admitting the pod).
  bool listedCompleteLocked(const TrackedPod& pod,
                            const std::map<std::string, std::map<std::string, std::vector<std::string>>>& held) const;
  std::optional<std::string> roomLocked(const std::string& uid, const std::vector<DeviceGrant>& devices) const;
  Assignment outcomeLocked(const TrackedPod& pod, const Progress& progress) const;
  void bumpLocked();

  std::string node_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::uint64_t generation_ = 0;
  std::uint64_t podsSeen_ = 0;
  std::map<std::string, std::string> resources_;  // resource -> backend
  std::map<std::string, Device> devices_;         // device id -> device
  std::map<std::string, TrackedPod> pods_;        // uid -> pod
  std::map<std::string, Progress> progress_;      // uid -> progress
  std::map<std::string, std::string> written_;    // uid -> assignment JSON this agent recorded
};

}  // namespace vgpu::deviceplugin
