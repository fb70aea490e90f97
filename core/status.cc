#include "core/status.h"

#include <exception>
#include <new>

namespace tessera {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_shared<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code())) + ": " + message();
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code(), context + ": " + message());
}

Status status_from_current_exception(const char* where) {
  const std::string prefix = where != nullptr && *where != '\0' ? std::string(where) + ": " : "";
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    return resource_exhausted(prefix + "out of memory (" + e.what() + ")");
  } catch (const std::exception& e) {
    return internal_error(prefix + "unexpected exception: " + e.what());
  } catch (...) {
    return internal_error(prefix + "unexpected exception of unknown type");
  }
}

namespace {

// `text` with control bytes, DEL, the backslash and (when `quote`) the single quote escaped
// (\n, \r, \t, \xNN, \\, \'), cut at `max_bytes` with "..." after it.
std::string escape_text(std::string_view text, size_t max_bytes, bool quote) {
  std::string out;
  const size_t shown = text.size() > max_bytes ? max_bytes : text.size();
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c == '\'' && quote) {
          out += "\\'";
        } else if (c < 0x20 || c == 0x7f) {
          const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (shown < text.size()) out += "...";
  return out;
}

}  // namespace

std::string quote_name(std::string_view name) {
  return "'" + escape_text(name, 256, true) + "'";
}

std::string untrusted_text(std::string_view text, size_t max_bytes) {
  return escape_text(text, max_bytes, false);
}

}  // namespace tessera
