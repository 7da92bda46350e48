#pragma once

#include <string>

#include "vgpu/backend_abi.h"
#include "vgpu/config.h"

namespace vgpu {

/// What a backend instance is created with: its config section with the node's override
/// applied. `nodeName` is empty on the scheduler.
struct BackendParams {
  std::string name;
  std::string nodeName;
  ResourceNamesConfig resources;
  BackendSettings settings;
};

/// A vgpu_backend_config view of `params`; valid while `params` lives and is unchanged.
class BackendConfigView {
 public:
  explicit BackendConfigView(const BackendParams& params);
  BackendConfigView(const BackendConfigView&) = delete;
  BackendConfigView& operator=(const BackendConfigView&) = delete;
  const vgpu_backend_config& c() const { return config_; }

 private:
  std::vector<vgpu_kv> options_;
  vgpu_backend_config config_{};
};

/// The C config copied back into BackendParams (strings copied; 0 and null = unset).
BackendParams paramsFromC(const vgpu_backend_config& config);

}  // namespace vgpu
