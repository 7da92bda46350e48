#pragma once
// Errors as values: what the outside world can cause is returned, never thrown across
// a module boundary.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace vgpu {

/// A failure a person can act on: `message` says what went wrong, where, and what to check.
struct Error {
  std::string message;

  /// Prepends context ("loading backend nvidia: ") so the message reads outermost first.
  Error& prefix(const std::string& context) {
    message.insert(0, context + ": ");
    return *this;
  }
};

/// Either a value or an error (an Error unless a module needs more, e.g. k8s::ApiError).
/// Accessing the wrong alternative is a broken invariant.
template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const E& error() const& { assert(!ok()); return std::get<1>(v_); }
  E&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, E> v_;
};

/// Success or an error, for operations that produce no value.
template <class E = Error>
class [[nodiscard]] BasicStatus {
 public:
  BasicStatus() = default;
  BasicStatus(E error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design
  static BasicStatus success() { return {}; }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const E& error() const { assert(failed_); return error_; }

 private:
  E error_;
  bool failed_ = false;
};

using Status = BasicStatus<Error>;

/// Shorthand for building an Error from a message.
inline Error makeError(std::string message) { return Error{std::move(message)}; }

}  // namespace vgpu
