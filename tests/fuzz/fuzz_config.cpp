// libFuzzer target: device-config.yaml parsing never crashes or throws, and the helpers
// work on whatever it accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "vgpu/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = vgpu::parseDeviceConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.error().message.rfind("fuzz.yaml", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& backend : config->backends) {
    if (config->backend(backend.name) != &backend) std::abort();
    (void)config->settingsFor(backend.name, "");
    for (const auto& node : config->nodes) (void)config->settingsFor(backend.name, node.name);
  }
  (void)config->enabledBackends();
  return 0;
}
