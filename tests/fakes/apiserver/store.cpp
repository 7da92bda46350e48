#include "store.h"

#include <algorithm>
#include <ctime>
#include <random>

#include <boost/json/serialize.hpp>

namespace vgpu::fakes::detail {
namespace {

namespace json = boost::json;

constexpr std::size_t kHistoryLimit = 500000;
constexpr std::size_t kSnapshotLimit = 128;

constexpr KindInfo kKinds[] = {
    {"nodes", "Node", "NodeList", false},
    {"pods", "Pod", "PodList", true},
    {"events", "Event", "EventList", true},
    {"resourceslices", "ResourceSlice", "ResourceSliceList", false, "resource.k8s.io/v1"},
    {"resourceclaims", "ResourceClaim", "ResourceClaimList", true, "resource.k8s.io/v1"},
    {"deviceclasses", "DeviceClass", "DeviceClassList", false, "resource.k8s.io/v1"},
    {"resourcequotas", "ResourceQuota", "ResourceQuotaList", true},
    {"leases", "Lease", "LeaseList", true, "coordination.k8s.io/v1"},
    {"configmaps", "ConfigMap", "ConfigMapList", true},
};


std::string_view strAt(const json::object& o, std::string_view a, std::string_view b) {
  auto* m = o.if_contains(a);
  if (m == nullptr || !m->is_object()) return {};
  auto* v = m->get_object().if_contains(b);
  return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

json::object& metadataOf(json::object& o) {
  auto& m = o["metadata"];
  if (!m.is_object()) m = json::object();
  return m.get_object();
}

std::string keyOf(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : std::string(ns) + "/" + std::string(name);
}

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Splits at commas outside parentheses.
std::vector<std::string> splitTop(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
  return out;
}

bool fieldSupported(std::string_view plural, std::string_view key) {
  static const std::vector<std::string_view> common = {"metadata.name", "metadata.namespace"};
  static const std::vector<std::string_view> pods = {
      "spec.nodeName", "spec.schedulerName", "spec.serviceAccountName", "spec.restartPolicy",
      "status.phase", "status.podIP", "status.nominatedNodeName"};
  static const std::vector<std::string_view> nodes = {"spec.unschedulable"};
  static const std::vector<std::string_view> events = {
      "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
      "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
      "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"};
  auto in = [&](const std::vector<std::string_view>& v) {
    return std::find(v.begin(), v.end(), key) != v.end();
  };
  if (in(common)) return true;
  if (plural == "pods") return in(pods);
  if (plural == "nodes") return in(nodes);
  if (plural == "events") return in(events);
  return false;
}

std::string fieldValue(const json::object& obj, std::string_view path) {
  const json::value* v = nullptr;
  const json::object* cur = &obj;
  while (!path.empty()) {
    auto dot = path.find('.');
    std::string_view part = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (cur == nullptr) return {};
    v = cur->if_contains(part);
    if (v == nullptr) return {};
    cur = v->is_object() ? &v->get_object() : nullptr;
  }
  if (v == nullptr) return {};
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  if (v->is_null()) return {};
  return json::serialize(*v);
}

std::string serializeObject(const ObjectPtr& obj) { return json::serialize(*obj); }

}  // namespace

std::string nowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string_view reasonFor(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "";
  }
}

Reply statusReply(int code, std::string_view reason, std::string_view message) {
  json::object o{{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", json::object()},
                 {"status", "Failure"},
                 {"message", message},
                 {"reason", reason},
                 {"code", code}};
  return Reply{code, json::serialize(o), nullptr};
}

void applyMergePatch(json::value& target, const json::value& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = json::object();
  auto& t = target.get_object();
  for (const auto& [k, v] : patch.get_object()) {
    if (v.is_null()) {
      t.erase(k);
    } else {
      applyMergePatch(t[k], v);
    }
  }
}

const KindInfo* kindByPlural(std::string_view plural) {
  for (const auto& k : kKinds) {
    if (k.plural == plural) return &k;
  }
  return nullptr;
}

const KindInfo* kindByKind(std::string_view kind) {
  for (const auto& k : kKinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

Selectors Selectors::parse(std::string_view plural, std::string_view label, std::string_view field) {
  Selectors s;
  using Op = Requirement::Op;
  for (const auto& part : splitTop(label)) {
    if (part.empty()) {
      s.error = "invalid label selector \"" + std::string(label) + "\": empty requirement";
      return s;
    }
    Requirement r{};
    auto setIn = [&](std::string_view word, Op op) -> bool {
      auto pos = part.find(word);
      if (pos == std::string::npos) return false;
      r.op = op;
      r.key = trim(std::string_view(part).substr(0, pos));
      std::string rest = trim(std::string_view(part).substr(pos + word.size()));
      if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')') {
        s.error = "invalid label selector \"" + std::string(label) + "\": expected ( after in";
        return true;
      }
      for (const auto& v : splitTop(std::string_view(rest).substr(1, rest.size() - 2))) {
        r.values.push_back(v);
      }
      return true;
    };
    if (part[0] == '!') {
      r.op = Op::kNotExists;
      r.key = trim(std::string_view(part).substr(1));
    } else if (setIn(" notin ", Op::kNotIn) || setIn(" in ", Op::kIn)) {
      if (!s.error.empty()) return s;
    } else if (auto ne = part.find("!="); ne != std::string::npos) {
      r.op = Op::kNe;
      r.key = trim(std::string_view(part).substr(0, ne));
      r.values.push_back(trim(std::string_view(part).substr(ne + 2)));
    } else if (auto eq = part.find('='); eq != std::string::npos) {
      r.op = Op::kEq;
      r.key = trim(std::string_view(part).substr(0, eq));
      std::size_t skip = part.compare(eq, 2, "==") == 0 ? 2 : 1;
      r.values.push_back(trim(std::string_view(part).substr(eq + skip)));
    } else {
      r.op = Op::kExists;
      r.key = part;
    }
    if (r.key.empty() || r.key.find_first_of(" =!()") != std::string::npos) {
      s.error = "invalid label selector \"" + std::string(label) + "\": bad key in \"" + part + "\"";
      return s;
    }
    s.labels.push_back(std::move(r));
  }
  for (const auto& part : splitTop(field)) {
    Requirement r{};
    std::size_t pos;
    std::size_t len;
    if ((pos = part.find("!=")) != std::string::npos) {
      r.op = Op::kNe;
      len = 2;
    } else if ((pos = part.find("==")) != std::string::npos) {
      r.op = Op::kEq;
      len = 2;
    } else if ((pos = part.find('=')) != std::string::npos) {
      r.op = Op::kEq;
      len = 1;
    } else {
      s.error = "invalid field selector \"" + std::string(field) + "\": \"" + part +
                "\" has no operator";
      return s;
    }
    r.key = trim(std::string_view(part).substr(0, pos));
    r.values.push_back(trim(std::string_view(part).substr(pos + len)));
    if (!fieldSupported(plural, r.key)) {
      s.error = "field label not supported: " + r.key;
      return s;
    }
    s.fields.push_back(std::move(r));
  }
  return s;
}

bool Selectors::matches(const json::object& obj) const {
  using Op = Requirement::Op;
  const json::object* labelMap = nullptr;
  if (auto* m = obj.if_contains("metadata"); m && m->is_object()) {
    if (auto* l = m->get_object().if_contains("labels"); l && l->is_object()) {
      labelMap = &l->get_object();
    }
  }
  for (const auto& r : labels) {
    const json::value* v = labelMap ? labelMap->if_contains(r.key) : nullptr;
    std::string value = v != nullptr && v->is_string() ? std::string(v->get_string()) : "";
    bool has = v != nullptr;
    bool inSet = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case Op::kEq: ok = has && value == r.values[0]; break;
      case Op::kNe: ok = !has || value != r.values[0]; break;
      case Op::kExists: ok = has; break;
      case Op::kNotExists: ok = !has; break;
      case Op::kIn: ok = inSet; break;
      case Op::kNotIn: ok = !inSet; break;
    }
    if (!ok) return false;
  }
  for (const auto& r : fields) {
    bool eq = fieldValue(obj, r.key) == r.values[0];
    if ((r.op == Op::kEq) != eq) return false;
  }
  return true;
}

std::map<std::string, ObjectPtr>& Store::objectsOf(std::string_view plural) {
  auto it = objects_.find(plural);
  if (it == objects_.end()) it = objects_.emplace(std::string(plural), std::map<std::string, ObjectPtr>()).first;
  return it->second;
}

std::string Store::nextRv() { return std::to_string(++rv_); }

void Store::record(std::string_view plural, std::string type, ObjectPtr before, ObjectPtr after) {
  history_.push_back(Event{rv_, std::string(plural), std::move(type), std::move(before), std::move(after)});
  while (history_.size() > kHistoryLimit) {
    compactedRv_ = history_.front().rv;
    history_.pop_front();
  }
  changed_.notify_all();
}

std::uint64_t Store::resourceVersion() {
  std::lock_guard lock(mu_);
  return rv_;
}

StoreBackup Store::backup() {
  std::lock_guard lock(mu_);
  return StoreBackup{rv_, objects_};
}

void Store::restore(const StoreBackup& backup) {
  std::lock_guard lock(mu_);
  rv_ = backup.rv;
  objects_ = backup.objects;
  // A fresh watch cache on the restored store: it can replay nothing older than now.
  history_.clear();
  compactedRv_ = rv_;
  ++compactions_;
  snapshots_.clear();
  ++epoch_;
  changed_.notify_all();
}

std::optional<Reply> Store::waitForVersion(std::string_view rv, std::chrono::milliseconds wait) {
  std::string rvs(rv);
  char* end = nullptr;
  unsigned long long wanted = std::strtoull(rvs.c_str(), &end, 10);
  if (rvs.empty() || end == rvs.c_str() || *end != '\0') return std::nullopt;
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] { return stopping_ || rv_ >= wanted; });
  if (rv_ >= wanted) return std::nullopt;
  json::object status{
      {"kind", "Status"},
      {"apiVersion", "v1"},
      {"metadata", json::object()},
      {"status", "Failure"},
      {"message", "Timeout: Too large resource version: " + std::to_string(wanted) +
                      ", current: " + std::to_string(rv_)},
      {"reason", "Timeout"},
      {"details",
       {{"causes", json::array{json::object{{"reason", "ResourceVersionTooLarge"},
                                            {"message", "Too large resource version"}}}},
        {"retryAfterSeconds", 1}}},
      {"code", 504}};
  return Reply{504, json::serialize(status), nullptr, 1};
}

void Store::setDraConsumableCapacity(bool on) {
  std::lock_guard lock(mu_);
  draGates_.consumableCapacity = on;
}

void Store::setDraDeviceTaints(bool on) {
  std::lock_guard lock(mu_);
  draGates_.deviceTaints = on;
}

std::vector<ObjectPtr> Store::all(std::string_view plural) {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  for (const auto& [k, v] : objectsOf(plural)) out.push_back(v);
  return out;
}

Reply Store::get(std::string_view plural, std::string_view ns, std::string_view name) {
  std::lock_guard lock(mu_);
  auto& objs = objectsOf(plural);
  auto it = objs.find(keyOf(ns, name));
  if (it == objs.end()) {
    return statusReply(404, "NotFound", std::string(plural) + " \"" + std::string(name) + "\" not found");
  }
  return Reply{200, serializeObject(it->second), it->second};
}

bool Store::validContinueToken(std::string_view token) {
  unsigned long long id = 0;
  unsigned long long off = 0;
  char extra = 0;
  const std::string t(token);
  if (std::sscanf(t.c_str(), "snap-%llu-%llu%c", &id, &off, &extra) == 2) return true;
  return t.rfind("after-", 0) == 0 && t.size() > 6;
}

std::map<std::string, ObjectPtr> Store::stateAt(std::string_view plural, std::uint64_t at) {
  std::map<std::string, ObjectPtr> state = objectsOf(plural);
  // Undo, newest first, every write made after `at`.
  for (auto it = history_.rbegin(); it != history_.rend() && it->rv > at; ++it) {
    if (it->plural != plural) continue;
    const json::object& any = it->after ? *it->after : *it->before;
    const std::string key = keyOf(strAt(any, "metadata", "namespace"), strAt(any, "metadata", "name"));
    if (it->before) state[key] = it->before;
    else state.erase(key);
  }
  return state;
}

Reply Store::list(std::string_view plural, std::string_view ns, const Selectors& sel, const ListRead& read) {
  const KindInfo* kind = kindByPlural(plural);
  const std::int64_t limit = read.limit;
  const std::string_view continueToken = read.continueToken;
  std::vector<ObjectPtr> page;
  std::string cont;
  std::uint64_t rv = 0;
  std::size_t remaining = 0;
  {
    std::lock_guard lock(mu_);
    std::vector<ObjectPtr> items;
    std::size_t offset = 0;
    std::uint64_t snapId = 0;
    auto select = [&](const std::map<std::string, ObjectPtr>& objects, std::string_view after) {
      for (auto it = after.empty() ? objects.begin() : objects.upper_bound(std::string(after)); it != objects.end();
           ++it) {
        if (!ns.empty() && strAt(*it->second, "metadata", "namespace") != ns) continue;
        if (sel.matches(*it->second)) items.push_back(it->second);
      }
    };
    if (continueToken.rfind("after-", 0) == 0) {
      // The token a 410 hands out: the rest of the list, read now (etcd3's continue at -1).
      rv = rv_;
      select(objectsOf(plural), continueToken.substr(6));
    } else if (!continueToken.empty()) {
      unsigned long long id = 0;
      unsigned long long off = 0;
      std::sscanf(std::string(continueToken).c_str(), "snap-%llu-%llu", &id, &off);
      auto it = snapshots_.find(id);
      if (it == snapshots_.end() || it->second.rv < compactedRv_ || it->second.compaction != compactions_) {
        // As etcd3 answers a continue whose revision was compacted: 410 with a token that
        // continues after the last item returned, at the current version.
        std::string fresh;
        if (it != snapshots_.end() && off > 0 && off <= it->second.items.size()) {
          const auto& last = *it->second.items[off - 1];
          fresh = "after-" + keyOf(strAt(last, "metadata", "namespace"), strAt(last, "metadata", "name"));
        }
        if (it != snapshots_.end()) snapshots_.erase(it);
        if (fresh.empty()) {
          return statusReply(410, "Expired",
                             "The provided continue parameter is too old to display a consistent list result. You "
                             "can start a new list without the continue parameter.");
        }
        json::object o{{"kind", "Status"},
                       {"apiVersion", "v1"},
                       {"metadata", json::object{{"continue", fresh}}},
                       {"status", "Failure"},
                       {"message",
                        "The provided continue parameter is too old to display a consistent list result. You can "
                        "start a new list without the continue parameter, or use the continue token in this "
                        "response to retrieve the remainder of the results. Continuing with the provided token "
                        "results in an inconsistent list - objects that were created, modified, or deleted between "
                        "the time the first chunk was returned and now may show up in the list."},
                       {"reason", "Expired"},
                       {"code", 410}};
        return Reply{410, json::serialize(o), nullptr};
      }
      snapId = id;
      offset = off;
      rv = it->second.rv;
    } else if (read.exact) {
      if (*read.exact < compactedRv_) {
        return statusReply(410, "Expired", "The resourceVersion for the provided list is too old.");
      }
      rv = *read.exact;
      select(rv == rv_ ? objectsOf(plural) : stateAt(plural, rv), {});
    } else {
      rv = rv_;
      select(objectsOf(plural), {});
    }
    const std::vector<ObjectPtr>& src = snapId != 0 ? snapshots_[snapId].items : items;
    std::size_t end = src.size();
    if (limit > 0 && offset + static_cast<std::size_t>(limit) < src.size()) {
      end = offset + static_cast<std::size_t>(limit);
    }
    if (offset < src.size()) page.assign(src.begin() + static_cast<std::ptrdiff_t>(offset), src.begin() + static_cast<std::ptrdiff_t>(end));
    remaining = src.size() - std::min(end, src.size());
    if (remaining > 0) {
      if (snapId == 0) {
        snapId = nextSnapshot_++;
        snapshots_[snapId] = Snapshot{rv, compactions_, std::move(items)};
        while (snapshots_.size() > kSnapshotLimit) snapshots_.erase(snapshots_.begin());
      }
      cont = "snap-" + std::to_string(snapId) + "-" + std::to_string(end);
    } else if (snapId != 0) {
      snapshots_.erase(snapId);
    }
  }
  std::string out;
  out.reserve(page.size() * 1024 + 256);
  out += R"({"kind":")";
  out += kind->listKind;
  out += R"(","apiVersion":")";
  out += kind->apiVersion;
  out += R"(","metadata":{"resourceVersion":")";
  out += std::to_string(rv);
  out += '"';
  if (!cont.empty()) {
    out += R"(,"continue":")" + cont + '"';
    // Only an unfiltered count is exact, so the apiserver leaves it out under a selector.
    if (sel.labels.empty() && sel.fields.empty()) out += R"(,"remainingItemCount":)" + std::to_string(remaining);
  }
  out += R"(},"items":[)";
  for (std::size_t i = 0; i < page.size(); ++i) {
    if (i) out += ',';
    out += serializeObject(page[i]);
  }
  out += "]}";
  return Reply{200, std::move(out), nullptr};
}

Reply Store::create(std::string_view plural, std::string_view pathNs, json::value body) {
  const KindInfo* kind = kindByPlural(plural);
  if (!body.is_object()) return statusReply(400, "BadRequest", "the request body is not a JSON object");
  json::object obj = std::move(body.get_object());
  auto& md = metadataOf(obj);
  std::string name(strAt(obj, "metadata", "name"));
  std::lock_guard lock(mu_);
  if (name.empty()) {
    std::string gen(strAt(obj, "metadata", "generateName"));
    if (gen.empty()) {
      return statusReply(422, "Invalid", std::string(kind->kind) +
                                             " \"\" is invalid: metadata.name: Required value: name "
                                             "or generateName is required");
    }
    static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
    name = gen;
    std::uint64_t x = ++uidCounter_ * 2654435761u;
    for (int i = 0; i < 5; ++i, x /= 27) name.push_back(kChars[x % 27]);
    md["name"] = name;
  }
  std::string ns;
  if (kind->namespaced) {
    std::string bodyNs(strAt(obj, "metadata", "namespace"));
    if (!pathNs.empty() && !bodyNs.empty() && bodyNs != pathNs) {
      return statusReply(400, "BadRequest",
                         "the namespace of the provided object does not match the namespace sent "
                         "on the request");
    }
    ns = !pathNs.empty() ? std::string(pathNs) : (!bodyNs.empty() ? bodyNs : "default");
    md["namespace"] = ns;
  } else {
    md.erase("namespace");
  }
  auto& objs = objectsOf(plural);
  std::string key = keyOf(ns, name);
  if (objs.count(key)) {
    auto r = statusReply(409, "AlreadyExists", std::string(plural) + " \"" + name + "\" already exists");
    return r;
  }
  if (strAt(obj, "metadata", "uid").empty()) {
    char buf[40];
    std::uint64_t a = ++uidCounter_;
    std::snprintf(buf, sizeof buf, "%08llx-0000-4000-8000-%012llx",
                  static_cast<unsigned long long>(a * 2654435761u & 0xffffffffu),
                  static_cast<unsigned long long>(a));
    md["uid"] = buf;
  }
  if (strAt(obj, "metadata", "creationTimestamp").empty()) md["creationTimestamp"] = nowRfc3339();
  obj["kind"] = kind->kind;
  obj["apiVersion"] = kind->apiVersion;
  if (auto invalid = admitResource(plural, obj, draGates_, nullptr)) return *invalid;
  metadataOf(obj)["resourceVersion"] = nextRv();  // `md` may have moved with the keys added
  if (plural == "pods") {
    if (!obj["spec"].is_object()) obj["spec"] = json::object();
    auto& st = obj["status"];
    if (!st.is_object()) st = json::object();
    if (!st.get_object().if_contains("phase")) st.get_object()["phase"] = "Pending";
  }
  auto ptr = std::make_shared<const json::object>(std::move(obj));
  objs[key] = ptr;
  record(plural, "ADDED", nullptr, ptr);
  return Reply{201, serializeObject(ptr), ptr};
}

Reply Store::update(std::string_view plural, json::object obj) {
  std::string ns(strAt(obj, "metadata", "namespace"));
  std::string name(strAt(obj, "metadata", "name"));
  std::lock_guard lock(mu_);
  auto& objs = objectsOf(plural);
  auto it = objs.find(keyOf(ns, name));
  if (it == objs.end()) {
    return statusReply(404, "NotFound", std::string(plural) + " \"" + name + "\" not found");
  }
  auto& md = metadataOf(obj);
  md["uid"] = strAt(*it->second, "metadata", "uid");
  md["creationTimestamp"] = strAt(*it->second, "metadata", "creationTimestamp");
  obj["kind"] = kindByPlural(plural)->kind;
  obj["apiVersion"] = kindByPlural(plural)->apiVersion;
  if (auto invalid = admitResource(plural, obj, draGates_, it->second.get())) return *invalid;
  metadataOf(obj)["resourceVersion"] = nextRv();  // `md` may have moved with the keys added
  auto ptr = std::make_shared<const json::object>(std::move(obj));
  auto before = it->second;
  it->second = ptr;
  record(plural, "MODIFIED", before, ptr);
  return Reply{200, serializeObject(ptr), ptr};
}

Reply Store::patch(std::string_view plural, std::string_view ns, std::string_view name,
                   const json::value& patch) {
  if (!patch.is_object()) {
    return statusReply(422, "Invalid", "the merge patch must be a JSON object");
  }
  std::lock_guard lock(mu_);
  auto& objs = objectsOf(plural);
  auto it = objs.find(keyOf(ns, name));
  if (it == objs.end()) {
    return statusReply(404, "NotFound", std::string(plural) + " \"" + std::string(name) + "\" not found");
  }
  const auto& cur = *it->second;
  std::string curRv(strAt(cur, "metadata", "resourceVersion"));
  if (auto* pm = patch.get_object().if_contains("metadata"); pm && pm->is_object()) {
    if (auto* prv = pm->get_object().if_contains("resourceVersion"); prv && prv->is_string()) {
      if (prv->get_string() != curRv) {
        return statusReply(409, "Conflict",
                           "Operation cannot be fulfilled on " + std::string(plural) + " \"" +
                               std::string(name) +
                               "\": the object has been modified; please apply your changes to "
                               "the latest version and try again");
      }
    }
  }
  json::value next = cur;
  applyMergePatch(next, patch);
  if (!next.is_object()) return statusReply(422, "Invalid", "the patched object is not an object");
  auto& obj = next.get_object();
  auto& md = metadataOf(obj);
  // Identity is immutable whatever the patch said.
  for (const char* k : {"name", "namespace", "uid", "creationTimestamp"}) {
    auto* old = cur.at("metadata").get_object().if_contains(k);
    if (old) {
      md[k] = *old;
    } else {
      md.erase(k);
    }
  }
  md["resourceVersion"] = curRv;
  obj["kind"] = cur.at("kind");
  obj["apiVersion"] = cur.at("apiVersion");
  if (auto invalid = admitResource(plural, obj, draGates_, &cur)) return *invalid;
  if (obj == cur) return Reply{200, serializeObject(it->second), it->second};  // no-op: no new version
  md["resourceVersion"] = nextRv();
  auto ptr = std::make_shared<const json::object>(std::move(obj));
  auto before = it->second;
  it->second = ptr;
  record(plural, "MODIFIED", before, ptr);
  return Reply{200, serializeObject(ptr), ptr};
}

Reply Store::remove(std::string_view plural, std::string_view ns, std::string_view name) {
  std::lock_guard lock(mu_);
  auto& objs = objectsOf(plural);
  auto it = objs.find(keyOf(ns, name));
  if (it == objs.end()) {
    return statusReply(404, "NotFound", std::string(plural) + " \"" + std::string(name) + "\" not found");
  }
  // The delete is a write of its own: the DELETED event carries the new version.
  json::object last = *it->second;
  metadataOf(last)["resourceVersion"] = nextRv();
  auto ptr = std::make_shared<const json::object>(std::move(last));
  auto before = it->second;
  objs.erase(it);
  record(plural, "DELETED", before, ptr);
  return Reply{200, serializeObject(ptr), ptr};
}

Reply Store::evict(std::string_view ns, std::string_view name, const json::value& body) {
  if (!body.is_object()) return statusReply(400, "BadRequest", "the request body is not a JSON object");
  const auto& b = body.get_object();
  auto top = [&](std::string_view key) {
    const auto* v = b.if_contains(key);
    return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
  };
  if (top("kind") != "Eviction" || top("apiVersion") != "policy/v1")
    return statusReply(400, "BadRequest", "the body must be a policy/v1 Eviction");
  if (strAt(b, "metadata", "name") != name)
    return statusReply(400, "BadRequest", "name in URL does not match name in Eviction object");
  Reply removed = remove("pods", ns, name);
  if (removed.status != 200) return removed;
  json::object ok{{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Success"},
                  {"code", 201}};
  return Reply{201, json::serialize(ok), nullptr};
}

Reply Store::bind(std::string_view ns, std::string_view name, const json::value& body) {
  if (!body.is_object()) return statusReply(400, "BadRequest", "the request body is not a JSON object");
  const auto& b = body.get_object();
  std::string target(strAt(b, "target", "name"));
  if (target.empty()) {
    return statusReply(422, "Invalid", "Binding \"" + std::string(name) +
                                           "\" is invalid: target.name: Required value");
  }
  std::lock_guard lock(mu_);
  auto& objs = objectsOf("pods");
  auto it = objs.find(keyOf(ns, name));
  if (it == objs.end()) {
    return statusReply(404, "NotFound", "pods \"" + std::string(name) + "\" not found");
  }
  const auto& cur = *it->second;
  std::string wantUid(strAt(b, "metadata", "uid"));
  std::string haveUid(strAt(cur, "metadata", "uid"));
  std::string prefix = "Operation cannot be fulfilled on pods/binding \"" + std::string(name) + "\": ";
  if (!wantUid.empty() && wantUid != haveUid) {
    return statusReply(409, "Conflict", prefix + "Precondition failed: UID in precondition: " +
                                            wantUid + ", UID in object meta: " + haveUid);
  }
  std::string bound(strAt(cur, "spec", "nodeName"));
  if (!bound.empty()) {
    return statusReply(409, "Conflict", prefix + "pod " + std::string(name) +
                                            " is already assigned to node \"" + bound + "\"");
  }
  json::object obj = cur;
  auto& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  spec.get_object()["nodeName"] = target;
  if (auto* bm = b.if_contains("metadata"); bm && bm->is_object()) {
    if (auto* ann = bm->get_object().if_contains("annotations"); ann && ann->is_object()) {
      auto& mine = metadataOf(obj)["annotations"];
      if (!mine.is_object()) mine = json::object();
      for (const auto& [k, v] : ann->get_object()) mine.get_object()[k] = v;
    }
  }
  auto& status = obj["status"];
  if (!status.is_object()) status = json::object();
  auto& conds = status.get_object()["conditions"];
  if (!conds.is_array()) conds = json::array();
  conds.get_array().push_back(json::object{{"type", "PodScheduled"},
                                           {"status", "True"},
                                           {"lastProbeTime", nullptr},
                                           {"lastTransitionTime", nowRfc3339()}});
  metadataOf(obj)["resourceVersion"] = nextRv();
  auto ptr = std::make_shared<const json::object>(std::move(obj));
  auto before = it->second;
  it->second = ptr;
  record("pods", "MODIFIED", before, ptr);
  json::object ok{{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
                  {"status", "Success"}, {"code", 201}};
  return Reply{201, json::serialize(ok), ptr};
}

std::string Store::errorLine(std::uint64_t requested) {
  json::object st{{"kind", "Status"},
                  {"apiVersion", "v1"},
                  {"metadata", json::object()},
                  {"status", "Failure"},
                  {"message", "too old resource version: " + std::to_string(requested) + " (" +
                                  std::to_string(compactedRv_) + ")"},
                  {"reason", "Expired"},
                  {"code", 410}};
  return json::serialize(json::object{{"type", "ERROR"}, {"object", std::move(st)}});
}

Store::WaitResult Store::beginWatch(Watch& w, std::string_view rv, std::vector<std::string>& lines) {
  std::lock_guard lock(mu_);
  w.epoch = epoch_;
  if (rv.empty() || rv == "0") {
    for (const auto& [key, obj] : objectsOf(w.plural)) {
      if (!w.ns.empty() && strAt(*obj, "metadata", "namespace") != w.ns) continue;
      if (!w.sel.matches(*obj)) continue;
      lines.push_back(R"({"type":"ADDED","object":)" + serializeObject(obj) + "}");
    }
    w.cursor = rv_;
    return WaitResult::kLines;
  }
  char* end = nullptr;
  std::string rvs(rv);
  unsigned long long n = std::strtoull(rvs.c_str(), &end, 10);
  if (end == rvs.c_str() || *end != '\0' || n < compactedRv_) {
    lines.push_back(errorLine(n));
    return WaitResult::kGone;
  }
  w.cursor = n;
  return WaitResult::kLines;
}

void Store::beginWatchList(Watch& w, std::vector<std::string>& lines) {
  std::lock_guard lock(mu_);
  w.epoch = epoch_;
  for (const auto& [key, obj] : objectsOf(w.plural)) {
    if (!w.ns.empty() && strAt(*obj, "metadata", "namespace") != w.ns) continue;
    if (!w.sel.matches(*obj)) continue;
    lines.push_back(R"({"type":"ADDED","object":)" + serializeObject(obj) + "}");
  }
  w.cursor = rv_;
  const KindInfo* kind = kindByPlural(w.plural);
  lines.push_back(std::string(R"({"type":"BOOKMARK","object":{"kind":")") + std::string(kind->kind) +
                  R"(","apiVersion":"v1","metadata":{"resourceVersion":")" + std::to_string(w.cursor) +
                  R"(","annotations":{"k8s.io/initial-events-end":"true"}}}})");
}

Store::WaitResult Store::next(Watch& w, std::chrono::steady_clock::time_point deadline,
                              std::chrono::steady_clock::time_point bookmarkAt,
                              std::vector<std::string>& lines) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_ || epoch_ != w.epoch) return WaitResult::kBroken;
    if (w.cursor < compactedRv_) {
      lines.push_back(errorLine(w.cursor));
      return WaitResult::kGone;
    }
    auto it = std::upper_bound(history_.begin(), history_.end(), w.cursor,
                               [](std::uint64_t v, const Event& e) { return v < e.rv; });
    for (; it != history_.end(); ++it) {
      w.cursor = it->rv;
      if (it->plural != w.plural) continue;
      const json::object& any = it->after ? *it->after : *it->before;
      if (!w.ns.empty() && strAt(any, "metadata", "namespace") != w.ns) continue;
      bool was = it->before && w.sel.matches(*it->before);
      bool is = it->type != "DELETED" && it->after && w.sel.matches(*it->after);
      const char* type = nullptr;
      if (it->type == "DELETED") {
        type = was ? "DELETED" : nullptr;
      } else if (was && is) {
        type = "MODIFIED";
      } else if (is) {
        type = "ADDED";
      } else if (was) {
        type = "DELETED";  // stopped matching the selector
      }
      if (type == nullptr) continue;
      lines.push_back(std::string(R"({"type":")") + type + R"(","object":)" +
                      serializeObject(it->after ? it->after : it->before) + "}");
    }
    if (!lines.empty()) return WaitResult::kLines;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return WaitResult::kTimeout;
    // A watch ahead of the store (restored from a backup) gets no bookmark, as upstream.
    bool canBookmark = w.bookmarks && rv_ >= w.cursor;
    if (canBookmark && now >= bookmarkAt) {
      w.cursor = std::max(w.cursor, rv_);
      const KindInfo* kind = kindByPlural(w.plural);
      lines.push_back(std::string(R"({"type":"BOOKMARK","object":{"kind":")") +
                      std::string(kind->kind) +
                      R"(","apiVersion":"v1","metadata":{"resourceVersion":")" +
                      std::to_string(w.cursor) + R"("}}})");
      return WaitResult::kLines;
    }
    changed_.wait_until(lock, canBookmark ? std::min(deadline, bookmarkAt) : deadline);
  }
}

void Store::breakWatches() {
  std::lock_guard lock(mu_);
  ++epoch_;
  changed_.notify_all();
}

void Store::compactHistory() {
  std::lock_guard lock(mu_);
  history_.clear();
  compactedRv_ = rv_;
  ++compactions_;
  changed_.notify_all();
}

void Store::setStopping(bool stopping) {
  std::lock_guard lock(mu_);
  stopping_ = stopping;
  if (stopping) {
    ++epoch_;
    ++hangEpoch_;
  }
  changed_.notify_all();
}

void Store::releaseHangs() {
  std::lock_guard lock(mu_);
  ++hangEpoch_;
  changed_.notify_all();
}

void Store::hang() {
  std::unique_lock lock(mu_);
  std::uint64_t e = hangEpoch_;
  changed_.wait(lock, [&] { return stopping_ || hangEpoch_ != e; });
}

void Store::sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, d, [&] { return stopping_; });
}

std::size_t Store::openWatches() {
  std::lock_guard lock(mu_);
  return openWatches_;
}

void Store::watchOpened(int delta) {
  std::lock_guard lock(mu_);
  openWatches_ = static_cast<std::size_t>(static_cast<long>(openWatches_) + delta);
}

}  // namespace vgpu::fakes::detail
