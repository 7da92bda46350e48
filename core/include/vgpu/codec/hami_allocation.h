#pragma once
// What HAMi's scheduler wrote on the pods it placed (shared/reference/hami.md section 2), read
// so that a cluster can switch from HAMi to vgpu with pods running: their devices count as
// used. The format is HAMi's own and the same for every vendor (UUID, type, memory, cores
// per device), so it is decoded here, in core; which backend owns a device is found by its
// UUID in the node's inventory (Device::id is the vendor UUID HAMi writes too).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::hami {

/// Pod: the node HAMi placed the pod on (also a label).
inline constexpr std::string_view kPodNode = "hami.io/vgpu-node";
/// Pod: HAMi's MIG placements, JSON (decodeMigAllocations).
inline constexpr std::string_view kPodMigAllocations = "hami.io/vgpu-mig-allocations";

/// Whether `key` is one of HAMi's per-vendor "devices allocated" pod annotations:
/// hami.io/vgpu-devices-allocated (NVIDIA), hami.io/cambricon-mlu-devices-allocated,
/// hami.io/dcu-devices-allocated, ... (hami.io/<word>-devices-allocated). Its
/// "-devices-to-allocate" twin is what HAMi's device plugin consumes; "allocated" never
/// changes after HAMi's filter and is what HAMi rebuilds its usage from.
bool isAllocatedKey(std::string_view key);

/// One device given to one container.
struct Device {
  std::string uuid;
  std::string type;  ///< HAMi's device type ("NVIDIA", "MLU", "DCU"), not the model
  std::uint64_t memoryMiB = 0;
  std::uint32_t cores = 0;  ///< percent of the device
  bool operator==(const Device&) const = default;
};

/// Per container, init containers first then app containers, each in spec order (HAMi
/// keeps an empty entry for a container without devices, so indices stay aligned).
using ContainerDevices = std::vector<std::vector<Device>>;

/// Decodes "UUID,TYPE,mem,cores:...;" lists: devices end with ':', containers with ';';
/// fields after the fourth are ignored, as HAMi does. Errors name the container and
/// device position and what is wrong (fewer than 4 fields, an empty UUID, a number that is
/// not a non-negative integer, cores above 100 are kept as written).
Result<ContainerDevices> decodeDeviceList(std::string_view text);
/// The same format, as HAMi writes it (tests replay HAMi's writing through it).
std::string encodeDeviceList(const ContainerDevices& containers);

/// One entry of hami.io/vgpu-mig-allocations: the MIG profile and placement HAMi chose on
/// a GPU for one device of one container.
struct MigAllocation {
  std::int64_t containerIndex = 0, deviceIndex = 0;
  std::string gpuUuid, profile;
  std::int64_t placementStart = 0, placementSize = 0;
  bool operator==(const MigAllocation&) const = default;
};
/// Errors name the entry and field. Fields HAMi's device plugin adds later (migUUID,
/// gpuInstanceID, computeInstanceID) are ignored.
Result<std::vector<MigAllocation>> decodeMigAllocations(std::string_view json);

}  // namespace vgpu::hami
