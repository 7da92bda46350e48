#include "preemption_args.h"

#include <boost/json.hpp>

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;

/// {"Pods":[...],"NumPDBViolations":N}; a pod is a v1.Pod (metadata.uid) or a MetaPod (UID).
Result<NodeVictims> readVictims(const std::string& node, const json::value& v, bool meta) {
  const std::string where = "victims of node " + node;
  NodeVictims out;
  if (v.is_null()) return out;
  const json::object* o = v.if_object();
  if (!o) return makeError(where + ": not an object");
  if (const json::value* n = o->if_contains("NumPDBViolations"); n && !n->is_null()) {
    if (!n->is_int64() || n->as_int64() < 0) return makeError(where + ": NumPDBViolations is not a count");
    out.pdbViolations = n->as_int64();
  }
  const json::value* pods = o->if_contains("Pods");
  if (!pods || pods->is_null()) return out;
  if (!pods->is_array()) return makeError(where + ": Pods is not an array");
  for (const json::value& p : pods->as_array()) {
    const json::string* uid = nullptr;
    if (const json::object* po = p.if_object()) {
      if (meta) {
        if (const json::value* u = po->if_contains("UID")) uid = u->if_string();
      } else if (const json::value* md = po->if_contains("metadata"); md && md->is_object()) {
        if (const json::value* u = md->as_object().if_contains("uid")) uid = u->if_string();
      }
    }
    if (!uid || uid->empty())
      return makeError(where + (meta ? ": a MetaPod without a UID" : ": a Pod without metadata.uid"));
    out.uids.emplace_back(*uid);
  }
  return out;
}

}  // namespace

Result<PreemptionArgs> parsePreemptionArgs(std::string_view body) {
  json::parse_options opts;
  opts.max_depth = 128;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, {}, opts);
  if (ec) return makeError("the body is not JSON: " + ec.message());
  json::object* o = v.if_object();
  if (!o) return makeError("the body is not a JSON object");
  PreemptionArgs args;
  json::value* pod = o->if_contains("Pod");
  if (!pod || !pod->is_object()) return makeError("ExtenderPreemptionArgs has no Pod object");
  args.pod = std::move(*pod);
  const json::value* meta = o->if_contains("NodeNameToMetaVictims");
  const json::value* full = o->if_contains("NodeNameToVictims");
  args.cacheCapable = meta && !meta->is_null();
  const json::value* map = args.cacheCapable ? meta : full;
  if (!map || map->is_null()) return args;  // no candidates
  if (!map->is_object())
    return makeError(std::string(args.cacheCapable ? "NodeNameToMetaVictims" : "NodeNameToVictims") +
                     " is not an object");
  for (const auto& kv : map->as_object()) {
    auto victims = readVictims(std::string(kv.key()), kv.value(), args.cacheCapable);
    if (!victims.ok()) return std::move(victims).error();
    args.nodes.emplace(std::string(kv.key()), std::move(*victims));
  }
  return args;
}

std::string preemptionResultJson(const std::map<std::string, NodeVictims>& nodes) {
  json::object map;
  for (const auto& [node, victims] : nodes) {
    json::array pods;
    for (const auto& uid : victims.uids) pods.push_back(json::object{{"UID", uid}});
    map.emplace(node, json::object{{"Pods", std::move(pods)}, {"NumPDBViolations", victims.pdbViolations}});
  }
  return json::serialize(json::object{{"NodeNameToMetaVictims", std::move(map)}});
}

}  // namespace vgpu::scheduler
