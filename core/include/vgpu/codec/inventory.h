#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu {

/// The node inventory annotation (keys::nodeDevices(backend)): one backend's devices as
/// JSON, {"version":1,"devices":[{...}]}; docs/wire-format.md has the fields.
std::string encodeInventory(const std::vector<Device>& devices);

/// Decodes an inventory; every device's `backend` is set to `backend`. Errors (a clear
/// message, never a partial result): not JSON, truncated, wrong types, a missing required
/// field, a number out of range, an unknown major version, duplicate device ids or
/// indices. Unknown fields are ignored, so a newer agent may add some (wire-format.md).
Result<std::vector<Device>> decodeInventory(std::string_view json, std::string_view backend);

}  // namespace vgpu
