#pragma once
// The MIG GPU instance profiles of the products the fake NVML models, with the placements the
// hardware allows (what nvidia-smi mig -lgip / -lgipp print on them). Facts, not policy: the
// NVIDIA backend never sees this table, only what NVML answers from it.

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::fakegpu {

struct MigProfileSpec {
  unsigned index;        ///< NVML_GPU_INSTANCE_PROFILE_* (what ProfileInfo takes)
  unsigned id;           ///< the profile id (what create and placements take)
  const char* name;      ///< "MIG 1g.5gb", as NVML's v2 info names it
  unsigned slices;       ///< compute slices
  unsigned instances;    ///< how many may exist at once
  unsigned sms;          ///< multiprocessors
  unsigned copyEngines, decoders, encoders, jpegs, ofas;
  std::uint64_t memoryMb;
  unsigned memorySlices;        ///< placement size
  std::vector<unsigned> starts; ///< allowed first memory slices
};

struct MigModel {
  const char* key;       ///< the config's mig_profiles value
  unsigned memorySlices; ///< 8 on A100 and H100
  unsigned computeSlices;
  std::vector<MigProfileSpec> profiles;
};

/// The model for a config key ("a100-40gb", "h100-80gb"); null if unknown.
const MigModel* findMigModel(const std::string& key);
/// The keys known, for error messages ("a100-40gb, h100-80gb").
std::string migModelKeys();

}  // namespace vgpu::fakegpu
