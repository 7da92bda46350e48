// List (a streaming list where the apiserver serves one), then watch from the list's
// resourceVersion; a list is applied object by object as it arrives. On a broken stream
// re-watch from the last version seen, once the apiserver confirms it still has it; on 410
// or a version the apiserver lacks relist and reconcile by diffing against the cache, so
// the callbacks see every change exactly once whatever happened on the wire. Every list is
// served from the apiserver's watch cache (never a quorum read from etcd), and every list
// after the first waits a jittered backoff, so that clients cut off together do not come
// back together.

#include "vgpu/k8s/informer.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
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
  std::unordered_set<std::string> listedKeys;  // keys seen by the list in progress
  bool watchListServed = true;  // until the apiserver refuses a streaming list
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

  /// A list is applied as it arrives, object by object, rather than collected first: a
  /// list then costs what its objects keep after `transform` and `retain`, not all of
  /// them whole at once (issue 42). Each object is diffed against the cache on arrival;
  /// the objects the list did not name are reported deleted at its end (endList).
  void beginList() {
    std::lock_guard lock(mu);
    listedKeys.clear();
    listedKeys.reserve(cache.size());
  }

  /// One listed object, already transformed.
  void listOne(boost::json::object&& item) {
    std::optional<Notification> n;
    std::optional<Notification> replaced;
    auto obj = std::make_shared<const boost::json::object>(std::move(item));
    std::string key = objectKey(*obj);
    {
      std::lock_guard lock(mu);
      listedKeys.insert(key);
      auto it = cache.find(key);
      if (it == cache.end()) {
        n = Notification{Kind::kAdd, nullptr, obj};
        cache.emplace(key, obj);
      } else if (uid(*it->second) != uid(*obj)) {
        // Deleted and created again under the same name while we were not watching: the
        // old object is gone (whoever keys by uid must hear of it), the new one is new.
        replaced = Notification{Kind::kDelete, it->second, nullptr};
        n = Notification{Kind::kAdd, nullptr, obj};
        it->second = obj;
      } else if (k8s::resourceVersion(*it->second) != k8s::resourceVersion(*obj)) {
        n = Notification{Kind::kUpdate, it->second, obj};
        it->second = obj;
      }
    }
    if (replaced) notify(*replaced);
    if (!n) return;
    notify(*n);
    n.reset();
    if (options.retain) retainOne(key, obj);
  }

  /// The list is complete at `listRv`: what it did not name is gone.
  void endList(const std::string& listRv, bool streamed) {
    std::vector<Notification> out;
    {
      std::lock_guard lock(mu);
      for (auto it = cache.begin(); it != cache.end();) {
        if (listedKeys.count(it->first) != 0) {
          ++it;
          continue;
        }
        out.push_back({Kind::kDelete, it->second, nullptr});
        it = cache.erase(it);
      }
      listedKeys.clear();
      listedKeys.rehash(0);
      rv = listRv;
      ++stats.lists;
      if (streamed) ++stats.streamedLists;
    }
    for (const auto& n : out) notify(n);
    out.clear();
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

  /// A full list from `from`, applied page by page (where the WatchList gate is off), read
  /// from the watch cache and paged there: NotOlderThan `from` with a limit. The watch cache
  /// ignores a limit for "0" only (cacher.go computeListLimit) and answers a whole
  /// collection at once, so "any version" is asked as "not older than 1"; "" would be a
  /// consistent read, which an apiserver whose watch cache is not ready yet sends to etcd.
  /// NotOlderThan, never the legacy meaning of a version with a limit (an exact read, 410
  /// once compacted). A continue token that expired (410) starts the list over.
  ApiStatus listFrom(const std::string& from, CancelToken* cancel) {
    ListOptions lo = listOptions();
    lo.resourceVersion = from == "0" ? "1" : from;
    lo.resourceVersionMatch = "NotOlderThan";
    for (int restart = 0;; ++restart) {
      beginList();
      ListOptions page = lo;
      std::string listRv;
      bool expired = false;
      for (;;) {
        auto r = client.listPage(type, page, cancel);
        if (!r) {
          if (r.error().isGone() && !page.continueToken.empty() && restart < 3) {
            expired = true;
            break;
          }
          return std::move(r).error();
        }
        if (listRv.empty()) listRv = r->resourceVersion;
        for (auto& item : r->items) listOne(std::move(item));
        if (r->continueToken.empty()) break;
        page.continueToken = r->continueToken;
        // The token carries the list's version; a resourceVersion beside it is a 400.
        page.resourceVersion.clear();
        page.resourceVersionMatch.clear();
      }
      if (!expired) {
        endList(listRv, false);
        return {};
      }
    }
  }

  WatchOptions watchOptions() const {
    WatchOptions wo;
    wo.ns = options.ns;
    wo.labelSelector = options.labelSelector;
    wo.fieldSelector = options.fieldSelector;
    wo.timeoutSeconds = options.watchTimeoutSeconds;
    return wo;
  }

  static bool endsInitialEvents(const boost::json::object& bookmark) {
    const auto* md = bookmark.if_contains("metadata");
    const auto* ann = md != nullptr && md->is_object() ? md->get_object().if_contains("annotations") : nullptr;
    const auto* v = ann != nullptr && ann->is_object() ? ann->get_object().if_contains(kInitialEventsEnd) : nullptr;
    return v != nullptr && v->is_string() && v->get_string() == "true";
  }

  /// A streaming list from `from` ("0" or a version, not older than it): the initial
  /// events are applied as listed objects; at the bookmark that ends them the list is
  /// complete and the same stream goes on as the watch. `listed` says whether it got there.
  ApiStatus streamList(const std::string& from, CancelToken* cancel, bool& listed, bool& gotEvent) {
    WatchOptions wo = watchOptions();
    wo.resourceVersion = from;
    wo.sendInitialEvents = true;
    {
      std::lock_guard lock(mu);
      ++stats.watches;
    }
    beginList();
    return client.watch(type, wo, [&](WatchEvent&& e) {
      gotEvent = true;
      if (listed) {
        apply(std::move(e));
        return true;
      }
      if (e.type == WatchEventType::kBookmark) {
        if (endsInitialEvents(e.object)) {
          endList(std::string(k8s::resourceVersion(e.object)), true);
          listed = true;
        }
        return true;  // a progress bookmark within the initial events: nothing to keep
      }
      if (e.type == WatchEventType::kDeleted) {
        apply(std::move(e));
        return true;
      }
      if (options.transform) e.object = options.transform(e.object);
      listOne(std::move(e.object));
      return true;
    }, cancel);
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
      std::optional<ApiStatus> status;  // set when a streaming list already ran its watch
      bool gotEvent = false;
      auto watchStart = std::chrono::steady_clock::now();
      if (next == Next::kList) {
        // Every list but the first waits its turn, growing while relists keep failing or
        // watches keep ending before any event.
        if (!std::exchange(first, false) && !pause(nextBackoff(backoff))) return;
        bool streaming = false;
        {
          std::lock_guard lock(mu);
          streaming = options.streamingList && watchListServed;
        }
        if (streaming) {
          bool listed = false;
          status = streamList(from, &cancel, listed, gotEvent);
          {
            std::lock_guard lock(mu);
            if (stopping) return;
            if (!*status) ++stats.watchErrors;
          }
          if (!listed) {
            if (!*status && status->error().isWatchListRefused()) {
              // The WatchList gate is off: list, at once.
              std::lock_guard lock(mu);
              watchListServed = false;
              first = true;
            } else if (!*status && from != "0" &&
                       (status->error().isGone() || status->error().isResourceVersionTooLarge())) {
              if (status->error().isResourceVersionTooLarge()) countTooLarge();
              from = "0";
            }
            continue;
          }
        } else {
          auto r = listFrom(from, &cancel);
          if (!r && from != "0" && (r.error().isGone() || r.error().isResourceVersionTooLarge())) {
            // Our version is of no use here (compacted on a server without a watch cache, or
            // a store behind us): take whatever version the watch cache has.
            if (r.error().isResourceVersionTooLarge()) countTooLarge();
            from = "0";
            r = listFrom(from, &cancel);
          }
          if (!r) continue;
        }
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
      if (!status) {
        WatchOptions wo = watchOptions();
        {
          std::lock_guard lock(mu);
          if (stopping) return;
          wo.resourceVersion = rv;
          ++stats.watches;
        }
        status = client.watch(type, wo, [&](WatchEvent&& e) {
          gotEvent = true;
          apply(std::move(e));
          return true;
        }, &cancel);
        std::lock_guard lock(mu);
        if (stopping) return;
        if (!*status) ++stats.watchErrors;
      }
      if (gotEvent) backoff = options.backoffMin;
      if (*status) {
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
      if (status->error().isGone()) {
        // History compacted past our version: relist, not older than it.
        std::lock_guard lock(mu);
        from = rv.empty() ? "0" : rv;
        next = Next::kList;
        continue;
      }
      if (status->error().isResourceVersionTooLarge()) {
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
