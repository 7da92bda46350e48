#pragma once
// The double's state: objects per kind, one resourceVersion counter, the event history
// that watches replay, list snapshots for paging. HTTP-free so it is quick to compile;
// every operation answers with the status and JSON body the apiserver would send.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace vgpu::fakes::detail {

using ObjectPtr = std::shared_ptr<const boost::json::object>;

struct Reply {
  int status = 200;
  std::string body;  ///< serialized JSON
  ObjectPtr object;  ///< the object written/read, when there is one
  int retryAfterSeconds = -1;  ///< >= 0: sent as Retry-After
};

/// A Status error body with the apiserver's shape.
Reply statusReply(int code, std::string_view reason, std::string_view message);
std::string_view reasonFor(int code);

/// RFC 7386.
void applyMergePatch(boost::json::value& target, const boost::json::value& patch);

/// Parsed label and field selectors; `error` is set when they do not parse.
struct Selectors {
  struct Requirement {
    enum class Op { kEq, kNe, kExists, kNotExists, kIn, kNotIn } op;
    std::string key;
    std::vector<std::string> values;
  };
  std::vector<Requirement> labels;
  std::vector<Requirement> fields;  ///< kEq / kNe only
  std::string error;

  static Selectors parse(std::string_view plural, std::string_view label, std::string_view field);
  bool matches(const boost::json::object& obj) const;
};

/// Which kinds the double serves.
struct KindInfo {
  std::string_view plural;
  std::string_view kind;
  std::string_view listKind;
  bool namespaced;
  std::string_view apiVersion = "v1";  ///< "v1" (core, under /api/v1) or "<group>/<version>" (under /apis/)
};
const KindInfo* kindByPlural(std::string_view plural);
const KindInfo* kindByKind(std::string_view kind);

struct StoreBackup {
  std::uint64_t rv = 0;
  std::map<std::string, std::map<std::string, ObjectPtr>, std::less<>> objects;
};

/// What a list reads, once the HTTP side has sorted out resourceVersion and its match.
struct ListRead {
  std::int64_t limit = 0;        ///< page size; 0 = everything
  std::string continueToken;     ///< from a previous page (or a 410's fresh token)
  /// Set: the state at exactly this version, rebuilt from the history (410 when the
  /// history no longer reaches back to it). Unset: the current state.
  std::optional<std::uint64_t> exact;
};

/// The resource.k8s.io feature gates the double models, on by default (as from 1.36).
struct DraGates {
  bool consumableCapacity = true;  ///< DRAConsumableCapacity
  bool deviceTaints = true;        ///< DRADeviceTaints (alpha, off in 1.34/1.35; beta on 1.36; GA 1.37)
};

class Store {
 public:
  Reply get(std::string_view plural, std::string_view ns, std::string_view name);
  Reply list(std::string_view plural, std::string_view ns, const Selectors& sel, const ListRead& read);
  /// Whether `token` is one list() could have handed out (400 "invalid continue token" if not).
  static bool validContinueToken(std::string_view token);
  /// Waits up to `wait` for the store to reach `rv`; the apiserver's 504 "Too large
  /// resource version" Status if it does not, nullopt when `rv` is served (or not a number).
  std::optional<Reply> waitForVersion(std::string_view rv, std::chrono::milliseconds wait);
  /// `ns` from the path ("" for cluster-scoped, or when the body names it).
  Reply create(std::string_view plural, std::string_view ns, boost::json::value body);
  Reply update(std::string_view plural, boost::json::object obj);
  Reply patch(std::string_view plural, std::string_view ns, std::string_view name,
              const boost::json::value& patch);
  Reply remove(std::string_view plural, std::string_view ns, std::string_view name);
  Reply bind(std::string_view ns, std::string_view name, const boost::json::value& body);
  /// POST pods/<name>/eviction: checks the body is a policy/v1 Eviction of that pod, deletes
  /// the pod (no PodDisruptionBudgets here) and answers 201 with a Success Status.
  Reply evict(std::string_view ns, std::string_view name, const boost::json::value& body);
  /// Whether the DRAConsumableCapacity gate is on (resource_api.cpp); off, ResourceSlices
  /// lose allowMultipleAllocations and request policies on every write, as the apiserver
  /// drops fields of disabled gates.
  void setDraConsumableCapacity(bool on);
  /// Whether the DRADeviceTaints gate is on; off, ResourceSlice devices lose their taints
  /// unless the stored slice already has some (the apiserver keeps a field in use).
  void setDraDeviceTaints(bool on);
  std::vector<ObjectPtr> all(std::string_view plural);
  std::uint64_t resourceVersion();
  StoreBackup backup();
  /// Puts the objects and counter back, forgets history and snapshots, breaks watches.
  void restore(const StoreBackup& backup);

  // ---- watches ----
  struct Watch {
    std::string plural;
    std::string ns;
    Selectors sel;
    bool bookmarks = false;
    std::uint64_t cursor = 0;  ///< last version examined
    std::uint64_t epoch = 0;   ///< breakWatches() epoch at the start
  };
  enum class WaitResult { kLines, kTimeout, kBroken, kGone };
  /// Positions a watch at `rv` ("" or "0": synthetic ADDED for what exists now, returned in
  /// `lines`). Returns kGone with an ERROR line when `rv` is older than the history.
  WaitResult beginWatch(Watch& w, std::string_view rv, std::vector<std::string>& lines);
  /// A streaming list (sendInitialEvents=true, the version already checked): synthetic
  /// ADDED for what exists now, then the BOOKMARK annotated k8s.io/initial-events-end at
  /// the store's version, from which the watch goes on.
  void beginWatchList(Watch& w, std::vector<std::string>& lines);
  /// Waits for events after the cursor until `deadline`; a bookmark line when idle at
  /// `bookmarkAt` (if asked for).
  WaitResult next(Watch& w, std::chrono::steady_clock::time_point deadline,
                  std::chrono::steady_clock::time_point bookmarkAt, std::vector<std::string>& lines);
  void breakWatches();
  void compactHistory();
  /// Wakes hung requests and ends every watch; `stopping` stays until reset.
  void setStopping(bool stopping);
  void releaseHangs();
  /// Blocks a hung request until releaseHangs()/stop.
  void hang();
  /// Sleeps `d`, or less if the server stops.
  void sleep(std::chrono::milliseconds d);
  std::size_t openWatches();
  void watchOpened(int delta);

 private:
  struct Event {
    std::uint64_t rv;
    std::string plural;
    std::string type;  // ADDED MODIFIED DELETED
    ObjectPtr before;
    ObjectPtr after;
  };
  struct Snapshot {
    std::uint64_t rv;
    std::uint64_t compaction;  ///< compactHistory() count when taken: any later one expires it
    std::vector<ObjectPtr> items;
  };
  /// The objects of `plural` as they were at version `at` (requires at >= compactedRv_).
  std::map<std::string, ObjectPtr> stateAt(std::string_view plural, std::uint64_t at);

  std::string nextRv();
  void record(std::string_view plural, std::string type, ObjectPtr before, ObjectPtr after);
  std::string errorLine(std::uint64_t requested);
  std::map<std::string, ObjectPtr>& objectsOf(std::string_view plural);

  std::mutex mu_;
  std::condition_variable changed_;
  std::uint64_t rv_ = 1000;
  std::map<std::string, std::map<std::string, ObjectPtr>, std::less<>> objects_;
  std::deque<Event> history_;
  std::uint64_t compactedRv_ = 0;
  std::uint64_t compactions_ = 0;  ///< versions <= this are no longer replayable
  std::map<std::uint64_t, Snapshot> snapshots_;
  std::uint64_t nextSnapshot_ = 1;
  std::uint64_t epoch_ = 0;
  std::uint64_t hangEpoch_ = 0;
  bool stopping_ = false;
  std::size_t openWatches_ = 0;
  std::uint64_t uidCounter_ = 0;
  DraGates draGates_;
};

/// What the apiserver's defaulting, validation and field-gating of resource.k8s.io/v1 do to
/// an object about to be stored (resource_api.cpp), `old` being the stored one on an update
/// (null on create): a 422 Reply when it is invalid; otherwise the fields of disabled gates
/// are dropped from `obj`. Other kinds pass untouched.
std::optional<Reply> admitResource(std::string_view plural, boost::json::object& obj, const DraGates& gates,
                                   const boost::json::object* old);

/// Now as the API writes a time: "2026-12-03T13:23:31Z".
std::string nowRfc3339();

}  // namespace vgpu::fakes::detail
