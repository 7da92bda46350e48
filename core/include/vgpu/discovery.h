#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu {

/// A device's health changed (an Xid error, a lost device, a recovery).
struct HealthEvent {
  std::string deviceId;
  Health health = Health::kUnknown;
  std::string reason;
  bool operator==(const HealthEvent&) const = default;
};

/// Node side: what devices this node has. Implementations talk to the vendor library.
/// Not required to be thread-safe; the node agent calls it from one thread.
class Discovery {
 public:
  virtual ~Discovery() = default;

  /// All devices the vendor library reports, unhealthy ones included (with their health).
  /// Errors: the vendor library is missing or fails (the message says which and where).
  virtual Result<std::vector<Device>> discover() = 0;

  /// Waits up to `timeout` for health changes and returns them (empty on timeout).
  virtual Result<std::vector<HealthEvent>> waitForHealthEvents(std::chrono::milliseconds timeout) = 0;
};

}  // namespace vgpu
