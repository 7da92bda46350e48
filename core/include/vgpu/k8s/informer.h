#pragma once
// A local mirror of one kind of object, fed by list+watch: the scheduler's view of all
// nodes and pods, the node agent's view of the pods bound to its node. It survives broken
// watches, 410 Gone, apiserver restarts and stores restored from a backup by relisting and
// diffing, so callbacks see each change once and a delete is never missed (HAMi's
// stale-accounting bug).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vgpu/k8s/client.h"
#include "vgpu/k8s/object.h"
#include "vgpu/k8s/resource.h"

namespace vgpu::k8s {

/// Callbacks run on the informer's thread, in order, after the cache reflects the change.
/// They must not block for long (they delay every later event) and must not call stop().
struct InformerHandlers {
  std::function<void(const ObjectPtr& obj)> onAdd;
  std::function<void(const ObjectPtr& before, const ObjectPtr& after)> onUpdate;
  /// `last` is the last state known; after a relist it is the cached one.
  std::function<void(const ObjectPtr& last)> onDelete;
};

struct InformerOptions {
  std::string ns;               ///< empty = all namespaces
  std::string labelSelector;
  std::string fieldSelector;    ///< e.g. "spec.nodeName=node1"
  /// Lists as a streaming list (a watch with sendInitialEvents) where the apiserver serves
  /// it; after its first refusal (the WatchList gate off) the informer lists instead.
  bool streamingList = true;
  /// Page size of lists where streaming lists are not served (every list is then
  /// NotOlderThan a version, which the watch cache pages; docs/kubernetes-client.md).
  std::int64_t pageSize = 500;
  int watchTimeoutSeconds = 300;
  /// Before every list but the first, and after a failed watch: doubling from backoffMin
  /// to backoffMax, jittered (between half and all of it).
  std::chrono::milliseconds backoffMin{200};
  std::chrono::milliseconds backoffMax{10000};
  /// Applied to every listed and watched object before it is cached or handed to a
  /// callback (vgpu/k8s/trim.h has the daemons' ones); null keeps whole objects.
  ObjectTransform transform;
  /// What the informer's own store keeps of an object once the callbacks that received
  /// it have run: get(), list() and the `before`/`last` of later callbacks see this. It must
  /// keep metadata name, namespace, uid and resourceVersion (the relist's diff reads them);
  /// returning its argument keeps the object as the callbacks got it. Null keeps every
  /// object whole. For a reader that holds what it needs elsewhere (the scheduler's cache
  /// of bound pods), so the store need not hold it twice.
  std::function<ObjectPtr(const ObjectPtr&)> retain;
  /// Runs on the informer's thread after each full list (the first and every relist), once
  /// its callbacks have run and the store holds what `retain` kept.
  std::function<void()> onListed;
};

/// Counters for metrics and tests.
struct InformerStats {
  std::uint64_t lists = 0;          ///< successful full lists (1 + relists), streamed or not
  std::uint64_t streamedLists = 0;  ///< of which streaming lists (sendInitialEvents)
  std::uint64_t watches = 0;        ///< watch streams opened
  std::uint64_t watchErrors = 0;    ///< streams that ended in an error
  std::uint64_t events = 0;         ///< add/update/delete callbacks delivered
  /// Answers that the apiserver lacks the informer's version (its etcd was restored from
  /// a backup); each dropped the version and relisted.
  std::uint64_t resourceVersionsTooLarge = 0;
};

class Informer {
 public:
  /// `client` must outlive the informer.
  Informer(Client& client, const ResourceType& type, InformerOptions options,
           InformerHandlers handlers);
  ~Informer();  ///< stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  /// Starts the list+watch thread. Call once.
  void start();
  /// Ends the thread; safe to call twice. No callback runs after it returns.
  void stop();

  /// True once the first list has been applied and its callbacks have run.
  bool hasSynced() const;
  bool waitForSync(std::chrono::milliseconds timeout) const;

  /// The cached object for "ns/name" (or "name"), null when absent.
  ObjectPtr get(const std::string& key) const;
  std::vector<ObjectPtr> list() const;
  std::size_t size() const;
  /// The last resourceVersion seen (list, event or bookmark).
  std::string resourceVersion() const;
  InformerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::k8s
