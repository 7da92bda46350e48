#pragma once
// Pods HAMi's scheduler placed (a cluster switching from HAMi with pods running): their
// hami.io/*-devices-allocated annotations say which devices, how much memory and compute
// each container holds, and the cache counts exactly that (docs/scheduler.md, "Switching
// from HAMi with pods running").

#include <optional>
#include <string>
#include <vector>

#include "vgpu/assignment.h"
#include "vgpu/backend_loader.h"
#include "vgpu/codec/hami_allocation.h"
#include "vgpu/node_state.h"
#include "vgpu/pod_info.h"
#include "vgpu/result.h"

namespace vgpu::scheduler {

/// What HAMi wrote on one pod, every vendor's key merged per container.
struct HamiPlacement {
  hami::ContainerDevices devices;
  std::vector<ContainerResources> containers;  ///< the pod's (names, init flags, limits)
};

/// The pod's HAMi placement; nullopt when it carries no hami.io/*-devices-allocated
/// annotation. Errors say why it cannot be used, in words for the log and the pod's event:
/// an unreadable list (the key and the decoder's words), more containers listed than the
/// pod has, hami.io/vgpu-node naming another node than spec.nodeName, a MIG allocation for
/// a device the list does not give that container.
Result<std::optional<HamiPlacement>> readHamiPlacement(const PodInfo& pod);

/// The placement as an assignment on `inventory` (devices found by UUID: Device::id is the
/// vendor UUID HAMi writes too; slots unnumbered, HAMi has none). Errors: a device the node
/// does not publish, or a device given to a container that asks for none of its backend's
/// resources.
Result<Assignment> resolveHamiPlacement(const HamiPlacement& placement, const NodeInventory& inventory,
                                        const BackendSet& backends);

}  // namespace vgpu::scheduler
