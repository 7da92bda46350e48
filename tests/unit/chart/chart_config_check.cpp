// chart_config_check: what the chart test asks of vgpu's own code, without a cluster.
//
//   chart_config_check parse <device-config.yaml>
//       Parses the file with loadDeviceConfig, as both daemons do at start-up, then loads
//       its enabled backends as the scheduler does (no node name), so options a backend
//       refuses are caught too.
//   chart_config_check resources <backend-dir> <backend>...
//       Loads each backend with its default resource names and prints one line per
//       resource: "<backend> <resource> advertised|scheduler-only".
//   chart_config_check reserved-annotations
//       Prints the pod annotations only vgpu writes (keys::kReservedPodAnnotations), one a
//       line: the security webhook's match condition must name the same.
// Exit status 0 on success; errors go to stderr with the file or backend named.
#include <cstdio>
#include <iostream>
#include <string>

#include "vgpu/annotations.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"

namespace {

int parse(const std::string& file, const std::string& backendDir) {
  auto config = vgpu::loadDeviceConfig(file);
  if (!config.ok()) {
    std::cerr << config.error().message << "\n";
    return 1;
  }
  auto loaded = vgpu::loadEnabledBackends(*config, backendDir, "");
  for (const auto& failure : loaded.failures) std::cerr << file << ": " << failure.message << "\n";
  if (!loaded.failures.empty()) return 1;
  for (const auto& b : loaded.backends.all()) std::cout << "loaded " << b->name() << "\n";
  return 0;
}

int resources(const std::string& backendDir, int count, char** names) {
  int status = 0;
  for (int i = 0; i < count; ++i) {
    vgpu::DeviceConfig config;
    vgpu::BackendConfig section;
    section.name = names[i];
    section.enabled = true;  // resources left unset: the backend's defaults
    config.backends.push_back(section);
    auto loaded = vgpu::loadEnabledBackends(config, backendDir, "");
    for (const auto& failure : loaded.failures) {
      std::cerr << "backend " << names[i] << ": " << failure.message << "\n";
      status = 1;
    }
    for (const auto& b : loaded.backends.all())
      for (const auto& r : b->allocator().resources())
        std::cout << names[i] << " " << r.name << " " << (r.advertised ? "advertised" : "scheduler-only") << "\n";
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "parse" && argc == 4) return parse(argv[2], argv[3]);
  if (mode == "resources" && argc >= 4) return resources(argv[2], argc - 3, argv + 3);
  if (mode == "reserved-annotations" && argc == 2) {
    for (std::string_view key : vgpu::keys::kReservedPodAnnotations) std::cout << key << "\n";
    return 0;
  }
  std::cerr << "usage: chart_config_check parse <device-config.yaml> <backend-dir>\n"
               "       chart_config_check resources <backend-dir> <backend>...\n"
               "       chart_config_check reserved-annotations\n";
  return 2;
}
