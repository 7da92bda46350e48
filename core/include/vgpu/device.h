#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace vgpu {

/// Whether a device can take new work. Unknown is what a device is before its first check.
enum class Health : std::uint8_t { kHealthy, kUnhealthy, kUnknown };

/// One physical device as discovery reports it and the node inventory publishes it.
/// Memory is in MiB after the backend's memory scaling; compute is in units where 100 is
/// the whole device (more than 100 means the operator oversubscribes compute).
struct Device {
  std::string id;             ///< Stable identifier (the vendor UUID), unique on the node.
  int index = 0;              ///< Position in the vendor's enumeration on the node.
  std::string backend;        ///< Name of the backend that owns the device ("nvidia").
  std::string model;          ///< Marketing name ("NVIDIA A100-SXM4-80GB").
  std::uint64_t memoryMiB = 0;
  std::uint32_t computeUnits = 100;
  std::uint32_t splitCount = 1;  ///< How many containers may share the device at once.
  int numaNode = -1;             ///< -1 when unknown.
  Health health = Health::kUnknown;
  std::map<std::string, std::string> attributes;  ///< Free-form: MIG mode, links, minor...
  /// Memory (MiB, as the vendor library reports it) that processes outside vgpu's containers
  /// hold on the device (host processes, pods vgpu did not place), as the node agent's
  /// watchdog last saw it; the scheduler counts it as taken. 0 when unknown.
  std::uint64_t foreignUsedMiB = 0;

  bool operator==(const Device&) const = default;
};

/// "healthy", "unhealthy" or "unknown".
const char* toString(Health health);

}  // namespace vgpu
