// libFuzzer target: the assignment decoder never crashes, and whatever it accepts
// re-encodes to a document that decodes to the same assignment.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "vgpu/codec/assignment_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto assignment = vgpu::decodeAssignment(text);
  if (!assignment.ok()) {
    if (assignment.error().message.empty()) std::abort();
    return 0;
  }
  auto again = vgpu::decodeAssignment(vgpu::encodeAssignment(*assignment));
  if (!again.ok() || *again != *assignment) std::abort();
  return 0;
}
