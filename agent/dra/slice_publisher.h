#pragma once
// Keeps one driver's ResourceSlice pool on the apiserver equal to the node's devices: a
// new generation written whenever the devices change, slices of an older, larger pool
// removed, and written again when someone (the kubelet at its start) deleted them. Reports
// whether the apiserver kept the sharing fields and the devices' taints. Not thread-safe: one publisher thread.

#include <string>
#include <vector>

#include "vgpu/dra/resource_slices.h"
#include "vgpu/k8s/client.h"

namespace vgpu::dra {

inline constexpr k8s::ResourceType kResourceSlices{"/apis/resource.k8s.io/v1", "resourceslices", "ResourceSlice",
                                                   false};
inline constexpr k8s::ResourceType kResourceClaims{"/apis/resource.k8s.io/v1", "resourceclaims", "ResourceClaim",
                                                   true};

struct PublishOutcome {
  bool written = false;  ///< a new generation went out
  std::int64_t generation = 0;
  std::size_t slices = 0;
  /// From droppedSharingFields over every slice written: the apiserver turned these
  /// devices exclusive (DRAConsumableCapacity off). Empty when kept or nothing written.
  std::vector<std::string> dropped;
  /// From droppedTaints over every slice written: devices whose taints the apiserver
  /// dropped (DRADeviceTaints off).
  std::vector<std::string> droppedTaints;
};

class SlicePublisher {
 public:
  /// `params` without generation: the publisher owns it.
  SlicePublisher(k8s::Client& client, SliceParams params);

  /// Writes `devices` as a new generation when they differ from the last ones written or
  /// the pool's first slice is gone from the apiserver; else does nothing. Errors: the
  /// apiserver refused or could not be reached (its words; the next call tries again).
  Result<PublishOutcome> publish(const std::vector<DraDevice>& devices);
  /// Deletes the pool's slices (at shutdown, so the scheduler stops allocating here).
  Status withdraw();
  std::int64_t generation() const { return params_.generation; }

 private:
  Result<PublishOutcome> write(const std::vector<DraDevice>& devices);
  k8s::Client& client_;
  SliceParams params_;
  bool started_ = false;
  std::size_t written_ = 0;  ///< slices of the pool on the apiserver (as far as we know)
  std::vector<DraDevice> last_;
};

}  // namespace vgpu::dra
