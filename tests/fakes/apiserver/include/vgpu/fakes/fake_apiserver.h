#pragma once
// An in-process Kubernetes apiserver double for tests: the real REST paths and JSON shapes
// for nodes, pods and events (/api/v1) and ResourceSlices, ResourceClaims and DeviceClasses
// (/apis/resource.k8s.io/v1, with the apiserver's validation of slices and its dropping of
// the DRAConsumableCapacity fields when that gate is off) over HTTP or HTTPS on loopback, one cluster-wide
// resourceVersion counter, merge-patch and 409 preconditions, watch streams with history,
// paging, selectors, the binding subresource, bearer-token checks, and switches a test
// flips to break things (cut watches, compact history for 410, inject 5xx/429/hangs,
// restart on the same port). Knows nothing of vgpu's client.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/result.h"

namespace vgpu::fakes {

namespace detail {
struct StoreBackup;
}

struct FakeApiServerOptions {
  bool tls = false;
  std::string token;       ///< bearer token every request must carry; empty = no check
  std::string certPem;     ///< TLS server certificate; empty = a self-signed one is made
  std::string keyPem;
  std::uint16_t port = 0;  ///< 0 = any free port
  std::string bindAddress = "127.0.0.1";
  /// Open watches that asked for bookmarks get one this often when idle; 0 = never.
  std::chrono::milliseconds bookmarkInterval{0};
  /// A list (or a sendInitialEvents watch) from a resourceVersion newer than the store's
  /// waits this long for the store to catch up before answering 504 "Too large resource
  /// version", as the real watch cache does for 3 s.
  std::chrono::milliseconds tooLargeResourceVersionWait{3000};
  /// kube-apiserver's WatchList feature gate: on, a watch with sendInitialEvents=true is a
  /// streaming list; off, it is refused 422 Invalid naming sendInitialEvents (as 1.34 and
  /// 1.37 do when the gate is turned off; it is on by default in both).
  bool watchList = true;
};

/// What an etcd snapshot holds: every object and the resourceVersion counter.
struct StoreBackup {
  std::shared_ptr<const detail::StoreBackup> state;
};

/// A failure to inject into the next matching requests.
struct Fault {
  enum class Action {
    kStatus,  ///< answer `status` with a Status body (and Retry-After if set)
    kHang,    ///< accept the request and never answer (until releaseHangs/stop)
    kDrop,    ///< close the connection without answering
    kDelay,   ///< wait `delay`, then serve the request normally (a slow apiserver)
    /// Serve the request (a write is applied) but close the connection instead of sending
    /// the answer: a reply lost on the way back, so the client retries what already happened.
    kLoseReply,
  };
  enum class Watch { kAny, kOnly, kNever };
  std::string method;      ///< "" = any; GET, POST, PATCH, DELETE
  std::string pathPrefix;  ///< "" = any; compared with the path (no query)
  std::string queryContains;  ///< "" = any; a substring of the raw query, e.g. "continue="
  Watch watch = Watch::kAny;
  Action action = Action::kStatus;
  int status = 500;
  std::string message;     ///< kStatus: the Status message ("" = a generic one)
  std::chrono::milliseconds delay{0};  ///< kDelay
  int retryAfterSeconds = -1;
  int times = 1;           ///< matching requests affected; -1 = until clearFaults()
};

struct RequestRecord {
  std::string method;
  std::string path;
  std::string query;
  int status = 0;  ///< 0 while a watch is streaming, or when dropped/hung
  std::chrono::steady_clock::time_point at;  ///< when the request arrived
};

class FakeApiServer {
 public:
  /// Listens at once; fails if the port is taken or TLS material is unusable.
  static Result<std::unique_ptr<FakeApiServer>> start(FakeApiServerOptions options = {});
  ~FakeApiServer();

  std::string url() const;          ///< http(s)://127.0.0.1:PORT
  std::uint16_t port() const;
  const std::string& caPem() const; ///< the certificate a client must trust (TLS only)

  // ---- State, bypassing HTTP (same semantics: new resourceVersion, watch events) ----
  /// `plural` is "nodes", "pods", "events", "resourceslices", "resourceclaims" or
  /// "deviceclasses". Fills uid, resourceVersion, timestamps.
  Result<boost::json::object> create(std::string_view plural, boost::json::object obj);
  /// Replaces an existing object's content (uid kept), as a PUT would.
  Result<boost::json::object> update(std::string_view plural, boost::json::object obj);
  /// RFC 7386 merge patch.
  Result<boost::json::object> patch(std::string_view plural, std::string_view ns,
                                    std::string_view name, const boost::json::object& patch);
  Status remove(std::string_view plural, std::string_view ns, std::string_view name);
  std::optional<boost::json::object> get(std::string_view plural, std::string_view ns,
                                         std::string_view name) const;
  std::vector<boost::json::object> list(std::string_view plural) const;
  /// The cluster-wide counter: the version of the latest write.
  std::uint64_t resourceVersion() const;
  /// Loads every *.yaml, *.yml and *.json file in `dir` (objects, multi-document YAML, or
  /// v1 List kinds). Errors name the file.
  Status loadFixtures(const std::string& dir);
  Status loadFixtureText(const std::string& text, const std::string& sourceName);

  /// The DRAConsumableCapacity feature gate (on by default, as from 1.36): off, every write
  /// of a ResourceSlice loses allowMultipleAllocations and capacity request policies, as a
  /// 1.34/1.35 apiserver without the gate stores it.
  void setDraConsumableCapacity(bool on);
  /// The DRADeviceTaints feature gate (on by default, as from 1.36): off, a ResourceSlice
  /// written loses its devices' taints unless the stored one already has taints, as a
  /// 1.34/1.35 apiserver without the gate does. Taints get timeAdded when they have none;
  /// those kept are validated (key a label name, value a label value, effect NoSchedule,
  /// NoExecute or None, at most 16 per device) as 1.37 does.
  void setDraDeviceTaints(bool on);

  // ---- Failure switches ----
  void addFault(Fault fault);
  void clearFaults();
  /// Cuts every open watch stream mid-flight (no final chunk).
  void breakWatches();
  /// Forgets the event history: watches from older versions and old continue tokens get 410.
  void compactHistory();
  void setToken(std::string token);
  void releaseHangs();
  /// Drops every connection, stops listening and listens again on the same port, keeping
  /// the objects; `keepHistory` false also compacts (as a fresh watch cache would). After
  /// stop() it listens again: an outage that ends.
  Status restart(bool keepHistory = true);
  /// The objects and the counter now, for restoreBackup().
  StoreBackup backup() const;
  /// An apiserver restarted on an etcd restored from `backup`: drops every connection,
  /// puts the objects and the counter back (versions go backwards: later writes reuse
  /// numbers clients have already seen), forgets the history and listens again.
  Status restoreBackup(const StoreBackup& backup);
  /// Stops serving; safe to call twice.
  void stop();

  // ---- Observation ----
  std::uint64_t connectionsAccepted() const;
  std::uint64_t requestCount() const;
  std::vector<RequestRecord> requests() const;  ///< the last 10,000
  std::size_t openWatches() const;

 private:
  struct Impl;
  explicit FakeApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::fakes
