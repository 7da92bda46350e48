// Resolves a container's memory cgroup (cgroup_path.h) for vgpu-cdi-hook, in both cgroup
// versions and both cgroup drivers of the runtimes (cgroupfs, systemd).

#include "cgroup_path.h"

#include <sstream>
#include <vector>

namespace vgpu::nvidia::hook {
namespace {

std::string trimSlashes(std::string path) {
  while (!path.empty() && path.front() == '/') path.erase(path.begin());
  while (!path.empty() && path.back() == '/') path.pop_back();
  return path;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!text.empty() && text.back() == sep) out.emplace_back();
  return out;
}

// "kubepods-burstable-pod1.slice" -> "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
// as systemd nests slices by the dashes of their names ("-.slice" is the root).
Result<std::string> expandSlice(const std::string& slice) {
  const std::string suffix = ".slice";
  if (slice == "-.slice") return std::string();
  if (slice.size() <= suffix.size() || slice.compare(slice.size() - suffix.size(), suffix.size(), suffix) != 0 ||
      slice.find('/') != std::string::npos)
    return makeError("\"" + slice + "\" is not a systemd slice name (like kubepods-burstable.slice)");
  const std::string name = slice.substr(0, slice.size() - suffix.size());
  if (name.front() == '-' || name.back() == '-' || name.find("--") != std::string::npos)
    return makeError("\"" + slice + "\" is not a systemd slice name (empty part between dashes)");
  std::string path, prefix;
  for (const auto& part : split(name, '-')) {
    prefix += (prefix.empty() ? "" : "-") + part;
    path += (path.empty() ? "" : "/") + prefix + suffix;
  }
  return path;
}

}  // namespace

Result<std::string> memoryCgroupFromProc(const std::string& procCgroupText) {
  std::string unified, memory;
  bool sawUnified = false, sawMemory = false;
  std::istringstream in(procCgroupText);
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path; the path may itself contain ':'.
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) sawUnified = true, unified = trimSlashes(path);
    for (const auto& c : split(controllers, ','))
      if (c == "memory") sawMemory = true, memory = trimSlashes(path);
  }
  if (sawMemory) {
    if (memory.empty()) return makeError("the process is in the root memory cgroup (not a container's)");
    return "memory/" + memory;
  }
  if (!sawUnified) return makeError("no cgroup v2 line (0::) and no v1 memory controller line");
  if (unified.empty()) return makeError("the process is in the root cgroup (not a container's)");
  return unified;
}

Result<std::string> memoryCgroupFromCgroupsPath(const std::string& cgroupsPath, bool v1) {
  if (cgroupsPath.empty()) return makeError("linux.cgroupsPath is empty");
  std::string rel;
  if (cgroupsPath.front() == '/') {
    rel = trimSlashes(cgroupsPath);  // cgroupfs driver: the path itself
  } else {
    const auto parts = split(cgroupsPath, ':');
    if (parts.size() != 3 || parts[2].empty())
      return makeError("linux.cgroupsPath \"" + cgroupsPath +
                       "\" is neither an absolute path (cgroupfs) nor slice:prefix:name (systemd)");
    auto slice = expandSlice(parts[0].empty() ? "system.slice" : parts[0]);
    if (!slice.ok()) return makeError("linux.cgroupsPath \"" + cgroupsPath + "\": " + slice.error().message);
    const std::string& name = parts[2];
    const std::string unit = name.ends_with(".slice") ? name : (parts[1].empty() ? name : parts[1] + "-" + name) + ".scope";
    rel = *slice + (slice->empty() ? "" : "/") + unit;
  }
  if (rel.empty()) return makeError("linux.cgroupsPath \"" + cgroupsPath + "\" names the root cgroup");
  for (const auto& part : split(rel, '/'))
    if (part == ".." || part == ".")
      return makeError("linux.cgroupsPath \"" + cgroupsPath + "\" has a . or .. component");
  return v1 ? "memory/" + rel : rel;
}

}  // namespace vgpu::nvidia::hook
