#pragma once
// Which of its backend's count resources a device is served under. A backend that advertises
// several count resources (NVIDIA with migStrategy mixed: nvidia.com/gpu and one
// nvidia.com/mig-<profile> per profile) says, per device, the one that counts it; the node
// agent then lists each device to the kubelet under that resource only and refuses an Allocate
// of it under another. A device without the attribute is served under every advertised count
// resource of its backend (one count resource: no need to say).

#include <string_view>

#include "vgpu/device.h"

namespace vgpu {

namespace served_attr {
/// The count resource ("nvidia.com/mig-1g.5gb") the device is served under.
inline constexpr std::string_view kCountResource = "countResource";
}  // namespace served_attr

/// Whether the kubelet sees `device` under `resource`.
bool servedUnder(const Device& device, std::string_view resource);
/// The count resource `device` names, empty when it names none.
std::string_view countResourceOf(const Device& device);

}  // namespace vgpu
