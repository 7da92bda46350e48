#pragma once
// Runs the built vgpu-sim as a user would, for the tests of its reports.

#include <array>
#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace vgpu::testing {

struct SimRun {
  int exitCode;
  std::string out;
};

/// vgpu-sim with the build's backends and `args`; stdout captured (stderr goes to the test
/// log unless `args` redirects it).
inline SimRun runSim(const std::string& args) {
  const std::string command = std::string(VGPU_SIM_BINARY) + " --backend-dir " + VGPU_BACKEND_DIR + " " + args;
  SimRun run{-1, {}};
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) run.out.append(buf.data(), n);
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace vgpu::testing
