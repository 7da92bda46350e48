#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vgpu/assignment.h"
#include "vgpu/c_views.h"
#include "vgpu/config.h"
#include "vgpu/node_state.h"
#include "vgpu/pod_request.h"
#include "vgpu/result.h"

namespace vgpu {

/// A PodRequest with its C views and allocators resolved, ready to evaluate many nodes.
class PreparedPod {
 public:
  struct Request {
    std::unique_ptr<RequestRecord> record;
    const Allocator* allocator = nullptr;
  };
  struct Container {
    std::string name;
    bool init = false;
    std::vector<Request> requests;
  };

  /// Errors: a request names a backend that is not in `backends`.
  static Result<PreparedPod> prepare(const PodRequest& pod, const BackendSet& backends);

  const PodRequest& pod() const { return pod_; }
  const std::vector<Container>& containers() const { return containers_; }
  /// The pod's only device request, or null when it has none or several.
  const Request* soleRequest() const {
    return soleContainer_ >= 0 ? &containers_[static_cast<std::size_t>(soleContainer_)].requests.front() : nullptr;
  }
  /// The container of soleRequest().
  std::int16_t soleRequestContainer() const { return soleContainer_; }

 private:
  PodRequest pod_;
  std::vector<Container> containers_;
  std::int16_t soleContainer_ = -1;  // the container of the only request; -1: none or several
};

/// Why a node cannot take a pod, compact enough to keep for thousands of nodes; words
/// come from PlacementEngine::explain.
struct NodeRefusal {
  static constexpr size_t kMaxReasons = 4;
  struct ReasonCount {
    vgpu_fit_result example{};  ///< The refusal with the most `available`, for the numbers.
    std::uint16_t devices = 0;  ///< How many devices gave this reason.
  };
  enum class Kind : std::uint8_t { kNone, kUnavailable, kNoDevices, kTooFewDevices };
  Kind kind = Kind::kNone;
  std::int16_t container = -1;  ///< The first container that did not fit.
  std::int16_t request = -1;    ///< Its request (index in the container's requests).
  std::uint16_t devicesConsidered = 0;
  std::uint16_t devicesFitting = 0;
  std::uint8_t reasonCount = 0;
  std::array<ReasonCount, kMaxReasons> reasons{};

  /// The reason most devices gave (ties: the first seen), or null when none was noted.
  const ReasonCount* dominant() const {
    const ReasonCount* top = nullptr;
    for (std::uint8_t i = 0; i < reasonCount; ++i)
      if (!top || reasons[i].devices > top->devices) top = &reasons[i];
    return top;
  }
};

/// The outcome of placing a pod on one node.
struct NodeEvaluation {
  bool fits = false;
  double score = 0;  ///< Higher is better under the pod's node policy; 0..1.
  NodeRefusal refusal;
};

/// The chosen node (if any) with the assignment, and the evaluation of every node.
struct Placement {
  std::optional<size_t> chosen;  ///< Index into the nodes given to place().
  Assignment assignment;
  std::vector<NodeEvaluation> evaluations;
};

/// Vendor-neutral placement across nodes and devices: node and device policies,
/// multi-device requests, NUMA binding, exclusive use, init containers. Per-device
/// decisions go through each backend's Allocator::fit. Thread-safe (const).
class PlacementEngine {
 public:
  explicit PlacementEngine(SchedulerConfig config = {}) : config_(config) {}

  /// Whether the pod fits `node` and how well, without building the assignment.
  NodeEvaluation evaluate(const PreparedPod& pod, const NodeState& node) const;

  /// evaluate() for filtering many nodes: the same fits and refusal, but no score (0), and
  /// a pod with one device request stops at the first devices that fit.
  NodeEvaluation check(const PreparedPod& pod, const NodeState& node) const;

  /// The devices each container gets on `node`; the error is the refusal in words.
  Result<Assignment> assign(const PreparedPod& pod, const NodeState& node) const;

  /// Evaluates every node and picks the best (ties: the earlier node).
  Placement place(const PreparedPod& pod, std::span<const NodeState> nodes) const;

  /// The refusal in words a user can act on, e.g.
  /// `container "train" needs 1 nvidia device: 8/8 devices: not enough free memory (...)`.
  std::string explain(const PreparedPod& pod, const NodeState& node, const NodeEvaluation& evaluation) const;

  /// The refusal in a few words without numbers, e.g. `vgpu: not enough free device
  /// memory`: the reason most of the node's devices gave. Nodes refusing for the same
  /// reason get the same text, so kube-scheduler's summary (it counts identical node
  /// messages) stays a handful of lines at any cluster size; explain() has the numbers.
  /// An unavailable node gets a generic text (the caller knows why it is unavailable).
  std::string category(const PreparedPod& pod, const NodeEvaluation& evaluation) const;

  /// How far a refused node is from taking the pod; lower is closer. Devices missing count
  /// first, then the smallest shortfall among the refused devices: a memory or compute
  /// gap as a fraction of what is asked, a share or exclusive use that a leaving pod would
  /// free, then what waiting does not fix (model, id, health, size). For naming the few
  /// nodes closest to fitting.
  double distance(const PreparedPod& pod, const NodeEvaluation& evaluation) const;

  NodePolicy nodePolicyFor(const PreparedPod& pod) const;
  DevicePolicy devicePolicyFor(const PreparedPod& pod) const;

 private:
  SchedulerConfig config_;
};

}  // namespace vgpu
