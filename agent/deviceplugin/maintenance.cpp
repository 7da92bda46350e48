// The periodic pass over handouts: attributed and pods corrected from the kubelet's PodResources,
// released (backend, folder, journal) once their containers are gone.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

void Agent::Impl::releaseHandout(const Handout& h) {
  if (Limiter* lim = limiterOf(h.backend))
    if (auto s = lim->release(h.backendRef()); !s.ok()) logLine("warning", s.error().message);
  removeContainerCdi(h.id);
  handouts.remove(h.id);
  std::lock_guard lock(waitMu);
  againCount.erase(h.id);
}

auto Agent::Impl::listHeld(std::chrono::milliseconds timeout) -> Listing {
  Listing out;
  if (options.podResourcesSocket.empty()) return out;
  out.asked = true;
  std::string problem;
  if (!fs::exists(options.podResourcesSocket)) {
    problem = "the kubelet's PodResources socket " + options.podResourcesSocket + " does not exist";
  } else if (auto listed = listPodResources(options.podResourcesSocket, timeout); !listed.ok()) {
    problem = listed.error().message;
  } else {
    out.pods = std::move(listed).value();
  }
  // Said once per change, not every pass.
  std::lock_guard lock(bgMu);
  if (problem != lastListProblem && !problem.empty())
    logLine("warning", problem + " (pods are not corrected and no container folder is removed until it answers)");
  lastListProblem = problem;
  return out;
}

void Agent::Impl::attributeHandouts(const std::map<std::string, HeldDevices>& listed) {
  std::map<std::string, std::string> uidByKey;
  for (const auto& p : tracker.pods()) uidByKey[p.info.key()] = p.info.uid;
  for (const auto& [key, held] : listed) {
    const auto slash = key.find('/');
    const std::string ns = slash == std::string::npos ? std::string() : key.substr(0, slash);
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    auto uid = uidByKey.find(key);
    const std::string podUid = uid == uidByKey.end() ? std::string() : uid->second;
    for (const auto& [container, byResource] : held)
      for (const auto& [resource, ids] : byResource) {
        if (ids.empty()) continue;
        auto h = handouts.listedAs(resource, ids, podUid, container);
        if (h && handouts.attribute(h->id, podUid, ns, name, container))
          logLine("info", "the devices handed out as " + h->id + " are held by pod " + key + " container " + container);
      }
  }
}

std::vector<PodOutcome> Agent::Impl::corrections(const std::map<std::string, HeldDevices>& listed) {
  std::map<std::string, std::string> uidByKey;
  for (const auto& p : tracker.pods()) uidByKey[p.info.key()] = p.info.uid;
  std::vector<PodOutcome> out;
  for (const auto& [key, held] : listed) {
    auto uid = uidByKey.find(key);
    if (uid == uidByKey.end()) continue;
    if (auto outcome = tracker.correction(uid->second, held, handouts)) out.push_back(std::move(*outcome));
  }
  return out;
}

void Agent::Impl::recordCorrections(const std::vector<PodOutcome>& outcomes) {
  for (const auto& outcome : outcomes) {
    const std::string key = outcome.podNamespace + "/" + outcome.podName;
    if (!outcome.unrecordable.empty()) {
      logLine("error", "pod " + key + ": the devices the kubelet gave it cannot be recorded (" + outcome.unrecordable +
                           "); its assignment is left as it is, and the agent counts those devices as its");
      continue;
    }
    k8s::MetadataPatch patch;
    patch.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(outcome.assignment);
    patch.annotations[std::string(keys::kPodBindPhase)] = "success";
    patch.annotations[std::string(keys::kPodAllocateError)] = std::nullopt;
    addPodAnnotations(patch, outcome.podUid);
    // Through the same queue as Allocate's outcomes, so the later of the two lands last.
    writeLater(outcome.podUid, outcome.podNamespace, outcome.podName, std::move(patch), [this, key] {
      logLine("info", "pod " + key + ": assignment corrected to the devices the kubelet gave it");
      std::lock_guard lock(bgMu);
      ++stats.corrections;
    });
  }
}

void Agent::Impl::cleanup(const Listing& listing) {
  if (!informer || !informer->hasSynced()) return;
  if (listing.asked && !listing.pods) return;
  std::map<std::string, std::string> uidByKey;
  std::map<std::string, TrackedPod> livePods;
  for (auto& p : tracker.pods()) {
    uidByKey[p.info.key()] = p.info.uid;
    if (!p.info.terminated()) livePods.emplace(p.info.uid, std::move(p));
  }
  std::set<std::string> held;  // handouts a listed container holds
  if (listing.pods)
    for (const auto& [key, containers] : *listing.pods) {
      auto uid = uidByKey.find(key);
      for (const auto& [container, byResource] : containers)
        for (const auto& [resource, ids] : byResource)
          if (!ids.empty())
            if (auto h = handouts.listedAs(resource, ids, uid == uidByKey.end() ? "" : uid->second, container))
              held.insert(h->id);
    }

  // Whether the kubelet reports h's container holding other IDs of h's resource.
  auto holdsOthers = [&](const Handout& h) {
    if (!listing.pods) return false;
    auto pod = listing.pods->find(h.podNamespace + "/" + h.podName);
    if (pod == listing.pods->end()) return false;
    auto c = pod->second.find(h.container);
    if (c == pod->second.end()) return false;
    auto ids = c->second.find(h.resource);
    return ids != c->second.end() && !ids->second.empty() && handoutId(h.resource, ids->second) != h.id;
  };

  std::unique_lock lock(limiterMu);
  std::uint64_t removed = 0;
  for (const auto& h : handouts.all()) {
    auto pod = livePods.find(h.podUid);
    // An init container that ran to completion: PodResources never lists one, its pod's
    // status says it ended. Its IDs may be held by the container after it, under its own handout.
    const bool initEnded = pod != livePods.end() && pod->second.initFinished(h.container);
    if (!initEnded) {
      if (held.contains(h.id)) continue;
      if (!h.podUid.empty() && pod != livePods.end() && !holdsOthers(h)) continue;
    }
    logLine("info", std::string(initEnded ? "init container " : "container ") + h.container + " of pod " +
                        h.podNamespace + "/" + h.podName + (initEnded ? " has finished" : " is gone") +
                        ": removing its folder " + handouts.folder(h.id).string());
    releaseHandout(h);
    ++removed;
  }
  removed += handouts.removeStrays();
  std::map<std::string, std::vector<ContainerRef>> liveByBackend;
  for (const auto& h : handouts.all()) liveByBackend[h.backend].push_back(h.backendRef());
  for (const auto& [name, st] : served)
    if (auto* lim = limiterOf(name))
      if (auto s = lim->reconcile(liveByBackend[name]); !s.ok())
        logLine("warning", "reconcile " + name + ": " + s.error().message);
  lock.unlock();
  std::lock_guard statsLock(bgMu);
  stats.regionsCleaned += removed;
}

void Agent::Impl::maintain(bool withCleanup) {
  // One pass at a time: a pass asked for (maintainNow) while the loop's is running waits
  // for it, so that when it returns every earlier pass's corrections are written too.
  std::lock_guard pass(maintainMu);
  const Listing listing = listHeld();
  if (listing.pods) {
    forgetUnwatched(*listing.pods);
    attributeHandouts(*listing.pods);
    recordCorrections(corrections(*listing.pods));
  }
  if (withCleanup) cleanup(listing);
}

void Agent::Impl::maintLoop() {
  auto nextCleanup = std::chrono::steady_clock::now();
  std::unique_lock lock(bgMu);
  while (!stopping) {
    const bool due = cleanupSoon || std::chrono::steady_clock::now() >= nextCleanup;
    cleanupSoon = false;
    lock.unlock();
    maintain(due);
    if (due) nextCleanup = std::chrono::steady_clock::now() + options.cleanupInterval;
    lock.lock();
    bgCv.wait_for(lock, options.podResourcesInterval, [&] { return stopping || cleanupSoon; });
  }
}

}  // namespace vgpu::deviceplugin
