// Builds and writes CDI spec files (cdi_spec.h): the container edits (env, mounts, device
// nodes, hooks) the runtime applies for a claim or a container.

#include "cdi_spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <boost/json.hpp>

namespace vgpu::node {
namespace json = boost::json;
namespace fs = std::filesystem;

std::string cdiKind(const std::string& driver) { return driver + "/share"; }

std::string cdiDeviceId(const std::string& kind, const std::string& name) { return kind + "=" + name; }

std::string cdiSpecFileName(const std::string& kind, const std::string& name) {
  std::string base = kind;
  for (char& c : base)
    if (c == '/') c = '-';
  return base + "_" + name + ".json";
}

namespace {
constexpr std::string_view kCdiAnnotationPrefix = "cdi.k8s.io/";
bool namesCdiDevices(const std::string& key) { return key.rfind(kCdiAnnotationPrefix, 0) == 0; }
}  // namespace

std::vector<std::string> cdiDevicesFromAnnotations(const std::map<std::string, std::string>& annotations) {
  std::vector<std::string> out;
  for (const auto& [key, value] : annotations) {
    if (!namesCdiDevices(key)) continue;
    std::size_t start = 0;
    while (start <= value.size()) {
      const std::size_t comma = std::min(value.find(',', start), value.size());
      if (comma > start) out.push_back(value.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

json::object cdiSpec(const std::string& kind, const std::string& name, const ContainerSpec& spec) {
  json::array env;
  for (const auto& [k, v] : spec.env) env.push_back(json::string(k + "=" + v));
  json::array mounts;
  for (const auto& m : spec.mounts)
    mounts.push_back(json::object{{"hostPath", m.hostPath},
                                  {"containerPath", m.containerPath},
                                  {"options", json::array{m.readOnly ? "ro" : "rw", "nosuid", "nodev", "bind"}}});
  json::array nodes;
  for (const auto& d : spec.devices)
    nodes.push_back(json::object{{"path", d.containerPath.empty() ? d.hostPath : d.containerPath},
                                 {"hostPath", d.hostPath},
                                 {"permissions", d.permissions}});
  json::array hooks;
  for (const auto& h : spec.hooks) {
    json::object hook{{"hookName", h.hookName}, {"path", h.path}};
    if (!h.args.empty()) hook["args"] = json::value_from(h.args);
    if (!h.env.empty()) hook["env"] = json::value_from(h.env);
    hooks.push_back(std::move(hook));
  }
  json::object edits;
  if (!env.empty()) edits["env"] = std::move(env);
  if (!hooks.empty()) edits["hooks"] = std::move(hooks);
  if (!mounts.empty()) edits["mounts"] = std::move(mounts);
  if (!nodes.empty()) edits["deviceNodes"] = std::move(nodes);
  json::object a;
  for (const auto& [k, v] : spec.annotations)
    if (!namesCdiDevices(k)) a[k] = v;
  json::object out{{"cdiVersion", a.empty() ? "0.5.0" : "0.6.0"}, {"kind", kind}};
  if (!a.empty()) out["annotations"] = std::move(a);
  out["devices"] = json::array{json::object{{"name", name}, {"containerEdits", std::move(edits)}}};
  return out;
}

Status writeJsonAtomically(const fs::path& dir, const std::string& fileName, const json::object& object) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return makeError("cannot create the CDI folder " + dir.string() + ": " + ec.message());
  const fs::path path = dir / fileName;
  const fs::path tmp = dir / ("." + fileName + ".tmp");
  const std::string text = json::serialize(object);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return makeError("cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    fs::remove(tmp, ec);
    return makeError("cannot write " + tmp.string() + ": " + std::strerror(err));
  }
  fs::rename(tmp, path, ec);
  if (ec) return makeError("cannot put in place " + path.string() + ": " + ec.message());
  return {};
}

}  // namespace vgpu::node
