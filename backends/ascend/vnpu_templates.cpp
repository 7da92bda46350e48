// The vNPU template table (Huawei's documented templates, as HAMi's Ascend config also lists
// them) and the fit of a request on one chip: whole, or the smallest template that holds it.
#include "vnpu_templates.h"

#include "vgpu/sdk/standard_rules.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace vgpu::ascend {
namespace {

const std::vector<ChipProfile>& profiles() {
  static const std::vector<ChipProfile> table{
      {"910A", 30, 32768, {{"vir02", 2, 0, 2184}, {"vir04", 4, 0, 4369}, {"vir08", 8, 0, 8738}, {"vir16", 16, 0, 17476}}},
      {"910B2", 24, 65536,
       {{"vir03_1c_8g", 3, 1, 8192}, {"vir06_1c_16g", 6, 1, 16384}, {"vir12_3c_32g", 12, 3, 32768}}},
      {"910B3", 20, 65536, {{"vir05_1c_16g", 5, 1, 16384}, {"vir10_3c_32g", 10, 3, 32768}}},
      {"910B4", 20, 32768, {{"vir05_1c_8g", 5, 1, 8192}, {"vir10_3c_16g", 10, 3, 16384}}},
      {"310P3", 8, 24576,
       {{"vir01", 1, 1, 3072},
        {"vir02", 2, 2, 6144},
        {"vir02_1c", 2, 1, 6144},
        {"vir04", 4, 4, 12288},
        {"vir04_3c", 4, 3, 12288}}},
  };
  return table;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

void refuse(vgpu_fit_result& r, int reason, std::uint64_t needed, std::uint64_t available) {
  r.fits = 0;
  r.reason = reason;
  r.needed = needed;
  r.available = available;
  r.take = {};
}

/// The percent of the chip's AI cores a template holds (rounded down, so that the shares of
/// templates that fill the chip add up to at most 100).
std::uint32_t percentOf(const ChipProfile& p, std::uint32_t cores) { return cores * 100 / p.aiCores; }

}  // namespace

const ChipProfile* profileFor(std::string_view model) {
  if (model.size() > 6 && iequals(model.substr(0, 6), "Ascend")) model.remove_prefix(6);
  for (const auto& p : profiles())
    if (iequals(p.chip, model)) return &p;
  // DCMI names the 910B chips of some boards "910B"; HAMi's 910B entry is the 910B3's table.
  if (iequals(model, "910B")) return profileFor("910B3");
  return nullptr;
}

std::uint32_t maxVnpus(const ChipProfile& profile) {
  return profile.templates.empty() ? 1 : profile.aiCores / profile.templates.front().aiCores;
}

std::optional<VnpuTemplate> templateFor(const ChipProfile& profile, std::uint64_t memoryMiB,
                                        std::uint32_t computePercent) {
  for (const auto& t : profile.templates)
    if (t.memoryMiB >= memoryMiB && std::uint64_t{t.aiCores} * 100 >= std::uint64_t{computePercent} * profile.aiCores)
      return t;
  return std::nullopt;
}

std::optional<VnpuTemplate> templateNamed(const ChipProfile& profile, std::string_view name) {
  for (const auto& t : profile.templates)
    if (t.name == name) return t;
  return std::nullopt;
}

void fitChip(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
             const std::vector<std::string_view>* placed, vgpu_fit_result& r, std::string* token, std::string* why) {
  const std::string_view model = d.model ? d.model : "";
  const std::string id = d.id ? d.id : "";
  auto say = [&](const std::string& words) {
    if (why) *why = words;
  };
  // Health and the pod's model and id filters, as every backend reads them.
  r = {};
  if (!sdk::passesStandardFilters(q, d, r, why, "chip")) return;
  const std::uint64_t memory = q.memory_mib ? q.memory_mib : d.memory_mib * (q.memory_percent ? q.memory_percent : 100) / 100;
  if (memory > d.memory_mib)
    return refuse(r, VGPU_REASON_REQUEST_TOO_LARGE, memory, d.memory_mib),
           say("asks " + std::to_string(memory) + " MiB of a " + std::to_string(d.memory_mib) + " MiB chip");

  const ChipProfile* profile = profileFor(model);
  std::optional<VnpuTemplate> tmpl;
  // Several chips per container are given whole (as in HAMi): a vNPU is one chip's slice.
  if (profile && d.split_count > 1 && q.count <= 1 && q.compute_percent < 100 && memory < d.memory_mib)
    tmpl = templateFor(*profile, memory, q.compute_percent);

  // What the grants on the chip hold: their tokens where known, else the totals.
  // One grant holding all the compute is a whole chip (no template holds every AI core).
  bool whole = u.shares == 1 && u.compute >= 100;
  std::uint64_t usedCores = profile ? (std::uint64_t{u.compute} * profile->aiCores + 99) / 100 : 0;
  std::uint64_t usedMemory = u.memory_mib;
  std::uint32_t grants = u.shares;
  if (placed && profile) {
    std::uint64_t cores = 0, mem = 0;
    for (const auto t : *placed) {
      if (t == kWholeToken) whole = true;
      else if (auto v = templateNamed(*profile, t)) cores += v->aiCores, mem += v->memoryMiB;
    }
    usedCores = std::max(usedCores, cores);
    usedMemory = std::max(usedMemory, mem);
    grants = std::max<std::uint32_t>(grants, static_cast<std::uint32_t>(placed->size()));
  }

  if (!tmpl) {  // the chip whole
    if (grants > 0)
      return refuse(r, VGPU_REASON_EXCLUSIVE_CONFLICT, 1, 0),
             say(id + " is shared by " + std::to_string(grants) + " grant(s); the request needs it whole" +
                 (profile ? " (no vNPU template of " + profile->chip + " holds " + std::to_string(memory) + " MiB and " +
                                std::to_string(q.compute_percent) + "% of the AI cores)"
                          : ""));
    r = {};
    r.fits = 1;
    r.take = {1, 100, d.memory_mib};
    if (token) *token = kWholeToken;
    return;
  }
  if (whole)
    return refuse(r, VGPU_REASON_EXCLUSIVE_CONFLICT, 1, 0), say(id + " is held whole by another grant");
  if (grants + 1 > d.split_count)
    return refuse(r, VGPU_REASON_SHARES_EXHAUSTED, grants + 1, d.split_count),
           say(id + " holds " + std::to_string(grants) + " vNPUs, its most");
  if (usedCores + tmpl->aiCores > profile->aiCores)
    return refuse(r, kReasonNoAiCores, tmpl->aiCores, profile->aiCores - std::min<std::uint64_t>(usedCores, profile->aiCores)),
           say("vNPU template " + tmpl->name + " needs " + std::to_string(tmpl->aiCores) + " AI cores; " + id +
               " has " + std::to_string(profile->aiCores - std::min<std::uint64_t>(usedCores, profile->aiCores)) + " free");
  // The templates divide the chip's nominal memory, which the driver may report a little
  // lower (a 310P's DDR less what the system keeps): the larger of the two bounds them.
  const std::uint64_t capacity = std::max(d.memory_mib, profile->memoryMiB);
  if (usedMemory + tmpl->memoryMiB > capacity)
    return refuse(r, VGPU_REASON_INSUFFICIENT_MEMORY, tmpl->memoryMiB, capacity - std::min(usedMemory, capacity)),
           say("vNPU template " + tmpl->name + " needs " + std::to_string(tmpl->memoryMiB) + " MiB; " + id + " has " +
               std::to_string(capacity - std::min(usedMemory, capacity)) + " MiB free");
  r = {};
  r.fits = 1;
  r.take = {1, percentOf(*profile, tmpl->aiCores), tmpl->memoryMiB};
  if (token) *token = tmpl->name;
}

std::string explainReason(const vgpu_fit_result& r) {
  if (r.reason == kReasonNoAiCores)
    return "the vNPU template needs " + std::to_string(r.needed) + " AI cores and the chip has " +
           std::to_string(r.available) + " free";
  return "unknown Ascend refusal " + std::to_string(r.reason);
}

}  // namespace vgpu::ascend
