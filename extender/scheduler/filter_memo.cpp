#include "filter_memo.h"

#include <algorithm>

#include "vgpu/allocator.h"

namespace vgpu::scheduler {

bool sameShape(const PodRequest& a, const PodRequest& b) {
  if (a.nodePolicy != b.nodePolicy || a.devicePolicy != b.devicePolicy || !(a.deviceChoice == b.deviceChoice) ||
      a.containers.size() != b.containers.size())
    return false;
  for (std::size_t i = 0; i < a.containers.size(); ++i)
    if (a.containers[i].init != b.containers[i].init || a.containers[i].requests != b.containers[i].requests)
      return false;
  return true;
}

void ShapeMemo::grow(std::uint32_t slot) { verdicts_.resize(std::max<std::size_t>(2 * (slot + std::size_t{1}), 1024)); }

ShapeMemo::CategoryKey ShapeMemo::categoryKey(const NodeRefusal& r) {
  CategoryKey key{r.kind, r.container, r.request, 0, {}, r.devicesConsidered};
  if (const auto* top = r.dominant()) {
    key.reason = top->example.reason;
    key.words = categorizeCoreReason(top->example);  // the same words, the same HAMi name
  }
  return key;
}

std::unique_ptr<ShapeMemo> FilterMemo::take(const PodRequest& pod) {
  {
    std::lock_guard lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (sameShape((*it)->shape(), pod)) {
        std::unique_ptr<ShapeMemo> memo = std::move(*it);
        kept_.erase(it);
        return memo;
      }
  }
  PodRequest shape = pod;  // names are not part of a shape: kept empty
  shape.podNamespace.clear();
  shape.podName.clear();
  return std::make_unique<ShapeMemo>(shape);
}

void FilterMemo::keep(std::unique_ptr<ShapeMemo> memo) {
  if (!memo || capacity_ == 0) return;
  std::lock_guard lock(mu_);
  std::erase_if(kept_, [&](const std::unique_ptr<ShapeMemo>& m) { return sameShape(m->shape(), memo->shape()); });
  if (kept_.size() == capacity_) kept_.erase(kept_.begin());
  kept_.push_back(std::move(memo));
}

}  // namespace vgpu::scheduler
