// vgpu-backend-check: loads one libvgpu-backend-<name>.so with a backend section of
// device-config.yaml and checks the contract the loader, the scheduler and the node agent
// rely on. One line per check and a summary (or --json); exit 1 when a check fails, 2 on
// bad usage. See docs/writing-a-backend.md, "Checking a backend".

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "contract.h"
#include "report.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"

namespace {

constexpr const char* kUsage = R"(usage: vgpu-backend-check --config FILE --backend NAME [options]

Loads libvgpu-backend-NAME.so with the backends.NAME section of FILE (device-config.yaml,
with the --node override applied, as the node agent does) and checks its contract.

  --config FILE            device-config.yaml with a backends.NAME section
  --backend NAME           the backend to check
  --node NODE              apply the nodes[] override of NODE (default: none)
  --library PATH           the library (default: DIR/libvgpu-backend-NAME.so)
  --backend-dir DIR        where the backends are (default: <bin>/../lib/vgpu/backends)
  --profile full|skeleton  full (default): discovery and the limiter must work;
                           skeleton: a fresh template, UNSUPPORTED is accepted
  --allowed-root DIR       a host folder the limiter's mounts and device nodes may use
                           besides the container's folder and /dev (repeatable)
  --missing-vendor KEY=VALUE  an option that points the backend at a missing vendor
                           library; discover must then fail with words (repeatable)
  --vanish-command CMD     a shell command that makes the first device disappear
                           (the fake's knob); calls afterwards must answer in words
  --threads N              concurrent grants (default 8, at most the split count)
  --json                   one JSON document instead of lines
)";

int usageError(const std::string& message) {
  std::cerr << "vgpu-backend-check: " << message << "\n\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vgpu;
  std::string configPath, backend, node, library, backendDir, profile = "full", vanish;
  check::ContractOptions options;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--config" ? value(configPath)
               : arg == "--backend" ? value(backend)
               : arg == "--node" ? value(node)
               : arg == "--library" ? value(library)
               : arg == "--backend-dir" ? value(backendDir)
               : arg == "--profile" ? value(profile)
               : arg == "--vanish-command" ? value(options.vanishCommand)
               : false) {
    } else if (arg == "--allowed-root" && value(v)) {
      options.allowedRoots.emplace_back(v);
    } else if (arg == "--missing-vendor" && value(v)) {
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) return usageError("--missing-vendor wants KEY=VALUE, not \"" + v + "\"");
      options.missingVendorOptions[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (arg == "--threads" && value(v)) {
      try {
        options.threads = static_cast<unsigned>(std::stoul(v));
      } catch (const std::exception&) {
        return usageError("--threads wants a number, not \"" + v + "\"");
      }
    } else {
      return usageError("unknown or incomplete argument \"" + std::string(arg) + "\"");
    }
  }
  if (configPath.empty() || backend.empty()) return usageError("--config and --backend are required");
  if (profile == "full") options.profile = check::Profile::kFull;
  else if (profile == "skeleton") options.profile = check::Profile::kSkeleton;
  else return usageError("--profile is full or skeleton, not \"" + profile + "\"");

  auto config = loadDeviceConfig(configPath);
  if (!config.ok()) {
    std::cerr << "vgpu-backend-check: " << config.error().message << "\n";
    return 2;
  }
  const BackendConfig* section = config->backend(backend);
  if (section == nullptr) {
    std::cerr << "vgpu-backend-check: " << configPath << " has no backends." << backend << " section\n";
    return 2;
  }
  options.params = backendParams(*config, *section, node);
  options.library = library.empty()
                        ? backendLibraryPath(backendDir.empty() ? defaultBackendDir() : std::filesystem::path(backendDir), backend)
                        : std::filesystem::absolute(library);  // dlopen searches a bare name elsewhere

  check::Report report;
  check::runContract(options, report);
  report.finishStdoutCheck();
  report.print(json, backend, options.library.string(), profile);
  return report.failures() == 0 ? 0 : 1;
}
