// List, then watch from the list's resourceVersion; on a broken stream re-watch from the
// last version seen, once the apiserver confirms it still has it; on 410 or a version the
// apiserver lacks relist and reconcile by diffing against the cache, so the callbacks see
// every change exactly once whatever happened on the wire. Every list after the first is
// served from the apiserver's watch cache (never a quorum read from etcd) and waits a
// jittered backoff first, so that clients cut off together do not come back together.

#include "vgpu/k8s/informer.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

namespace vgpu::k8s {
namespace {

enum class Kind { kAdd, kUpdate, kDelete };
struct Notification {
  Kind kind;
  ObjectPtr before;
  ObjectPtr after;
};

}  // namespace

struct Informer::Impl {
  Client& client;
  ResourceType type;
  InformerOptions options;
  InformerHandlers handlers;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::unordered_map<std::string, ObjectPtr> cache;
  std::vector<std::pair<std::string, ObjectPtr>> listed;  // the last list's objects, until retained
  std::string rv;
  bool synced = false;
  bool stopping = false;
  InformerStats stats;
  CancelToken* activeCancel = nullptr;

  std::thread thread;
  std::mt19937 rng{std::random_device{}()};

  Impl(Client& c, const ResourceType& t, InformerOptions o, InformerHandlers h)
      : client(c), type(t), options(std::move(o)), handlers(std::move(h)) {}

  void notify(const Notification& n) {
    switch (n.kind) {
      case Kind::kAdd:
        if (handlers.onAdd) handlers.onAdd(n.after);
        break;
      case Kind::kUpdate:
        if (handlers.onUpdate) handlers.onUpdate(n.before, n.after);
        break;
      case Kind::kDelete:
        if (handlers.onDelete) handlers.onDelete(n.before);
        break;
    }
    std::lock_guard lock(mu);
    ++stats.events;
  }

  /// Stores options.retain's version of `obj` under `key`, unless a later event replaced it.
  /// Called once the callbacks that got `obj` have run; retain runs outside the lock.
  void retainOne(const std::string& key, const ObjectPtr& obj) {
    ObjectPtr kept = options.retain(obj);
    if (kept == obj) return;
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end() && it->second == obj) it->second = std::move(kept);
  }

  /// retainOne for every object of the list just applied. All the retained versions are
  /// made before the listed ones are let go, so these go as one block of the heap rather
  /// than holes between the smaller objects that replace them.
  void retainListed(std::size_t count) {
    if (!options.retain) return;
    std::vector<ObjectPtr> kept;
    kept.reserve(count);
    for (const auto& [key, obj] : listed) kept.push_back(options.retain(obj));
    {
      std::lock_guard lock(mu);
      for (std::size_t i = 0; i < listed.size(); ++i) {
        const auto& [key, obj] = listed[i];
        if (auto it = cache.find(key); it != cache.end() && it->second == obj) it->second = std::move(kept[i]);
      }
    }
    listed.clear();
    listed.shrink_to_fit();
  }

  // Replaces the cache with a fresh list and reports the difference.
  void replaceAll(ListResult&& list) {
    std::vector<Notification> out;
    {
      std::lock_guard lock(mu);
      std::unordered_map<std::string, ObjectPtr> next;
      next.reserve(list.items.size());
      for (auto& item : list.items) {
        auto obj = std::make_shared<const boost::json::object>(std::move(item));
        std::string key = objectKey(*obj);
        auto it = cache.find(key);
        if (it == cache.end()) {
          out.push_back({Kind::kAdd, nullptr, obj});
        } else if (uid(*it->second) != uid(*obj)) {
          // Deleted and created again under the same name while we were not watching: the
          // old object is gone (whoever keys by uid must hear of it), the new one is new.
          out.push_back({Kind::kDelete, it->second, nullptr});
          out.push_back({Kind::kAdd, nullptr, obj});
        } else if (k8s::resourceVersion(*it->second) != k8s::resourceVersion(*obj)) {
          out.push_back({Kind::kUpdate, it->second, obj});
        }
        if (options.retain) listed.emplace_back(key, obj);
        next.emplace(std::move(key), std::move(obj));
      }
      for (auto& [key, obj] : cache) {
        if (!next.count(key)) out.push_back({Kind::kDelete, obj, nullptr});
      }
      cache = std::move(next);
      rv = list.resourceVersion;
      ++stats.lists;
    }
    for (const auto& n : out) notify(n);
    out.clear();
    retainListed(list.items.size());
    if (options.onListed) options.onListed();
    {
      // Synced only once the first list's callbacks have run, so a caller that waited
      // for sync sees its handlers' view complete.
      std::lock_guard lock(mu);
      synced = true;
    }
    cv.notify_all();
  }

  void apply(WatchEvent&& event) {
    std::optional<Notification> n;
    std::optional<Notification> replaced;  // a different object under the same name: its delete first
    if (options.transform && event.type != WatchEventType::kBookmark) event.object = options.transform(event.object);
    {
      std::lock_guard lock(mu);
      std::string eventRv(k8s::resourceVersion(event.object));
      if (event.type == WatchEventType::kBookmark) {
        if (!eventRv.empty()) rv = eventRv;
        return;
      }
      auto obj = std::make_shared<const boost::json::object>(std::move(event.object));
      std::string key = objectKey(*obj);
      auto it = cache.find(key);
      if (event.type == WatchEventType::kDeleted) {
        if (it != cache.end()) {
          n = Notification{Kind::kDelete, it->second, nullptr};
          cache.erase(it);
        }
      } else if (it == cache.end()) {
        n = Notification{Kind::kAdd, nullptr, obj};
        cache.emplace(key, obj);
      } else if (uid(*it->second) != uid(*obj)) {
        replaced = Notification{Kind::kDelete, it->second, nullptr};
        n = Notification{Kind::kAdd, nullptr, obj};
        it->second = obj;
      } else if (k8s::resourceVersion(*it->second) != eventRv) {
        n = Notification{Kind::kUpdate, it->second, obj};
        it->second = obj;
      }
      // else: a replay of what the cache already holds (re-watch after a relist).
      if (!eventRv.empty()) rv = eventRv;
    }
    if (replaced) notify(*replaced);
    if (n) notify(*n);
    if (options.retain && n && n->after) {
      const ObjectPtr after = n->after;
      n.reset();
      retainOne(objectKey(*after), after);
    }
  }

  // Sleeps up to `d` unless stop() is called; returns false when stopping.
  bool pause(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, d, [&] { return stopping; });
  }

  /// Exponential backoff with equal jitter: uniformly in [d/2, d], d doubling up to the cap.
  /// The spread is what keeps many clients cut off at one instant from returning together.
  std::chrono::milliseconds nextBackoff(std::chrono::milliseconds& current) {
    auto d = current;
    current = std::min(options.backoffMax, current * 2);
    std::uniform_int_distribution<std::int64_t> jitter(0, d.count() / 2);
    return std::chrono::milliseconds(d.count() - d.count() / 2 + jitter(rng));
  }

  ListOptions listOptions() const {
    ListOptions lo;
    lo.ns = options.ns;
    lo.labelSelector = options.labelSelector;
    lo.fieldSelector = options.fieldSelector;
    lo.limit = options.pageSize;
    lo.transform = options.transform;
    return lo;
  }

  void countTooLarge() {
    std::lock_guard lock(mu);
    ++stats.resourceVersionsTooLarge;
  }

  /// A full list from `from`: "0" (any version: the watch cache's, paged by the apiserver
  /// only when it has no watch cache) or the last version seen (not older than it). The
  /// latter goes unpaged, as client-go's reflector sends it: with a limit the apiserver
  /// would read at exactly that version, from etcd, and answer 410 once it is compacted.
  ApiResult<ListResult> listFrom(const std::string& from, CancelToken* cancel) {
    ListOptions lo = listOptions();
    lo.resourceVersion = from;
    if (from != "0") lo.limit = 0;
    return client.list(type, lo, cancel);
  }

  void run() {
    enum class Next { kList, kCheck, kWatch };
    Next next = Next::kList;
    // What the next list starts from: "0" at first and when our version is of no use (the
    // apiserver lacks it), our last version after a 410 from a watch (as the reflector
    // does: served from the watch cache, never older than what we hold). Never "": that is
    // a quorum read from etcd, and after an apiserver restart every client would do it at once.
    std::string from = "0";
    bool first = true;
    auto backoff = options.backoffMin;
    for (;;) {
      // One token per round, so stop() can interrupt the list as well as the watch.
      CancelToken cancel;
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        activeCancel = &cancel;
      }
      struct Clear {
        Impl& impl;
        ~Clear() {
          std::lock_guard lock(impl.mu);
          impl.activeCancel = nullptr;
        }
      } clear{*this};
      if (next == Next::kList) {
        // Every list but the first waits its turn, growing while relists keep failing or
        // watches keep ending before any event.
        if (!std::exchange(first, false) && !pause(nextBackoff(backoff))) return;
        auto r = listFrom(from, &cancel);
        if (!r && from != "0" && (r.error().isGone() || r.error().isResourceVersionTooLarge())) {
          // Our version is of no use here (compacted on a server without a watch cache, or
          // a store behind us): take whatever version the watch cache has.
          if (r.error().isResourceVersionTooLarge()) countTooLarge();
          from = "0";
          r = listFrom(from, &cancel);
        }
        if (!r) continue;
        replaceAll(std::move(*r));
        next = Next::kWatch;
      } else if (next == Next::kCheck) {
        // The stream broke: the apiserver may have come back on an etcd restored from a
        // backup, older than our version. A plain watch from a version it lacks is accepted
        // and stays silent until its store passes that version, losing what came between,
        // so ask first with a one-item list not older than our version, which it refuses
        // ("too large"). NotOlderThan, not the legacy meaning of a version with a limit: that
        // is an exact read, 410 once compacted, which no retry would ever get past.
        ListOptions probe = listOptions();
        probe.limit = 1;
        probe.resourceVersionMatch = "NotOlderThan";
        {
          std::lock_guard lock(mu);
          probe.resourceVersion = rv;
        }
        auto r = client.listPage(type, probe, &cancel);
        if (!r && r.error().isResourceVersionTooLarge()) {
          countTooLarge();
          from = "0";
          next = Next::kList;
          continue;
        }
        if (!r && r.error().isGone()) {
          from = probe.resourceVersion;
          next = Next::kList;
          continue;
        }
        if (!r) {
          if (!pause(nextBackoff(backoff))) return;
          continue;
        }
        next = Next::kWatch;
      }
      WatchOptions wo;
      wo.ns = options.ns;
      wo.labelSelector = options.labelSelector;
      wo.fieldSelector = options.fieldSelector;
      wo.timeoutSeconds = options.watchTimeoutSeconds;
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        wo.resourceVersion = rv;
        ++stats.watches;
      }
      bool gotEvent = false;
      auto watchStart = std::chrono::steady_clock::now();
      auto status = client.watch(type, wo, [&](WatchEvent&& e) {
        gotEvent = true;
        apply(std::move(e));
        return true;
      }, &cancel);
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        if (!status) ++stats.watchErrors;
      }
      if (gotEvent) backoff = options.backoffMin;
      if (status) {
        // The server ended the stream: resume from the last version, at once unless it
        // keeps ending streams straight away (then back off instead of hammering it).
        bool instant = !gotEvent && std::chrono::steady_clock::now() - watchStart < std::chrono::seconds(1);
        if (!instant) {
          backoff = options.backoffMin;
        } else if (!pause(nextBackoff(backoff))) {
          return;
        }
        continue;
      }
      if (status.error().isGone()) {
        // History compacted past our version: relist, not older than it.
        std::lock_guard lock(mu);
        from = rv.empty() ? "0" : rv;
        next = Next::kList;
        continue;
      }
      if (status.error().isResourceVersionTooLarge()) {
        countTooLarge();
        from = "0";
        next = Next::kList;
        continue;
      }
      next = Next::kCheck;
      if (!pause(nextBackoff(backoff))) return;
    }
  }
};

Informer::Informer(Client& client, const ResourceType& type, InformerOptions options,
                   InformerHandlers handlers)
    : impl_(std::make_unique<Impl>(client, type, std::move(options), std::move(handlers))) {}

Informer::~Informer() { stop(); }

void Informer::start() {
  impl_->thread = std::thread([this] { impl_->run(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    if (impl_->activeCancel != nullptr) impl_->activeCancel->cancel();
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool Informer::hasSynced() const {
  std::lock_guard lock(impl_->mu);
  return impl_->synced;
}

bool Informer::waitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->synced; });
}

ObjectPtr Informer::get(const std::string& key) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->cache.find(key);
  return it == impl_->cache.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::list() const {
  std::lock_guard lock(impl_->mu);
  std::vector<ObjectPtr> out;
  out.reserve(impl_->cache.size());
  for (const auto& [key, obj] : impl_->cache) out.push_back(obj);
  return out;
}

std::size_t Informer::size() const {
  std::lock_guard lock(impl_->mu);
  return impl_->cache.size();
}

std::string Informer::resourceVersion() const {
  std::lock_guard lock(impl_->mu);
  return impl_->rv;
}

InformerStats Informer::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace vgpu::k8s
