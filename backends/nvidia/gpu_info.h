#pragma once
// What discovery learns about one physical GPU, before the config's scaling is applied.

#include <cstdint>
#include <string>
#include <vector>

#include "mig.h"
#include "vgpu/device.h"

namespace vgpu::nvidia {

enum class MigMode : std::uint8_t { kUnknown, kDisabled, kEnabled };

struct GpuInfo {
  std::string uuid;  ///< "GPU-..."; empty when the driver could not say
  int index = 0;
  std::string name;  ///< as NVML reports it ("NVIDIA H100 80GB HBM3")
  std::uint64_t memoryMiB = 0;
  int minor = -1;          ///< /dev/nvidia<minor>; -1 unknown
  std::string pciBusId;    ///< NVML form, "00000000:3B:00.0"; empty unknown
  int numaNode = -1;       ///< -1 unknown or none
  std::string computeCapability;  ///< "9.0"; empty unknown
  MigMode mig = MigMode::kUnknown;
  std::vector<DeviceLink> links;  ///< to the node's other GPUs; empty when unknown
  /// MIG on, and MIG devices served (a MIG strategy other than none): what exists on it.
  std::vector<MigDevice> migDevices;
  /// Dynamic MIG: what the GPU reports, for the scheduler's fit.
  bool migManaged = false;
  std::vector<MigProfile> migProfiles;
  std::string error;  ///< non-empty: the GPU answered badly and is reported unhealthy, with this reason
};

/// Device attribute keys this backend publishes (and its fit reads back).
namespace attr {
inline constexpr const char* kMigMode = "migMode";  ///< "enabled" / "disabled"
inline constexpr const char* kMinor = "minor";
inline constexpr const char* kPciBusId = "pciBusId";
inline constexpr const char* kComputeCapability = "computeCapability";
inline constexpr const char* kDiscoveredBy = "discoveredBy";  ///< "nvml" / "nvidia-smi"
inline constexpr const char* kHealthReason = "healthReason";
inline constexpr const char* kKernelMemoryLimit = "kernelMemoryLimit";
/// vgpu/device.h's kMemoryEnforcementAttribute: "driver" (the NVIDIA driver's per-cgroup cap,
/// r615+, through a CDI hook) or "preload" (libvgpu.so alone: older drivers, MIG devices,
/// memoryEnforcement libvgpu).
inline constexpr const char* kMemoryEnforcement = kMemoryEnforcementAttribute;
/// On a MIG device: its profile ("1g.5gb"), its GPU ("GPU-..."), its GPU instance's memory
/// slices ("4:4", start:size) and its GPU and compute instance ids.
inline constexpr const char* kMigProfile = "migProfile";
inline constexpr const char* kMigParent = "migParent";
inline constexpr const char* kMigPlacement = "migPlacement";
inline constexpr const char* kGpuInstanceId = "gpuInstanceId";
inline constexpr const char* kComputeInstanceId = "computeInstanceId";
/// On a GPU under dynamic MIG: "true", the profiles it reports (encodeMigProfiles) and the GPU
/// instances on it at discovery (encodeMigOccupants).
inline constexpr const char* kMigManaged = "migManaged";
inline constexpr const char* kMigProfiles = "migProfiles";
inline constexpr const char* kMigInstances = "migInstances";
}  // namespace attr

}  // namespace vgpu::nvidia
