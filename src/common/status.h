#pragma once
// Status / StatusOr: how every module reports failure across its boundary.
// Nothing in overlapprof throws across a module boundary; functions that can fail
// return Status or StatusOr<T>, and callers propagate with OVERLAPPROF_RETURN_IF_ERROR
// and OVERLAPPROF_ASSIGN_OR_RETURN (after Perfetto's base::Status).
#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace overlapprof {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad flag or argument (CLI usage error)
  kNotFound,            // missing file
  kInvalidInput,        // input exists but is not a valid trace (parse error, wrong schema)
  kUnsupportedVersion,  // a trace written by a newer overlapprof
  kCorrupt,             // a damaged file (SQLite corruption, truncated gzip)
  kIo,                  // read/write failure
  kInternal,            // a bug in overlapprof
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy with `prefix: ` in front of the message (e.g. the file name).
  Status WithPrefix(std::string_view prefix) const {
    if (ok()) return *this;
    return Status(code_, fmt::format("{}: {}", prefix, message_));
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

template <typename... Args>
Status MakeError(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? OkStatus() : std::get<Status>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace overlapprof

#define OVERLAPPROF_CONCAT_INNER(a, b) a##b
#define OVERLAPPROF_CONCAT(a, b) OVERLAPPROF_CONCAT_INNER(a, b)

#define OVERLAPPROF_RETURN_IF_ERROR(expr)              \
  do {                                                 \
    ::overlapprof::Status _overlapprof_st = (expr);    \
    if (!_overlapprof_st.ok()) return _overlapprof_st; \
  } while (0)

#define OVERLAPPROF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) return tmp.status();                     \
  lhs = std::move(tmp).value()

#define OVERLAPPROF_ASSIGN_OR_RETURN(lhs, expr) \
  OVERLAPPROF_ASSIGN_OR_RETURN_IMPL(OVERLAPPROF_CONCAT(_overlapprof_so_, __LINE__), lhs, expr)
