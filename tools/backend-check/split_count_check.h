#pragma once
// The check that a backend's stated split count (ABI 1.10's split_count slot) is the one its
// discovery publishes: vgpu-sim places tenants by the statement, the node by the inventory.

#include <vector>

#include "report.h"
#include "vgpu/backend_abi.h"
#include "vgpu/device.h"

namespace vgpu::check {

/// `discovery.split_count`: for each discovered device whose model the backend states a
/// split count for (nonzero), that count equals the device's. Skipped where the slot is
/// absent or null (`present` false) or nothing was discovered.
void checkSplitCount(const vgpu_backend_table& table, bool present, vgpu_backend* instance,
                     const std::vector<Device>& devices, Report& report);

}  // namespace vgpu::check
