#pragma once
// A device that is a partition of another device of the same backend on the node (an NVIDIA
// MIG device of its GPU, ...), in vendor-neutral words. A backend says so with the attributes
// below: on a device discovery reports (a partition the operator made, served as a device of
// its own), or, for a partition its limiter makes for one container at Allocate, in the pod
// annotation madePartitionsKey(). The node agent exports an info series per partition from
// them (docs/metrics.md). docs/writing-a-backend.md, "Partitions", says what each means.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu {

namespace partition_attr {
/// The parent device's id; present = the device is a partition.
inline constexpr std::string_view kParent = "partitionOf";
/// The partitioning technology, one lower-case word ("mig").
inline constexpr std::string_view kKind = "partitionKind";
/// The partition's profile (size class), in the vendor's words ("3g.20gb").
inline constexpr std::string_view kProfile = "partitionProfile";
/// Where it sits in the parent: "<first slice>:<slices>" in the parent's units.
inline constexpr std::string_view kPlacement = "partitionPlacement";
/// The parent's id for the partition (NVIDIA MIG: the GPU instance id).
inline constexpr std::string_view kInstanceId = "partitionInstanceId";
/// The id of the sub-partition inside it, where there is one (MIG: the compute instance id).
inline constexpr std::string_view kSubInstanceId = "partitionSubInstanceId";
}  // namespace partition_attr

/// What a partition is. Empty strings: the backend did not say.
struct Partition {
  std::string id;      ///< the partition's own device id ("MIG-...")
  std::string parent;  ///< partition_attr::kParent
  std::string kind;
  std::string profile;
  std::string placement;
  std::string instanceId;
  std::string subInstanceId;
  bool operator==(const Partition&) const = default;
};

/// The partition `device` is (its id and partition attributes); nullopt when it has no
/// partition_attr::kParent.
std::optional<Partition> partitionOf(const Device& device);
/// Writes `p`'s facts (all but its id) into `attributes`; empty ones are left out.
void setPartitionAttributes(const Partition& p, std::map<std::string, std::string>& attributes);
/// "<start>:<size>" split into its two numbers; nullopt when it is not that.
std::optional<std::pair<unsigned, unsigned>> parsePlacement(std::string_view placement);

/// Pod annotation key under which a limiter reports the partitions it made for the container
/// at `containerIndex` (ContainerGrant::containerIndex): "vgpu.io/partitions-<index>".
std::string madePartitionsKey(int containerIndex);
/// Whether `key` is a madePartitionsKey().
bool isMadePartitionsKey(std::string_view key);
/// The annotation's value: a JSON array of objects, each "id" and the partition attributes
/// (docs/wire-format.md, "Partitions made at Allocate").
std::string encodePartitions(const std::vector<Partition>& partitions);
/// Errors name the field that is wrong; every element needs "id" and "partitionOf".
Result<std::vector<Partition>> decodePartitions(std::string_view json);

}  // namespace vgpu
