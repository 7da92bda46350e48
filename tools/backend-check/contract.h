#pragma once
// The contract every backend library meets, checked through its C table the way the
// loader, the scheduler and the node agent call it (docs/writing-a-backend.md, "Checking a
// backend").

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "report.h"
#include "vgpu/backend_params.h"

namespace vgpu::check {

enum class Profile {
  kFull,      ///< discovery and the limiter must be there and work
  kSkeleton,  ///< a fresh template: optional slots may be missing or answer UNSUPPORTED
};

struct ContractOptions {
  std::filesystem::path library;
  BackendParams params;  ///< the backend's config section, as the daemons build it
  Profile profile = Profile::kFull;
  /// Folders the limiter's mounts and device nodes may name on the host, besides the
  /// container's own host folder and /dev.
  std::vector<std::filesystem::path> allowedRoots;
  /// Options that point the backend at a vendor library that is not there.
  std::map<std::string, std::string> missingVendorOptions;
  /// A shell command that makes the first discovered device vanish (the fake's own knob).
  std::string vanishCommand;
  unsigned threads = 8;
};

/// Runs every check, recording one result per check in `report`.
void runContract(const ContractOptions& options, Report& report);

}  // namespace vgpu::check
