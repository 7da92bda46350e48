// The project's images for the real node (project_images.h): images.txt of a build folder
// read, or scripts/build-images.sh run with this build's binaries.
#include "project_images.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "child_process.h"

namespace vgpu::realk8s {
namespace fs = std::filesystem;

namespace {
constexpr const char* kBuildDir = VGPU_REALNODE_BUILD_DIR;
constexpr const char* kSourceDir = VGPU_REALNODE_SOURCE_DIR;

/// The images of `names` that `dir`/images.txt lists ("name ref archive" lines) and exist.
std::vector<ProjectImage> listed(const std::string& dir, const std::vector<std::string>& names) {
  std::map<std::string, ProjectImage> all;
  std::ifstream list(dir + "/images.txt");
  for (std::string name, ref, file; list >> name >> ref >> file;) all[name] = {name, ref, file};
  std::vector<ProjectImage> out;
  for (const auto& n : names)
    if (all.count(n) && fs::exists(all[n].archive)) out.push_back(all[n]);
  return out;
}
}  // namespace

Result<std::string> runProgram(const std::string& program, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env, const std::string& log,
                               std::chrono::seconds timeout) {
  e2e::ProcessOptions o;
  o.program = program;
  o.args = args;
  o.env = env;
  o.logFile = log;
  auto p = e2e::ChildProcess::start(std::move(o));
  if (!p.ok()) return p.error();
  const auto status = (*p)->waitExit(timeout);
  std::string line = program;
  for (const auto& a : args) line += " " + a;
  if (!status) return makeError("`" + line + "` did not finish in " + std::to_string(timeout.count()) + " s: " + (*p)->log());
  if (e2e::exitCodeOf(*status) != 0)
    return makeError("`" + line + "` exited with " + std::to_string(e2e::exitCodeOf(*status)) + ": " + (*p)->log());
  return (*p)->log();
}

Result<std::vector<ProjectImage>> projectImages(const RealCluster& cluster, const std::vector<std::string>& names) {
  if (auto built = listed(std::string(kBuildDir) + "/images", names); built.size() == names.size()) return built;
  const std::string out = cluster.dir() + "/images";
  std::vector<std::string> args{"--build-dir", kBuildDir, "--out", out, "--k8s-binary", cluster.binary(),
                                "--k8s-release", cluster.release()};
  for (const auto& n : names) args.insert(args.end(), {"--image", n});
  auto r = runProgram(std::string(kSourceDir) + "/scripts/build-images.sh", args,
                      {{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin"},
                       {"HOME", std::getenv("HOME") ? std::getenv("HOME") : "/root"},
                       {"VGPU_JOBS", "2"}},
                      cluster.dir() + "/build-images.log", std::chrono::seconds(900));
  if (!r.ok()) return r.error();
  auto built = listed(out, names);
  if (built.size() != names.size()) return makeError("build-images.sh did not list the images asked for in " + out);
  return built;
}

}  // namespace vgpu::realk8s
