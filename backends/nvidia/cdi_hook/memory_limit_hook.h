#pragma once
// vgpu-cdi-hook's one job: as an OCI createContainer hook (declared in a CDI spec), set the
// NVIDIA driver's per-cgroup memory limit (R615+) of the new container on each of its GPUs.

#include <cstdint>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::nvidia::hook {

/// The soft limit the hook sets: none (0, nothing guaranteed) or the hard limit itself.
enum class SoftLimit : std::uint8_t { kNone, kHard };

struct HookOptions {
  struct Device {
    std::string uuid;        ///< GPU-...
    std::uint64_t memoryMiB = 0;  ///< the hard limit
  };
  std::vector<Device> devices;
  SoftLimit soft = SoftLimit::kNone;
  /// True: a failure only warns (the container then relies on libvgpu.so); false: it fails
  /// the container's start.
  bool preloadOnlyAcceptable = false;
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  /// For tests only: where sysfs and procfs are (the nameSpace given to NVML starts with
  /// sysRoot, so a test's fake cgroup tree is what the fake NVML records).
  std::string sysRoot = "/sys";
  std::string procRoot = "/proc";
};

/// The hook's command line after argv[0]: "memory-limits --device <uuid>=<MiB> [...]
/// [--soft-limit none|hard] [--on-failure fail|preload-only] [--nvml-library <path>]
/// [--sys-root <dir>] [--proc-root <dir>]". Errors name the bad argument.
Result<HookOptions> parseHookArgs(const std::vector<std::string>& args);

/// What the hook did, for its log line.
struct Applied {
  std::string nameSpace;  ///< the cgroup's sysfs path
  std::vector<std::string> devices;  ///< "GPU-...: 8000 MiB"
};

/// Reads the OCI state (`stateJson`: pid, bundle; linux.cgroupsPath of <bundle>/config.json),
/// finds the container's memory cgroup and sets the limits through NVML. Errors say which
/// step failed and why.
Result<Applied> applyMemoryLimits(const HookOptions& options, const std::string& stateJson);

}  // namespace vgpu::nvidia::hook
