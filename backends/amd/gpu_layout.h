#pragma once
// What amdsmi's processors make: one whole GPU, or one MI300-class GPU set to a compute
// partition mode (DPX/QPX/CPX), whose partitions amdsmi lists as processors of their own.
// Also the fit of a partitioned GPU: each grant takes one free partition (a fixed slice,
// placed with ABI 1.6 tokens "<mode>@<partition>").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amdsmi_library.h"
#include "vgpu/backend_abi.h"

namespace vgpu::amd {

/// Device attributes discovery publishes; fit reads kComputePartitionAttribute.
inline constexpr const char* kComputePartitionAttribute = "computePartition";
inline constexpr const char* kMemoryPartitionAttribute = "memoryPartition";
inline constexpr const char* kPartitionsAttribute = "partitions";

/// One physical GPU: its processors, ordered by partition id (one when not partitioned).
struct PhysicalGpu {
  std::vector<Processor> parts;
  const Processor& first() const { return parts.front(); }
  /// DPX, QPX, CPX... with more than one partition listed; "" for a whole GPU (SPX or none).
  std::string partitionMode() const;
  bool partitioned() const { return !partitionMode().empty(); }
  /// The GPU's memory: the partitions' sum, or under NPS1 (one pool all partitions see)
  /// the largest any partition reports.
  std::uint64_t memoryMiB() const;
};

/// Groups processors into GPUs by PCI domain:bus:device (a partition's function number may
/// differ), keeping amdsmi's order of each GPU's first processor; no BDF: alone.
std::vector<PhysicalGpu> groupPhysical(const std::vector<Processor>& processors);

/// "CPX@3" and back; nullopt for another form.
std::string partitionToken(std::string_view mode, std::uint32_t partition);
std::optional<std::uint32_t> partitionOfToken(std::string_view token);

/// Whether core must place grants on this device (a partitioned GPU's published form).
bool isPartitionedDevice(const vgpu_device& device);

/// Fit of `request` on a partitioned GPU: one free partition of memory_mib / split_count
/// MiB and 100 / split_count of the compute; percentages are of one partition. `placed`:
/// the tokens of the grants already there (null: only the usage's totals are known).
void fitPartition(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
                  const std::vector<std::string_view>* placed, vgpu_fit_result& result, std::string* token,
                  std::string* why);

}  // namespace vgpu::amd
