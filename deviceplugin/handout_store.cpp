#include "handout_store.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>

#include <boost/json.hpp>

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;
namespace {

constexpr const char* kRecordSuffix = ".json";

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

boost::json::object toJson(const Handout& h) {
  boost::json::array ids;
  for (const auto& id : h.ids) ids.emplace_back(id);
  boost::json::object annotations;
  for (const auto& [k, v] : h.podAnnotations) annotations[k] = v;
  return {
      {"resource", h.resource},      {"ids", ids},       {"backend", h.backend},     {"podUid", h.podUid},
      {"namespace", h.podNamespace}, {"pod", h.podName}, {"container", h.container}, {"podAnnotations", annotations}};
}

Result<Handout> fromJson(const std::string& text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return makeError("not a JSON object");
  const auto& o = v.as_object();
  auto str = [&](const char* key) -> std::string {
    const auto* f = o.if_contains(key);
    return f && f->is_string() ? std::string(f->as_string()) : std::string();
  };
  Handout h;
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
  if (h.resource.empty() || h.ids.empty() || h.backend.empty() || h.container.empty())
    return makeError("resource, ids, backend or container missing");
  return h;
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

Status HandoutStore::saveLocked(const Handout& h) const {
  const fs::path path = root_ / (h.id + kRecordSuffix);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << boost::json::serialize(toJson(h));
    out.flush();
    if (!out) return makeError("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return makeError("cannot write " + path.string() + ": " + ec.message());
  return {};
}

std::vector<std::string> HandoutStore::load() {
  std::lock_guard lock(mu_);
  std::vector<std::string> problems;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    const fs::path& p = entry.path();
    if (p.extension() != kRecordSuffix) continue;
    std::ifstream in(p);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    auto h = fromJson(text);
    if (!h.ok()) {
      problems.push_back(p.string() + ": " + h.error().message);
      continue;
    }
    h->id = handoutId(h->resource, h->ids);
    std::sort(h->ids.begin(), h->ids.end());
    if (h->id != p.stem().string()) {
      problems.push_back(p.string() + ": names device IDs that do not belong to this file");
      continue;
    }
    handouts_.push_back(std::move(h).value());
  }
  return problems;
}

Result<std::string> HandoutStore::create(Handout h) {
  std::sort(h.ids.begin(), h.ids.end());
  h.id = handoutId(h.resource, h.ids);
  const fs::path dir = root_ / h.id;
  std::lock_guard lock(mu_);
  std::erase_if(handouts_, [&](const Handout& o) { return o.id == h.id; });
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return makeError("cannot create the container's host folder " + dir.string() + ": " + ec.message());
  if (auto s = saveLocked(h); !s.ok()) {
    fs::remove_all(dir, ec);
    return s.error();
  }
  handouts_.push_back(std::move(h));
  return dir.string();
}

bool HandoutStore::setPodAnnotations(const std::string& id, const Annotations& annotations) {
  std::lock_guard lock(mu_);
  for (auto& h : handouts_)
    if (h.id == id) {
      h.podAnnotations = annotations;
      (void)saveLocked(h);  // the record on disk only matters after a restart; memory is right
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
    (void)saveLocked(h);
    return true;
  }
  return false;
}

void HandoutStore::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  std::erase_if(handouts_, [&](const Handout& h) { return h.id == id; });
  std::error_code ec;
  fs::remove_all(root_ / id, ec);
  fs::remove(root_ / (id + kRecordSuffix), ec);
}

std::size_t HandoutStore::removeStrays() {
  std::lock_guard lock(mu_);
  std::set<std::string> known;
  for (const auto& h : handouts_) {
    known.insert(h.id);
    known.insert(h.id + kRecordSuffix);
  }
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> strays;
  for (const auto& entry : fs::directory_iterator(root_, ec))
    if (!known.contains(entry.path().filename().string())) strays.push_back(entry.path());
  for (const auto& p : strays) {
    std::error_code rec;
    fs::remove_all(p, rec);
    if (!rec) ++removed;
  }
  return removed;
}

std::optional<Handout> HandoutStore::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  for (const auto& h : handouts_)
    if (h.id == id) return h;
  return std::nullopt;
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
