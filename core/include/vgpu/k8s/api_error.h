#pragma once
// Errors from the Kubernetes API as values that keep what a caller needs to decide what to
// do next (the HTTP status and the apiserver's reason) and what a person needs to act on
// (the verb, the path and the apiserver's message).

#include <algorithm>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::k8s {

/// One failed API call. `httpStatus` is 0 when no response came back (connection refused,
/// TLS failure, timeout, a stream cut short).
struct ApiError {
  std::string verb;     ///< GET, LIST, WATCH, PATCH, POST, DELETE
  std::string path;     ///< request path with its query, e.g. /api/v1/pods?fieldSelector=...
  int httpStatus = 0;   ///< 0 = no HTTP response
  std::string reason;   ///< Status.reason from the apiserver (Conflict, NotFound, Expired...)
  std::string message;  ///< Status.message, or the transport's description
  std::vector<std::string> causes;  ///< Status.details.causes[].reason

  bool isNotFound() const { return httpStatus == 404; }
  /// 409: a stale resourceVersion precondition, an existing object, an already bound pod.
  bool isConflict() const { return httpStatus == 409; }
  /// 410: the resourceVersion or continue token is too old; relist.
  bool isGone() const { return httpStatus == 410; }
  /// 504 Timeout "Too large resource version": the apiserver has no such version yet and
  /// may never have (its etcd was restored from a backup); relist from the most recent.
  /// Servers before 1.18.6 gave no cause, only the message.
  bool isResourceVersionTooLarge() const {
    return httpStatus == 504 &&
           (std::find(causes.begin(), causes.end(), "ResourceVersionTooLarge") != causes.end() ||
            message.find("Too large resource version") != std::string::npos);
  }
  /// 422 Invalid naming sendInitialEvents: the apiserver's WatchList feature gate is off
  /// ("sendInitialEvents is forbidden for watch unless the WatchList feature gate is
  /// enabled"); list instead.
  bool isWatchListRefused() const {
    return httpStatus == 422 && message.find("sendInitialEvents") != std::string::npos;
  }
  bool isUnauthorized() const { return httpStatus == 401; }
  bool isTransport() const { return httpStatus == 0; }

  /// "PATCH /api/v1/nodes/n1: HTTP 409 (Conflict): the object has been modified ..."
  std::string describe() const;
  /// The same text as a core Error, for callers that only report.
  Error toError() const { return Error{describe()}; }
};

/// A value or an ApiError.
template <class T>
using ApiResult = Result<T, ApiError>;

/// Success or an ApiError, for calls whose response body callers do not need.
using ApiStatus = BasicStatus<ApiError>;

}  // namespace vgpu::k8s
