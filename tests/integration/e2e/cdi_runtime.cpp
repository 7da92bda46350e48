#include "cdi_runtime.h"

#include <algorithm>
#include <array>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <boost/json.hpp>

namespace vgpu::e2e {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

/// One device of a spec file, with what it needs to be applied.
struct CdiDevice {
  std::string file;
  std::size_t specIndex = 0;  ///< which file: its containerEdits go in once
  const json::object* specEdits = nullptr;
  const json::object* edits = nullptr;
  bool conflict = false;
  int folder = 0;
};

using Version = std::array<int, 3>;

Result<Version> parseVersion(const std::string& text, const std::string& where) {
  Version v{};
  char dot1 = 0, dot2 = 0;
  std::istringstream in(text);
  if (!(in >> v[0] >> dot1 >> v[1] >> dot2 >> v[2]) || dot1 != '.' || dot2 != '.' || !in.eof())
    return makeError(where + ": cdiVersion \"" + text + "\" is not MAJOR.MINOR.PATCH");
  return v;
}

Status onlyKnownKeys(const json::object& o, std::initializer_list<std::string_view> known, const std::string& where) {
  for (const auto& [key, value] : o)
    if (std::find(known.begin(), known.end(), key) == known.end())
      return makeError(where + ": unknown field \"" + std::string(key) + "\"");
  return {};
}

Status needsVersion(const Version& have, const Version& need, const std::string& what, const std::string& where) {
  if (have >= need) return {};
  const std::string wanted = std::to_string(need[0]) + "." + std::to_string(need[1]) + "." + std::to_string(need[2]);
  return makeError(where + ": " + what + " needs cdiVersion " + wanted + " or later");
}

Status checkEdits(const json::value& v, const Version& version, const std::string& where) {
  if (!v.is_object()) return makeError(where + " is not an object");
  const auto& e = v.get_object();
  if (auto s = onlyKnownKeys(e, {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"},
                             where);
      !s.ok())
    return s;
  if (const auto* nodes = e.if_contains("deviceNodes"); nodes && nodes->is_array())
    for (const auto& n : nodes->get_array())
      if (n.is_object() && n.get_object().contains("hostPath"))
        if (auto s = needsVersion(version, {0, 5, 0}, "deviceNodes[].hostPath", where); !s.ok()) return s;
  return {};
}

/// The containerEdits of a spec or a device (null when it has none), checked, with its
/// annotations' version.
Result<const json::object*> editsOf(const json::object& o, const Version& version, const std::string& where) {
  if (o.contains("annotations"))
    if (auto s = needsVersion(version, {0, 6, 0}, "annotations", where); !s.ok()) return s.error();
  const auto* e = o.if_contains("containerEdits");
  if (!e) return static_cast<const json::object*>(nullptr);
  if (auto s = checkEdits(*e, version, where + " containerEdits"); !s.ok()) return s.error();
  return &e->get_object();
}

/// Parses and checks one spec file; its devices go into `devices` under "<kind>=<name>".
Status loadSpec(const fs::path& file, int folder, std::deque<json::object>& specs,
                std::map<std::string, CdiDevice>& devices) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string where = "CDI spec " + file.string();
  boost::system::error_code ec;
  json::value parsed = json::parse(text.str(), ec);
  if (ec || !parsed.is_object()) return makeError(where + " is not a JSON object");
  specs.push_back(std::move(parsed).as_object());
  const std::size_t index = specs.size() - 1;
  const json::object& spec = specs.back();
  if (auto s = onlyKnownKeys(spec, {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}, where); !s.ok())
    return s;
  const auto* version = spec.if_contains("cdiVersion");
  const auto* kind = spec.if_contains("kind");
  if (!version || !version->is_string() || !kind || !kind->is_string())
    return makeError(where + ": cdiVersion and kind are required strings");
  auto v = parseVersion(std::string(version->get_string()), where);
  if (!v.ok()) return v.error();
  const std::string k(kind->get_string());
  if (std::count(k.begin(), k.end(), '/') != 1 || k.front() == '/' || k.back() == '/')
    return makeError(where + ": kind \"" + k + "\" is not vendor/class");
  auto specEdits = editsOf(spec, *v, where);
  if (!specEdits.ok()) return specEdits.error();
  const auto* devs = spec.if_contains("devices");
  if (!devs || !devs->is_array() || devs->get_array().empty()) return makeError(where + ": no devices");
  for (const auto& d : devs->get_array()) {
    if (!d.is_object()) return makeError(where + ": a device is not an object");
    const auto& dev = d.get_object();
    const auto* name = dev.if_contains("name");
    if (!name || !name->is_string() || name->get_string().empty()) return makeError(where + ": a device has no name");
    const std::string id = k + "=" + std::string(name->get_string());
    const std::string at = where + " device " + std::string(name->get_string());
    if (auto s = onlyKnownKeys(dev, {"name", "annotations", "containerEdits"}, at); !s.ok()) return s;
    auto edits = editsOf(dev, *v, at);
    if (!edits.ok()) return edits.error();
    CdiDevice entry{file.string(), index, *specEdits, *edits, false, folder};
    auto [it, fresh] = devices.try_emplace(id, entry);
    if (fresh) continue;
    if (it->second.folder == folder)
      it->second.conflict = true;  // two files of one folder define it: neither wins
    else
      it->second = entry;  // a folder of higher priority shadows the lower one
  }
  return {};
}

std::string text(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::size_t depth(const std::string& path) {
  return static_cast<std::size_t>(std::count(path.begin(), path.end(), '/'));
}

Status apply(const json::object& edits, const std::string& where, ContainerSpec& spec) {
  for (const char* unsupported : {"hooks", "additionalGids", "intelRdt", "netDevices"})
    if (const auto* v = edits.if_contains(unsupported); v && !(v->is_array() && v->get_array().empty()))
      return makeError(where + ": " + unsupported + " are not modelled by the end-to-end runtime");
  if (const auto* env = edits.if_contains("env")) {
    if (!env->is_array()) return makeError(where + ": env is not a list");
    for (const auto& e : env->get_array()) {
      if (!e.is_string()) return makeError(where + ": an env entry is not a string");
      const std::string kv(e.get_string());
      const auto eq = kv.find('=');
      spec.env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
  }
  if (const auto* nodes = edits.if_contains("deviceNodes")) {
    if (!nodes->is_array()) return makeError(where + ": deviceNodes is not a list");
    for (const auto& n : nodes->get_array()) {
      if (!n.is_object()) return makeError(where + ": a device node is not an object");
      DeviceNode d;
      d.containerPath = text(n.get_object(), "path");
      if (d.containerPath.empty() || d.containerPath[0] != '/')
        return makeError(where + ": a device node has no absolute path");
      d.hostPath = text(n.get_object(), "hostPath");
      if (d.hostPath.empty()) d.hostPath = d.containerPath;
      d.permissions = text(n.get_object(), "permissions");
      if (d.permissions.empty()) d.permissions = "rwm";
      std::erase_if(spec.devices, [&](const DeviceNode& x) { return x.containerPath == d.containerPath; });
      spec.devices.push_back(std::move(d));
    }
  }
  if (const auto* mounts = edits.if_contains("mounts")) {
    if (!mounts->is_array()) return makeError(where + ": mounts is not a list");
    for (const auto& m : mounts->get_array()) {
      if (!m.is_object()) return makeError(where + ": a mount is not an object");
      const auto& o = m.get_object();
      Mount mount{text(o, "hostPath"), text(o, "containerPath"), false};
      if (mount.hostPath.empty() || mount.containerPath.empty())
        return makeError(where + ": a mount needs hostPath and containerPath");
      std::set<std::string> options;
      if (const auto* opts = o.if_contains("options"); opts && opts->is_array())
        for (const auto& x : opts->get_array())
          if (x.is_string()) options.insert(std::string(x.get_string()));
      if (!options.contains("bind") && !options.contains("rbind"))
        return makeError(where + ": mount " + mount.containerPath + " is not a bind mount");
      mount.readOnly = options.contains("ro");
      std::erase_if(spec.mounts, [&](const Mount& x) { return x.containerPath == mount.containerPath; });
      spec.mounts.push_back(std::move(mount));
    }
    std::stable_sort(spec.mounts.begin(), spec.mounts.end(),
                     [](const Mount& a, const Mount& b) { return depth(a.containerPath) < depth(b.containerPath); });
  }
  return {};
}

}  // namespace

Result<ContainerSpec> applyCdiDevices(const std::vector<fs::path>& specDirs, const std::vector<std::string>& cdiIds,
                                      ContainerSpec base) {
  std::deque<json::object> specs;  // CdiDevice points into it: push_back keeps elements in place
  std::map<std::string, CdiDevice> devices;
  for (std::size_t folder = 0; folder < specDirs.size(); ++folder) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(specDirs[folder], ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file() && it->path().extension() == ".json") files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (auto s = loadSpec(f, static_cast<int>(folder), specs, devices); !s.ok()) return s.error();
  }
  std::string unresolved;
  for (const auto& id : cdiIds)
    if (!devices.contains(id)) unresolved += (unresolved.empty() ? "" : ", ") + id;
  if (!unresolved.empty()) return makeError("unresolvable CDI devices " + unresolved);
  std::set<std::size_t> specsApplied;
  for (const auto& id : cdiIds) {
    const CdiDevice& d = devices.at(id);
    if (d.conflict) return makeError("CDI device " + id + " is defined twice in one folder (" + d.file + ")");
    if (specsApplied.insert(d.specIndex).second && d.specEdits)
      if (auto s = apply(*d.specEdits, d.file + " containerEdits", base); !s.ok()) return s.error();
    if (d.edits)
      if (auto s = apply(*d.edits, d.file + " device " + id, base); !s.ok()) return s.error();
  }
  return base;
}

}  // namespace vgpu::e2e
