#pragma once
// The simulated machine described by VGPU_FAKE_GPU_CONFIG (see ../README.md for the format).

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::fakegpu {

/// One simulated GPU, as written on a `gpu` line.
struct GpuSpec {
  std::string uuid;           ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  unsigned char uuidBytes[16] = {};
  std::string name;
  uint64_t memoryMib = 0;
  int smCount = 0;
  int ccMajor = 0;
  int ccMinor = 0;
  std::string pciBusId;       ///< "00000000:17:00.0" (NVML form, upper-case hex)
  unsigned pciDomain = 0, pciBus = 0, pciDevice = 0, pciFunction = 0;
  unsigned pciDeviceId = 0x233010DE;  ///< devId<<16 | vendor, as nvmlPciInfo_t holds it
  unsigned minor = 0;
  int numa = -1;              ///< -1: not a NUMA-attributed device
  bool mig = false;
  std::string migModel;       ///< `mig_profiles`: whose MIG profiles NVML reports; empty = none
  uint64_t contextMib = 0;    ///< device memory each context takes, as a real driver's overhead
  int nvmlError = 0;          ///< nvmlReturn_t every per-device NVML query returns; 0 = healthy
  /// NVLinks by link number: the GPU index at the far end, or -1 for an NVSwitch
  /// (`nvlink` and `nvswitch` lines, in the order given).
  std::vector<int> nvlinkPeers;
};

/// A PCIe path between two GPUs other than the default (`pcie` lines).
struct PciePathSpec {
  unsigned gpu = 0, peer = 0;
  int level = 0;  ///< nvmlGpuTopologyLevel_t
};

/// One Xid event to deliver through NVML event sets.
struct XidSpec {
  unsigned gpu = 0;
  unsigned long long code = 0;
  unsigned delayMs = 0;  ///< after the event set is registered for the device
};

/// The whole simulated machine plus its injected faults.
struct MachineConfig {
  std::vector<GpuSpec> gpus;
  std::vector<XidSpec> xids;
  /// nvmlDeviceGetTopologyCommonAncestor answers these; other pairs: NODE on the same NUMA
  /// node, SYSTEM across.
  std::vector<PciePathSpec> pciePaths;
  int nvmlInitError = 0;  ///< nvmlReturn_t for nvmlInit*; 0 = succeed
  int cuInitError = 0;    ///< CUresult for cuInit; 0 = succeed
  std::string error;      ///< non-empty: the file was malformed; says file, line and why
  std::string source;     ///< the file it came from, or "(default)"
};

/// Parses the text of a config file. `origin` names it in error messages.
MachineConfig parseMachineConfig(const std::string& text, const std::string& origin);

/// Reads VGPU_FAKE_GPU_CONFIG (or the one default GPU when unset). Never throws.
MachineConfig loadMachineConfig();

/// nvmlReturn_t by name ("GPU_IS_LOST", "NVML_ERROR_GPU_IS_LOST") or number; -1 if unknown.
int nvmlReturnFromName(const std::string& name);
/// CUresult by name ("CUDA_ERROR_NO_DEVICE", "NO_DEVICE") or number; -1 if unknown.
int cuResultFromName(const std::string& name);

}  // namespace vgpu::fakegpu
