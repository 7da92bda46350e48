#pragma once
// The Kubernetes REST client the daemons use: typed verbs over JSON objects, with
// timeouts, retries with backoff and jitter, a client-side rate limit and a small pool of
// keep-alive connections. No HTTP type appears here (Beast stays in one .cpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/k8s/api_error.h"
#include "vgpu/k8s/clock.h"
#include "vgpu/k8s/config.h"
#include "vgpu/k8s/object.h"
#include "vgpu/k8s/resource.h"
#include "vgpu/k8s/watch.h"
#include "vgpu/result.h"

namespace vgpu::k8s {

/// Tuning. Defaults suit a scheduler: a high rate limit (HAMi's 5 QPS starves binds).
struct ClientOptions {
  double qps = 1000;                  ///< sustained requests per second; <= 0 = unlimited
  int burst = 2000;                   ///< bucket size of the rate limiter
  std::chrono::milliseconds requestTimeout{30000};  ///< per attempt, connect to last byte
  int maxRetries = 5;                 ///< extra attempts after connection errors, 5xx, 429
  std::chrono::milliseconds backoffBase{100};
  std::chrono::milliseconds backoffMax{5000};
  std::chrono::seconds tokenRefresh{60};  ///< re-read tokenFile this often (and on 401)
  std::size_t maxIdleConnections = 16;    ///< keep-alive pool size
  /// Bounds on what the apiserver (or whoever answers in its place) can make us hold: a
  /// response body larger than maxResponseBytes fails the request, a watch event (a line of
  /// the stream) longer than maxWatchEventBytes ends the watch with an error naming the limit
  /// (an informer then watches again or relists). Objects are at most 1.5 MiB in etcd by
  /// default; the defaults leave room for large lists and events many times that size.
  std::size_t maxResponseBytes = std::size_t{512} << 20;
  std::size_t maxWatchEventBytes = std::size_t{64} << 20;
  std::string userAgent = "vgpu/0.1";
  std::shared_ptr<Clock> clock;       ///< null = systemClock()
  /// An exec credential plugin (ClientConfig::exec) is killed after this.
  std::chrono::milliseconds execTimeout{60000};
  /// Wall-clock time for exec credentials' expirationTimestamp; null = system_clock::now.
  std::function<std::chrono::system_clock::time_point()> wallClock;
  std::uint64_t jitterSeed = 0;       ///< 0 = random
};

struct ListOptions {
  std::string ns;              ///< empty = all namespaces (or a cluster-scoped kind)
  std::string labelSelector;   ///< e.g. "app=x,tier!=db"
  std::string fieldSelector;   ///< e.g. "spec.nodeName=node1"
  std::int64_t limit = 500;    ///< page size; 0 = no paging
  std::string continueToken;   ///< for listPage: the token of the previous page
  /// "" = the most recent (a consistent read: a quorum read from etcd on servers without
  /// consistent reads from the watch cache); "0" = any version, served from the watch
  /// cache, which then ignores `limit`; a version = not older than it, except that with a
  /// `limit` and no `resourceVersionMatch` the apiserver reads at exactly that version
  /// (410 once compacted). docs/kubernetes-client.md has the table.
  std::string resourceVersion;
  /// "", "NotOlderThan" or "Exact"; only with a resourceVersion and without a continue token
  /// (the apiserver answers 422 otherwise).
  std::string resourceVersionMatch;
  /// Applied to each item as it is decoded, one item at a time (never a page's tree): a
  /// list costs one page's text and its items' transformed copies.
  ObjectTransform transform;
};

struct ListResult {
  std::vector<boost::json::object> items;
  std::string resourceVersion;  ///< of the list: start a watch from here
  std::string continueToken;    ///< non-empty when more pages follow (listPage only)
};

struct WatchOptions {
  std::string ns;
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;     ///< from the list or the last event seen
  bool allowBookmarks = true;
  /// A streaming list (the WatchList feature, on by default in kube-apiserver 1.34 and
  /// 1.37): the stream opens with an ADDED event per object at a version not older than
  /// `resourceVersion` ("" = a consistent read, "0" = any), then a BOOKMARK carrying the
  /// annotation kInitialEventsEnd, then the changes. Sends `resourceVersionMatch=NotOlderThan`.
  /// An apiserver with the gate off answers 422 Invalid (isWatchListRefused()).
  bool sendInitialEvents = false;
  int timeoutSeconds = 300;        ///< the server ends the stream after this; re-watch
};

/// Annotation/label edits as a JSON merge patch: a value sets the key, nullopt removes it.
struct MetadataPatch {
  std::map<std::string, std::optional<std::string>> annotations;
  std::map<std::string, std::optional<std::string>> labels;
  /// Non-empty: apply only if the object is still at this version, else 409 (caller decides).
  std::string resourceVersion;
};

/// POST pods/{name}/binding: sets spec.nodeName and merges `annotations` atomically.
struct BindRequest {
  std::string ns;
  std::string pod;
  std::string node;
  std::string uid;  ///< optional precondition: the pod must still be this instance
  std::map<std::string, std::string> annotations;
};

/// Now as the API writes a time (metav1.Time): "2026-12-03T13:23:31Z", UTC, whole seconds.
std::string rfc3339Now();

/// A core/v1 Event about an object (pod or node).
struct EventSpec {
  std::string kind;        ///< "Pod", "Node"
  std::string ns;          ///< of the object; events about cluster-scoped objects go to "default"
  std::string name;
  std::string uid;
  std::string apiVersion = "v1";
  std::string type = "Normal";  ///< Normal | Warning
  std::string reason;      ///< CamelCase, e.g. "FilteringFailed"
  std::string message;
  std::string component;   ///< source.component / reportingComponent, e.g. "vgpu-scheduler"
  std::string host;        ///< source.host / reportingInstance
};

/// Thread-safe; share one per process. Every call blocks the calling thread.
class Client {
 public:
  /// Fails on unusable TLS material or a malformed server URL.
  static Result<std::unique_ptr<Client>> create(ClientConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ApiResult<boost::json::object> get(const ResourceType& type, std::string_view ns,
                                     std::string_view name);
  /// GET of any path the apiserver serves, as text: a subresource that is not JSON, such as
  /// a node proxy's `/api/v1/nodes/<node>:<port>/proxy/metrics`. Errors as for get().
  ApiResult<std::string> getText(std::string_view path);
  /// One page (follow `continueToken` yourself). `cancel` ends it early with an error.
  ApiResult<ListResult> listPage(const ResourceType& type, const ListOptions& options,
                                 CancelToken* cancel = nullptr);
  /// All pages. Pages after the first send only the continue token (the apiserver refuses
  /// a resourceVersion beside one). If a token expires (410) mid-way it starts over, a few times.
  ApiResult<ListResult> list(const ResourceType& type, ListOptions options,
                             CancelToken* cancel = nullptr);
  /// Blocks while the stream lasts, calling `handler` per event. Returns ok when the server
  /// ended the stream (re-watch from the last resourceVersion), when the handler returned
  /// false or when `cancel` fired; an ApiError on a failure status, an ERROR event (410:
  /// relist) or a broken stream. Not retried here: the informer owns that loop.
  ApiStatus watch(const ResourceType& type, const WatchOptions& options,
                  const WatchHandler& handler, CancelToken* cancel = nullptr);

  /// JSON merge patch (RFC 7386) of any fields; returns the patched object.
  ApiResult<boost::json::object> mergePatch(const ResourceType& type, std::string_view ns,
                                            std::string_view name,
                                            const boost::json::object& patch);
  /// Annotations/labels with an optional resourceVersion precondition (409 on mismatch).
  ApiResult<boost::json::object> patchMetadata(const ResourceType& type, std::string_view ns,
                                               std::string_view name,
                                               const MetadataPatch& patch);
  ApiStatus bind(const BindRequest& request);
  /// Creates a core/v1 Event named "<object>.<hex nanotime>"; returns it as stored.
  ApiResult<boost::json::object> createEvent(const EventSpec& event);
  ApiResult<boost::json::object> create(const ResourceType& type, std::string_view ns,
                                        const boost::json::object& object);
  ApiStatus remove(const ResourceType& type, std::string_view ns, std::string_view name);

  const ClientConfig& config() const;
  /// TCP connections opened so far (keep-alive reuse keeps this near the concurrency).
  std::uint64_t connectionsOpened() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::k8s
