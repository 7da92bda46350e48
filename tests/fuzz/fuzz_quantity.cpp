// libFuzzer target: Quantity parsing never crashes, and its three answers agree.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vgpu/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto value = vgpu::parseQuantityValue(text);
  auto milli = vgpu::parseQuantityMilli(text);
  auto integer = vgpu::parseQuantityInteger(text);
  // Milli fits => value fits; value is milli / 1000 rounded away from zero.
  if (milli.ok()) {
    if (!value.ok()) std::abort();
    std::int64_t m = *milli;
    std::int64_t expected = m / 1000 + (m % 1000 > 0 ? 1 : 0) - (m % 1000 < 0 ? 1 : 0);
    if (*value != expected) std::abort();
    if (m % 1000 == 0 && (!integer.ok() || *integer != *value)) std::abort();
  }
  if (integer.ok() && (!value.ok() || *integer != *value)) std::abort();
  if (!value.ok() && (milli.ok() || integer.ok())) std::abort();
  return 0;
}
