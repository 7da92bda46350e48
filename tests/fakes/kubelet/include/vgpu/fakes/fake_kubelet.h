#pragma once
// A kubelet double for the node agent's tests: the kubelet's side of the device plugin API
// v1beta1 (the Registration service on <dir>/kubelet.sock, a DevicePlugin client per
// registered resource that follows ListAndWatch) and the PodResources v1 service, over unix
// sockets with the real protocols. It admits pods one at a time in the order it is given
// them, choosing device IDs as the kubelet's device manager does (pkg/kubelet/cm/
// devicemanager, v1.34-v1.37): init containers first, the devices an init container got
// reused by the containers after it, GetPreferredAllocation when the plugin offers it, no
// Allocate for a container whose devices it already recorded. It can restart the way the
// kubelet does (every socket in the directory deleted, its own recreated), with its
// checkpoint or having lost it. No gRPC type appears here.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vgpu/container_spec.h"
#include "vgpu/pod_info.h"
#include "vgpu/result.h"

namespace vgpu::fakes {

struct FakeKubeletOptions {
  std::string devicePluginDir;     ///< kubelet.sock is created here; plugins put theirs here
  std::string podResourcesSocket;  ///< full path of the PodResources socket; empty = not served
  /// Never ask GetPreferredAllocation; take the lowest available IDs (for a test).
  bool ignorePreferred = false;
};

/// One container of a pod to admit: its extended-resource limits.
struct KubeletContainer {
  std::string name;
  bool init = false;
  std::map<std::string, std::int64_t> limits;
  /// An init container with restartPolicy Always (a sidecar): it keeps its devices, which
  /// the containers after it do not reuse, and PodResources lists it.
  bool restartAlways = false;
};

struct KubeletPod {
  std::string ns = "default";
  std::string name;
  std::string uid;
  std::vector<KubeletContainer> containers;  ///< init containers first, as the kubelet orders them
};

/// The pod as a kubelet admits it, from the parsed pod: its containers (init containers
/// first) with their extended-resource limits.
inline KubeletPod kubeletPodOf(const PodInfo& info) {
  KubeletPod kp;
  kp.ns = info.podNamespace;
  kp.name = info.name;
  kp.uid = info.uid;
  for (const auto& c : info.containers) kp.containers.push_back({c.name, c.init, c.limits});
  return kp;
}

/// What one container got for one resource.
struct ContainerAllocation {
  std::string container;
  std::string resource;
  std::vector<std::string> deviceIds;
  ContainerSpec response;  ///< the plugin's ContainerAllocateResponse (CDI devices below)
  std::vector<std::string> cdiDevices;  ///< its cdi_devices, fully qualified names
  /// False when the kubelet had the container's devices recorded (its checkpoint) and
  /// answered from there without calling Allocate.
  bool allocateCalled = false;
  std::chrono::microseconds allocateTime{0};  ///< how long the Allocate RPC took
};

struct AdmitResult {
  bool admitted = false;
  std::string error;  ///< the plugin's gRPC error, as the kubelet would report it
  std::vector<ContainerAllocation> allocations;
};

/// A plugin's registration as the kubelet recorded it.
struct PluginRegistration {
  std::string resource;
  std::string endpoint;
  bool preStartRequired = false;
  bool preferredAllocationAvailable = false;
};

/// The last device list a plugin sent.
struct KubeletDevice {
  std::string id;
  bool healthy = false;
  std::vector<std::int64_t> numaNodes;
};

class FakeKubelet {
 public:
  /// Serves Registration (and PodResources when asked). Fails if a socket cannot be made.
  static Result<std::unique_ptr<FakeKubelet>> start(FakeKubeletOptions options);
  ~FakeKubelet();  ///< stop()
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  /// Stops every server and stream; safe to call twice.
  void stop();

  /// Waits until `resource` is registered and its plugin sent a list satisfying `pred`
  /// (any list when `pred` is empty).
  bool waitForDevices(const std::string& resource, std::chrono::milliseconds timeout,
                      const std::function<bool(const std::vector<KubeletDevice>&)>& pred = {});
  std::vector<KubeletDevice> devices(const std::string& resource) const;
  /// Every successful Register call so far, in order.
  std::vector<PluginRegistration> registrations() const;
  /// Device lists received for `resource` since start.
  std::size_t listsReceived(const std::string& resource) const;

  /// Admits a pod as the kubelet's resource admit handler does: for each container (init
  /// first, in the order given) and each registered resource it requests: the devices
  /// recorded for it already (an admitted pod admitted again, e.g. after a restart with the
  /// checkpoint) without any RPC; else IDs from those the pod's earlier init containers got
  /// (the kubelet's devicesToReuse; not a sidecar's), then GetPreferredAllocation
  /// (must_include = the reused ones), then the lowest; Allocate with one container request;
  /// PreStartContainer when required. A failure rejects the pod and frees what it got.
  /// Admissions are serialized, as in the kubelet.
  AdmitResult admit(const KubeletPod& pod);
  /// While off, PodResources List and Get answer UNAVAILABLE (a kubelet too busy to answer in
  /// time): the plugin must do without the kubelet's view.
  void setPodResourcesAnswering(bool on);
  /// The pod is gone (or finished): its devices become available again and PodResources
  /// stops listing it.
  void removePod(const std::string& uid);
  // PodResources List/Get name every admitted pod with its app containers and sidecars
  // (init containers left out, as the kubelet's server does), each with what it holds.
  /// Device IDs held by admitted pods: uid -> container -> resource -> ids.
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>> allocations() const;

  /// What a kubelet restart looks like to a plugin: the Registration server goes away,
  /// every unix socket in the directory is deleted, plugin streams end, kubelet.sock is
  /// recreated. Admitted pods keep their devices (the kubelet's checkpoint), unless
  /// `checkpointLost` (kubelet_internal_checkpoint missing or unreadable at start): then the
  /// pods are still active (PodResources lists their containers holding nothing) and admitting
  /// them again allocates their devices anew, with Allocate calls.
  Status restart(bool checkpointLost = false);

  struct Impl;

 private:
  explicit FakeKubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::fakes
