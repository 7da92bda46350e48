#pragma once

#include <cstdint>

namespace vgpu {

/// What is already taken on one device: by how many containers (shares), how much memory
/// (MiB) and how much compute (percent of the device). The scheduler rebuilds it from the
/// assignments of the pods that hold the device.
struct DeviceUsage {
  std::uint32_t shares = 0;
  std::uint64_t memoryMiB = 0;
  std::uint32_t compute = 0;

  DeviceUsage& operator+=(const DeviceUsage& other) {
    shares += other.shares;
    memoryMiB += other.memoryMiB;
    compute += other.compute;
    return *this;
  }
  bool operator==(const DeviceUsage&) const = default;
};

}  // namespace vgpu
