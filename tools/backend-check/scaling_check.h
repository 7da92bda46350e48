#pragma once
// The check that a backend applies or refuses memoryScaling and coreScaling: core passes them
// to the backend and does nothing with them itself, so a backend that ignores them publishes
// unscaled devices while the operator believes they are scaled.

#include "report.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"

namespace vgpu::check {

/// `create.memory_scaling`, `create.core_scaling`: create with the setting at 2 must either be
/// refused with words naming the key, or discover must report the first device that `places`
/// does not name (fixed slices have the hardware's sizes) with that field doubled, against
/// an instance created without the setting. Without working
/// discovery the check is skipped in the skeleton profile (`skeleton`) and fails otherwise.
void checkScaling(const vgpu_backend_table& table, const BackendParams& params, bool skeleton, Report& report);

}  // namespace vgpu::check
