// File: msched/status.h
// Status and Result<T>: how msched code reports errors. No msched interface
// throws; functions that can fail return one of these, and callers must look.
// Value types, thread-compatible. Included by every layer. Header-only, so
// that the simulator's msim-run, which links nothing of msched, can use it.
//
// Example:
//   Result<uint64_t> bytes = ParseBytes("8GiB");
//   if (!bytes.ok()) return bytes.status();
//   Use(*bytes);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace msched {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed
  kNotFound,           // a lookup found nothing
  kOutOfRange,         // a value is outside what the operation accepts
  kCorruption,         // stored or received data is inconsistent
  kUnavailable,        // a peer (driver, coordinator) cannot be reached
  kPermissionDenied,   // the caller may not do this
  kResourceExhausted,  // memory, slots or budget ran out
  kInternal,           // a bug or an impossible state
  kIoError,            // a file or socket operation failed
};

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kIoError: return "IoError";
  }
  return "Unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status OutOfRange(std::string msg) { return Status(StatusCode::kOutOfRange, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(StatusCode::kCorruption, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(StatusCode::kUnavailable, std::move(msg)); }
  static Status PermissionDenied(std::string msg) { return Status(StatusCode::kPermissionDenied, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) { return Status(StatusCode::kResourceExhausted, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: MSCHED_MODE: ..." ; "OK" when ok().
  std::string ToString() const {
    if (ok()) return "OK";
    return std::string(StatusCodeName(code_)) + ": " + message_;
  }

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T> holds either a T or a non-OK Status.
// REQUIRES: a Result is never built from an OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// Moves the value of `r` into *out; the Status of `r` (*out is untouched
// when it is not OK). With MSCHED_RETURN_IF_ERROR, one field per line:
//   MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "name", ""), &spec.name));
template <typename T>
Status Assign(Result<T> r, T* out) {
  if (!r.ok()) return r.status();
  *out = std::move(*r);
  return Status::Ok();
}

}  // namespace msched

// Returns from the calling function when `expr` (a Status) is not OK.
#define MSCHED_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::msched::Status msched_status_ = (expr);        \
    if (!msched_status_.ok()) return msched_status_; \
  } while (0)
