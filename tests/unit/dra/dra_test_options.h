#pragma once
// vgpu-dra-plugin's options as the DRA tests start it: everything under one test folder, the
// sim backend from the build tree, the apiserver double's URL, resyncs by hand.

#include <chrono>
#include <filesystem>
#include <string>

#include "dra_agent.h"

namespace vgpu::dra::testing {

inline DraAgentOptions draTestOptions(const std::filesystem::path& dir, const std::string& apiUrl,
                                      const std::string& configFile = "device-config.yaml") {
  DraAgentOptions o;
  o.nodeName = "node-1";
  o.configPath = (dir / configFile).string();
  o.backendDir = VGPU_BACKEND_DIR;
  o.registrationDir = (dir / "reg").string();
  o.pluginDir = (dir / "plugins").string();
  o.cdiDir = (dir / "cdi").string();
  o.stateDir = (dir / "state").string();
  o.metricsAddress = "127.0.0.1:0";
  o.apiConfig.server = apiUrl;
  o.resyncInterval = std::chrono::seconds(60);  // tests resync by hand
  o.regionTmpfs = deviceplugin::FolderTmpfs::kOff;  // mounts are tested in claim_tmpfs_test
  return o;
}

}  // namespace vgpu::dra::testing
