#pragma once
// The link matrix between this node's GPUs, read from NVML and published in the inventory's
// vendor-neutral words (vgpu::DeviceLink): NVLink bridges are `direct` links, NVLink into
// NVSwitches a `switch-fabric`, everything else the PCIe path NVML's common ancestor names.

#include <string>
#include <vector>

#include "nvml.h"
#include "vgpu/device.h"

namespace vgpu::nvidia {

/// One GPU as the link reader needs it.
struct LinkedGpu {
  nvml::Device handle = nullptr;
  std::string uuid;
  unsigned pciDomain = 0, pciBus = 0, pciDevice = 0;
};

/// The class of a PCIe path by NVML's common-ancestor level (unknown for other values).
LinkClass classOfLevel(nvml::TopologyLevel level);

/// Each GPU's links to the others (result[i] belongs to gpus[i]). A pair NVML cannot place
/// is left out (unknown); without the NVML functions every list is empty.
std::vector<std::vector<DeviceLink>> readNvmlLinks(const NvmlFunctions& f, const std::vector<LinkedGpu>& gpus);

}  // namespace vgpu::nvidia
