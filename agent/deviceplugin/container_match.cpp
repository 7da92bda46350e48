// Which pod and container an Allocate is for: the tracker's claim, the kubelet's PodResources
// view, and a container the kubelet admits again after losing its record of the devices.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

bool Agent::Impl::kubeletLost(const Handout& h, KubeletView& kubelet) {
  if (!kubelet.isConfigured()) return true;
  const auto& listed = kubelet.pods();
  if (!listed) return false;
  auto pod = listed->find(h.podNamespace + "/" + h.podName);
  if (pod == listed->end()) return false;  // not active: gone for the kubelet, the IDs free
  for (const auto& [container, byResource] : pod->second)
    if (auto ids = byResource.find(h.resource); ids != byResource.end())
      for (const auto& id : ids->second)
        if (std::find(h.ids.begin(), h.ids.end(), id) != h.ids.end()) return false;
  return true;
}

auto Agent::Impl::againCandidates(const std::vector<Handout>& handouts) -> std::vector<Again> {
  std::vector<Again> out;
  for (const auto& h : handouts) {
    if (h.devices.empty()) continue;
    if (auto pod = tracker.servedPod(h.podUid)) out.push_back({h, std::move(*pod)});
  }
  return out;
}

auto Agent::Impl::allocatedAgain(const std::string& resource, const std::vector<std::string>& ids,
                                 KubeletView& kubelet) -> std::optional<Again> {
  auto candidates = againCandidates(handouts.withIds(resource, ids));
  std::optional<Again> best;
  unsigned bestCount = 0;
  for (auto& c : candidates) {
    if (!kubeletLost(c.handout, kubelet)) continue;
    const unsigned n = answeredAgain(c.handout.id);
    if (!best || n < bestCount) {
      bestCount = n;
      best = std::move(c);
    }
  }
  return best;
}

std::optional<std::vector<std::string>> Agent::Impl::againHint(const std::string& resource,
                                                               const std::vector<std::string>& available,
                                                               const std::vector<std::string>& mustInclude,
                                                               std::size_t size, KubeletView& kubelet) {
  const std::set<std::string> avail(available.begin(), available.end());
  std::vector<Handout> fits;
  for (const auto& h : handouts.all()) {
    if (h.resource != resource || h.ids.size() != size) continue;
    if (!std::all_of(h.ids.begin(), h.ids.end(), [&](const std::string& id) { return avail.contains(id); })) continue;
    if (!std::all_of(mustInclude.begin(), mustInclude.end(), [&](const std::string& id) {
          return std::find(h.ids.begin(), h.ids.end(), id) != h.ids.end();
        }))
      continue;
    fits.push_back(h);
  }
  auto candidates = againCandidates(fits);
  auto order = [](const Again& a) {
    int index = 0;
    for (size_t i = 0; i < a.pod.info.containers.size(); ++i)
      if (a.pod.info.containers[i].name == a.handout.container) index = static_cast<int>(i);
    return std::make_tuple(a.pod.created, a.pod.info.key(), index);
  };
  std::sort(candidates.begin(), candidates.end(), [&](const Again& a, const Again& b) { return order(a) < order(b); });
  for (const auto& c : candidates)
    if (kubeletLost(c.handout, kubelet)) return c.handout.ids;
  return std::nullopt;
}

unsigned Agent::Impl::answeredAgain(const std::string& id) {
  std::lock_guard lock(waitMu);
  auto it = againCount.find(id);
  return it == againCount.end() ? 0 : it->second;
}

auto Agent::Impl::match(const std::string& resource,
                        const std::vector<std::string>& ids) -> std::variant<Claim, Again, ClaimError> {
  const auto deadline = std::chrono::steady_clock::now() + options.podWait;
  KubeletView kubelet(*this);
  WatchWait wait(*this);
  bool lastLook = false;
  for (;;) {
    const auto seen = tracker.generation();
    auto got = tracker.claim(resource, ids);
    if (auto* c = std::get_if<Claim>(&got); c && c->exact) return std::move(*c);
    if (auto again = allocatedAgain(resource, ids, kubelet)) {
      if (auto* c = std::get_if<Claim>(&got)) tracker.abort(*c, /*failPod=*/false);
      return std::move(*again);
    }
    if (auto* c = std::get_if<Claim>(&got)) return std::move(*c);
    auto& err = std::get<ClaimError>(got);
    if (err.failure != ClaimFailure::kNoPod) return std::move(err);
    if (!wait.worthIt(kubelet)) {
      // As in preferred(): the watch may have shown the pod meanwhile; look once more.
      if (lastLook || tracker.generation() == seen) return std::move(err);
      lastLook = true;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      wait.inVain();
      return std::move(err);
    }
    tracker.waitForChange(seen, deadline);
  }
}

}  // namespace vgpu::deviceplugin
