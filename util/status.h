// Status and StatusOr<T>: expected failures as values.
//
// The few codes are chosen so that their meaning drives the saga (compare
// absl::StatusCode):
//   kUnavailable        transient: retry the same operation later, same key.
//   kAborted            a compare-and-swap lost to a concurrent writer: the
//                       record changed since it was read; reload and decide
//                       again (absl's meaning).
//   kMovedOn            the decision no longer applies: the step or saga
//                       moved on since it was planned (another thread, an
//                       operator or a timer acted first); plan again, there
//                       is nothing to report.
//   kInvalidArgument    the caller's input is wrong; stop, no retry.
//   kFailedPrecondition the system is not in a state where this is allowed
//                       (an operator action refused, a transition outside a
//                       state machine's table, a newer schema); stop and
//                       report the message.
//   kNotFound / kAlreadyExists  lookups and creations.
//   kLeaseLost          this process does not own the instance (any more):
//                       another holds its lease, so a commit was fenced, a
//                       send withheld or a lease not granted; drop the
//                       instance, never retry here.
//   kPermissionDenied   the caller may not do this (a missing or unknown
//                       token, or a role too low); sagad::Client's answer to
//                       a 401 or 403.
//   kResourceExhausted  a limit the caller is held to is reached (a guard of
//                       a toolbox): not now, perhaps later; HTTP 429.
//   kInternal           a broken invariant or an I/O error of our own.
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace sagad {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kAborted,
  kUnavailable,
  kInternal,
  kLeaseLost,
  kMovedOn,
  kPermissionDenied,
  kResourceExhausted,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status AlreadyExists(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
inline Status FailedPrecondition(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status Aborted(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status LeaseLost(std::string m) { return Status(StatusCode::kLeaseLost, std::move(m)); }
inline Status MovedOn(std::string m) { return Status(StatusCode::kMovedOn, std::move(m)); }
inline Status PermissionDenied(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status ResourceExhausted(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : status_(std::move(s)) {}  // NOLINT: implicit by design
  StatusOr(T v) : value_(std::move(v)) {}        // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace sagad

#define SAGAD_RETURN_IF_ERROR(expr) \
  do {                              \
    ::sagad::Status _st = (expr);   \
    if (!_st.ok()) return _st;      \
  } while (0)
