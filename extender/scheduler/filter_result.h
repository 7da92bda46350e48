#pragma once
// The answer of one filter call (ExtenderFilterResult, k8s-protocols.md section 2): the
// candidates that fit and, per failing candidate, why in words. Each distinct reason is
// kept once: with thousands of nodes, most fail for the same few reasons.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "extender_args.h"

namespace vgpu::scheduler {

class FilterResult {
 public:
  using ReasonId = std::uint32_t;

  /// `candidates`: how many the request named (for reserving space).
  explicit FilterResult(std::size_t candidates);

  /// The id of `text`, added when new.
  ReasonId reason(std::string_view text);
  const std::string& reasonText(ReasonId id) const { return reasons_[id]; }

  /// Records the verdict on candidate `index` (its position in the request). Unresolvable:
  /// a problem preemption cannot fix (FailedAndUnresolvableNodes).
  void pass(std::uint32_t index) { passed_.push_back(index); }
  void fail(std::uint32_t index, ReasonId reason, bool unresolvable) {
    failed_.push_back({index, reason, unresolvable});
  }

  /// Fails the whole call (ExtenderFilterResult.Error): kube-scheduler then ignores the
  /// node verdicts and retries the pod after its backoff.
  void setError(std::string error) { error_ = std::move(error); }

  std::size_t passedCount() const { return passed_.size(); }
  std::size_t failedCount() const { return failed_.size(); }

  /// "0/N nodes can take the pod: 3000 <reason>, 2000 <reason>" (the commonest first, at
  /// most six), for the pod's events.
  std::string summary(std::size_t candidates) const;

  /// The JSON answer, in the shape of the request: NodeNames when it was nodeCacheCapable,
  /// else Nodes (the fitting Node objects as received). NodeNames is an array even when
  /// empty: null would be read as "no opinion".
  /// Reasons and the error go through printfSafe(): kube-scheduler formats them.
  std::string toJson(const ExtenderArgs& args) const;

 private:
  void appendPassedNames(std::string& out, const ExtenderArgs& args) const;
  struct Failure {
    std::uint32_t index;
    ReasonId reason;
    bool unresolvable;
  };
  std::vector<std::uint32_t> passed_;
  std::vector<Failure> failed_;
  std::deque<std::string> reasons_;  // stable: ids_ holds views into it
  std::unordered_map<std::string_view, ReasonId> ids_;
  std::string error_;
};

}  // namespace vgpu::scheduler
