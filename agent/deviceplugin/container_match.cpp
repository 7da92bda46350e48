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

std::optional<KubeletAdmitting> Agent::Impl::admittingOf(const std::string& resource, KubeletView& kubelet,
                                                        WatchWait& wait) {
  const auto& listed = kubelet.pods();
  if (!listed) return std::nullopt;
  KubeletAdmitting out;
  for (const auto& [key, held] : *listed) {
    bool waits = held.empty();
    for (const auto& [container, byResource] : held) {
      auto ids = byResource.find(resource);
      waits = waits || ids == byResource.end() || ids->second.empty();
    }
    if (waits) out.pods.insert(key);
  }
  out.unknownPod = wait.worthIt(kubelet);
  return out;
}

std::chrono::steady_clock::time_point Agent::Impl::readDirectlyAt(std::chrono::steady_clock::time_point start) const {
  // A watch that keeps up shows a bound pod within milliseconds; past this it lags or is cut.
  return start + std::min<std::chrono::milliseconds>(options.podWait / 2, std::chrono::milliseconds(500));
}

void Agent::Impl::readUnwatched(const WatchWait& wait, std::chrono::steady_clock::time_point deadline) {
  std::set<std::string> known;
  for (const auto& p : tracker.pods()) known.insert(p.info.key());
  for (const auto& key : wait.waitingFor) {
    if (known.contains(key)) continue;
    if (std::chrono::steady_clock::now() >= deadline) break;
    const auto slash = key.find('/');
    if (slash == std::string::npos) continue;
    auto got = allocClient->get(k8s::kPods, key.substr(0, slash), key.substr(slash + 1));
    if (!got.ok()) {
      logLine("warning", "pod " + key + ": the kubelet admits it, the watch has not shown it and the apiserver " +
                             "cannot be read (" + got.error().message + ")");
      continue;
    }
    logLine("info", "pod " + key + ": the kubelet admits it before the watch showed it; read from the apiserver");
    const auto* uid = k8s::findPath(*got, {"metadata", "uid"});
    if (uid && uid->is_string()) {
      std::lock_guard lock(waitMu);
      readDirectly[key] = std::string(uid->as_string());
    }
    onPod(k8s::trimPod(*got));
  }
}

void Agent::Impl::forgetUnwatched(const std::map<std::string, HeldDevices>& listed) {
  std::map<std::string, std::string> read;
  {
    std::lock_guard lock(waitMu);
    read = readDirectly;
  }
  for (const auto& [key, uid] : read) {
    const bool watched = informer && informer->get(key);
    if (!watched && listed.contains(key)) continue;
    if (!watched) tracker.remove(uid);
    std::lock_guard lock(waitMu);
    readDirectly.erase(key);
  }
}

auto Agent::Impl::match(const std::string& resource,
                        const std::vector<std::string>& ids) -> std::variant<Claim, Again, ClaimError> {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.podWait;
  const auto readAt = readDirectlyAt(start);
  KubeletView kubelet(*this);
  WatchWait wait(*this);
  bool lastLook = false, read = false;
  for (;;) {
    const auto seen = tracker.generation();
    auto admitting = admittingOf(resource, kubelet, wait);
    auto got = tracker.claim(resource, ids, admitting ? &*admitting : nullptr);
    auto* c = std::get_if<Claim>(&got);
    // The kubelet admits a pod it lists: a pod it does not list, while it lists one the watch
    // has not shown, is a guess (the IDs may even be that pod's: a hint misled by the same
    // lag). Wait for the watch, then read those pods, before taking it.
    const bool guess = c && admitting && admitting->unknownPod &&
                       !admitting->pods.contains(c->podNamespace + "/" + c->podName);
    if (c && c->exact && !guess) return std::move(*c);
    if (auto again = allocatedAgain(resource, ids, kubelet)) {
      if (c) tracker.abort(*c, /*failPod=*/false);
      return std::move(*again);
    }
    if (c && !guess) return std::move(*c);
    if (!c) {
      auto& err = std::get<ClaimError>(got);
      if (err.failure != ClaimFailure::kNoPod) return std::move(err);
      if (!wait.worthIt(kubelet)) {
        // As in preferred(): the watch may have shown the pod meanwhile; look once more.
        if (lastLook || tracker.generation() == seen) return std::move(err);
        lastLook = true;
        continue;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      wait.inVain();
      std::string unseen;
      for (const auto& key : wait.waitingFor) unseen += (unseen.empty() ? "" : ", ") + key;
      unseen = "the kubelet admits " + unseen + ", which the watch has not shown and the apiserver did not " +
               "return within --pod-wait-ms";
      if (!c) {
        auto& err = std::get<ClaimError>(got);
        if (!wait.waitingFor.empty()) err.message += " (" + unseen + ")";
        return std::move(err);
      }
      // Never a guess: serving another pod's container would record that pod's share as
      // given while the admitted pod holds it, and its own share promised twice.
      tracker.abort(*c, /*failPod=*/false);
      return ClaimError{ClaimFailure::kNoPod,
                        unseen + "; not matched to pod " + c->podNamespace + "/" + c->podName +
                            ", which the kubelet is not admitting (device IDs " + [&] {
                              std::string l;
                              for (const auto& id : ids) l += (l.empty() ? "" : ",") + id;
                              return l;
                            }() + ")",
                        {}};
    }
    if (c) tracker.abort(*c, /*failPod=*/false);
    if (!read && now >= readAt) {
      read = true;
      readUnwatched(wait, deadline);
      continue;
    }
    tracker.waitForChange(seen, read ? deadline : std::min(deadline, readAt));
  }
}

}  // namespace vgpu::deviceplugin
