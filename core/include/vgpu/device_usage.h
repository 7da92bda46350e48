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

/// How much each part of a device's usage counts in its load when the device policy
/// orders devices (HAMi's hami.io/device-scoring-weights: slot, core, memory). Each >= 0,
/// not all 0; the load stays 0..1 whatever the weights.
struct LoadWeights {
  double shares = 1;
  double compute = 1;
  double memory = 1;

  bool equal() const { return shares == compute && compute == memory; }
  bool operator==(const LoadWeights&) const = default;
};

}  // namespace vgpu
