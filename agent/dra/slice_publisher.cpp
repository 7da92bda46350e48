// Keeps one driver's ResourceSlice pool equal to the node's devices (slice_publisher.h),
// built by vgpu_dra_slices (core/src/dra) and written again when deleted.

#include "slice_publisher.h"

#include <boost/json.hpp>

namespace vgpu::dra {
namespace json = boost::json;

SlicePublisher::SlicePublisher(k8s::Client& client, SliceParams params) : client_(client), params_(std::move(params)) {}

Result<PublishOutcome> SlicePublisher::publish(const std::vector<DraDevice>& devices) {
  if (!started_) {
    // A restarted driver continues the pool's generations, so readers never take our new
    // slices for older ones.
    auto first = client_.get(kResourceSlices, "", sliceName(params_, 0));
    if (first.ok()) {
      const auto* pool = k8s::findPath(*first, {"spec", "pool"});
      if (pool && pool->is_object()) {
        if (const auto* g = pool->get_object().if_contains("generation"); g && g->is_int64())
          params_.generation = g->get_int64();
        if (const auto* n = pool->get_object().if_contains("resourceSliceCount"); n && n->is_int64())
          written_ = static_cast<std::size_t>(std::max<std::int64_t>(n->get_int64(), 0));
      }
    } else if (!first.error().isNotFound()) {
      return makeError("reading ResourceSlice " + sliceName(params_, 0) + ": " + first.error().describe());
    }
    started_ = true;
    return write(devices);
  }
  if (devices == last_) {
    auto first = client_.get(kResourceSlices, "", sliceName(params_, 0));
    if (first.ok()) return PublishOutcome{false, params_.generation, written_, {}, {}};
    if (!first.error().isNotFound())
      return makeError("reading ResourceSlice " + sliceName(params_, 0) + ": " + first.error().describe());
  }
  return write(devices);
}

Result<PublishOutcome> SlicePublisher::write(const std::vector<DraDevice>& devices) {
  SliceParams next = params_;
  ++next.generation;
  PublishOutcome out;
  const auto slices = buildResourceSlices(next, devices);
  for (const auto& slice : slices) {
    const std::string name(slice.at("metadata").at("name").as_string());
    auto stored = client_.create(kResourceSlices, "", slice);
    if (!stored.ok() && stored.error().isConflict()) {
      json::object patch{{"metadata", slice.at("metadata")}, {"spec", slice.at("spec")}};
      stored = client_.mergePatch(kResourceSlices, "", name, patch);
    }
    if (!stored.ok()) return makeError("writing ResourceSlice " + name + ": " + stored.error().describe());
    for (auto& d : droppedSharingFields(slice, *stored)) out.dropped.push_back(std::move(d));
    for (auto& d : droppedTaints(slice, *stored)) out.droppedTaints.push_back(std::move(d));
  }
  // Slices of the older, larger pool: readers would see a pool with too many slices.
  for (std::size_t i = slices.size(); i < written_; ++i) {
    auto gone = client_.remove(kResourceSlices, "", sliceName(next, i));
    if (!gone.ok() && !gone.error().isNotFound())
      return makeError("removing ResourceSlice " + sliceName(next, i) + ": " + gone.error().describe());
  }
  params_ = next;
  written_ = slices.size();
  last_ = devices;
  out.written = true;
  out.generation = params_.generation;
  out.slices = slices.size();
  return out;
}

Status SlicePublisher::withdraw() {
  for (std::size_t i = 0; i < std::max<std::size_t>(written_, 1); ++i) {
    auto gone = client_.remove(kResourceSlices, "", sliceName(params_, i));
    if (!gone.ok() && !gone.error().isNotFound())
      return makeError("removing ResourceSlice " + sliceName(params_, i) + ": " + gone.error().describe());
  }
  written_ = 0;
  last_.clear();
  return {};
}

}  // namespace vgpu::dra
