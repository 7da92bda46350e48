#pragma once
// Per-container usage from libvgpu.so's shared regions, for /metrics. The agent reads one file
// per handout: the region the backend's limiter created and named (Handout::region, by path
// in the handout's folder and inode). Nothing else a tenant writes into the folder is read,
// so planted region copies add no series and no scrape time (docs/security.md).

#include <filesystem>
#include <memory>
#include <vector>

#include "handout_store.h"
#include "hami_metrics.h"
#include "vgpu/container_spec.h"
#include "vgpu/metrics/registry.h"
#include "vgpu/result.h"
#include "vgpu/shared_region.h"

namespace vgpu::deviceplugin {

struct RegionCopyFree {
  void operator()(const vgpu_region* r) const { vgpu_region_close(r); }
};
/// A private copy of a region (vgpu_region_open_readonly), freed with it.
using RegionCopy = std::unique_ptr<const vgpu_region, RegionCopyFree>;

/// A copy of the region `region` names inside `folder`: each folder on the way and the file
/// are opened without following links and must be the agent's own, and the file must still be
/// the inode the limiter created. Errors say which check failed (the caller skips the handout).
Result<RegionCopy> readRegionIn(const std::filesystem::path& folder, const RegionFile& region);

/// The gauges the regions feed, labelled (namespace, pod, container[, uuid, index[, limit]]).
struct RegionGauges {
  metrics::Gauge& memoryUsed;
  metrics::Gauge& memoryLimit;
  metrics::Gauge& computeLimit;
  metrics::Gauge& busySeconds;
  metrics::Gauge& unenforced;
  metrics::Gauge& processes;
};

/// Sets the gauges (and HAMi's, when `hami` is given) from the region of each handout that
/// has one, labelled with the pod and container that hold it now. At most one region is read
/// per handout.
void exportRegions(const HandoutStore& handouts, const RegionGauges& gauges, HamiNodeMetrics* hami);

}  // namespace vgpu::deviceplugin
