// Which pod the kubelet is admitting (pod_tracker.h, DESIGN.md 6a): the node's pods from the
// watch, the claim of an Allocate's IDs, and corrections from PodResources.

#include "pod_tracker.h"

#include <algorithm>

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/hami_allocation.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::deviceplugin {
namespace {

std::string annotationOr(const PodInfo& pod, std::string_view key) {
  auto it = pod.annotations.find(std::string(key));
  return it == pod.annotations.end() ? std::string() : it->second;
}

std::int64_t limitOf(const ContainerResources& c, const std::string& resource) {
  auto it = c.limits.find(resource);
  return it == c.limits.end() ? 0 : it->second;
}

std::vector<DeviceGrant> devicesOf(const Assignment* a, const std::string& container, const std::string& backend) {
  std::vector<DeviceGrant> out;
  if (!a) return out;
  if (const auto* c = a->container(container))
    for (const auto& d : c->devices)
      if (d.backend == backend) out.push_back(d);
  return out;
}

bool sameDevices(std::vector<DeviceGrant> a, std::vector<DeviceGrant> b) {
  auto order = [](const DeviceGrant& x, const DeviceGrant& y) {
    return std::tie(x.backend, x.deviceId, x.slot) < std::tie(y.backend, y.deviceId, y.slot);
  };
  std::sort(a.begin(), a.end(), order);
  std::sort(b.begin(), b.end(), order);
  return a == b;
}

/// Replaces `backend`'s devices of `container` in `a` (adding the container if absent).
void replaceDevices(Assignment& a, const std::string& container, const std::string& backend,
                    const std::vector<DeviceGrant>& devices) {
  auto it = std::find_if(a.containers.begin(), a.containers.end(),
                         [&](const ContainerAssignment& c) { return c.name == container; });
  if (it == a.containers.end()) {
    a.containers.push_back({container, false, {}});
    it = std::prev(a.containers.end());
  }
  if (sameDevices(devicesOf(&a, container, backend), devices)) return;
  std::erase_if(it->devices, [&](const DeviceGrant& d) { return d.backend == backend; });
  it->devices.insert(it->devices.end(), devices.begin(), devices.end());
}

/// The first device `devices` names twice, if any.
std::optional<std::string> deviceTwice(const std::vector<DeviceGrant>& devices) {
  std::set<std::string> seen;
  for (const auto& d : devices)
    if (!seen.insert(d.deviceId).second) return d.deviceId;
  return std::nullopt;
}

/// "id1,id2" with the IDs sorted, for messages.
std::string sortedList(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + ids[i];
  return out;
}

}  // namespace

bool TrackedPod::initFinished(const std::string& container) const {
  if (!initDone.contains(container) || sidecars.contains(container)) return false;
  return std::any_of(info.containers.begin(), info.containers.end(),
                     [&](const ContainerResources& c) { return c.init && c.name == container; });
}

Handout handoutOf(const Claim& claim) {
  Handout h;
  h.id = handoutId(claim.resource, claim.ids);
  h.resource = claim.resource;
  h.ids = claim.ids;
  h.backend = claim.backend;
  h.devices = claim.devices;
  h.podUid = claim.podUid;
  h.podNamespace = claim.podNamespace;
  h.podName = claim.podName;
  h.container = claim.container;
  return h;
}

void PodTracker::setResources(std::map<std::string, std::string> resourceToBackend) {
  std::lock_guard lock(mu_);
  resources_ = std::move(resourceToBackend);
}

void PodTracker::setDevices(const std::string& backend, const std::vector<Device>& devices) {
  std::lock_guard lock(mu_);
  std::erase_if(devices_, [&](const auto& kv) { return kv.second.backend == backend; });
  for (const auto& d : devices) {
    Device copy = d;
    copy.backend = backend;
    devices_[d.id] = std::move(copy);
  }
}

void PodTracker::bumpLocked() {
  ++generation_;
  changed_.notify_all();
}

void PodTracker::upsert(TrackedPod pod) {
  pod.assignment.reset();
  pod.assignmentError.clear();
  if (auto it = pod.info.annotations.find(std::string(keys::kPodAssignment)); it != pod.info.annotations.end()) {
    auto decoded = decodeAssignment(it->second);
    if (decoded.ok()) pod.assignment = std::move(decoded).value();
    else pod.assignmentError = decoded.error().message;
  }
  pod.bindTime = annotationOr(pod.info, keys::kPodBindTime);
  pod.bindPhase = annotationOr(pod.info, keys::kPodBindPhase);
  std::lock_guard lock(mu_);
  const std::string uid = pod.info.uid;
  auto [it, added] = pods_.insert_or_assign(uid, std::move(pod));
  if (added) ++podsSeen_;

  bumpLocked();
}

std::vector<PodTracker::HamiContainer> PodTracker::hamiContainers() const {
  std::lock_guard lock(mu_);
  std::vector<HamiContainer> out;
  for (const auto& [uid, p] : pods_) {
    if (p.assignment || p.info.terminated() || (!node_.empty() && p.info.nodeName != node_)) continue;
    for (const auto& [key, value] : p.info.annotations) {
      if (!hami::isAllocatedKey(key)) continue;
      auto list = hami::decodeDeviceList(value);
      if (!list.ok()) continue;  // vgpu-scheduler reports it (HamiAnnotationsIgnored)
      for (std::size_t c = 0; c < list->size() && c < p.info.containers.size(); ++c)
        for (const auto& d : (*list)[c])
          out.push_back({p.info.podNamespace, p.info.name, p.info.containers[c].name, d.uuid, d.memoryMiB, d.cores});
    }
  }
  return out;
}

std::uint64_t PodTracker::podsSeen() const {
  std::lock_guard lock(mu_);
  return podsSeen_;
}

std::optional<TrackedPod> PodTracker::servedPod(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.info.terminated() || it->second.info.deleting) return std::nullopt;
  if (waitingLocked(it->second)) return std::nullopt;
  auto pr = progress_.find(uid);
  const bool served = pr != progress_.end() ? pr->second.done && !pr->second.failed : it->second.bindPhase == "success";
  if (!served) return std::nullopt;
  return it->second;
}

void PodTracker::remove(const std::string& uid) {
  std::lock_guard lock(mu_);
  pods_.erase(uid);
  progress_.erase(uid);
  written_.erase(uid);
  bumpLocked();
}

std::vector<TrackedPod> PodTracker::pods() const {
  std::lock_guard lock(mu_);
  std::vector<TrackedPod> out;
  for (const auto& [uid, p] : pods_) out.push_back(p);
  return out;
}

std::uint64_t PodTracker::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

bool PodTracker::waitForChange(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  return changed_.wait_until(lock, deadline, [&] { return generation_ != seen; });
}

bool PodTracker::waitingLocked(const TrackedPod& p) const {
  // Running: the kubelet admitted it long ago (a pod HAMi placed before the switch, say).
  if (p.info.terminated() || p.info.deleting || p.info.phase == "Running") return false;
  if (!node_.empty() && p.info.nodeName != node_) return false;
  auto pr = progress_.find(p.info.uid);
  if (pr != progress_.end() && (pr->second.failed || pr->second.done)) return false;
  if (pr == progress_.end() && (p.bindPhase == "success" || p.bindPhase == "failed")) return false;
  bool ours = false;
  for (const auto& c : p.info.containers)
    for (const auto& [r, b] : resources_) ours = ours || limitOf(c, r) > 0;
  return ours;
}

std::vector<const TrackedPod*> PodTracker::waitingLocked() const {
  std::vector<const TrackedPod*> out;
  for (const auto& [uid, p] : pods_)
    if (waitingLocked(p)) out.push_back(&p);
  // Without the kubelet's view, the oldest first: the kubelet sorts the pods of one update
  // by creation time (HandlePodAdditions); bind time and name break ties. Pods that reach it
  // apart (bound apart) arrive in any order: candidatesLocked() asks its view first.
  std::sort(out.begin(), out.end(), [](const TrackedPod* a, const TrackedPod* b) {
    return std::tie(a->created, a->bindTime, a->info.podNamespace, a->info.name) <
           std::tie(b->created, b->bindTime, b->info.podNamespace, b->info.name);
  });
  return out;
}

std::vector<const TrackedPod*> PodTracker::candidatesLocked(const std::string& resource, std::size_t count,
                                                            const KubeletAdmitting* admitting, bool* listed) const {
  auto all = waitingLocked();
  if (listed) *listed = false;
  if (!admitting) return all;
  std::vector<const TrackedPod*> mine;
  for (const TrackedPod* p : all) {
    if (!admitting->pods.contains(p->info.key())) continue;
    auto c = nextContainerLocked(*p, resource);
    if (c && limitOf(*c->container, resource) == static_cast<std::int64_t>(count)) mine.push_back(p);
  }
  if (mine.empty()) return all;
  if (listed) *listed = true;
  return mine;
}

bool PodTracker::awaitsListed(const std::string& resource, std::size_t count, const KubeletAdmitting& admitting) const {
  std::lock_guard lock(mu_);
  bool listed = false;
  candidatesLocked(resource, count, &admitting, &listed);
  return listed;
}

std::optional<PodTracker::Candidate> PodTracker::nextContainerLocked(const TrackedPod& pod,
                                                                     const std::string& resource) const {
  const Progress* pr = nullptr;
  if (auto it = progress_.find(pod.info.uid); it != progress_.end()) pr = &it->second;
  for (size_t i = 0; i < pod.info.containers.size(); ++i) {
    const auto& c = pod.info.containers[i];
    if (limitOf(c, resource) <= 0) continue;
    const auto key = std::make_pair(c.name, resource);
    if (pr && (pr->served.contains(key) || pr->reserved.contains(key))) continue;
    return Candidate{&pod, &c, static_cast<int>(i)};
  }
  return std::nullopt;
}

std::vector<std::string> PodTracker::preferred(const std::string& resource, const std::vector<std::string>& available,
                                               const std::vector<std::string>& mustInclude, std::size_t size,
                                               const KubeletAdmitting* admitting) const {
  std::lock_guard lock(mu_);
  auto backend = resources_.find(resource);
  if (backend == resources_.end()) return {};
  const std::set<std::string> avail(available.begin(), available.end());
  std::set<std::string> promised;  // IDs of waiting pods' assignments
  bool foreignFirst = false;       // the oldest pod this call can be for has no assignment
  bool seenCandidate = false;
  std::vector<std::string> hint;
  bool listed = false;
  const auto candidates = candidatesLocked(resource, size, admitting, &listed);
  // The kubelet admits a pod the watch has not shown, and none it lists waits here.
  if (admitting && admitting->unknownPod && !listed) foreignFirst = true;
  for (const TrackedPod* pod : candidates) {
    auto c = nextContainerLocked(*pod, resource);
    if (!c) continue;
    const bool sized = limitOf(*c->container, resource) == static_cast<std::int64_t>(size);
    if (!pod->assignment) {
      if (sized && !seenCandidate) foreignFirst = true;
      seenCandidate = seenCandidate || sized;
      continue;
    }
    std::vector<std::string> ids;
    for (const auto& g : devicesOf(&*pod->assignment, c->container->name, backend->second))
      ids.push_back(formatVirtualDeviceId(g.deviceId, g.slot));
    promised.insert(ids.begin(), ids.end());
    if (!hint.empty() || ids.size() != size) continue;
    seenCandidate = true;
    if (!std::all_of(ids.begin(), ids.end(), [&](const std::string& id) { return avail.contains(id); })) continue;
    if (!std::all_of(mustInclude.begin(), mustInclude.end(),
                     [&](const std::string& id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }))
      continue;
    hint = std::move(ids);
  }
  if (!foreignFirst) return hint;
  // The kubelet is most likely admitting a pod vgpu-scheduler did not place: steer it to IDs
  // no waiting pod was promised, so its Allocate cannot pass for theirs (it is refused).
  std::vector<std::string> unpromised(mustInclude.begin(), mustInclude.end());
  for (const auto& id : available)
    if (unpromised.size() < size && !promised.contains(id) &&
        std::find(unpromised.begin(), unpromised.end(), id) == unpromised.end())
      unpromised.push_back(id);
  return unpromised.size() == size ? unpromised : std::vector<std::string>{};
}

std::optional<std::string> PodTracker::roomLocked(const std::string& uid, const std::vector<DeviceGrant>& devices) const {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> add;
  for (const auto& d : devices) {
    add[d.deviceId].first += d.memoryMiB;
    add[d.deviceId].second += d.compute;
  }
  for (const auto& [id, want] : add) {
    auto dev = devices_.find(id);
    if (dev == devices_.end()) return "device " + id + " is not on this node";
    std::uint64_t mem = 0, compute = 0;
    for (const auto& [puid, pr] : progress_) {
      if (pr.failed || !pods_.contains(puid) || pods_.at(puid).info.terminated()) continue;
      for (const auto& [c, grants] : pr.given)
        for (const auto& g : grants)
          if (g.deviceId == id) {
            mem += g.memoryMiB;
            compute += g.compute;
          }
    }
    (void)uid;
    if (mem + want.first > dev->second.memoryMiB)
      return "device " + id + " has " + std::to_string(dev->second.memoryMiB - std::min(mem, dev->second.memoryMiB)) +
             " MiB free, the container needs " + std::to_string(want.first) + " MiB";
    if (compute + want.second > dev->second.computeUnits)
      return "device " + id + " has " +
             std::to_string(dev->second.computeUnits - std::min<std::uint64_t>(compute, dev->second.computeUnits)) +
             "% compute free, the container needs " + std::to_string(want.second) + "%";
  }
  return std::nullopt;
}

std::variant<Claim, ClaimError> PodTracker::claim(const std::string& resource, const std::vector<std::string>& ids,
                                                  const KubeletAdmitting* admitting) {
  std::lock_guard lock(mu_);
  auto backendIt = resources_.find(resource);
  if (backendIt == resources_.end())
    return ClaimError{ClaimFailure::kBadRequest, "resource " + resource + " is not served by this agent", {}};
  const std::string backend = backendIt->second;
  if (ids.empty()) return ClaimError{ClaimFailure::kBadRequest, "Allocate named no device IDs", {}};
  std::vector<VirtualDeviceId> parsed;
  for (const auto& id : ids) {
    auto v = parseVirtualDeviceId(id);
    if (!v) return ClaimError{ClaimFailure::kBadRequest, "device ID \"" + id + "\" is not <device id>::<slot>", {}};
    parsed.push_back(*v);
  }
  if (std::set<std::string>(ids.begin(), ids.end()).size() != ids.size())
    return ClaimError{ClaimFailure::kBadRequest, "Allocate named a device ID twice", {}};
  const std::set<std::string> want(ids.begin(), ids.end());

  std::optional<Candidate> exact, signature, unusable;
  std::string unusableWhy;
  bool unusableFirst = false;  // the oldest pod with this container signature cannot be served
  for (const TrackedPod* pod : candidatesLocked(resource, ids.size(), admitting)) {
    auto c = nextContainerLocked(*pod, resource);
    if (!c) continue;
    const bool countMatches = limitOf(*c->container, resource) == static_cast<std::int64_t>(ids.size());
    if (!pod->assignment) {
      if (countMatches && !unusable) {
        unusable = c;
        unusableFirst = !signature;
        unusableWhy = pod->assignmentError.empty()
                          ? "pod " + pod->info.key() + " asks for " + resource + " but was not placed by vgpu-scheduler "
                                "(it has no " + std::string(keys::kPodAssignment) + " annotation; schedulerName \"" +
                                pod->info.schedulerName + "\"): the node agent serves only pods "
                                "vgpu-scheduler placed, never a share promised to another pod. Create it without "
                                "spec.nodeName and with schedulerName vgpu-scheduler (the vgpu webhook sets it)"
                          : "pod " + pod->info.key() + ": its " + std::string(keys::kPodAssignment) +
                                " annotation cannot be read: " + pod->assignmentError;
      }
      continue;
    }
    const auto grants = devicesOf(&*pod->assignment, c->container->name, backend);
    if (grants.size() != ids.size()) {
      if (countMatches && !unusable) {
        unusable = c;
        unusableFirst = !signature;
        unusableWhy = "pod " + pod->info.key() + " container " + c->container->name + " asks for " +
                      std::to_string(ids.size()) + " " + resource + " but its assignment grants " +
                      std::to_string(grants.size()) + " " + backend + " devices";
      }
      continue;
    }
    std::set<std::string> have;
    for (const auto& g : grants) have.insert(formatVirtualDeviceId(g.deviceId, g.slot));
    if (have == want) {
      exact = c;
      break;
    }
    if (countMatches && !signature) signature = c;
  }

  // Without its own IDs, the Allocate is for the first candidate of its signature (one the
  // kubelet lists, else the oldest): when that pod cannot be served, it is refused, and
  // another pod's promised slice is not handed to it.
  std::optional<Candidate> chosen = exact ? exact : unusableFirst ? std::nullopt : signature;
  if (!chosen) {
    if (unusable) return ClaimError{ClaimFailure::kPodUnusable, unusableWhy, unusable->pod->info.uid};
    return ClaimError{ClaimFailure::kNoPod,
                      "no pod bound to node " + node_ + " is waiting for " + std::to_string(ids.size()) + " " +
                          resource + " (device IDs " + sortedList(ids) + ")",
                      {}};
  }
  const TrackedPod& pod = *chosen->pod;
  const auto grants = devicesOf(&*pod.assignment, chosen->container->name, backend);
  // Pair the kubelet's IDs with the assignment's grants: the same device where possible,
  // the rest in order, so each device keeps the memory and compute the scheduler gave it.
  std::vector<DeviceGrant> devices(ids.size());
  std::vector<bool> used(grants.size(), false), placed(ids.size(), false);
  for (size_t i = 0; i < parsed.size(); ++i)
    for (size_t j = 0; j < grants.size(); ++j)
      if (!used[j] && grants[j].deviceId == parsed[i].deviceId && (exact ? grants[j].slot == parsed[i].slot : true)) {
        devices[i] = grants[j];
        used[j] = placed[i] = true;
        break;
      }
  for (size_t i = 0, j = 0; i < parsed.size(); ++i) {
    if (placed[i]) continue;
    while (used[j]) ++j;
    devices[i] = grants[j];
    used[j] = true;
  }
  for (size_t i = 0; i < parsed.size(); ++i) {
    devices[i].backend = backend;
    devices[i].deviceId = parsed[i].deviceId;
    devices[i].slot = parsed[i].slot;
    if (auto d = devices_.find(parsed[i].deviceId); d != devices_.end()) devices[i].deviceIndex = d->second.index;
  }
  // A container sees a device once, so the assignment codec refuses two grants of one (issue
  // 43 defect 5): two slots of one device handed to a container that asks for N devices
  // (a kubelet without the hint) could be neither recorded nor accounted. Refused, the
  // kubelet fails the pod (UnexpectedAdmissionError) and frees the IDs; its controller
  // creates it again.
  if (auto twice = deviceTwice(devices))
    return ClaimError{ClaimFailure::kPodUnusable,
                      "pod " + pod.info.key() + " container " + chosen->container->name + " asks for " +
                          std::to_string(ids.size()) + " " + resource + " but the kubelet handed over two slots of device " +
                          *twice + " (device IDs " + sortedList(ids) +
                          "), and a container sees a device once: refused, so the pod can be created again",
                      pod.info.uid};
  if (!exact) {
    if (auto why = roomLocked(pod.info.uid, devices))
      return ClaimError{ClaimFailure::kPodUnusable,
                        "pod " + pod.info.key() + " container " + chosen->container->name +
                            ": the kubelet handed over devices other than its assignment and " + *why,
                        pod.info.uid};
  }
  Progress& pr = progress_[pod.info.uid];
  pr.reserved.insert({chosen->container->name, resource});
  auto& given = pr.given[chosen->container->name];
  std::erase_if(given, [&](const DeviceGrant& g) { return g.backend == backend; });
  given.insert(given.end(), devices.begin(), devices.end());

  Claim out;
  out.podUid = pod.info.uid;
  out.podNamespace = pod.info.podNamespace;
  out.podName = pod.info.name;
  out.container = chosen->container->name;
  out.containerIndex = chosen->index;
  out.resource = resource;
  out.backend = backend;
  out.ids = ids;
  out.devices = std::move(devices);
  out.exact = exact.has_value();
  out.podAnnotations = pod.info.annotations;
  return out;
}

bool PodTracker::podCompleteLocked(const TrackedPod& pod, const Progress& progress) const {
  for (const auto& c : pod.info.containers)
    for (const auto& [r, b] : resources_)
      if (limitOf(c, r) > 0 && !progress.served.contains({c.name, r})) return false;
  return true;
}

bool PodTracker::listedCompleteLocked(
    const TrackedPod& pod, const std::map<std::string, std::map<std::string, std::vector<std::string>>>& held) const {
  for (const auto& c : pod.info.containers) {
    // The kubelet allocates init containers first and its List leaves them out.
    if (c.init) continue;
    for (const auto& [r, b] : resources_) {
      if (limitOf(c, r) <= 0) continue;
      auto hc = held.find(c.name);
      if (hc == held.end()) return false;
      auto ids = hc->second.find(r);
      if (ids == hc->second.end() || ids->second.empty()) return false;
    }
  }
  return true;
}

Assignment PodTracker::outcomeLocked(const TrackedPod& pod, const Progress& progress) const {
  Assignment a = pod.assignment ? *pod.assignment : Assignment{node_, {}};
  for (const auto& [container, grants] : progress.given) {
    std::set<std::string> backends;
    for (const auto& g : grants) backends.insert(g.backend);
    for (const auto& b : backends) {
      std::vector<DeviceGrant> mine;
      for (const auto& g : grants)
        if (g.backend == b) mine.push_back(g);
      replaceDevices(a, container, b, mine);
    }
  }
  return a;
}

std::optional<PodOutcome> PodTracker::commit(const Claim& claim) {
  std::lock_guard lock(mu_);
  auto pod = pods_.find(claim.podUid);
  Progress& pr = progress_[claim.podUid];
  pr.reserved.erase({claim.container, claim.resource});
  pr.served.insert({claim.container, claim.resource});
  bumpLocked();
  if (pod == pods_.end() || !podCompleteLocked(pod->second, pr)) return std::nullopt;
  pr.done = true;
  PodOutcome out{claim.podUid, claim.podNamespace, claim.podName, outcomeLocked(pod->second, pr), false, {}};
  out.changed = !pod->second.assignment || out.assignment != *pod->second.assignment;
  written_[claim.podUid] = encodeAssignment(out.assignment);
  return out;
}

void PodTracker::abort(const Claim& claim, bool failPod) {
  std::lock_guard lock(mu_);
  Progress& pr = progress_[claim.podUid];
  pr.reserved.erase({claim.container, claim.resource});
  if (auto it = pr.given.find(claim.container); it != pr.given.end())
    std::erase_if(it->second, [&](const DeviceGrant& g) { return g.backend == claim.backend; });
  if (failPod) pr.failed = true;
  bumpLocked();
}

void PodTracker::failPod(const std::string& uid) {
  std::lock_guard lock(mu_);
  progress_[uid].failed = true;
  bumpLocked();
}

std::optional<PodOutcome> PodTracker::correction(
    const std::string& uid, const std::map<std::string, std::map<std::string, std::vector<std::string>>>& held,
    HandoutStore& handouts) {
  std::lock_guard lock(mu_);
  auto pod = pods_.find(uid);
  if (pod == pods_.end()) return std::nullopt;
  // An Allocate matched to this pod is being answered: the next pass sees its outcome.
  if (auto pr = progress_.find(uid); pr != progress_.end() && !pr->second.reserved.empty()) return std::nullopt;
  const bool complete = listedCompleteLocked(pod->second, held);
  std::optional<Assignment> base;
  bool recordedSuccess = false;
  if (auto w = written_.find(uid); w != written_.end()) {
    auto decoded = decodeAssignment(w->second);
    if (decoded.ok()) {
      base = std::move(decoded).value();
      recordedSuccess = true;
    }
  }
  if (!base) {
    base = pod->second.assignment;
    recordedSuccess = pod->second.bindPhase == "success";
  }
  if (!base) return std::nullopt;
  Assignment fixed = *base;
  bool any = false;
  for (const auto& [container, byResource] : held)
    for (const auto& [resource, ids] : byResource) {
      auto r = resources_.find(resource);
      if (r == resources_.end() || ids.empty()) continue;
      any = true;
      std::vector<DeviceGrant> devices;
      if (auto g = handouts.listedAs(resource, ids, uid, container); g && !g->devices.empty()) {
        devices = g->devices;
        if (g->matchedPodUid != uid || g->matchedContainer != container) {
          // The kubelet admitted this pod with IDs the agent matched to another waiting pod
          // (interchangeable assignments): that pod has not been admitted and waits again,
          // unless a correction already gave it the IDs it really holds. The match, not the
          // holder: attribution may have moved the holder before this pod could be corrected.
          if (auto other = progress_.find(g->matchedPodUid); other != progress_.end()) {
            auto gv = other->second.given.find(g->matchedContainer);
            std::vector<DeviceGrant> mine;
            if (gv != other->second.given.end())
              for (const auto& d : gv->second)
                if (d.backend == r->second) mine.push_back(d);
            if (sameDevices(mine, devices)) {
              other->second.served.erase({g->matchedContainer, resource});
              std::erase_if(gv->second, [&](const DeviceGrant& d) { return d.backend == r->second; });
              other->second.done = false;
            }
          }
          handouts.rematch(g->id, uid, container);
        }
      } else {
        // Not handed out by an agent that journalled the devices (or not by this node's
        // agent at all): keep the annotation's slices, in order.
        const auto grants = devicesOf(&*base, container, r->second);
        for (size_t i = 0; i < ids.size(); ++i) {
          auto v = parseVirtualDeviceId(ids[i]);
          if (!v) continue;
          DeviceGrant d = i < grants.size() ? grants[i] : DeviceGrant{};
          d.backend = r->second;
          d.deviceId = v->deviceId;
          d.slot = v->slot;
          if (auto dev = devices_.find(v->deviceId); dev != devices_.end()) d.deviceIndex = dev->second.index;
          devices.push_back(d);
        }
      }
      if (complete) {
        replaceDevices(fixed, container, r->second, devices);
      } else {
        // The kubelet is still admitting the pod: what it holds so far counts as served, so
        // its remaining containers' Allocates are matched to it; nothing is recorded yet.
        Progress& p = progress_[uid];
        p.served.insert({container, resource});
        auto& given = p.given[container];
        std::erase_if(given, [&](const DeviceGrant& d) { return d.backend == r->second; });
        given.insert(given.end(), devices.begin(), devices.end());
      }
    }
  if (!any) return std::nullopt;
  if (!complete) {
    bumpLocked();
    return std::nullopt;
  }
  if (fixed == *base && recordedSuccess) return std::nullopt;
  Progress& p = progress_[uid];
  if (auto valid = checkAssignment(fixed); !valid) {
    // What the kubelet holds cannot be an assignment (two slots of one device in one
    // container, handed out before claim refused that): nobody could read it, so it is not
    // written; the devices the pod runs on still count here, so no Allocate overfills them.
    bool counted = p.done && !p.failed;
    for (const auto& c : fixed.containers) counted = counted && p.given[c.name] == c.devices;
    if (counted) return std::nullopt;
    p.done = true;
    p.failed = false;
    for (const auto& c : fixed.containers) p.given[c.name] = c.devices;
    bumpLocked();
    PodOutcome out{uid, pod->second.info.podNamespace, pod->second.info.name, std::move(fixed), false, {}};
    out.unrecordable = valid.error().message;
    return out;
  }
  written_[uid] = encodeAssignment(fixed);
  p.done = true;
  p.failed = false;
  for (const auto& c : fixed.containers) p.given[c.name] = c.devices;
  bumpLocked();
  return PodOutcome{uid, pod->second.info.podNamespace, pod->second.info.name, std::move(fixed), true, {}};
}

std::optional<Assignment> PodTracker::recorded(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto w = written_.find(uid);
  if (w == written_.end()) return std::nullopt;
  auto decoded = decodeAssignment(w->second);
  if (!decoded.ok()) return std::nullopt;
  return std::move(decoded).value();
}

std::vector<std::pair<std::string, std::string>> PodTracker::liveContainers() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [uid, p] : pods_) {
    if (p.info.terminated()) continue;
    for (const auto& c : p.info.containers) out.emplace_back(uid, c.name);
  }
  return out;
}

std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> PodTracker::usageByDevice() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& [uid, pr] : progress_) {
    if (pr.failed) continue;
    auto pod = pods_.find(uid);
    if (pod == pods_.end() || pod->second.info.terminated()) continue;
    for (const auto& [c, grants] : pr.given)
      for (const auto& g : grants) {
        out[g.deviceId].first += g.memoryMiB;
        out[g.deviceId].second += g.compute;
      }
  }
  return out;
}

}  // namespace vgpu::deviceplugin
