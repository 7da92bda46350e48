#pragma once
// The vNPU templates of each Ascend chip (Huawei's documented table: each template fixes AI
// cores, AI CPUs and memory) and the fit of a request on a chip partitioned by them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/backend_abi.h"

namespace vgpu::ascend {

struct VnpuTemplate {
  std::string name;  ///< as dcmi_create_vdevice takes it: "vir02", "vir05_1c_16g"
  std::uint32_t aiCores = 0;
  std::uint32_t aiCpus = 0;  ///< 0 = the template does not state it
  std::uint64_t memoryMiB = 0;
};

/// One chip family: its AI cores and memory as the templates divide them.
struct ChipProfile {
  std::string chip;  ///< DCMI's chip_name: "910B3", "310P3"
  std::uint32_t aiCores = 0;
  std::uint64_t memoryMiB = 0;
  std::vector<VnpuTemplate> templates;  ///< smallest first: the order a request is matched in
};

/// The profile of a device model ("Ascend910B3", or the bare chip name "910B3"); null for a
/// chip without vNPU templates (offered whole only).
const ChipProfile* profileFor(std::string_view model);
/// How many vNPUs of the smallest template fit a chip (1 without a profile).
std::uint32_t maxVnpus(const ChipProfile& profile);

/// A placement token: a template's name, or this for a chip held whole.
inline constexpr const char* kWholeToken = "whole";

/// The smallest template (in table order) with at least `memoryMiB` and `computePercent` of
/// the chip's AI cores; nullopt when none is that large.
std::optional<VnpuTemplate> templateFor(const ChipProfile& profile, std::uint64_t memoryMiB,
                                        std::uint32_t computePercent);
/// A template by name, or nullopt.
std::optional<VnpuTemplate> templateNamed(const ChipProfile& profile, std::string_view name);

/// Refusal: no room on the chip for the template's AI cores (`needed`/`available` in cores).
inline constexpr int kReasonNoAiCores = VGPU_REASON_BACKEND + 1;

/// `fit` for one chip. `placed` (null: the grants' places are unknown) are the tokens of the
/// grants already on it; when it fits and `token` is not null, writes the grant's token.
/// `why`, when not null, gets the refusal in words.
void fitChip(const vgpu_device_request& request, const vgpu_device& device, const vgpu_device_usage& usage,
             const std::vector<std::string_view>* placed, vgpu_fit_result& result, std::string* token,
             std::string* why);

/// Words for kReasonNoAiCores.
std::string explainReason(const vgpu_fit_result& result);

}  // namespace vgpu::ascend
