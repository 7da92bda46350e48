#include "vgpu/c_views.h"

#include <algorithm>
#include <cstddef>

namespace vgpu {
namespace {

std::vector<const char*> pointersTo(const std::vector<std::string>& strings) {
  std::vector<const char*> out;
  out.reserve(strings.size());
  for (const auto& s : strings) out.push_back(s.c_str());
  return out;
}

vgpu_str_list listOf(const std::vector<const char*>& pointers) {
  return {pointers.data(), pointers.size()};
}

std::vector<std::string> stringsOf(const vgpu_str_list& list) {
  std::vector<std::string> out;
  out.reserve(list.count);
  for (size_t i = 0; i < list.count; ++i) out.emplace_back(list.items[i] ? list.items[i] : "");
  return out;
}

std::uint32_t healthToC(Health h) {
  switch (h) {
    case Health::kHealthy: return VGPU_HEALTHY;
    case Health::kUnhealthy: return VGPU_UNHEALTHY;
    case Health::kUnknown: break;
  }
  return VGPU_HEALTH_UNKNOWN;
}

Health healthFromC(std::uint32_t h) {
  switch (h) {
    case VGPU_HEALTHY: return Health::kHealthy;
    case VGPU_UNHEALTHY: return Health::kUnhealthy;
    default: return Health::kUnknown;
  }
}

static_assert(static_cast<std::uint32_t>(LinkClass::kCrossNuma) == VGPU_LINK_CROSS_NUMA &&
              static_cast<std::uint32_t>(LinkClass::kPcieSwitch) == VGPU_LINK_PCIE_SWITCH &&
              static_cast<std::uint32_t>(LinkClass::kSwitchFabric) == VGPU_LINK_SWITCH_FABRIC,
              "vgpu::LinkClass and vgpu_link_class must agree");

constexpr std::size_t kDeviceSizeWithLinks = offsetof(vgpu_device, link_size) + sizeof(size_t);
constexpr std::size_t kLinkSizeWithRank = offsetof(vgpu_device_link, rank) + sizeof(std::uint32_t);

std::vector<DeviceLink> linksFromC(const vgpu_device& d) {
  std::vector<DeviceLink> out;
  if (d.struct_size < kDeviceSizeWithLinks || d.links == nullptr || d.link_size < kLinkSizeWithRank) return out;
  out.reserve(d.link_count);
  const auto* bytes = reinterpret_cast<const unsigned char*>(d.links);
  for (size_t i = 0; i < d.link_count; ++i) {
    const auto& l = *reinterpret_cast<const vgpu_device_link*>(bytes + i * d.link_size);
    if (l.peer_id == nullptr) continue;
    // A class from a newer backend reads as unknown; its rank still orders the pair.
    const LinkClass linkClass = l.link_class <= VGPU_LINK_SWITCH_FABRIC ? static_cast<LinkClass>(l.link_class)
                                                                        : LinkClass::kUnknown;
    out.push_back({l.peer_id, linkClass, l.lanes, std::min(l.rank, kMaxLinkRank)});
  }
  return out;
}

}  // namespace

vgpu_device DeviceRecord::viewOf(const Device& d, const std::vector<vgpu_kv>& attributes) {
  vgpu_device view{};
  view.struct_size = sizeof(vgpu_device);
  view.id = d.id.c_str();
  view.index = d.index;
  view.model = d.model.c_str();
  view.memory_mib = d.memoryMiB;
  view.compute_units = d.computeUnits;
  view.split_count = d.splitCount;
  view.numa_node = d.numaNode;
  view.health = healthToC(d.health);
  view.attributes = {attributes.data(), attributes.size()};
  return view;
}

DeviceRecord::DeviceRecord(Device device) : device_(std::move(device)) {
  attributes_.reserve(device_.attributes.size());
  for (const auto& [k, v] : device_.attributes) attributes_.push_back({k.c_str(), v.c_str()});
  view_ = viewOf(device_, attributes_);
  links_.reserve(device_.links.size());
  for (const auto& l : device_.links)
    links_.push_back({l.peer.c_str(), static_cast<std::uint32_t>(l.linkClass), l.lanes, l.rank});
  view_.links = links_.data();
  view_.link_count = links_.size();
  view_.link_size = sizeof(vgpu_device_link);
}

RequestRecord::RequestRecord(DeviceRequest request) : request_(std::move(request)) {
  const auto& c = request_.constraints;
  includeModels_ = pointersTo(c.includeModels);
  excludeModels_ = pointersTo(c.excludeModels);
  includeIds_ = pointersTo(c.includeIds);
  excludeIds_ = pointersTo(c.excludeIds);
  view_.struct_size = sizeof(vgpu_device_request);
  view_.count = request_.count;
  view_.memory_mib = request_.memoryMiB;
  view_.memory_percent = request_.memoryPercent;
  view_.compute_percent = request_.computePercent;
  view_.priority = request_.priority;
  view_.numa_bind = c.numaBind ? 1 : 0;
  view_.include_models = listOf(includeModels_);
  view_.exclude_models = listOf(excludeModels_);
  view_.include_ids = listOf(includeIds_);
  view_.exclude_ids = listOf(excludeIds_);
}

Device deviceFromC(const vgpu_device& d, const std::string& backend) {
  Device out;
  out.id = d.id ? d.id : "";
  out.index = d.index;
  out.backend = backend;
  out.model = d.model ? d.model : "";
  out.memoryMiB = d.memory_mib;
  out.computeUnits = d.compute_units;
  out.splitCount = d.split_count;
  out.numaNode = d.numa_node;
  out.health = healthFromC(d.health);
  for (size_t i = 0; i < d.attributes.count; ++i) {
    const auto& kv = d.attributes.items[i];
    if (kv.key) out.attributes[kv.key] = kv.value ? kv.value : "";
  }
  out.links = linksFromC(d);
  return out;
}

DeviceRequest requestFromC(const vgpu_device_request& r, const std::string& backend) {
  DeviceRequest out;
  out.backend = backend;
  out.count = r.count;
  out.memoryMiB = r.memory_mib;
  out.memoryPercent = r.memory_percent;
  out.computePercent = r.compute_percent;
  out.priority = r.priority;
  out.constraints.numaBind = r.numa_bind != 0;
  out.constraints.includeModels = stringsOf(r.include_models);
  out.constraints.excludeModels = stringsOf(r.exclude_models);
  out.constraints.includeIds = stringsOf(r.include_ids);
  out.constraints.excludeIds = stringsOf(r.exclude_ids);
  return out;
}

}  // namespace vgpu
