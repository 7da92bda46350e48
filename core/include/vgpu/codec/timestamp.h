#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "vgpu/result.h"

namespace vgpu {

/// RFC 3339 timestamps in UTC with second precision ("2026-12-02T08:29:23Z"), the form
/// Kubernetes uses in metadata and our heartbeat and bind-time annotations.
std::string formatTimestamp(std::chrono::system_clock::time_point time);

/// Accepts "Z" or a numeric offset and optional fractional seconds; errors name the text.
Result<std::chrono::system_clock::time_point> parseTimestamp(std::string_view text);

}  // namespace vgpu
