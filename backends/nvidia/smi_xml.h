#pragma once
// The fallback when NVML cannot be used in this process: `nvidia-smi -q -x`, parsed.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu_info.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// The GPUs of an `nvidia-smi -q -x` document (DTD v11..v13). Any field may be "N/A": such
/// fields stay unknown; a GPU without a usable UUID or memory size is returned with `error`
/// set rather than dropped. Errors: not XML, or no <nvidia_smi_log> root.
Result<std::vector<GpuInfo>> parseSmiXml(std::string_view xml);

/// "81920 MiB" -> 81920 (KiB, MiB, GiB accepted); nullopt for "N/A" or anything else.
std::optional<std::uint64_t> parseMiB(std::string_view text);

/// Runs `program` (a path, or a name looked up on PATH) with `args` and returns its stdout.
/// Errors: it cannot start, exits non-zero (its stderr quoted), is killed by a signal, or runs
/// past `timeout` (then it is killed).
Result<std::string> runProgram(const std::string& program, const std::vector<std::string>& args,
                               std::chrono::milliseconds timeout);

}  // namespace vgpu::nvidia
