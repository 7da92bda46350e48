#pragma once
// What a watch stream delivers, and how another thread ends a running watch.

#include <atomic>
#include <functional>
#include <mutex>
#include <string_view>

#include <boost/json/object.hpp>

namespace vgpu::k8s {

/// The annotation, "true" on the BOOKMARK that ends a streaming list's initial events
/// (WatchOptions::sendInitialEvents); its resourceVersion is the list's.
inline constexpr std::string_view kInitialEventsEnd = "k8s.io/initial-events-end";

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };

/// One event of a watch stream. ERROR events never reach the handler: the watch call
/// returns them as an ApiError (410 Expired → relist).
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  boost::json::object object;  ///< the object (for DELETED: its last state; BOOKMARK: only metadata.resourceVersion)
};

/// Called on the watching thread for each event; return false to end the watch.
using WatchHandler = std::function<bool(WatchEvent&&)>;

/// Ends a blocking watch from another thread. Thread-safe; cancel() is sticky.
class CancelToken {
 public:
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  /// The transport registers how to interrupt its blocking read; cleared with nullptr.
  /// Runs `fn` at once if already cancelled.
  void setCanceller(std::function<void()> fn);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::function<void()> canceller_;
};

}  // namespace vgpu::k8s
