// libFuzzer target: the inventory decoder never crashes, and whatever it accepts
// re-encodes to a document that decodes to the same devices.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vgpu/codec/inventory.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto devices = vgpu::decodeInventory(text, "fuzz");
  if (!devices.ok()) {
    if (devices.error().message.empty()) std::abort();
    return 0;
  }
  auto again = vgpu::decodeInventory(vgpu::encodeInventory(*devices), "fuzz");
  if (!again.ok() || *again != *devices) std::abort();
  return 0;
}
