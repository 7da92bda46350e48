#pragma once
// Appending JSON text to a string by hand, for the extender's large answers (thousands of
// node names), where building a boost::json::value first would cost more than the answer.

#include <string>
#include <string_view>

namespace vgpu::scheduler {

/// Appends `text` as a JSON string literal. Quotes, backslashes and control characters are
/// escaped; other bytes (UTF-8) are copied, so `text` must be valid UTF-8, as everything
/// parsed from a request is.
void appendJsonString(std::string& out, std::string_view text);

}  // namespace vgpu::scheduler
