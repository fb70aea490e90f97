// Status and Result<T>: the one error system of Tessera.
//
// Every fallible function returns a [[nodiscard]] Status (cheap when OK: a null pointer) or a
// Result<T> (a value or a Status). No exception crosses the public API. Messages name what is at
// fault: the node, op, attribute, field or file offset, so a user can act on them.
//
//   Status load(...) {
//     RETURN_IF_ERROR(check_header(bytes));
//     ASSIGN_OR_RETURN(auto graph, parse(bytes));
//     ...
//   }
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed (bad shape, bad attribute, bad file)
  kNotFound,           // a named thing (file, device, tensor, op) does not exist
  kUnimplemented,      // valid input that this build or device does not support
  kOutOfRange,         // sizes, indices or dimensions beyond limits
  kResourceExhausted,  // allocation failed, memory cap exceeded
  kFailedPrecondition,  // an object used in the wrong state
  kInternal,            // a bug in Tessera or a backend library
  kIoError,             // reading or writing a file failed
  kCancelled,           // the caller (or a shutdown) cancelled the work
  kDeadlineExceeded,    // the work did not finish before its deadline
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status ok_status() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: message" or "OK".
  std::string to_string() const;

  // Returns a copy with "context: " prepended to the message (for call-site breadcrumbs).
  Status with_context(const std::string& context) const;

  // Explicitly drop a Status whose failure is acceptable at this call site.
  void ignore() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status invalid_argument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status not_found(std::string msg) {
  return Status(StatusCode::kNotFound, std::move(msg));
}
inline Status unimplemented(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}
inline Status out_of_range(std::string msg) {
  return Status(StatusCode::kOutOfRange, std::move(msg));
}
inline Status resource_exhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status failed_precondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status internal_error(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}
inline Status io_error(std::string msg) {
  return Status(StatusCode::kIoError, std::move(msg));
}
inline Status cancelled(std::string msg) {
  return Status(StatusCode::kCancelled, std::move(msg));
}
inline Status deadline_exceeded(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}

// For the API boundaries only (the CLI's main, the C API), inside a `catch (...)`: the exception
// being handled as a Status whose message starts with "`where`: " (nothing when it is empty).
// std::bad_alloc becomes
// ResourceExhausted ("out of memory"), anything else Internal with its what(). Tessera code
// returns Status and does not throw; this catches what the standard library or a dependency
// might (allocation failure, length_error, ...) so that it ends in an error, not terminate.
Status status_from_current_exception(const char* where);

// A name that came from a file (a node, tensor, key or device name), quoted for a message:
// 'conv1'. Control bytes, DEL, the quote and the backslash are escaped (\n, \t, \xNN, \', \\),
// so a hostile name cannot rewrite a terminal or forge lines in a log; a name over 256 bytes is
// cut there and ends in "...". Every message quoting such a name goes through this.
std::string quote_name(std::string_view name);
// A message from outside Tessera's code (a driver's error text, which may echo names from a
// model) made safe to print the same way: control bytes, DEL and the backslash escaped, cut at
// `max_bytes` and ending in "..." when longer. Quotes are kept (the text quotes its own names).
std::string untrusted_text(std::string_view text, size_t max_bytes = 1024);

// A value of type T, or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK Status");
  }

  bool ok() const { return v_.index() == 0; }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tessera

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::tessera::Status tessera_status_ = (expr);        \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on error returns its Status, else moves the value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL(TESSERA_CONCAT(tessera_result_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
