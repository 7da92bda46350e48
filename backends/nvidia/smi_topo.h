#pragma once
// `nvidia-smi topo -m`: the link matrix between GPUs where NVML is not used.

#include <optional>
#include <string_view>
#include <vector>

#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu::nvidia {

/// One GPU pair of the matrix in vendor-neutral words.
struct TopoCell {
  LinkClass linkClass = LinkClass::kUnknown;
  std::uint32_t lanes = 0;
};

/// The GPU-by-GPU part of `nvidia-smi topo -m` (rows and columns GPU0, GPU1...; NIC columns,
/// CPU and NUMA affinity and the legend are skipped), indexed by the GPU numbers: NV<n>
/// `direct` with n lanes, PIX `pcie-switch`, PXB `pcie-switches`, PHB `pcie-host-bridge`,
/// NODE `same-numa`, SYS (SOC in old drivers) `cross-numa`; X and words it does not know
/// leave the cell empty. Errors: no header naming GPU columns.
Result<std::vector<std::vector<std::optional<TopoCell>>>> parseTopoMatrix(std::string_view text);

}  // namespace vgpu::nvidia
