#include "vgpu/device.h"

namespace vgpu {

const char* toString(Health health) {
  switch (health) {
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
    case Health::kUnknown:
      return "unknown";
  }
  return "unknown";
}

}  // namespace vgpu
