// The kubelet's device-plugin calls (ListAndWatch's devices, GetPreferredAllocation, Allocate):
// a handout made, the backend's limiter asked for the container spec, the pod's outcome queued.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

std::vector<VirtualDevice> Agent::Impl::devices(const std::string& resource, std::uint64_t& version) {
  std::lock_guard lock(devMu);
  std::vector<VirtualDevice> out;
  auto b = resourceToBackend.find(resource);
  if (b == resourceToBackend.end()) return out;
  const auto& st = served.at(b->second);
  version = st.version;
  for (const auto& d : st.devices) {
    if (!servedUnder(d, resource)) continue;
    for (std::uint32_t slot = 0; slot < std::max<std::uint32_t>(d.splitCount, 1); ++slot)
      out.push_back({formatVirtualDeviceId(d.id, static_cast<int>(slot)), d.health != Health::kUnhealthy, d.numaNode});
  }
  return out;
}

std::string Agent::Impl::servedElsewhere(const std::string& resource, const std::vector<std::string>& ids) const {
  std::lock_guard lock(devMu);
  auto b = resourceToBackend.find(resource);
  if (b == resourceToBackend.end()) return "";
  for (const auto& id : ids) {
    auto v = parseVirtualDeviceId(id);
    if (!v) continue;
    for (const auto& d : served.at(b->second).devices)
      if (d.id == v->deviceId && !servedUnder(d, resource))
        return "device " + d.id + " (ID " + id + ") is served as " + std::string(countResourceOf(d)) + ", not as " +
               resource + ": the kubelet may hand out only the IDs it lists under " + resource;
  }
  return "";
}

bool Agent::Impl::waitForDevices(const std::string& resource, std::uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(devMu);
  auto b = resourceToBackend.find(resource);
  if (b == resourceToBackend.end()) return false;
  const auto& st = served.at(b->second);
  return devCv.wait_for(lock, timeout, [&] { return st.version != seen; });
}

std::vector<std::string> Agent::Impl::preferred(const std::string& resource, const std::vector<std::string>& available,
                                                const std::vector<std::string>& mustInclude, std::size_t size) {
  // The kubelet may ask before our watch shows the pod: wait a little for it (reading it
  // from the apiserver when the watch lags), since a hint that names the assignment saves a
  // correction later, and a hint for another pod hands that pod's share away.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::min<std::chrono::milliseconds>(options.podWait, std::chrono::seconds(1));
  const auto readAt = readDirectlyAt(start);
  KubeletView kubelet(*this);
  WatchWait wait(*this);
  bool lastLook = false, read = false;
  for (;;) {
    const auto seen = tracker.generation();
    auto admitting = admittingOf(resource, kubelet, wait);
    const auto now = std::chrono::steady_clock::now();
    // The kubelet admits a pod the watch has not shown and none it lists waits here yet.
    const bool unseen = admitting && admitting->unknownPod && !tracker.awaitsListed(resource, size, *admitting);
    if (!unseen || now >= deadline) {
      auto ids = tracker.preferred(resource, available, mustInclude, size, admitting ? &*admitting : nullptr);
      if (!ids.empty()) return ids;
      // The kubelet admits again a container the agent served (it lost its record of the
      // devices): steer it to the IDs that container holds.
      if (auto again = againHint(resource, available, mustInclude, size, kubelet)) return *again;
    }
    if (!wait.worthIt(kubelet) || now >= deadline) {
      // The watch may have shown the pod since the look above (while PodResources was
      // asked): worthIt then finds it known and gives up. Look once more before an empty
      // hint sends the kubelet to other IDs than the assignment.
      if (lastLook || tracker.generation() == seen) return {};
      lastLook = true;
      continue;
    }
    if (!read && now >= readAt) {
      read = true;
      readUnwatched(wait, deadline);
      continue;
    }
    tracker.waitForChange(seen, read ? deadline : std::min(deadline, readAt));
  }
}

std::variant<ContainerSpec, RpcError> Agent::Impl::allocate(const std::string& resource,
                                                            const std::vector<std::string>& ids) {
  const auto t0 = std::chrono::steady_clock::now();
  auto result = allocateImpl(resource, ids);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  allocateSeconds.observe({resource}, secs);
  const bool ok = std::holds_alternative<ContainerSpec>(result);
  allocateTotal.inc({resource, ok ? "success" : "failure"});
  std::lock_guard lock(bgMu);
  ++(ok ? stats.allocations : stats.allocateFailures);
  return result;
}

bool Agent::Impl::sameAdmission(const Handout& earlier, const Claim& claim) {
  const bool samePod = earlier.matchedPodUid == claim.podUid || earlier.podUid == claim.podUid;
  return samePod && earlier.matchedContainer != claim.container;
}

Annotations Agent::Impl::podAnnotationsFor(const std::string& uid) const {
  Annotations out;
  for (const auto& h : handouts.heldBy(uid))
    for (const auto& [k, v] : h.podAnnotations) {
      auto [it, added] = out.emplace(k, v);
      if (!added && it->second != v)
        logLine("warning", "pod " + h.podNamespace + "/" + h.podName +
                               ": its containers' backends ask for different values of the pod annotation " + k +
                               " (\"" + it->second + "\" and \"" + v + "\"); a pod carries one, the first is kept");
    }
  return out;
}

void Agent::Impl::addPodAnnotations(k8s::MetadataPatch& patch, const std::string& uid) const {
  for (const auto& [k, v] : podAnnotationsFor(uid)) patch.annotations.emplace(k, v);
}

std::variant<ContainerSpec, RpcError> Agent::Impl::answerAgain(const Again& again) {
  const Handout& h = again.handout;
  const std::string who = "pod " + h.podNamespace + "/" + h.podName + " container " + h.container;
  ContainerSpec spec;
  {
    std::shared_lock limiterLock(limiterMu);
    if (Limiter* limiter = limiterOf(h.backend)) {
      ContainerGrant grant;
      grant.container = h.backendRef();
      grant.podNamespace = h.podNamespace;
      grant.podName = h.podName;
      for (size_t i = 0; i < again.pod.info.containers.size(); ++i)
        if (again.pod.info.containers[i].name == h.container) grant.containerIndex = static_cast<int>(i);
      grant.devices = h.devices;
      grant.podAnnotations = again.pod.info.annotations;
      grant.podUid = h.podUid;
      auto dir = handouts.prepare(h.id);
      if (!dir.ok()) {
        const std::string msg = who + ": " + dir.error().message;
        logLine("error", "Allocate " + h.resource + ": " + msg);
        return RpcError{RpcCode::kFailedPrecondition, msg};
      }
      grant.hostDir = *dir;
      auto s = limiter->containerSpec(grant);
      if (!s.ok()) {
        const std::string msg = who + ": backend " + h.backend + " cannot set up the devices again: " + s.error().message;
        logLine("error", "Allocate " + h.resource + ": " + msg);
        return RpcError{RpcCode::kFailedPrecondition, msg};
      }
      spec = std::move(s).value();
      if (auto b = boundSharedFolders(handouts.bound(), spec, grant.hostDir); !b.ok()) {
        const std::string msg = who + ": " + b.error().message;
        logLine("error", "Allocate " + h.resource + ": " + msg);
        return RpcError{RpcCode::kFailedPrecondition, msg};
      }
      if (auto c = writeContainerCdi(h.id, spec); !c.ok()) {
        const std::string msg = who + ": " + c.error().message;
        logLine("error", "Allocate " + h.resource + ": " + msg);
        return RpcError{RpcCode::kFailedPrecondition, msg};
      }
    }
  }
  handouts.setRegion(h.id, spec.region);
  {
    std::lock_guard lock(waitMu);
    ++againCount[h.id];
  }
  logLine("info", "Allocate " + h.resource + " for " + who +
                      " again (the kubelet lost its record of the devices): answered with the devices it holds, " +
                      h.id);
  return spec;
}

std::variant<ContainerSpec, RpcError> Agent::Impl::allocateImpl(const std::string& resource,
                                                                const std::vector<std::string>& ids) {
  if (auto why = servedElsewhere(resource, ids); !why.empty()) {
    logLine("error", "Allocate " + resource + ": " + why);
    return RpcError{RpcCode::kInvalidArgument, why};
  }
  auto matched = match(resource, ids);
  if (auto* again = std::get_if<Again>(&matched)) return answerAgain(*again);
  std::variant<Claim, ClaimError> got;
  if (auto* c = std::get_if<Claim>(&matched)) got = std::move(*c);
  else got = std::get<ClaimError>(std::move(matched));
  if (auto* err = std::get_if<ClaimError>(&got)) {
    logLine("error", "Allocate " + resource + ": " + err->message);
    if (err->failure == ClaimFailure::kBadRequest) return RpcError{RpcCode::kInvalidArgument, err->message};
    if (err->failure == ClaimFailure::kPodUnusable) {
      tracker.failPod(err->podUid);
      recordFailure(err->podUid, err->message);
    }
    return RpcError{RpcCode::kFailedPrecondition, err->message};
  }
  const Claim claim = std::get<Claim>(std::move(got));
  const std::string who = "pod " + claim.podNamespace + "/" + claim.podName + " container " + claim.container;
  Backend* backend = served.at(claim.backend).backend;

  // The folder is named by what the kubelet handed out, not by the guessed pod, which
  // the PodResources pass may correct later (handout_store.h).
  std::shared_lock limiterLock(limiterMu);
  Handout handout = handoutOf(claim);
  // The kubelet hands IDs out again once their earlier holder is gone, or within one pod
  // from an init container to the containers after it: that one keeps its own handout.
  for (const auto& earlier : handouts.withIds(resource, ids))
    if (!sameAdmission(earlier, claim)) releaseHandout(earlier);
  auto hostDir = handouts.create(handout);
  if (hostDir.ok()) handout.id = fs::path(*hostDir).filename().string();
  if (!hostDir.ok()) {
    tracker.abort(claim, true);
    const std::string msg = who + ": " + hostDir.error().message;
    recordFailure(claim.podUid, msg);
    return RpcError{RpcCode::kInternal, msg};
  }
  ContainerGrant grant;
  grant.container = handout.backendRef();
  grant.podNamespace = claim.podNamespace;
  grant.podName = claim.podName;
  grant.containerIndex = claim.containerIndex;
  grant.devices = claim.devices;
  grant.hostDir = *hostDir;
  grant.podAnnotations = claim.podAnnotations;
  grant.podUid = claim.podUid;
  auto asked = containerSpecFor(*backend, grant, handouts.bound());
  if (!asked.ok()) {
    tracker.abort(claim, true);
    releaseHandout(handout);
    const std::string msg = who + ": " + asked.error().message;
    recordFailure(claim.podUid, msg);
    return RpcError{RpcCode::kFailedPrecondition, msg};
  }
  ContainerSpec spec = std::move(asked).value();
  // A backend's OCI hooks (the driver's memory cap) reach the runtime in a CDI spec; the
  // container must not start without them.
  if (auto c = writeContainerCdi(handout.id, spec); !c.ok()) {
    tracker.abort(claim, true);
    releaseHandout(handout);
    const std::string msg = who + ": " + c.error().message;
    recordFailure(claim.podUid, msg);
    return RpcError{RpcCode::kFailedPrecondition, msg};
  }
  limiterLock.unlock();
  handouts.setRegion(handout.id, spec.region);
  if (!spec.podAnnotations.empty()) handouts.setPodAnnotations(handout.id, spec.podAnnotations);
  postNotices(claim, spec.notices);
  if (auto outcome = tracker.commit(claim)) {
    // The pod's last container: its outcome is written after the answer, off the kubelet's
    // path (issue 27 item 15). The scheduler counts the pod in flight until it reads it, or
    // until the pod runs; the PodResources pass writes it too should this agent stop first.
    k8s::MetadataPatch patch;
    patch.annotations[std::string(keys::kPodBindPhase)] = "success";
    patch.annotations[std::string(keys::kPodAllocateError)] = std::nullopt;
    if (outcome->changed) patch.annotations[std::string(keys::kPodAssignment)] = encodeAssignment(outcome->assignment);
    addPodAnnotations(patch, claim.podUid);
    writeLater(claim.podUid, claim.podNamespace, claim.podName, std::move(patch));
  }
  return spec;
}

}  // namespace vgpu::deviceplugin
