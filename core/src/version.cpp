#include "vgpu/version.h"

namespace vgpu {

const char* versionString() { return "0.1.0"; }

}  // namespace vgpu
