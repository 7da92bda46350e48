// Judges a pod on every node of a snapshot with the scheduler's engine, categories and
// filter summary, so kubectl-vgpu's words are vgpu-scheduler's.
#include "node_verdicts.h"

#include <limits>

#include "filter_result.h"
#include "vgpu/k8s/object.h"

namespace vgpu::kubectl {

Snapshot takeSnapshot(const LiveState& live) {
  Snapshot snapshot;
  const auto timeout = live.config.scheduler.heartbeatTimeout;
  live.cache->read([&](const scheduler::ClusterCache::Lookup& lookup, std::chrono::system_clock::time_point now) {
    for (const auto& object : live.nodes) {
      Snapshot::Node node;
      node.name = std::string(k8s::name(object));
      if (const scheduler::NodeEntry* entry = lookup(node.name)) {
        node.state = entry->state;
        if (!scheduler::nodeUsable(*entry, now, timeout)) {
          node.unusableCategory = scheduler::nodeUnusableCategory(*entry, now, timeout);
          node.unusableReason = scheduler::nodeUnusableReason(*entry, now, timeout);
        }
      }
      snapshot.nodes.push_back(std::move(node));
    }
  });
  return snapshot;
}

Verdicts judge(const PlacementEngine& engine, const PreparedPod& pod, const Snapshot& snapshot) {
  Verdicts out;
  scheduler::FilterResult result(snapshot.nodes.size());
  constexpr double kNever = std::numeric_limits<double>::infinity();  // waiting does not help
  for (const auto& node : snapshot.nodes) {
    NodeVerdict v;
    v.node = node.name;
    v.distance = kNever;
    if (!node.state) {
      v.category = scheduler::kUnknownNodeCategory;
    } else if (!node.unusableCategory.empty()) {
      v.category = node.unusableCategory;
      v.detail = node.unusableReason;
    } else {
      const NodeEvaluation eval = engine.check(pod, *node.state);
      v.fits = eval.fits;
      if (!eval.fits) {
        v.category = engine.category(pod, eval);
        v.detail = engine.explain(pod, *node.state, eval);
        v.distance = engine.distance(pod, eval);
      }
    }
    const auto index = static_cast<std::uint32_t>(out.nodes.size());
    if (v.fits) result.pass(index);
    else result.fail(index, result.reason(v.category), false);
    out.nodes.push_back(std::move(v));
  }
  for (const auto& v : out.nodes)
    if (!v.fits && v.distance < kNever && (!out.closest || v.distance < out.closest->distance)) out.closest = &v;
  out.summary = result.summary(out.nodes.size());
  return out;
}

}  // namespace vgpu::kubectl
