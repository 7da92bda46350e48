#pragma once
// What the real-cluster scenarios share: pods as the tests write them, waits on the
// apiserver, the kubelet's part for a stream of pods (Admitter), kube-scheduler's /filter
// call made directly, and cleaning up a scenario's pods and nodes.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "real_cluster.h"

namespace vgpu::realk8s {

/// The node label each scenario puts on its own vgpu nodes and selects in its pods, so
/// that the scenarios sharing one cluster never place pods on each other's nodes.
inline constexpr const char* kGroupLabel = "realk8s.vgpu.io/group";

/// The chart's sim devices, eight per node (80 GiB, 100 compute units, 4 shares each: the
/// chart's splitCount), for every scenario of the suite.
std::string suiteChartValues();
inline constexpr std::uint64_t kDeviceMemoryMiB = 81920;
inline constexpr int kDevicesPerNode = 8;

std::string str(const boost::json::value* v);
const boost::json::value* at(const boost::json::object& obj, std::initializer_list<std::string_view> path);

struct PodSpec {
  std::string name;
  std::map<std::string, std::string> limits{};  ///< of the one container "main"
  std::string group{};                          ///< nodeSelector kGroupLabel=group when set
  std::map<std::string, std::string> labels{};
  std::map<std::string, std::string> annotations{};
  std::string schedulerName{};
  std::string nodeName{};
  bool privileged = false;
  /// An init container "init" with these limits, when not empty.
  std::map<std::string, std::string> initLimits{};
  std::string priorityClassName{};
};

/// limits of `count` sim devices with `memoryMiB` and `cores` percent each.
std::map<std::string, std::string> simLimits(int count, std::uint64_t memoryMiB, int cores);
boost::json::object podObject(const PodSpec& spec);

/// POSTs the pod (201 expected); the error carries the reply.
Status createPod(RealCluster& c, const std::string& ns, const PodSpec& spec);
/// The pod, once `pred` holds for it (polled); nullopt after `timeout`.
std::optional<boost::json::object> waitForPod(RealCluster& c, const std::string& ns, const std::string& name,
                                              const std::function<bool(const boost::json::object&)>& pred,
                                              std::chrono::milliseconds timeout = kWait);
std::string nodeOf(const boost::json::object& pod);
/// PodScheduled=False with reason Unschedulable: kube-scheduler tried and found no node.
bool unschedulable(const boost::json::object& pod);
/// The pods of `ns` (items of a list; `fieldSelector` as the API takes it, URL-encoded).
Result<std::vector<boost::json::object>> listPods(RealCluster& c, const std::string& ns,
                                                  const std::string& fieldSelector = "");
/// The pod's events as `kubectl describe pod` finds them (core/v1, by involvedObject).
std::vector<boost::json::object> podEvents(RealCluster& c, const std::string& ns, const std::string& name);
/// A ResourceClaim's `spec` (resource.k8s.io/v1) with one request "gpu": one device of
/// `deviceClass` consuming `memory` and `cores` of its capacity ("6000Mi", "20").
boost::json::object draClaimSpec(const std::string& deviceClass, const std::string& memory, const std::string& cores);

/// kube-scheduler's /filter call for `pod` on `nodes` (nodeCacheCapable): reason per
/// refused node, and the nodes that fit.
struct FilterVerdict {
  std::vector<std::string> fitting;
  std::map<std::string, std::string> refused;
  std::string error;
};
Result<FilterVerdict> filterDirect(RealCluster& c, const boost::json::object& pod,
                                   const std::vector<std::string>& nodes);

/// Deletes every pod of `ns` at once (deletecollection, no grace: no kubelet confirms) and
/// waits until they are gone; then takes the vgpu nodes away.
Status cleanUp(RealCluster& c, const std::string& ns, const std::vector<std::string>& vgpuNodes = {});

/// The kubelet's part for the pods of one namespace: a watch on the pods bound there, and
/// per node a worker that admits them in the order they were bound (the kubelet double's
/// GetPreferredAllocation and Allocate against the node's vgpu-device-plugin), as a kubelet
/// admits the pods the apiserver shows it. Stops (and joins) in the destructor.
class Admitter {
 public:
  Admitter(RealCluster& c, std::string ns);
  ~Admitter();
  Admitter(const Admitter&) = delete;
  Admitter& operator=(const Admitter&) = delete;
  void stop();

  std::size_t admitted() const;
  /// "<ns/name> on <node>: <why>" for each pod the kubelet double refused.
  std::vector<std::string> refusals() const;
  /// Every pod that `listPods` shows bound now has been through its kubelet.
  bool caughtUp();
  /// Waits until caughtUp() (polled).
  bool waitCaughtUp(std::chrono::milliseconds timeout = kWait);
  /// What vgpu-scheduler decided, one view per bind: the pod's assignment in the first
  /// version that showed it bound (the Binding sets spec.nodeName and the annotations at
  /// once), with the assignments the other pods of that node held in the versions the watch
  /// had shown before it (the agent's corrections to what the kubelet handed out
  /// included; deleted pods left out). A bind that gave a share another pod still held,
  /// or more than a device has, shows in its view even where the agent papered it over.
  std::vector<std::vector<e2e::AuditPod>> bindViews() const;

 private:
  void watchLoop();
  void offer(const boost::json::object& pod);
  void forget(const boost::json::object& pod);
  void work(const std::string& node);
  bool stopping();

  RealCluster& c_;
  std::string ns_;
  ApiClient api_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::set<std::string> seen_;     // uids handed to a worker
  std::set<std::string> through_;  // uids admitted or refused
  std::map<std::string, e2e::AuditPod> current_;             // uid -> its latest version's assignment
  std::vector<std::vector<e2e::AuditPod>> bindViews_;        // per bind: that node's pods then
  std::map<std::string, std::string> history_;  // uid -> its last assignment and bind phase
  std::map<std::string, std::deque<boost::json::object>> queues_;
  std::map<std::string, std::thread> workers_;
  std::size_t admitted_ = 0;
  std::vector<std::string> refusals_;
  std::thread watcher_;
};

}  // namespace vgpu::realk8s
