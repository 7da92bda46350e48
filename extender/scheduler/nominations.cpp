#include "nominations.h"

#include <algorithm>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "vgpu/k8s/object.h"
#include "vgpu/pod_info.h"
#include "vgpu/pod_request.h"

namespace vgpu::scheduler {

HeldState withRoomHeld(const PlacementEngine& engine, const NodeState& node,
                       const std::vector<std::shared_ptr<const Nominee>>& nominees) {
  HeldState out{node, {}};
  std::vector<const Nominee*> order;
  for (const auto& n : nominees) order.push_back(n.get());
  std::stable_sort(order.begin(), order.end(),
                   [](const Nominee* a, const Nominee* b) { return a->priority > b->priority; });
  for (const Nominee* n : order) {
    auto placed = engine.assign(*n->pod, out.state);
    if (!placed.ok() || !out.state.add(*placed).ok()) {
      out.whole = n->key + " (priority " + std::to_string(n->priority) + ")";
      return out;
    }
  }
  return out;
}

void Nominations::upsertPod(const boost::json::object& obj) {
  const std::string uid(k8s::uid(obj));
  if (uid.empty()) return;
  // Nearly every pod event is of a pod nobody nominated: a look at one field, no parse.
  const boost::json::value* status = obj.if_contains("status");
  const boost::json::value* nominated =
      status && status->is_object() ? status->as_object().if_contains("nominatedNodeName") : nullptr;
  if (!nominated || !nominated->is_string() || nominated->as_string().empty()) {
    std::lock_guard lock(mu_);
    if (byUid_.empty() || !byUid_.contains(uid)) return;
  }
  std::shared_ptr<Nominee> nominee;
  auto pod = parsePod(boost::json::value(obj));
  if (pod.ok() && !pod->nominatedNodeName.empty() && pod->nodeName.empty() && !pod->deleting && !pod->terminated()) {
    auto request = buildPodRequest(backends_, pod->podNamespace, pod->name, pod->containers, pod->annotations);
    if (request.ok() && !request->empty())
      if (auto prepared = PreparedPod::prepare(*request, backends_); prepared.ok())
        nominee = std::make_shared<Nominee>(Nominee{uid, pod->key(), pod->nominatedNodeName, pod->priority,
                                                     std::make_shared<const PreparedPod>(std::move(*prepared))});
  }
  std::lock_guard lock(mu_);
  auto it = byUid_.find(uid);
  if (nominee) {
    if (it == byUid_.end() || it->second->node != nominee->node)
      spdlog::info("pod={} nominated to node={} (priority {}): its request is held there against pods of lower "
                   "priority", nominee->key, nominee->node, nominee->priority);
    byUid_[uid] = std::move(nominee);
  } else if (it != byUid_.end()) {
    spdlog::info("pod={} node={}: the room held for it is released", it->second->key, it->second->node);
    byUid_.erase(it);
  }
}

void Nominations::removePod(const boost::json::object& obj) {
  const std::string uid(k8s::uid(obj));
  std::lock_guard lock(mu_);
  if (auto it = byUid_.find(uid); it != byUid_.end()) {
    spdlog::info("pod={} node={} gone: the room held for it is released", it->second->key, it->second->node);
    byUid_.erase(it);
  }
}

HeldRoom Nominations::heldAgainst(std::int32_t priority, std::string_view uid) const {
  HeldRoom out;
  std::lock_guard lock(mu_);
  for (const auto& [id, n] : byUid_)
    if (n->priority > priority && id != uid) out[n->node].push_back(n);
  return out;
}

std::size_t Nominations::size() const {
  std::lock_guard lock(mu_);
  return byUid_.size();
}

}  // namespace vgpu::scheduler
