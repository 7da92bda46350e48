// libFuzzer target: RFC 3339 parsing never crashes; what parses formats and parses back.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vgpu/codec/timestamp.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = vgpu::parseTimestamp(text);
  if (!t.ok()) return 0;
  auto again = vgpu::parseTimestamp(vgpu::formatTimestamp(*t));
  if (!again.ok()) std::abort();
  if (*again != std::chrono::floor<std::chrono::seconds>(*t)) std::abort();
  return 0;
}
