#pragma once
// Helpers shared by the parsers in core/src (quantity, timestamp, JSON codecs, config).

#include <cstddef>
#include <string>
#include <string_view>

namespace vgpu::detail {

/// `text` in double quotes for an error message: control and non-ASCII bytes become \xNN and
/// anything past `maxShown` bytes is cut to "...", so hostile input cannot flood a log.
std::string quoteForMessage(std::string_view text, std::size_t maxShown = 64);

}  // namespace vgpu::detail
