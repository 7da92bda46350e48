// Pods in and out: the pod watch (init containers, container ids, HAMi's pods) and the queued,
// retried writes of Allocate's outcomes, failures and events on the apiserver.

#include "agent_impl.h"

namespace vgpu::deviceplugin {

void Agent::Impl::writeLater(const std::string& uid, const std::string& ns, const std::string& name,
                             k8s::MetadataPatch patch, std::function<void()> onWritten) {
  std::lock_guard lock(writeMu);
  PendingWrite& w = pendingWrites[uid];
  w.ns = ns;
  w.name = name;
  for (auto& [k, v] : patch.annotations) w.patch.annotations[k] = std::move(v);
  if (onWritten) w.onWritten.push_back(std::move(onWritten));
  if (!w.queued && !w.writing) {
    w.queued = true;
    writeQueue.push_back(uid);
  }
  writeCv.notify_one();
}

void Agent::Impl::writerLoop() {
  std::unique_lock lock(writeMu);
  for (;;) {
    // The first pod whose backoff is over.
    auto ready = writeQueue.end();
    auto next = std::chrono::steady_clock::time_point::max();
    const auto now = std::chrono::steady_clock::now();
    for (auto it = writeQueue.begin(); it != writeQueue.end(); ++it) {
      const auto at = pendingWrites.at(*it).notBefore;
      if (at <= now) {
        ready = it;
        break;
      }
      next = std::min(next, at);
    }
    if (ready == writeQueue.end()) {
      if (writersStop) return;
      if (next == std::chrono::steady_clock::time_point::max()) writeCv.wait(lock);
      else writeCv.wait_until(lock, next);
      continue;
    }
    const std::string uid = *ready;
    writeQueue.erase(ready);
    PendingWrite& w = pendingWrites.at(uid);
    w.queued = false;
    w.writing = true;
    const std::string ns = w.ns, name = w.name;
    k8s::MetadataPatch patch = std::move(w.patch);
    w.patch = {};
    auto callbacks = std::move(w.onWritten);
    w.onWritten.clear();
    lock.unlock();
    auto r = writeClient->patchMetadata(k8s::kPods, ns, name, patch);
    if (r.ok())
      for (auto& f : callbacks) f();
    lock.lock();
    PendingWrite& after = pendingWrites.at(uid);
    after.writing = false;
    if (!r.ok() && !r.error().isNotFound()) {
      // Put it back under anything newer, and try again later.
      for (auto& [k, v] : patch.annotations) after.patch.annotations.try_emplace(k, std::move(v));
      after.onWritten.insert(after.onWritten.begin(), std::make_move_iterator(callbacks.begin()),
                             std::make_move_iterator(callbacks.end()));
      ++after.failures;
      if (after.failures == 1 || after.failures % 20 == 0)
        logLine("warning", "recording the allocation on pod " + ns + "/" + name + " (attempt " +
                               std::to_string(after.failures) + ", retried until the apiserver takes it): " +
                               r.error().describe());
      after.notBefore = std::chrono::steady_clock::now() +
                        std::min<std::chrono::milliseconds>(std::chrono::milliseconds(100 << std::min(after.failures, 6)),
                                                           std::chrono::seconds(5));
    } else {
      after.failures = 0;
      after.notBefore = {};
    }
    if (!after.patch.annotations.empty() || !after.onWritten.empty()) {
      after.queued = true;
      writeQueue.push_back(uid);
    } else {
      pendingWrites.erase(uid);
    }
    writeCv.notify_all();
  }
}

bool Agent::Impl::flushWrites(std::chrono::milliseconds timeout) {
  std::unique_lock lock(writeMu);
  return writeCv.wait_for(lock, timeout, [&] { return pendingWrites.empty(); });
}

void Agent::Impl::recordFailure(const std::string& uid, const std::string& reason, std::string ns, std::string name) {
  if (ns.empty())
    for (const auto& p : tracker.pods())
      if (p.info.uid == uid) {
        ns = p.info.podNamespace;
        name = p.info.name;
      }
  if (name.empty()) return;
  auto patched = std::make_shared<bool>(false);
  enqueue([this, ns, name, uid, reason, patched] {
    if (!*patched) {
      k8s::MetadataPatch patch;
      patch.annotations[std::string(keys::kPodBindPhase)] = "failed";
      patch.annotations[std::string(keys::kPodAllocateError)] = reason;
      auto r = client->patchMetadata(k8s::kPods, ns, name, patch);
      if (!r.ok()) return r.error().isNotFound();
      *patched = true;
    }
    k8s::EventSpec ev{"Pod", ns, name, uid, "v1", "Warning", "VgpuAllocateFailed", reason, kComponent,
                      options.nodeName};
    auto e = client->createEvent(ev);
    return e.ok();
  });
}

void Agent::Impl::postNotices(const Claim& claim, const std::vector<PodNotice>& notices) {
  for (const auto& n : notices) {
    k8s::EventSpec ev{"Pod", claim.podNamespace, claim.podName, claim.podUid, "v1", "Normal", n.reason,
                      "container " + claim.container + ": " + n.message, kComponent, options.nodeName};
    enqueue([this, ev] { return client->createEvent(ev).ok(); });
  }
}

void Agent::Impl::enqueue(std::function<bool()> task) {
  std::lock_guard lock(bgMu);
  tasks.emplace_back(20, std::move(task));
  bgCv.notify_all();
}

void Agent::Impl::recorderLoop() {
  std::unique_lock lock(bgMu);
  while (!stopping) {
    if (tasks.empty()) {
      bgCv.wait(lock, [&] { return stopping || !tasks.empty(); });
      continue;
    }
    auto [left, task] = std::move(tasks.front());
    tasks.pop_front();
    lock.unlock();
    const bool done = task();
    lock.lock();
    if (!done && left > 1) {
      tasks.emplace_back(left - 1, std::move(task));
      bgCv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping; });
    }
  }
}

void Agent::Impl::noteHamiPod(const PodInfo& pod) {
  if (pod.nodeName != options.nodeName || pod.annotations.contains(std::string(keys::kPodAssignment))) return;
  std::lock_guard lock(hamiMu);
  if (hamiSeen.contains(pod.uid)) return;
  for (const auto& [key, value] : pod.annotations)
    if (hami::isAllocatedKey(key)) {
      hamiSeen.insert(pod.uid);
      logLine("info", "pod " + pod.key() + " was placed by HAMi (" + key + ": " + value +
                          "): HAMi-core limits its containers; the agent leaves them alone "
                          "(vgpu_hami_container_memory_bytes)");
      return;
    }
}

void Agent::Impl::onPod(const boost::json::object& obj) {
  auto info = parsePod(boost::json::value(obj));
  if (!info.ok()) {
    logLine("warning", "ignoring a pod the agent cannot read: " + info.error().message);
    return;
  }
  TrackedPod p;
  p.info = std::move(info).value();
  noteHamiPod(p.info);
  if (const auto* ts = k8s::findPath(obj, {"metadata", "creationTimestamp"}); ts && ts->is_string())
    if (auto t = parseTimestamp(ts->as_string()); t.ok()) p.created = *t;
  readInitContainers(obj, p);
  readContainerIds(obj, p);
  // An init container that finished gives its handout back now, not at the next interval.
  bool released = false;
  for (const auto& h : handouts.heldBy(p.info.uid)) released = released || p.initFinished(h.container);
  tracker.upsert(std::move(p));
  if (released) {
    std::lock_guard lock(bgMu);
    cleanupSoon = true;
    bgCv.notify_all();
  }
}

void Agent::Impl::readInitContainers(const boost::json::object& obj, TrackedPod& p) {
  if (const auto* spec = k8s::findPath(obj, {"spec", "initContainers"}); spec && spec->is_array())
    for (const auto& c : spec->as_array()) {
      const auto* o = c.if_object();
      const auto* name = o ? o->if_contains("name") : nullptr;
      const auto* policy = o ? o->if_contains("restartPolicy") : nullptr;
      if (name && name->is_string() && policy && policy->is_string() && policy->as_string() == "Always")
        p.sidecars.insert(std::string(name->as_string()));
    }
  const auto* statuses = k8s::findPath(obj, {"status", "initContainerStatuses"});
  if (!statuses || !statuses->is_array()) return;
  for (const auto& st : statuses->as_array()) {
    const auto* o = st.if_object();
    const auto* name = o ? o->if_contains("name") : nullptr;
    const auto* code = o ? k8s::findPath(*o, {"state", "terminated", "exitCode"}) : nullptr;
    if (name && name->is_string() && code && code->is_int64() && code->as_int64() == 0)
      p.initDone.insert(std::string(name->as_string()));
  }
}

void Agent::Impl::readContainerIds(const boost::json::object& obj, TrackedPod& p) {
  for (const char* field : {"initContainerStatuses", "containerStatuses"}) {
    const auto* statuses = k8s::findPath(obj, {"status", field});
    if (!statuses || !statuses->is_array()) continue;
    for (const auto& st : statuses->as_array()) {
      const auto* o = st.if_object();
      const auto* name = o ? o->if_contains("name") : nullptr;
      const auto* id = o ? o->if_contains("containerID") : nullptr;
      if (!name || !name->is_string() || !id || !id->is_string()) continue;
      if (auto cid = runtimeContainerId(id->as_string()); !cid.empty())
        p.containerIds[std::string(name->as_string())] = std::move(cid);
    }
  }
}

void Agent::Impl::onPodDeleted(const boost::json::object& obj) {
  tracker.remove(std::string(k8s::uid(obj)));
  // Its folders go in the cleanup pass, once the kubelet no longer reports their devices
  // held: the container attributed to this pod may really be another pod's.
  std::lock_guard lock(bgMu);
  cleanupSoon = true;
  bgCv.notify_all();
}

}  // namespace vgpu::deviceplugin
