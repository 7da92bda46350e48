// List, then watch from the list's resourceVersion; on a broken stream re-watch from the
// last version seen, once the apiserver confirms it still has it; on 410 or a version the
// apiserver lacks relist and reconcile by diffing against the cache, so the callbacks see
// every change exactly once whatever happened on the wire.

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
        } else if (k8s::resourceVersion(*it->second) != k8s::resourceVersion(*obj) ||
                   uid(*it->second) != uid(*obj)) {
          out.push_back({Kind::kUpdate, it->second, obj});
        }
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
      } else if (k8s::resourceVersion(*it->second) != eventRv || uid(*it->second) != uid(*obj)) {
        n = Notification{Kind::kUpdate, it->second, obj};
        it->second = obj;
      }
      // else: a replay of what the cache already holds (re-watch after a relist).
      if (!eventRv.empty()) rv = eventRv;
    }
    if (n) notify(*n);
  }

  // Sleeps up to `d` unless stop() is called; returns false when stopping.
  bool pause(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return !cv.wait_for(lock, d, [&] { return stopping; });
  }

  std::chrono::milliseconds nextBackoff(std::chrono::milliseconds& current) {
    auto d = current;
    current = std::min(options.backoffMax, current * 2);
    std::uniform_int_distribution<std::int64_t> jitter(0, d.count() / 2);
    return std::chrono::milliseconds(d.count() - d.count() / 4 + jitter(rng) / 2);
  }

  ListOptions listOptions() const {
    ListOptions lo;
    lo.ns = options.ns;
    lo.labelSelector = options.labelSelector;
    lo.fieldSelector = options.fieldSelector;
    lo.limit = options.pageSize;
    return lo;
  }

  // After a relist from a version the apiserver lacked, a second such answer before any
  // event means the server keeps refusing: back off rather than relist in a loop.
  bool relistForTooLarge(bool& lastWasTooLarge, std::chrono::milliseconds& backoff) {
    {
      std::lock_guard lock(mu);
      ++stats.resourceVersionsTooLarge;
    }
    bool again = std::exchange(lastWasTooLarge, true);
    return !again || pause(nextBackoff(backoff));
  }

  void run() {
    bool needList = true;
    // Set when a stream failed: the apiserver may have come back on an etcd restored from
    // a backup, older than our version. A plain watch from a version it lacks is accepted
    // and stays silent until its store passes that version, losing what came between, so
    // ask first with a one-item list from our version, which it refuses ("too large").
    bool needCheck = false;
    bool lastWasTooLarge = false;
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
      if (needList) {
        auto r = client.list(type, listOptions(), &cancel);  // "": the most recent
        if (!r) {
          if (!pause(nextBackoff(backoff))) return;
          continue;
        }
        replaceAll(std::move(*r));
        needList = false;
        needCheck = false;
        backoff = options.backoffMin;
      } else if (needCheck) {
        ListOptions probe = listOptions();
        probe.limit = 1;
        {
          std::lock_guard lock(mu);
          probe.resourceVersion = rv;
        }
        auto r = client.listPage(type, probe, &cancel);
        if (!r && r.error().isResourceVersionTooLarge()) {
          if (!relistForTooLarge(lastWasTooLarge, backoff)) return;
          needList = true;
          continue;
        }
        if (!r) {
          if (!pause(nextBackoff(backoff))) return;
          continue;
        }
        needCheck = false;
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
      if (gotEvent) lastWasTooLarge = false;
      if (status.error().isGone()) {
        needList = true;  // history compacted: rebuild from a fresh list
        continue;
      }
      if (status.error().isResourceVersionTooLarge()) {
        if (!relistForTooLarge(lastWasTooLarge, backoff)) return;
        needList = true;
        continue;
      }
      needCheck = true;
      if (gotEvent) backoff = options.backoffMin;
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
