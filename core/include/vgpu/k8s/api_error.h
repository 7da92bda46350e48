#pragma once
// Errors from the Kubernetes API as values that keep what a caller needs to decide what to
// do next (the HTTP status and the apiserver's reason) and what a person needs to act on
// (the verb, the path and the apiserver's message).

#include <cassert>
#include <string>
#include <utility>
#include <variant>

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

  bool isNotFound() const { return httpStatus == 404; }
  /// 409: a stale resourceVersion precondition, an existing object, an already bound pod.
  bool isConflict() const { return httpStatus == 409; }
  /// 410: the resourceVersion or continue token is too old; relist.
  bool isGone() const { return httpStatus == 410; }
  bool isUnauthorized() const { return httpStatus == 401; }
  bool isTransport() const { return httpStatus == 0; }

  /// "PATCH /api/v1/nodes/n1: HTTP 409 (Conflict): the object has been modified ..."
  std::string describe() const;
  /// The same text as a core Error, for callers that only report.
  Error toError() const { return Error{describe()}; }
};

/// A value or an ApiError. Accessing the wrong alternative is a broken invariant.
template <class T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}    // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const ApiError& error() const& { assert(!ok()); return std::get<1>(v_); }
  ApiError&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, ApiError> v_;
};

/// Success or an ApiError, for calls whose response body callers do not need.
class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(ApiError error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const ApiError& error() const { assert(failed_); return error_; }

 private:
  ApiError error_;
  bool failed_ = false;
};

}  // namespace vgpu::k8s
