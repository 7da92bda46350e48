#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu {

/// One process on one device, as the vendor library reports it: ours or anyone's.
struct DeviceProcess {
  std::uint32_t pid = 0;  ///< the node's (host) PID namespace, as the driver sees it
  std::string deviceId;   ///< Device::id
  int deviceIndex = 0;    ///< Device::index
  std::optional<std::uint64_t> memoryUsedBytes;     ///< unset: the vendor library cannot tell
  std::optional<std::uint32_t> utilizationPercent;  ///< busy percent of the whole device; unset: unknown
  bool operator==(const DeviceProcess&) const = default;
};

/// Node side, optional: the processes on each device the backend discovered, for the node
/// agent's watchdog (slice enforcement from outside the container) and for the memory that
/// processes outside vgpu's containers hold. Thread-safe; called about every second.
class ProcessReporter {
 public:
  virtual ~ProcessReporter() = default;
  /// Every process on every discovered device, one entry per process and device.
  /// Errors: the vendor library fails (in words); the caller reports and tries again later.
  virtual Result<std::vector<DeviceProcess>> deviceProcesses() = 0;
};

/// Node side, optional (backend ABI 1.9): the device memory the vendor driver itself charges
/// to a process's memory cgroup, where it keeps per-cgroup accounting (NVIDIA r615+ with a
/// limit set for the cgroup). The watchdog takes it over the sum of the processes' figures.
class CgroupMemoryReporter {
 public:
  virtual ~CgroupMemoryReporter() = default;
  /// Bytes charged on device `deviceId` to the memory cgroup that `procCgroup` (the text of a
  /// process's /proc/<pid>/cgroup) names; nullopt where the driver does not account it.
  /// Errors: the vendor library fails (in words).
  virtual Result<std::optional<std::uint64_t>> cgroupMemoryUsed(const std::string& procCgroup,
                                                               const std::string& deviceId) = 0;
};

}  // namespace vgpu
