#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "vgpu/backend_abi.h"

namespace vgpu {

/// Pod or node annotations, key to value.
using Annotations = std::map<std::string, std::string>;

/// An extended resource a backend owns, and what it means to that backend.
struct ResourceName {
  std::string name;  ///< "nvidia.com/gpumem"
  vgpu_resource_role role = VGPU_RESOURCE_OTHER;
  bool advertised = false;  ///< Registered with the kubelet (device counts), or scheduler-only.
  bool operator==(const ResourceName&) const = default;
};

/// One container's name and its extended-resource limits, parsed from Quantities.
struct ContainerResources {
  std::string name;
  bool init = false;
  std::map<std::string, std::int64_t> limits;
};

}  // namespace vgpu
