#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu {

/// One device given to one container, with the slice of it the container may use.
/// `slot` names which of the device's split-count virtual devices the kubelet hands over
/// (DESIGN.md 6a); -1 until the scheduler binds the pod.
struct DeviceGrant {
  std::string backend;
  std::string deviceId;
  int deviceIndex = 0;  ///< Device::index on the node, for env such as *_LIMIT_<i>.
  std::uint64_t memoryMiB = 0;
  std::uint32_t compute = 0;
  int slot = -1;
  std::int32_t priority = -1;  ///< The request's task priority (backend-defined); -1 = unset.
  /// Where on the device the grant sits, the backend's opaque token (Allocator::fitPlaced);
  /// empty for devices whose fit does not place grants.
  std::string placement = {};

  bool operator==(const DeviceGrant&) const = default;
};

/// The devices one container got. Init containers are listed with `init` set, in the
/// pod's order, so container indices stay aligned with the pod spec.
struct ContainerAssignment {
  std::string name;
  bool init = false;
  std::vector<DeviceGrant> devices;

  bool operator==(const ContainerAssignment&) const = default;
};

/// Where a pod was placed and which devices each of its containers got. Written on the pod
/// as an annotation at bind; the scheduler rebuilds device usage from it.
struct Assignment {
  std::string node;
  std::vector<ContainerAssignment> containers;

  const ContainerAssignment* container(const std::string& name) const {
    for (const auto& c : containers)
      if (c.name == name) return &c;
    return nullptr;
  }
  bool operator==(const Assignment&) const = default;
};

}  // namespace vgpu
