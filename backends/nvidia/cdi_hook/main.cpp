// vgpu-cdi-hook: the program a container runtime runs as a createContainer hook (declared in
// a CDI spec the NVIDIA backend writes); see memory_limit_hook.h and docs/backends/nvidia.md.

#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "memory_limit_hook.h"

int main(int argc, char** argv) {
  using namespace vgpu::nvidia::hook;
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  auto options = parseHookArgs(args);
  if (!options.ok()) {
    std::cerr << "vgpu-cdi-hook: " << options.error().message << "\n";
    return 2;
  }
  const std::string state((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto applied = applyMemoryLimits(*options, state);
  if (!applied.ok()) {
    if (options->preloadOnlyAcceptable) {
      std::cerr << "vgpu-cdi-hook: warning: no driver memory limit, libvgpu.so alone enforces memory: "
                << applied.error().message << "\n";
      return 0;
    }
    std::cerr << "vgpu-cdi-hook: the container's GPU memory limit cannot be set, refusing to start it: "
              << applied.error().message << "\n";
    return 1;
  }
  std::cerr << "vgpu-cdi-hook: driver memory limit set for cgroup " << applied->nameSpace << ":";
  for (const auto& d : applied->devices) std::cerr << " " << d;
  std::cerr << "\n";
  return 0;
}
