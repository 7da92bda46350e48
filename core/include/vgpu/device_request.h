#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu {

/// Filters a pod puts on which devices may serve it (from its annotations). Model filters
/// match case-insensitive substrings of Device::model; UUID filters match Device::id exactly.
/// Empty lists mean "no constraint".
struct DeviceConstraints {
  std::vector<std::string> includeModels;
  std::vector<std::string> excludeModels;
  std::vector<std::string> includeIds;
  std::vector<std::string> excludeIds;
  bool numaBind = false;  ///< All devices of one container from a single NUMA node.

  bool operator==(const DeviceConstraints&) const = default;
};

/// What one container asks of one backend: `count` devices, each with this much memory and
/// compute. Memory is either absolute (memoryMiB) or a share of each device's memory
/// (memoryPercent); when both are zero the container takes the whole device's memory.
struct DeviceRequest {
  std::string backend;           ///< Backend that parsed the request and will judge the fit.
  std::uint32_t count = 0;       ///< Number of distinct devices.
  std::uint64_t memoryMiB = 0;   ///< Per device; 0 = use memoryPercent.
  std::uint32_t memoryPercent = 0;  ///< Per device, 1..100; 0 with memoryMiB 0 = 100%.
  std::uint32_t computePercent = 0;  ///< Per device, 0..100; 100 = the device alone.
  std::int32_t priority = -1;        ///< Backend-defined task priority; -1 = unset.
  DeviceConstraints constraints;

  /// Memory this request takes on a device of `deviceMemoryMiB`.
  std::uint64_t memoryOn(std::uint64_t deviceMemoryMiB) const {
    if (memoryMiB != 0) return memoryMiB;
    const std::uint32_t percent = memoryPercent == 0 ? 100 : memoryPercent;
    return deviceMemoryMiB * percent / 100;
  }
  bool exclusive() const { return computePercent >= 100; }
  bool operator==(const DeviceRequest&) const = default;
};

}  // namespace vgpu
