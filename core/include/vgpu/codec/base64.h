#pragma once
// Standard base64 (RFC 4648 section 4, with padding): admission JSONPatches travel in it,
// kubeconfig files carry certificates and keys in it.

#include <string>
#include <string_view>

#include "vgpu/result.h"

namespace vgpu {

std::string base64Encode(std::string_view data);

/// Whitespace (line breaks in kubeconfig files) is skipped. Errors name the offending
/// character and its position, or say that the length or padding is wrong.
Result<std::string> base64Decode(std::string_view text);

}  // namespace vgpu
