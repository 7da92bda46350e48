#include "vgpu/backend_params.h"

namespace vgpu {
namespace {

const char* cOrNull(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }

std::optional<std::string> optString(const char* s) {
  if (s == nullptr) return std::nullopt;
  return std::string(s);
}

template <class T>
std::optional<T> optNonZero(T value) {
  if (value == T{}) return std::nullopt;
  return value;
}

}  // namespace

BackendConfigView::BackendConfigView(const BackendParams& p) {
  const auto& s = p.settings;
  for (const auto& [k, v] : s.options) options_.push_back({k.c_str(), v.c_str()});
  config_.struct_size = sizeof(vgpu_backend_config);
  config_.name = p.name.c_str();
  config_.node_name = p.nodeName.c_str();
  config_.count_resource = cOrNull(p.resources.count);
  config_.memory_resource = cOrNull(p.resources.memory);
  config_.memory_percent_resource = cOrNull(p.resources.memoryPercent);
  config_.cores_resource = cOrNull(p.resources.cores);
  config_.priority_resource = cOrNull(p.resources.priority);
  config_.split_count = s.splitCount.value_or(0);
  config_.memory_scaling = s.memoryScaling.value_or(0.0);
  config_.core_scaling = s.coreScaling.value_or(0.0);
  config_.memory_unit_mib = s.memoryUnitMiB.value_or(0);
  config_.default_memory_mib = s.defaultMemoryMiB.value_or(0);
  config_.default_cores = s.defaultCores.value_or(0);
  config_.default_count = s.defaultCount.value_or(0);
  config_.options = {options_.data(), options_.size()};
}

BackendParams paramsFromC(const vgpu_backend_config& c) {
  BackendParams p;
  p.name = c.name ? c.name : "";
  p.nodeName = c.node_name ? c.node_name : "";
  p.resources.count = optString(c.count_resource);
  p.resources.memory = optString(c.memory_resource);
  p.resources.memoryPercent = optString(c.memory_percent_resource);
  p.resources.cores = optString(c.cores_resource);
  p.resources.priority = optString(c.priority_resource);
  auto& s = p.settings;
  s.splitCount = optNonZero(c.split_count);
  s.memoryScaling = optNonZero(c.memory_scaling);
  s.coreScaling = optNonZero(c.core_scaling);
  s.memoryUnitMiB = optNonZero(c.memory_unit_mib);
  s.defaultMemoryMiB = optNonZero(c.default_memory_mib);
  s.defaultCores = optNonZero(c.default_cores);
  s.defaultCount = optNonZero(c.default_count);
  for (size_t i = 0; i < c.options.count; ++i) {
    const auto& kv = c.options.items[i];
    if (kv.key) s.options[kv.key] = kv.value ? kv.value : "";
  }
  return p;
}

}  // namespace vgpu
