// Copies the kept fields into a new object with the default storage, so that whatever
// resource the decoder used (a page's arena) can be released as a whole.

#include "vgpu/k8s/trim.h"

#include <initializer_list>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

namespace vgpu::k8s {
namespace {

namespace json = boost::json;

constexpr std::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

const json::object* objectAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

/// Copies `keys` of `from` that are present (any type: readers check types themselves).
void copyKeys(const json::object& from, json::object& to, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys)
    if (const json::value* v = from.if_contains(k)) to.emplace(k, *v);
}

json::object annotationsWithoutLastApplied(const json::object& annotations) {
  json::object out;
  out.reserve(annotations.size());
  for (const auto& kv : annotations)
    if (kv.key() != kLastApplied) out.emplace(kv.key(), kv.value());
  return out;
}

void copyMetadata(const json::object& obj, json::object& out, std::initializer_list<std::string_view> keys) {
  const json::object* md = objectAt(obj, "metadata");
  if (md == nullptr) {
    if (const json::value* v = obj.if_contains("metadata")) out.emplace("metadata", *v);  // let readers complain
    return;
  }
  json::object m;
  copyKeys(*md, m, keys);
  if (const json::value* a = md->if_contains("annotations")) {
    if (const json::object* ao = a->if_object()) {
      m.emplace("annotations", annotationsWithoutLastApplied(*ao));
    } else {
      m.emplace("annotations", *a);
    }
  }
  out.emplace("metadata", std::move(m));
}

/// A list of objects, each cut down to `keys`; anything not a list or not an object is kept
/// as it is, so parsePod still reports it.
void copyList(const json::object& from, json::object& to, std::string_view field,
              std::initializer_list<std::string_view> keys) {
  const json::value* v = from.if_contains(field);
  if (v == nullptr) return;
  const json::array* list = v->if_array();
  if (list == nullptr) {
    to.emplace(field, *v);
    return;
  }
  json::array out;
  out.reserve(list->size());
  for (const auto& item : *list) {
    if (const json::object* o = item.if_object()) {
      json::object kept;
      copyKeys(*o, kept, keys);
      out.emplace_back(std::move(kept));
    } else {
      out.emplace_back(item);
    }
  }
  to.emplace(field, std::move(out));
}

/// requests and limits with extended resources only (names with a '/'): parsePod skips
/// cpu, memory and the like.
json::value extendedResources(const json::value& resources) {
  const json::object* r = resources.if_object();
  if (r == nullptr) return resources;
  json::object out;
  for (const auto& section : *r) {
    const json::object* amounts = section.value().if_object();
    if (amounts == nullptr) {
      out.emplace(section.key(), section.value());
      continue;
    }
    json::object kept;
    for (const auto& kv : *amounts)
      if (kv.key().find('/') != std::string_view::npos) kept.emplace(kv.key(), kv.value());
    out.emplace(section.key(), std::move(kept));
  }
  return out;
}

void copyContainers(const json::object& spec, json::object& to, std::string_view field) {
  copyList(spec, to, field, {"name", "restartPolicy"});
  const json::array* from = nullptr;
  if (const json::value* v = spec.if_contains(field)) from = v->if_array();
  json::value* kept = to.if_contains(field);
  if (from == nullptr || kept == nullptr || !kept->is_array()) return;
  for (std::size_t i = 0; i < from->size(); ++i) {
    const json::object* c = (*from)[i].if_object();
    const json::value* resources = c != nullptr ? c->if_contains("resources") : nullptr;
    if (resources != nullptr) kept->get_array()[i].get_object().emplace("resources", extendedResources(*resources));
  }
}

}  // namespace

json::object trimPod(const json::object& pod) {
  json::object out;
  copyMetadata(pod, out, {"name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"});
  if (const json::object* spec = objectAt(pod, "spec")) {
    json::object s;
    copyKeys(*spec, s, {"nodeName", "schedulerName", "priority"});
    copyContainers(*spec, s, "initContainers");
    copyContainers(*spec, s, "containers");
    out.emplace("spec", std::move(s));
  } else if (const json::value* v = pod.if_contains("spec")) {
    out.emplace("spec", *v);
  }
  if (const json::object* status = objectAt(pod, "status")) {
    json::object s;
    copyKeys(*status, s, {"phase", "nominatedNodeName"});  // preemption's reservation (nominations.h)
    // The agent reads init containers' exit codes, and every container's runtime id (its watchdog);
    // the scheduler asks only whether there are any container statuses.
    copyList(*status, s, "initContainerStatuses", {"name", "containerID", "state"});
    copyList(*status, s, "containerStatuses", {"name", "containerID"});
    out.emplace("status", std::move(s));
  }
  return out;
}

json::object podStub(const json::object& pod) {
  json::object out;
  if (const json::object* md = objectAt(pod, "metadata")) {
    json::object m;
    copyKeys(*md, m, {"name", "namespace", "uid", "resourceVersion"});
    out.emplace("metadata", std::move(m));
  }
  if (const json::object* spec = objectAt(pod, "spec")) {
    json::object s;
    copyKeys(*spec, s, {"nodeName"});
    out.emplace("spec", std::move(s));
  }
  return out;
}

json::object trimNode(const json::object& node) {
  json::object out;
  copyMetadata(node, out, {"name", "uid", "resourceVersion"});
  return out;
}

}  // namespace vgpu::k8s
