// The handout record (handout_store.h): each container's folder, its record in the node's handout
// journal, replay at start, attribution to the pod the kubelet says holds the IDs, and removal.

#include "handout_store.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <type_traits>

#include <boost/json.hpp>

#include "vgpu/host_files.h"
#include "vgpu/shared_region.h"

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;
namespace {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The device plugin's record of `h` in the journal (the line of the journal before the shared
/// one, less its "op"). Devices use the field names of the assignment annotation's grants
/// (docs/wire-format.md).
boost::json::object recordOf(const Handout& h) {
  boost::json::array ids;
  for (const auto& id : h.ids) ids.emplace_back(id);
  boost::json::array devices;
  for (const auto& d : h.devices) {
    boost::json::object o{{"backend", d.backend},     {"id", d.deviceId},     {"index", d.deviceIndex},
                          {"memoryMiB", d.memoryMiB}, {"compute", d.compute}, {"slot", d.slot}};
    if (d.priority != -1) o["priority"] = d.priority;
    if (!d.placement.empty()) o["placement"] = d.placement;
    devices.emplace_back(std::move(o));
  }
  boost::json::object annotations;
  for (const auto& [k, v] : h.podAnnotations) annotations[k] = v;
  boost::json::object record{{"id", h.id},
          {"resource", h.resource},
          {"ids", ids},
          {"backend", h.backend},
          {"devices", devices},
          {"podUid", h.podUid},
          {"namespace", h.podNamespace},
          {"pod", h.podName},
          {"container", h.container},
          {"podAnnotations", annotations},
          {"matchedPodUid", h.matchedPodUid},
          {"matchedContainer", h.matchedContainer}};
  if (h.region) record["region"] = boost::json::object{{"path", h.region->path}, {"inode", h.region->inode}};
  return record;
}

Result<DeviceGrant> deviceFromJson(const boost::json::value& v) {
  const auto* o = v.if_object();
  if (!o) return makeError("a device is not an object");
  DeviceGrant d;
  const auto* backend = o->if_contains("backend");
  const auto* id = o->if_contains("id");
  if (!backend || !backend->is_string() || !id || !id->is_string()) return makeError("a device without backend or id");
  d.backend = std::string(backend->as_string());
  d.deviceId = std::string(id->as_string());
  // Integers the agent itself wrote; a value out of range means a corrupt line.
  auto number = [&](const char* key, auto& out, bool required) -> bool {
    const auto* f = o->if_contains(key);
    if (!f) return !required;
    using T = std::remove_reference_t<decltype(out)>;
    boost::system::error_code ec;
    const T n = f->to_number<T>(ec);
    if (ec) return false;
    out = n;
    return true;
  };
  if (!number("index", d.deviceIndex, true) || !number("memoryMiB", d.memoryMiB, true) ||
      !number("compute", d.compute, true) || !number("slot", d.slot, true) || !number("priority", d.priority, false))
    return makeError("device " + d.deviceId + " has a missing or bad index, memoryMiB, compute, slot or priority");
  if (const auto* placement = o->if_contains("placement"); placement && placement->is_string())
    d.placement = std::string(placement->as_string());
  return d;
}

Result<Handout> fromJson(const boost::json::object& o) {
  auto str = [&](const char* key) -> std::string {
    const auto* f = o.if_contains(key);
    return f && f->is_string() ? std::string(f->as_string()) : std::string();
  };
  Handout h;
  h.id = str("id");
  h.resource = str("resource");
  h.backend = str("backend");
  h.podUid = str("podUid");
  h.podNamespace = str("namespace");
  h.podName = str("pod");
  h.container = str("container");
  if (const auto* ids = o.if_contains("ids"); ids && ids->is_array())
    for (const auto& id : ids->as_array())
      if (id.is_string()) h.ids.emplace_back(id.as_string());
  if (const auto* a = o.if_contains("podAnnotations"); a && a->is_object())
    for (const auto& [k, val] : a->as_object())
      if (val.is_string()) h.podAnnotations[std::string(k)] = std::string(val.as_string());
  if (h.id.empty() || h.resource.empty() || h.ids.empty() || h.backend.empty() || h.container.empty())
    return makeError("id, resource, ids, backend or container missing");
  // A line from before the match was journalled apart: the holder it names is the best guess.
  if (o.contains("matchedContainer")) {
    h.matchedPodUid = str("matchedPodUid");
    h.matchedContainer = str("matchedContainer");
  } else {
    h.matchedPodUid = h.podUid;
    h.matchedContainer = h.container;
  }
  if (const auto* r = o.if_contains("region")) {
    const auto* ro = r->if_object();
    const auto* path = ro ? ro->if_contains("path") : nullptr;
    const auto* inode = ro ? ro->if_contains("inode") : nullptr;
    boost::system::error_code ec;
    RegionFile region;
    if (path && path->is_string()) region.path = std::string(path->as_string());
    if (inode) region.inode = inode->to_number<std::uint64_t>(ec);
    if (region.path.empty() || !inode || ec) return makeError("region without path or inode");
    h.region = std::move(region);
  }
  if (const auto* devices = o.if_contains("devices")) {
    if (!devices->is_array()) return makeError("devices is not an array");
    for (const auto& v : devices->as_array()) {
      auto d = deviceFromJson(v);
      if (!d.ok()) return d.error();
      h.devices.push_back(std::move(d).value());
    }
    if (!h.devices.empty() && h.devices.size() != h.ids.size())
      return makeError(std::to_string(h.devices.size()) + " devices for " + std::to_string(h.ids.size()) + " IDs");
  }
  return h;
}

/// The journal's entry for `h`: which devices it holds (the share is the slot) and who holds them.
JournalEntry entryOf(const Handout& h) {
  JournalEntry e;
  e.frontEnd = FrontEnd::kDevicePlugin;
  e.key = h.id;
  const std::string pod = h.podName.empty() ? "uid " + (h.podUid.empty() ? std::string("unknown") : h.podUid)
                                            : h.podNamespace + "/" + h.podName;
  e.holder = {h.podUid, h.container, "", "pod " + pod + " container " + h.container + " (handout " + h.id + ")"};
  for (const auto& d : h.devices)
    e.devices.push_back(
        HeldDevice{d.backend, d.deviceId, d.memoryMiB, d.compute, d.slot >= 0 ? "slot " + std::to_string(d.slot) : ""});
  e.record = recordOf(h);
  return e;
}

/// A record as load() uses it: parsed, its IDs sorted and belonging to its folder.
Result<Handout> handoutOf(const boost::json::object& record) {
  auto h = fromJson(record);
  if (!h.ok()) return h;
  std::sort(h->ids.begin(), h->ids.end());
  if (handoutKey(h->id) != handoutId(h->resource, h->ids)) return makeError("the device IDs do not belong to folder " + h->id);
  return h;
}

/// The journal of an agent from before the shared one (containers.journal): one line per
/// change, {"op":"put", <record>} or {"op":"remove","id"}; its live handouts as entries.
Result<HandoutJournal::Migrated> readLegacyJournal(const fs::path& file) {
  HandoutJournal::Migrated out;
  std::ifstream in(file);
  if (!in) return makeError("cannot read the container journal " + file.string());
  std::vector<Handout> live;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::string where = file.string() + " line " + std::to_string(n) + ": ";
    boost::system::error_code ec;
    auto v = boost::json::parse(line, ec);
    const auto* o = ec ? nullptr : v.if_object();
    const auto* op = o ? o->if_contains("op") : nullptr;
    if (!op || !op->is_string()) {
      out.problems.push_back(where + "not a journal entry");
      continue;
    }
    if (op->as_string() == "remove") {
      const auto* id = o->if_contains("id");
      if (id && id->is_string()) std::erase_if(live, [&](const Handout& h) { return h.id == id->as_string(); });
      continue;
    }
    auto h = handoutOf(*o);
    if (!h.ok()) {
      out.problems.push_back(where + h.error().message);
      continue;
    }
    std::erase_if(live, [&](const Handout& o2) { return o2.id == h->id; });
    live.push_back(std::move(h).value());
  }
  for (const auto& h : live) out.entries.push_back(entryOf(h));
  return out;
}

}  // namespace

std::string handoutId(const std::string& resource, std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string key = resource + "|";
  for (const auto& id : ids) key += id + ",";
  std::string name;
  for (char c : resource) name += (c == '/' ? '_' : c);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return name + "-" + hex;
}

std::string handoutKey(const std::string& id) {
  // "<resource>-<16 hex digits>" or that with "-<n>": a tail of 16 characters is the hash.
  const auto dash = id.rfind('-');
  if (dash == std::string::npos || dash + 1 == id.size()) return id;
  const std::string tail = id.substr(dash + 1);
  if (tail.size() == 16 || !std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return id;
  return id.substr(0, dash);
}

namespace {

/// n of "<key>-<n>", 1 for the key itself.
unsigned ordinalOf(const std::string& id) {
  const std::string key = handoutKey(id);
  if (key.size() == id.size()) return 1;
  try {
    return static_cast<unsigned>(std::stoul(id.substr(key.size() + 1)));
  } catch (...) {
    return 1;
  }
}

}  // namespace

HandoutStore::HandoutStore(fs::path root, fs::path journal, FolderBound bound, fs::path legacy)
    : root_(std::move(root)),
      bound_(std::move(bound)),
      legacy_(std::move(legacy)),
      journal_(std::move(journal), FrontEnd::kDevicePlugin) {}

HandoutStore::~HandoutStore() = default;

Status HandoutStore::recordLocked(const Handout& h) { return journal_.update(entryOf(h)); }

Result<std::vector<std::string>> HandoutStore::load() {
  std::lock_guard lock(mu_);
  auto problems = journal_.open(legacy_, readLegacyJournal);
  if (!problems.ok()) return problems.error();
  handouts_.clear();
  for (const auto& e : journal_.mine()) {
    auto h = handoutOf(e.record);
    if (!h.ok()) {
      problems->push_back(journal_.file().string() + " handout " + e.key + ": " + h.error().message);
      continue;
    }
    handouts_.push_back(std::move(h).value());
  }
  // Oldest first, as the journal named them: "-<n>" after its key.
  std::sort(handouts_.begin(), handouts_.end(), [](const Handout& a, const Handout& b) { return a.id < b.id; });
  return problems;
}

std::vector<const Handout*> HandoutStore::withKeyLocked(const std::string& key) const {
  std::vector<const Handout*> out;
  for (const auto& h : handouts_)
    if (handoutKey(h.id) == key) out.push_back(&h);
  std::sort(out.begin(), out.end(), [](const Handout* a, const Handout* b) { return ordinalOf(a->id) < ordinalOf(b->id); });
  return out;
}

Result<std::string> HandoutStore::create(Handout h) {
  std::sort(h.ids.begin(), h.ids.end());
  const std::string key = handoutId(h.resource, h.ids);
  h.matchedPodUid = h.podUid;
  h.matchedContainer = h.container;
  std::lock_guard lock(mu_);
  const auto live = withKeyLocked(key);
  h.id = live.empty() ? key : key + "-" + std::to_string(std::max(ordinalOf(live.back()->id), 1u) + 1);
  const fs::path dir = root_ / h.id;
  auto root = openOwnDir(root_);
  if (!root) return makeError("cannot create the container's host folder " + dir.string() + ": " + root.error().message);
  bool made = false;
  // The folder is made under the journal's lock, once the devices are known to be free of the
  // DRA front end, and recorded in the same breath.
  auto makeFolder = [&]() -> Status {
    // An earlier holder's tmpfs goes with its files.
    if (auto s = unmountAt(root->get(), h.id, dir.string()); !s.ok())
      return makeError("cannot empty the container's host folder: " + s.error().message);
    if (auto s = removeAt(root->get(), h.id, dir.string()); !s.ok())
      return makeError("cannot empty the container's host folder: " + s.error().message);
    if (auto m = makeOwnDirAt(root->get(), h.id, 0755, dir.string()); !m)
      return makeError("cannot create the container's host folder: " + m.error().message);
    made = true;
    return boundFolderAt(bound_, root->get(), h.id, dir.string());
  };
  if (auto s = journal_.hold(entryOf(h), makeFolder); !s.ok()) {
    if (made) {
      (void)unmountAt(root->get(), h.id, dir.string());
      (void)removeAt(root->get(), h.id, dir.string());
    }
    return s.error();
  }
  handouts_.push_back(std::move(h));
  return dir.string();
}

Result<std::string> HandoutStore::prepare(const std::string& id) {
  std::lock_guard lock(mu_);
  const fs::path dir = root_ / id;
  auto root = openOwnDir(root_);
  if (!root) return makeError("cannot open the container's host folder " + dir.string() + ": " + root.error().message);
  if (auto made = makeOwnDirAt(root->get(), id, 0755, dir.string()); !made)
    return makeError("cannot create the container's host folder: " + made.error().message);
  if (auto s = boundFolderAt(bound_, root->get(), id, dir.string()); !s.ok()) return s.error();
  return dir.string();
}

bool HandoutStore::setRegion(const std::string& id, const std::optional<RegionFile>& region) {
  std::lock_guard lock(mu_);
  for (auto& h : handouts_)
    if (h.id == id) {
      if (h.region == region) return true;
      h.region = region;
      (void)recordLocked(h);  // memory is right; the journal is for restarts
      return true;
    }
  return false;
}

bool HandoutStore::setPodAnnotations(const std::string& id, const Annotations& annotations) {
  std::lock_guard lock(mu_);
  for (auto& h : handouts_)
    if (h.id == id) {
      h.podAnnotations = annotations;
      (void)recordLocked(h);  // memory is right; the journal is for restarts
      return true;
    }
  return false;
}

bool HandoutStore::attribute(const std::string& id, const std::string& podUid, const std::string& podNamespace,
                             const std::string& podName, const std::string& container) {
  std::lock_guard lock(mu_);
  for (auto& h : handouts_) {
    if (h.id != id) continue;
    if (h.podUid == podUid && h.podNamespace == podNamespace && h.podName == podName && h.container == container)
      return false;
    h.podUid = podUid;
    h.podNamespace = podNamespace;
    h.podName = podName;
    h.container = container;
    (void)recordLocked(h);
    return true;
  }
  return false;
}

bool HandoutStore::rematch(const std::string& id, const std::string& podUid, const std::string& container) {
  std::lock_guard lock(mu_);
  for (auto& h : handouts_) {
    if (h.id != id) continue;
    h.matchedPodUid = podUid;
    h.matchedContainer = container;
    (void)recordLocked(h);  // memory is right; the journal is for restarts
    return true;
  }
  return false;
}

void HandoutStore::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  std::erase_if(handouts_, [&](const Handout& h) { return h.id == id; });
  if (auto root = openOwnDir(root_); root) {
    (void)unmountAt(root->get(), id, (root_ / id).string());
    (void)removeAt(root->get(), id, (root_ / id).string());
  }
  (void)journal_.release(id);
}

std::size_t HandoutStore::removeStrays() {
  std::lock_guard lock(mu_);
  std::set<std::string> known;
  for (const auto& h : handouts_) known.insert(h.id);
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<std::string> strays;
  for (const auto& entry : fs::directory_iterator(root_, ec))
    if (!known.contains(entry.path().filename().string())) strays.push_back(entry.path().filename().string());
  if (auto root = openOwnDir(root_); root)
    for (const auto& name : strays)
      if (unmountAt(root->get(), name, (root_ / name).string()).ok() &&
          removeAt(root->get(), name, (root_ / name).string()).ok())
        ++removed;
  (void)journal_.compactIfLarge();
  return removed;
}

std::optional<Handout> HandoutStore::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  for (const auto& h : handouts_)
    if (h.id == id) return h;
  return std::nullopt;
}

std::vector<Handout> HandoutStore::withIds(const std::string& resource, const std::vector<std::string>& ids) const {
  std::lock_guard lock(mu_);
  std::vector<Handout> out;
  for (const Handout* h : withKeyLocked(handoutId(resource, ids))) out.push_back(*h);
  return out;
}

std::optional<Handout> HandoutStore::listedAs(const std::string& resource, const std::vector<std::string>& ids,
                                              const std::string& podUid, const std::string& container) const {
  std::lock_guard lock(mu_);
  const auto live = withKeyLocked(handoutId(resource, ids));
  if (live.empty()) return std::nullopt;
  for (const Handout* h : live)
    if (!podUid.empty() && h->podUid == podUid && h->container == container) return *h;
  return *live.back();
}

std::vector<Handout> HandoutStore::all() const {
  std::lock_guard lock(mu_);
  return handouts_;
}

std::vector<Handout> HandoutStore::heldBy(const std::string& podUid) const {
  std::lock_guard lock(mu_);
  std::vector<Handout> out;
  for (const auto& h : handouts_)
    if (!podUid.empty() && h.podUid == podUid) out.push_back(h);
  return out;
}

}  // namespace vgpu::deviceplugin
