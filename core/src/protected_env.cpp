#include "vgpu/allocator.h"

namespace vgpu {

bool ProtectedEnv::matches(std::string_view name) const {
  if (!pattern.empty() && pattern.back() == '*')
    return name.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1));
  return name == pattern;
}

const std::vector<ProtectedEnv>& Allocator::protectedEnv() const {
  static const std::vector<ProtectedEnv> kNone;
  return kNone;
}

}  // namespace vgpu
