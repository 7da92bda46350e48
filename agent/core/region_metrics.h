#pragma once
// Per-container (device plugin) and per-claim (DRA) usage from libvgpu.so's shared regions, for
// /metrics. Each front end reads one file per handout or claim: the region the backend's limiter
// created and named (by path in the holder's folder and inode). Nothing else a tenant writes into the folder is read,
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

/// The gauges the regions feed, labelled by the holder's labels (namespace, pod, container for
/// a device-plugin handout; namespace, claim for a DRA claim), then [device uuid, index[, limit]]
/// except `processes`, labelled by the holder's alone.
struct RegionGauges {
  metrics::Gauge& memoryUsed;
  metrics::Gauge& memoryLimit;
  metrics::Gauge& computeLimit;
  metrics::Gauge& busySeconds;
  metrics::Gauge& unenforced;
  metrics::Gauge& processes;
};

/// One region to export: the folder the limiter made it in, the file, and who holds it.
struct RegionSource {
  std::filesystem::path folder;
  RegionFile region;
  metrics::LabelValues holder;
};

/// The region of each handout that has one, held by (namespace, pod, container) now.
std::vector<RegionSource> regionSources(const HandoutStore& handouts);

/// vgpu-dra-plugin's families of the regions its claims' limiters made: the device plugin's
/// vgpu_container_* families as vgpu_claim_*, labelled (namespace, claim) in place of (namespace,
/// pod, container), since one claim may serve several pods and containers.
struct ClaimRegionFamilies {
  explicit ClaimRegionFamilies(metrics::Registry& registry);
  RegionGauges gauges();
  void clear();
  metrics::Gauge &memoryUsed, &memoryLimit, &computeLimit, &busySeconds, &unenforced, &processes;
};

/// Sets the gauges (and HAMi's, when `hami` is given: device-plugin handouts only) from each
/// source's region. At most one region is read per source; one that cannot be read (not
/// written yet, or not the limiter's file any more) adds nothing.
void exportRegions(const std::vector<RegionSource>& sources, const RegionGauges& gauges, HamiNodeMetrics* hami);

}  // namespace vgpu::deviceplugin
