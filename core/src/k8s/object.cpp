#include "vgpu/k8s/object.h"

#include <boost/json/value.hpp>

namespace vgpu::k8s {
namespace {

std::string_view stringAt(const boost::json::object& obj,
                          std::initializer_list<std::string_view> path) {
  const auto* v = findPath(obj, path);
  if (v == nullptr || !v->is_string()) return {};
  return v->get_string();
}

const boost::json::object* objectAt(const boost::json::object& obj,
                                    std::initializer_list<std::string_view> path) {
  const auto* v = findPath(obj, path);
  return v != nullptr && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::string_view> entry(const boost::json::object* map, std::string_view key) {
  if (map == nullptr) return std::nullopt;
  auto it = map->find(key);
  if (it == map->end() || !it->value().is_string()) return std::nullopt;
  return std::string_view(it->value().get_string());
}

}  // namespace

const boost::json::value* findPath(const boost::json::object& obj,
                                   std::initializer_list<std::string_view> path) {
  const boost::json::object* cur = &obj;
  const boost::json::value* v = nullptr;
  for (auto key : path) {
    if (cur == nullptr) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    v = &it->value();
    cur = v->is_object() ? &v->get_object() : nullptr;
  }
  return v;
}

std::string_view name(const boost::json::object& obj) { return stringAt(obj, {"metadata", "name"}); }
std::string_view namespaceOf(const boost::json::object& obj) {
  return stringAt(obj, {"metadata", "namespace"});
}
std::string_view uid(const boost::json::object& obj) { return stringAt(obj, {"metadata", "uid"}); }
std::string_view resourceVersion(const boost::json::object& obj) {
  return stringAt(obj, {"metadata", "resourceVersion"});
}
std::string_view nodeName(const boost::json::object& pod) { return stringAt(pod, {"spec", "nodeName"}); }
std::string_view podPhase(const boost::json::object& pod) { return stringAt(pod, {"status", "phase"}); }

const boost::json::object* annotations(const boost::json::object& obj) {
  return objectAt(obj, {"metadata", "annotations"});
}
const boost::json::object* labels(const boost::json::object& obj) {
  return objectAt(obj, {"metadata", "labels"});
}
std::optional<std::string_view> annotation(const boost::json::object& obj, std::string_view key) {
  return entry(annotations(obj), key);
}
std::optional<std::string_view> label(const boost::json::object& obj, std::string_view key) {
  return entry(labels(obj), key);
}

std::string objectKey(const boost::json::object& obj) {
  auto ns = namespaceOf(obj);
  std::string key;
  if (!ns.empty()) {
    key.append(ns);
    key.push_back('/');
  }
  key.append(name(obj));
  return key;
}

}  // namespace vgpu::k8s
