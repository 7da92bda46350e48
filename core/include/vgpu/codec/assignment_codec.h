#pragma once

#include <string>
#include <string_view>

#include "vgpu/assignment.h"
#include "vgpu/result.h"

namespace vgpu {

/// The pod assignment annotation (keys::kPodAssignment) as JSON,
/// {"version":1,"node":"...","containers":[{"name":..,"init":..,"devices":[...]}]};
/// docs/wire-format.md has the fields. Writers call checkAssignment first: this writes
/// whatever it is given, also what decodeAssignment refuses.
std::string encodeAssignment(const Assignment& assignment);

/// What decodeAssignment refuses beyond the fields' types, with the same words: two
/// containers of one name, or one device (backend and id) granted twice to one container.
Status checkAssignment(const Assignment& assignment);

/// Errors as for decodeInventory: a clear message, never a partial result; also duplicate
/// container names, or one device granted twice to one container. Unknown fields are
/// ignored.
Result<Assignment> decodeAssignment(std::string_view json);

}  // namespace vgpu
