// Grouping amdsmi's processors into physical GPUs, and the partition fit with its tokens.
#include "gpu_layout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "vgpu/sdk/standard_rules.h"

namespace vgpu::amd {
namespace {

std::string_view attribute(const vgpu_device& d, const char* key) {
  for (size_t i = 0; i < d.attributes.count; ++i)
    if (d.attributes.items[i].key && std::strcmp(d.attributes.items[i].key, key) == 0 && d.attributes.items[i].value)
      return d.attributes.items[i].value;
  return {};
}

void refuse(vgpu_fit_result& r, int reason, std::uint64_t needed, std::uint64_t available) {
  r = {};
  r.reason = reason;
  r.needed = needed;
  r.available = available;
}

}  // namespace

std::string PhysicalGpu::partitionMode() const {
  const std::string& mode = first().computePartition;
  if (parts.size() < 2 || mode.empty() || mode == "SPX") return "";
  return mode;
}

std::uint64_t PhysicalGpu::memoryMiB() const {
  std::uint64_t sum = 0, most = 0;
  for (const auto& p : parts) sum += p.memoryMiB, most = std::max(most, p.memoryMiB);
  return first().memoryPartition == "NPS1" && parts.size() > 1 ? most : sum;
}

std::vector<PhysicalGpu> groupPhysical(const std::vector<Processor>& processors) {
  std::vector<PhysicalGpu> out;
  std::map<std::uint64_t, size_t> byPci;
  for (const auto& p : processors) {
    const std::uint64_t key = p.bdf & ~std::uint64_t{7};  // clear the function number
    auto it = p.bdf ? byPci.find(key) : byPci.end();
    if (it == byPci.end()) {
      if (p.bdf) byPci[key] = out.size();
      out.push_back({{p}});
    } else {
      out[it->second].parts.push_back(p);
    }
  }
  for (auto& g : out)
    std::stable_sort(g.parts.begin(), g.parts.end(),
                     [](const Processor& a, const Processor& b) { return a.partitionId < b.partitionId; });
  return out;
}

std::string partitionToken(std::string_view mode, std::uint32_t partition) {
  return std::string(mode) + "@" + std::to_string(partition);
}

std::optional<std::uint32_t> partitionOfToken(std::string_view token) {
  const auto at = token.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 >= token.size() || token.size() - at > 4) return std::nullopt;
  std::uint32_t n = 0;
  for (char c : token.substr(at + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return n;
}

bool isPartitionedDevice(const vgpu_device& device) {
  const auto mode = attribute(device, kComputePartitionAttribute);
  return device.split_count > 1 && !mode.empty() && mode != "SPX";
}

void fitPartition(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                  const std::vector<std::string_view>* placed, vgpu_fit_result& r, std::string* token,
                  std::string* why) {
  const std::string id = d.id ? d.id : "";
  auto say = [&](const std::string& words) {
    if (why) *why = words;
  };
  r = {};
  if (!sdk::passesStandardFilters(q, d, r, why, "GPU")) return;
  const std::uint32_t parts = std::max<std::uint32_t>(d.split_count, 1);
  const std::uint64_t slice = d.memory_mib / parts;
  const std::string mode(attribute(d, kComputePartitionAttribute));
  if (q.memory_mib > slice)
    return refuse(r, VGPU_REASON_REQUEST_TOO_LARGE, q.memory_mib, slice),
           say("asks " + std::to_string(q.memory_mib) + " MiB; a " + mode + " partition of " + id + " has " +
               std::to_string(slice) + " MiB");
  // Which partitions are taken: the tokens' where known; grants without one (placed before
  // the backend placed them) take the lowest others.
  std::set<std::uint32_t> taken;
  if (placed)
    for (const auto t : *placed)
      if (auto p = partitionOfToken(t); p && *p < parts) taken.insert(*p);
  std::uint32_t unplaced = u.shares > taken.size() ? u.shares - static_cast<std::uint32_t>(taken.size()) : 0;
  std::optional<std::uint32_t> free;
  for (std::uint32_t p = 0; p < parts; ++p) {
    if (taken.count(p)) continue;
    if (unplaced > 0) {
      --unplaced;
      continue;
    }
    free = p;
    break;
  }
  if (!free)
    return refuse(r, VGPU_REASON_SHARES_EXHAUSTED, 1, 0),
           say("all " + std::to_string(parts) + " " + mode + " partitions of " + id + " are taken");
  r = {};
  r.fits = 1;
  r.take = {1, 100 / parts, slice};
  if (token) *token = partitionToken(mode, *free);
}

}  // namespace vgpu::amd
