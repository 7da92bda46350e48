// vgpu-cdi-hook (memory_limit_hook.h): reads the OCI state, resolves the container's cgroup
// and sets nvmlDeviceSetMemoryLimits_v1 on each GPU, looked up at run time.

#include "memory_limit_hook.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "../nvml.h"
#include "cgroup_path.h"

namespace vgpu::nvidia::hook {
namespace json = boost::json;
namespace {

// Plain strings and access(2) rather than std::filesystem: the hook runs on hosts whose
// libstdc++ may predate it (GCC 8).
std::string join(const std::string& a, const std::string& b) { return a.empty() || a.back() == '/' ? a + b : a + "/" + b; }
bool isDirectory(const std::string& path) { return ::access(join(path, ".").c_str(), F_OK) == 0; }
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kMaxMiB = 1ull << 30;  // 1 PiB: anything above is a typo

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct OciState {
  long pid = 0;
  std::string bundle;
};

Result<OciState> parseState(const std::string& stateJson) {
  boost::system::error_code ec;
  json::value v = json::parse(stateJson, ec);
  if (ec || !v.is_object()) return makeError("the OCI state on stdin is not a JSON object");
  const auto& o = v.as_object();
  OciState s;
  if (const auto* pid = o.if_contains("pid"); pid != nullptr && pid->is_int64() && pid->as_int64() > 0)
    s.pid = static_cast<long>(pid->as_int64());
  else
    return makeError("the OCI state on stdin has no pid (is this a createContainer hook?)");
  if (const auto* bundle = o.if_contains("bundle"); bundle != nullptr && bundle->is_string())
    s.bundle = std::string(bundle->as_string());
  return s;
}

// linux.cgroupsPath of the bundle's config.json; empty when it has none.
Result<std::string> cgroupsPathOf(const std::string& bundle) {
  if (bundle.empty()) return std::string();
  auto text = readFile(join(bundle, "config.json"));
  if (!text.ok()) return makeError("the OCI bundle: " + text.error().message);
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  if (ec || !v.is_object()) return makeError(bundle + "/config.json is not a JSON object");
  const auto* linux = v.as_object().if_contains("linux");
  const auto* path = linux != nullptr && linux->is_object() ? linux->as_object().if_contains("cgroupsPath") : nullptr;
  return path != nullptr && path->is_string() ? std::string(path->as_string()) : std::string();
}

// The container's memory cgroup as a sysfs path that exists. /proc/<pid>/cgroup is where the
// process is; the config's cgroupsPath is the fallback (and named in the error).
Result<std::string> containerCgroup(const HookOptions& options, const OciState& state) {
  const std::string cgroupRoot = join(options.sysRoot, "fs/cgroup");
  const bool v2 = exists(join(cgroupRoot, "cgroup.controllers"));
  std::string tried;
  const std::string procFile = join(join(options.procRoot, std::to_string(state.pid)), "cgroup");
  if (auto text = readFile(procFile); !text.ok()) {
    tried = text.error().message;
  } else if (auto rel = memoryCgroupFromProc(*text); !rel.ok()) {
    tried = procFile + ": " + rel.error().message;
  } else if (isDirectory(join(cgroupRoot, *rel))) {
    return join(cgroupRoot, *rel);
  } else {
    tried = procFile + " names " + join(cgroupRoot, *rel) + ", which does not exist";
  }
  auto cgroupsPath = cgroupsPathOf(state.bundle);
  if (!cgroupsPath.ok()) return makeError(tried + "; " + cgroupsPath.error().message);
  if (cgroupsPath->empty()) return makeError(tried + "; and the bundle's config.json has no linux.cgroupsPath");
  auto rel = memoryCgroupFromCgroupsPath(*cgroupsPath, !v2);
  if (!rel.ok()) return makeError(tried + "; " + rel.error().message);
  if (!isDirectory(join(cgroupRoot, *rel)))
    return makeError(tried + "; linux.cgroupsPath \"" + *cgroupsPath + "\" names " + join(cgroupRoot, *rel) +
                     ", which does not exist");
  return join(cgroupRoot, *rel);
}

}  // namespace

Result<HookOptions> parseHookArgs(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "memory-limits")
    return makeError("expected the command memory-limits (vgpu-cdi-hook memory-limits --device <uuid>=<MiB> ...)");
  HookOptions o;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) return makeError(flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--device") {
      const auto eq = value.find('=');
      std::uint64_t mib = 0;
      const char* end = value.data() + value.size();
      if (eq == std::string::npos || eq == 0 ||
          std::from_chars(value.data() + eq + 1, end, mib).ptr != end || eq + 1 == value.size() || mib == 0 ||
          mib > kMaxMiB)
        return makeError("--device " + value + ": expected <GPU UUID>=<MiB>, MiB 1 to " + std::to_string(kMaxMiB));
      o.devices.push_back({value.substr(0, eq), mib});
    } else if (flag == "--soft-limit") {
      if (value == "none") o.soft = SoftLimit::kNone;
      else if (value == "hard") o.soft = SoftLimit::kHard;
      else return makeError("--soft-limit " + value + ": expected none or hard");
    } else if (flag == "--on-failure") {
      if (value == "fail") o.preloadOnlyAcceptable = false;
      else if (value == "preload-only") o.preloadOnlyAcceptable = true;
      else return makeError("--on-failure " + value + ": expected fail or preload-only");
    } else if (flag == "--nvml-library") {
      if (value.empty()) return makeError("--nvml-library needs a path");
      o.nvmlLibrary = value;
    } else if (flag == "--sys-root" || flag == "--proc-root") {
      if (value.empty() || value.front() != '/') return makeError(flag + " " + value + ": expected an absolute path");
      (flag == "--sys-root" ? o.sysRoot : o.procRoot) = value;
    } else {
      return makeError("unknown argument " + flag);
    }
  }
  if (o.devices.empty()) return makeError("no --device <uuid>=<MiB> given: nothing to limit");
  return o;
}

Result<Applied> applyMemoryLimits(const HookOptions& options, const std::string& stateJson) {
  auto state = parseState(stateJson);
  if (!state.ok()) return std::move(state).error();
  auto cgroup = containerCgroup(options, *state);
  if (!cgroup.ok()) return makeError("cannot find the cgroup of container process " + std::to_string(state->pid) + ": " +
                                     cgroup.error().message);
  auto session = NvmlSession::open(options.nvmlLibrary);
  if (!session.ok()) return std::move(session).error();
  const NvmlFunctions& fn = (*session)->fn();
  if (fn.deviceSetMemoryLimits == nullptr)
    return makeError("the NVIDIA driver's NVML (" + options.nvmlLibrary +
                     ") has no nvmlDeviceSetMemoryLimits_v1: per-cgroup memory limits need driver r615 or newer");
  if (fn.deviceGetHandleByUUID == nullptr) return makeError("NVML has no nvmlDeviceGetHandleByUUID");
  Applied applied{*cgroup, {}};
  for (const auto& d : options.devices) {
    nvml::Device device = nullptr;
    if (auto rc = fn.deviceGetHandleByUUID(d.uuid.c_str(), &device); rc != nvml::kSuccess)
      return makeError("GPU " + d.uuid + ": " + (*session)->describe("nvmlDeviceGetHandleByUUID", rc));
    const std::uint64_t hard = d.memoryMiB * kMiB;
    nvmlSetMemoryLimits_v1_t limits{applied.nameSpace.c_str(), options.soft == SoftLimit::kHard ? hard : 0, hard};
    if (auto rc = fn.deviceSetMemoryLimits(device, &limits); rc != nvml::kSuccess)
      return makeError("GPU " + d.uuid + ", cgroup " + applied.nameSpace + ": " +
                       (*session)->describe("nvmlDeviceSetMemoryLimits_v1", rc) +
                       (rc == NVML_ERROR_NO_PERMISSION ? " (the hook must run as root)" : ""));
    applied.devices.push_back(d.uuid + ": " + std::to_string(d.memoryMiB) + " MiB");
  }
  return applied;
}

}  // namespace vgpu::nvidia::hook
