#pragma once
// What filter concluded about a node for pods of one request shape, kept while the node
// is unchanged (NodeEntry::generation). kube-scheduler retries a pod nothing fits over and
// over, and pods of one workload ask alike: between two such requests most of thousands
// of nodes have not changed, and their verdict costs a compare instead of the placement
// engine's walk over their devices.
//
// A verdict holds only what the node's state decides: the pod's requests and policies on
// one side (its shape, not its name), the node's inventory and usage on the other. What
// changes without a new generation (heartbeats, room held for nominated pods, namespace
// quotas, nodes the cache does not know) is judged by the caller on every request.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster_cache.h"
#include "vgpu/placement.h"
#include "vgpu/pod_request.h"

namespace vgpu::scheduler {

/// Whether two pods ask the same of every node: the same containers (init or not, in
/// order) with the same device requests, and the same policies. Names do not count.
bool sameShape(const PodRequest& a, const PodRequest& b);

/// The verdicts and refusal categories of one request shape. Not thread-safe: one request
/// uses it at a time (FilterMemo hands it out).
class ShapeMemo {
 public:
  explicit ShapeMemo(const PodRequest& shape) : shape_(shape) {}

  struct Verdict {
    std::uint64_t generation = 0;  ///< the node's when judged; 0: none
    double distance = 0;           ///< PlacementEngine::distance of a refusal
    std::uint16_t category = 0;    ///< a refusal's, an index for categoryText()
    bool fits = false;
  };

  const PodRequest& shape() const { return shape_; }

  /// The verdict on `node` if it was judged in its present state, else null.
  const Verdict* find(const NodeEntry& node) const {
    if (node.slot >= verdicts_.size()) return nullptr;
    const Verdict& v = verdicts_[node.slot];
    return v.generation == node.generation && v.generation != 0 ? &v : nullptr;
  }
  /// Keeps `verdict`, judged on `node` as it is now.
  void store(const NodeEntry& node, Verdict verdict) {
    if (node.generation == 0) return;  // not a cached node
    if (node.slot >= verdicts_.size()) grow(node.slot);
    verdict.generation = node.generation;
    verdicts_[node.slot] = verdict;
  }

  /// The category of refusal `eval` in this shape: nodes refused alike share one text
  /// (PlacementEngine::category), made by `text(eval)` the first time its kind is seen.
  template <class Text>
  std::uint16_t category(const NodeEvaluation& eval, Text&& text) {
    const CategoryKey key = categoryKey(eval.refusal);
    for (std::size_t i = 0; i < categories_.size(); ++i)  // a handful: a scan beats hashing
      if (categories_[i].first == key) return static_cast<std::uint16_t>(i);
    categories_.emplace_back(key, text(eval));
    return static_cast<std::uint16_t>(categories_.size() - 1);
  }
  const std::string& categoryText(std::uint16_t category) const { return categories_[category].second; }

 private:
  /// What PlacementEngine::category reads of a refusal.
  struct CategoryKey {
    NodeRefusal::Kind kind;
    std::int16_t container, request;
    std::int32_t reason;
    std::string_view words;  ///< categorizeCoreReason of the dominant example: its rules, not a copy
    std::uint16_t devices;   ///< devicesConsidered: fewer than asked is a category of its own
    bool operator==(const CategoryKey&) const = default;
  };
  static CategoryKey categoryKey(const NodeRefusal& r);
  void grow(std::uint32_t slot);  // room for `slot` and as many more

  PodRequest shape_;
  std::vector<Verdict> verdicts_;  // by NodeEntry::slot
  std::vector<std::pair<CategoryKey, std::string>> categories_;
};

/// The shapes filter saw last, each lent to one request at a time. Thread-safe.
class FilterMemo {
 public:
  /// `shapes`: how many shapes are kept (the least recently used goes first); 0 keeps none.
  explicit FilterMemo(std::size_t shapes = 16) : capacity_(shapes) {}

  /// The memo of `pod`'s shape, for the caller alone until it is given back with keep();
  /// an empty one when none is kept or another request holds it.
  std::unique_ptr<ShapeMemo> take(const PodRequest& pod);
  /// Gives back what take() lent (it replaces an older memo of the same shape).
  void keep(std::unique_ptr<ShapeMemo> memo);

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ShapeMemo>> kept_;  // the most recently used last
};

}  // namespace vgpu::scheduler
