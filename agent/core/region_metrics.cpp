// Per-container usage from the one shared region each handout names (region_metrics.h).
#include "region_metrics.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <string>

#include "vgpu/host_files.h"

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;

Result<RegionCopy> readRegionIn(const fs::path& folder, const RegionFile& region) {
  // The path came from a backend: plain names only, a few levels deep, never out of the folder.
  const fs::path rel(region.path);
  std::vector<std::string> parts;
  for (const auto& p : rel) parts.push_back(p.string());
  if (rel.is_absolute() || parts.empty() || parts.size() > 4)
    return makeError("region path \"" + region.path + "\" is not a short path inside the container's folder");
  for (const auto& p : parts)
    if (p.empty() || p == "." || p == ".." || p.find('/') != std::string::npos)
      return makeError("region path \"" + region.path + "\" is not a short path inside the container's folder");
  fs::path shown = folder;
  auto dir = openOwnDirAt(AT_FDCWD, folder.string(), shown.string());
  if (!dir) return dir.error();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    shown /= parts[i];
    auto next = openOwnDirAt(dir->get(), parts[i], shown.string());
    if (!next) return next.error();
    *dir = std::move(*next);
  }
  const std::string& name = parts.back();
  shown /= name;
  auto file = openOwnFileAt(dir->get(), name, region.inode, shown.string());
  if (!file) return file.error();
  // The copy is taken by name inside the checked folder (the last component is opened without
  // following a link), then the name must still be the inode checked before and after.
  const vgpu_region* copy = nullptr;
  char err[512] = "";
  if (vgpu_region_open_readonly(pathAt(dir->get(), name).c_str(), &copy, err, sizeof err) != VGPU_REGION_OK)
    return makeError(shown.string() + ": " + err);
  RegionCopy owned(copy);
  struct stat st {};
  if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || static_cast<std::uint64_t>(st.st_ino) != region.inode)
    return makeError(shown.string() + " was replaced while it was read");
  return owned;
}

std::vector<RegionSource> regionSources(const HandoutStore& handouts) {
  std::vector<RegionSource> out;
  for (const auto& h : handouts.all())
    if (h.region) out.push_back({handouts.folder(h.id), *h.region, {h.podNamespace, h.podName, h.container}});
  return out;
}

ClaimRegionFamilies::ClaimRegionFamilies(metrics::Registry& r)
    : memoryUsed(r.gauge("vgpu_claim_memory_used_bytes",
                         "Device memory the processes using a ResourceClaim hold (libvgpu.so shared region).",
                         {"namespace", "claim", "device_uuid", "device_index"})),
      memoryLimit(r.gauge("vgpu_claim_memory_limit_bytes", "A ResourceClaim's device memory limit.",
                          {"namespace", "claim", "device_uuid", "device_index"})),
      computeLimit(r.gauge("vgpu_claim_compute_limit_percent",
                           "A ResourceClaim's compute share of the device (0 = not limited).",
                           {"namespace", "claim", "device_uuid", "device_index"})),
      busySeconds(r.gauge("vgpu_claim_compute_busy_seconds",
                          "Kernel time a ResourceClaim's processes used on the device since its region was created.",
                          {"namespace", "claim", "device_uuid", "device_index"})),
      unenforced(r.gauge("vgpu_claim_limit_unenforced",
                         "1 when a ResourceClaim's limit is set but libvgpu.so cannot enforce it with this driver.",
                         {"namespace", "claim", "device_uuid", "device_index", "limit"})),
      processes(r.gauge("vgpu_claim_processes", "Processes using a ResourceClaim attached to libvgpu.so.",
                        {"namespace", "claim"})) {}

RegionGauges ClaimRegionFamilies::gauges() {
  return {memoryUsed, memoryLimit, computeLimit, busySeconds, unenforced, processes};
}

void ClaimRegionFamilies::clear() {
  for (auto* g : {&memoryUsed, &memoryLimit, &computeLimit, &busySeconds, &unenforced, &processes}) g->clear();
}

void exportRegions(const std::vector<RegionSource>& sources, const RegionGauges& g, HamiNodeMetrics* hami) {
  for (const auto& source : sources) {
    auto region = readRegionIn(source.folder, source.region);
    if (!region) continue;  // not written yet, or not the limiter's file any more: nothing to say
    const vgpu_region& r = **region;
    const auto labels = [&source](std::initializer_list<std::string> more) {
      metrics::LabelValues l = source.holder;
      l.insert(l.end(), more);
      return l;
    };
    std::uint32_t procs = 0;
    for (std::uint32_t i = 0; i < VGPU_REGION_MAX_PROCS; ++i)
      if (__atomic_load_n(&r.procs[i].pid, __ATOMIC_RELAXED) != 0) ++procs;
    g.processes.set(source.holder, procs);
    for (int i = 0; i < VGPU_REGION_MAX_DEVICES; ++i) {
      const auto& d = r.devices[i];
      const std::string uuid(d.uuid, strnlen(d.uuid, VGPU_REGION_UUID_LEN));
      const auto limit = __atomic_load_n(&d.memory_limit, __ATOMIC_RELAXED);
      const auto used = __atomic_load_n(&d.memory_used, __ATOMIC_RELAXED);
      if (uuid.empty() && limit == 0 && used == 0) continue;
      const auto l = labels({uuid, std::to_string(i)});
      g.memoryUsed.set(l, static_cast<double>(used));
      g.memoryLimit.set(l, static_cast<double>(limit));
      g.computeLimit.set(l, __atomic_load_n(&d.sm_limit, __ATOMIC_RELAXED));
      const double busy = static_cast<double>(__atomic_load_n(&d.compute_busy_ns, __ATOMIC_RELAXED)) / 1e9;
      g.busySeconds.set(l, busy);
      if (hami) {
        hami->memory(l, static_cast<double>(used));
        hami->memoryLimit(l, static_cast<double>(limit));
        hami->busyTime(l, busy, std::chrono::steady_clock::now());
      }
      const auto unenforced = __atomic_load_n(&d.unenforced, __ATOMIC_RELAXED);  // 0 in version-1 regions
      for (const auto& [what, bit] : {std::pair{"memory", VGPU_REGION_UNENFORCED_MEMORY},
                                      std::pair{"compute", VGPU_REGION_UNENFORCED_COMPUTE}})
        g.unenforced.set(labels({uuid, std::to_string(i), what}), (unenforced & bit) != 0 ? 1 : 0);
    }
  }
}

}  // namespace vgpu::deviceplugin
