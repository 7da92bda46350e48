#pragma once
// The health of one driver's devices as the kubelet's DRAResourceHealth stream reports it
// (reference/k8s-protocols.md 6.4): the publisher writes the whole list after every
// discovery and advances the check time after every quiet health wait; each open stream
// reads it and wakes when it changes. No gRPC type appears here.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "vgpu/device.h"

namespace vgpu::dra {

struct DeviceHealthReport {
  std::string pool;
  std::string device;  ///< the DRA device name ("sim-0")
  Health health = Health::kUnknown;
  std::string message;  ///< why, when unhealthy or unknown; at most kMaxHealthMessage
  bool operator==(const DeviceHealthReport&) const = default;
};

/// The kubelet keeps at most this many characters of a message.
inline constexpr std::size_t kMaxHealthMessage = 1024;

/// Thread-safe.
class HealthBoard {
 public:
  struct Snapshot {
    std::uint64_t version = 0;  ///< 0: nothing known yet
    std::vector<DeviceHealthReport> devices;
    std::int64_t checkedAt = 0;  ///< Unix seconds of the backend's last health check
  };

  /// Replaces the list (messages cut to kMaxHealthMessage); wakes the readers when it
  /// differs from the last one.
  void set(std::vector<DeviceHealthReport> devices, std::int64_t checkedAt);
  /// The backend checked again and found no change.
  void touch(std::int64_t checkedAt);
  Snapshot snapshot() const;
  /// Waits until the list is newer than `version` or `timeout` passes; true when newer.
  bool waitNewer(std::uint64_t version, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Snapshot current_;
};

/// Unix seconds now.
std::int64_t unixNow();

}  // namespace vgpu::dra
