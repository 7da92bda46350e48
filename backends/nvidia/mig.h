#pragma once
// Multi-Instance GPU: what a MIG-capable GPU reports through NVML (its GPU instance profiles
// and their placements, the MIG devices that exist on it), read the same way for every
// product: nothing here is a table per model.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nvml.h"
#include "vgpu/partition.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// How MIG devices are served (the NVIDIA device plugin's strategies).
enum class MigStrategy : std::uint8_t {
  kNone,    ///< MIG GPUs are listed and refused (reason kReasonMigEnabled)
  kSingle,  ///< every MIG device of the node is alike and served as nvidia.com/gpu
  kMixed,   ///< each MIG device is served as nvidia.com/mig-<profile>
};

/// How this node serves MIG devices (backends.<name>.options.migStrategy, migProfiles).
struct MigServing {
  MigStrategy strategy = MigStrategy::kNone;
  /// mixed: the profiles served, each as the resource <domain>/mig-<profile>.
  std::vector<std::string> profiles;
  /// Dynamic MIG (options.migManaged): GPUs whose instances the backend creates on demand,
  /// by UUID, or all GPUs in MIG mode.
  bool manageAll = false;
  std::set<std::string> managed;
  /// options.migAllowedProfiles: the profiles dynamic MIG may create (empty = all the GPU has).
  std::vector<std::string> allowed;
  /// options.migStateDir: the node agent's records of the instances it created.
  std::string stateDir = "/var/lib/vgpu/mig";

  bool manages(const std::string& gpuUuid) const { return manageAll || managed.contains(gpuUuid); }
  bool dynamic() const { return manageAll || !managed.empty(); }
};

/// The request constraint that carries a mixed-strategy profile to the fit: an entry of
/// vgpu_device_request.include_models, "mig-profile=1g.5gb", that the NVIDIA fit takes out
/// (it is not a model substring) and matches against the device's migProfile attribute.
inline constexpr const char* kMigProfileConstraint = "mig-profile=";

/// A GPU instance profile as the GPU reports it.
struct MigProfile {
  unsigned id = 0;               ///< NVML profile id (what create and placements take)
  std::string name;              ///< "3g.20gb" (NVML's name without "MIG ")
  unsigned slices = 0;           ///< compute slices
  unsigned instances = 0;        ///< how many may exist at once
  std::uint64_t memoryMiB = 0;
  unsigned placementSize = 0;    ///< memory slices one instance takes
  std::vector<unsigned> starts;  ///< first memory slices it may start at
};

/// A MIG device (one compute instance in its GPU instance) that exists on a GPU.
struct MigDevice {
  std::string uuid;          ///< "MIG-..."
  unsigned gpuInstanceId = 0;
  unsigned computeInstanceId = 0;
  unsigned profileId = 0;
  std::string profile;       ///< "1g.5gb", or "1c.3g.20gb" for a compute instance smaller than its GPU instance
  unsigned start = 0;        ///< first memory slice of its GPU instance
  unsigned size = 0;         ///< memory slices of its GPU instance
  std::uint64_t memoryMiB = 0;
};

/// "MIG 1g.5gb" -> "1g.5gb"; without NVML's name: "<slices>g.<GiB rounded up>gb", as the
/// product names go (4864 MiB -> 5gb, 19968 -> 20gb, 81152 -> 80gb).
std::string migProfileName(const char* nvmlName, unsigned slices, std::uint64_t memoryMiB);

/// The GPU instance profiles `gpu` reports, with their placements. Empty when the GPU has
/// no MIG or the driver lacks the calls. Errors: a query that fails otherwise (names it).
Result<std::vector<MigProfile>> readMigProfiles(const NvmlSession& nvml, nvml::Device gpu);

/// The MIG devices on `gpu` (MIG mode on), named with `profiles`. Errors name the failing call.
Result<std::vector<MigDevice>> readMigDevices(const NvmlSession& nvml, nvml::Device gpu,
                                              const std::vector<MigProfile>& profiles);

/// The resource that serves MIG devices of `profile` under migStrategy mixed:
/// "<domain of the count resource>/mig-<profile>" (nvidia.com/gpu -> nvidia.com/mig-1g.5gb).
std::string migResourceName(const std::string& countResource, const std::string& profile);

/// `mig` on GPU `parentUuid` as a partition in core's words (vgpu/partition.h): kind "mig",
/// instance = its GPU instance id, sub-instance = its compute instance id.
Partition migPartition(const std::string& parentUuid, const MigDevice& mig);

/// "slices 4-7" / "slice 5".
std::string describeSlices(unsigned start, unsigned size);

}  // namespace vgpu::nvidia
