// The C++ face of the limiter's configuration parser: the same code libvgpu.so runs
// (limiter_settings.cpp), with Result and std types for the node agent's side and tests.

#include "vgpu/limiter_config.h"

#include <memory>

#include "vgpu/limiter_settings.h"

namespace vgpu {
namespace {

constexpr size_t kErrLen = 8192;

}  // namespace

Result<uint64_t> parseMemorySize(std::string_view text) {
  uint64_t v = 0;
  char err[kErrLen];
  if (vgpu_parse_memory_size(text.data(), text.size(), &v, err, sizeof err) != 0) return makeError(err);
  return v;
}

Result<uint32_t> parsePercent(std::string_view text) {
  uint32_t v = 0;
  char err[kErrLen];
  if (vgpu_parse_percent(text.data(), text.size(), &v, err, sizeof err) != 0) return makeError(err);
  return v;
}

Result<bool> parseBool(std::string_view text) {
  int v = 0;
  char err[kErrLen];
  if (vgpu_parse_bool(text.data(), text.size(), &v, err, sizeof err) != 0) return makeError(err);
  return v != 0;
}

Result<std::map<std::string, std::string>> parseLimitsFile(std::string_view content, std::string_view fileName) {
  vgpu_limits_file file;
  char err[kErrLen];
  const std::string name(fileName);
  if (vgpu_parse_limits_file(content.data(), content.size(), name.c_str(), &file, err, sizeof err) != 0) {
    return makeError(err);
  }
  std::map<std::string, std::string> out;
  for (int i = 0; i < file.count; ++i) {
    const vgpu_limits_entry& e = file.entries[i];
    out.emplace(std::string(e.key, e.key_len), std::string(e.value, e.value_len));
  }
  return out;
}

Result<LimiterConfig> loadLimiterConfig(const EnvLookup& env, const char* fixedFilePath) {
  auto settings = std::make_unique<vgpu_limiter_settings>();
  char err[kErrLen];
  auto lookup = [](void* ctx, const char* name) { return (*static_cast<const EnvLookup*>(ctx))(name); };
  if (vgpu_limiter_settings_load(lookup, const_cast<EnvLookup*>(&env), fixedFilePath, settings.get(), err,
                                 sizeof err) != 0) {
    return makeError(err);
  }
  LimiterConfig cfg;
  for (int i = 0; i < kLimiterMaxDevices; ++i) {
    cfg.devices[i].memoryBytes = settings->memory_bytes[i];
    cfg.devices[i].smPercent = settings->sm_percent[i];
  }
  cfg.regionPath = settings->region_path;
  cfg.limitsFile = settings->limits_file;
  cfg.oversubscribe = settings->oversubscribe != 0;
  cfg.priority = settings->priority;
  cfg.prioritySet = settings->priority_set != 0;
  cfg.activityBoard = settings->activity_board;
  cfg.contextOverhead = settings->context_overhead;
  cfg.controlDisabled = settings->control_disabled != 0;
  cfg.disableControlIgnored = settings->disable_control_ignored != 0;
  cfg.corePolicy = settings->core_policy == VGPU_CORE_POLICY_FORCE     ? CorePolicy::kForce
                   : settings->core_policy == VGPU_CORE_POLICY_DISABLE ? CorePolicy::kDisable
                                                                       : CorePolicy::kDefault;
  return cfg;
}

}  // namespace vgpu
