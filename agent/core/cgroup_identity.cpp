// Reads a process's pod UID and container id from its cgroup path (cgroup_identity.h), for the
// watchdog, and a runtime's container id from a pod's status; cgroup v1 and v2 layouts.

#include "cgroup_identity.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace vgpu::deviceplugin {
namespace {

bool isUidChar(char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

/// The pod UID a path component names: "pod<uid>" (cgroupfs) or "...-pod<uid>.slice"
/// (systemd, with '_' for '-'); empty when it names none.
std::string podUidOf(std::string_view part) {
  if (part.ends_with(".slice")) part.remove_suffix(6);
  const auto at = part.rfind("pod");
  if (at == std::string_view::npos || (at != 0 && part[at - 1] != '-')) return "";
  std::string_view uid = part.substr(at + 3);
  if (uid.size() != 36) return "";
  std::string out;
  for (char c : uid) {
    if (!isUidChar(c)) return "";
    out += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

/// The container id a leaf component names: "cri-containerd-<id>.scope", "crio-<id>.scope",
/// "docker-<id>.scope" (systemd) or "<id>" (cgroupfs).
std::string containerIdOf(std::string_view part) {
  if (part.ends_with(".scope")) part.remove_suffix(6);
  if (const auto dash = part.rfind('-'); dash != std::string_view::npos) part = part.substr(dash + 1);
  if (part.empty()) return "";
  for (char c : part)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
  return std::string(part);
}

std::optional<CgroupIdentity> identityOfPath(std::string_view path) {
  std::optional<CgroupIdentity> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (!out) {
      if (auto uid = podUidOf(part); !uid.empty()) out = CgroupIdentity{uid, ""};
    } else if (out->containerId.empty()) {
      out->containerId = containerIdOf(part);
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

std::optional<CgroupIdentity> parseCgroupIdentity(std::string_view text) {
  // v2 has one line "0::<path>"; v1 one per hierarchy, all naming the same container. The
  // first line that names a pod decides.
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const auto first = line.find(':');
    const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (auto id = identityOfPath(line.substr(second + 1))) return id;
  }
  return std::nullopt;
}

ProcessCgroup readProcessCgroup(const std::filesystem::path& procRoot, std::uint32_t pid) {
  std::ifstream in(procRoot / std::to_string(pid) / "cgroup");
  if (!in) return {};
  std::ostringstream read;
  read << in.rdbuf();
  std::string text = std::move(read).str();
  auto identity = parseCgroupIdentity(text);
  return {true, std::move(identity), std::move(text)};
}

std::string runtimeContainerId(std::string_view containerID) {
  const auto sep = containerID.find("://");
  return sep == std::string_view::npos ? std::string() : std::string(containerID.substr(sep + 3));
}

}  // namespace vgpu::deviceplugin
