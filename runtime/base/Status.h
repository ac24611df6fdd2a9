// Status and StatusOr: how runtime (and shared parsing) code reports errors.
// Library code never exits or aborts; every failure carries one line that
// names the file, field or value at fault.
#ifndef WEFT_RUNTIME_BASE_STATUS_H_
#define WEFT_RUNTIME_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace weft {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // malformed input (file contents, flags, requests)
  kNotFound,           // a file, tensor or field is missing
  kOutOfRange,         // offsets or sizes outside what the input holds
  kUnimplemented,      // well-formed but unsupported (architecture, dtype)
  kFailedPrecondition, // input is valid but does not match what it must
  kResourceExhausted,  // memory or capacity limits
  kInternal,           // a bug or a failure of a lower layer (CUDA, OS)
};

const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status notFound(std::string msg) {
  return Status(StatusCode::kNotFound, std::move(msg));
}
inline Status outOfRange(std::string msg) {
  return Status(StatusCode::kOutOfRange, std::move(msg));
}
inline Status unimplemented(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}
inline Status failedPrecondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status internalError(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}

// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.isOk() && "StatusOr built from an OK status");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace weft

#define WEFT_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::weft::Status _weft_status = (expr);                                      \
    if (!_weft_status.isOk())                                                  \
      return _weft_status;                                                     \
  } while (0)

#endif // WEFT_RUNTIME_BASE_STATUS_H_
