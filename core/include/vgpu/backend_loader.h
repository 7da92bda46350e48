#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/backend.h"
#include "vgpu/backend_params.h"
#include "vgpu/config.h"
#include "vgpu/result.h"

namespace vgpu {

/// The backends a process uses, by name. Refuses a second backend of the same name and a
/// resource name claimed by two backends, so lookups are unambiguous.
class BackendSet {
 public:
  /// Takes ownership; errors name both claimants.
  Status add(std::unique_ptr<Backend> backend);
  Backend* find(std::string_view name) const;
  /// The backend that owns `resource` (e.g. "nvidia.com/gpu"), or null.
  Backend* ownerOf(std::string_view resource) const;
  const std::vector<std::unique_ptr<Backend>>& all() const { return backends_; }
  bool empty() const { return backends_.empty(); }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

/// `<dir>/libvgpu-backend-<name>.so`.
std::filesystem::path backendLibraryPath(const std::filesystem::path& dir, std::string_view name);

/// `<directory of the running binary>/../lib/vgpu/backends`, where the install puts them.
std::filesystem::path defaultBackendDir();

/// Loads one backend library and creates its instance. Refused with a message naming the
/// file: a missing file, no entry symbol, a backend that refuses this loader's ABI, a
/// different major ABI version, a missing required slot, a name other than `params.name`,
/// and create() failing (its message included).
Result<std::unique_ptr<Backend>> loadBackend(const std::filesystem::path& library, const BackendParams& params);

/// What loadEnabledBackends achieved: the backends that loaded, and one error per backend
/// that did not (a failing backend never takes the others down).
struct BackendLoadOutcome {
  BackendSet backends;
  std::vector<Error> failures;
};

/// Loads every enabled backend of `config` from `dir`, with `nodeName`'s overrides applied
/// (empty on the scheduler).
BackendLoadOutcome loadEnabledBackends(const DeviceConfig& config, const std::filesystem::path& dir,
                                       const std::string& nodeName);

/// The same over several folders (vgpu-sim's repeated --backend-dir: the project's backends
/// and one built elsewhere): each backend from the first folder that holds its library;
/// one that none holds is refused naming the first folder's path and the others.
BackendLoadOutcome loadEnabledBackends(const DeviceConfig& config, const std::vector<std::filesystem::path>& dirs,
                                       const std::string& nodeName);

/// The params a backend section gives on `nodeName`.
BackendParams backendParams(const DeviceConfig& config, const BackendConfig& section, const std::string& nodeName);

}  // namespace vgpu
