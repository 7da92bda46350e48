#pragma once
// The limiter's configuration: limits from the read-only limits file and the environment
// (vgpu/limiter_contract.h names them), parsed strictly so a typo is an error, not a
// silently different limit. The parser is vgpu/limiter_settings.h (C, what libvgpu.so runs);
// this is its C++ face.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "vgpu/result.h"

namespace vgpu {

inline constexpr int kLimiterMaxDevices = 16;  // VGPU_LIMITER_MAX_DEVICES

/// Limits of one device (CUDA ordinal as the container sees it). 0 means none.
struct DeviceLimit {
  uint64_t memoryBytes = 0;
  uint32_t smPercent = 0;  // 0 or 100: not throttled
};

/// GPU_CORE_UTILIZATION_POLICY: when the compute limit applies (kDefault: while another
/// tenant runs kernels on the GPU; kForce: always; kDisable: never).
enum class CorePolicy { kDefault, kForce, kDisable };

/// Everything libvgpu.so reads at start.
struct LimiterConfig {
  std::array<DeviceLimit, kLimiterMaxDevices> devices{};
  std::string regionPath;  // never empty after loading
  bool oversubscribe = false;
  int32_t priority = 1;       // 0 high, anything else low; 1 when unset
  bool prioritySet = false;   // CUDA_TASK_PRIORITY was given
  CorePolicy corePolicy = CorePolicy::kDefault;
  std::string activityBoard;  // VGPU_ACTIVITY_BOARD, "" if unset
  uint64_t contextOverhead = 0;  // VGPU_CONTEXT_OVERHEAD (limits file only), 0 = not given
  std::string limitsFile;  // the file that was read, "" if none
  bool controlDisabled = false;        // CUDA_DISABLE_CONTROL=true without a limits file: nothing limited
  bool disableControlIgnored = false;  // CUDA_DISABLE_CONTROL=true, ignored: a limits file was read

  /// True when `dev` has a compute limit that the policy may apply.
  bool computeLimited(int dev) const {
    if (dev < 0 || dev >= kLimiterMaxDevices || corePolicy == CorePolicy::kDisable) return false;
    uint32_t p = devices[dev].smPercent;
    return p > 0 && p < 100;
  }
};

/// "1073741824", "1024m", "4g", "512k" (binary units); "" and "0" mean no limit.
Result<uint64_t> parseMemorySize(std::string_view text);
/// An integer 0..100.
Result<uint32_t> parsePercent(std::string_view text);
/// true/false/1/0/yes/no (any case).
Result<bool> parseBool(std::string_view text);

/// KEY=VALUE lines of a limits file; errors name `fileName` and the line.
Result<std::map<std::string, std::string>> parseLimitsFile(std::string_view content, std::string_view fileName);

/// Looks a variable up; returns nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// Reads the limits file (`fixedFilePath` if it exists, else $VGPU_LIMITS_FILE) and the
/// environment. With a file the environment can only tighten it; without one it is read as
/// HAMi-core reads it (docs/limiter.md, "HAMi-core's variables"). Errors name the variable or
/// file line at fault.
Result<LimiterConfig> loadLimiterConfig(const EnvLookup& env, const char* fixedFilePath = nullptr);

}  // namespace vgpu
