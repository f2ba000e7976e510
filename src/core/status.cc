#include "core/status.h"

#include <cstring>

namespace revive {

Status Status::FromErrno(const std::string& context, int err) {
  std::string m = context + ": " + std::strerror(err);
  return err == ENOENT ? NotFound(std::move(m)) : IOError(std::move(m));
}

std::string Status::ToString() const {
  switch (code_) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "not found: " + msg_;
    case Code::kCorruption: return "corruption: " + msg_;
    case Code::kInvalidArgument: return "invalid argument: " + msg_;
    case Code::kIOError: return "I/O error: " + msg_;
    case Code::kAlreadyExists: return "already exists: " + msg_;
  }
  return msg_;
}

}  // namespace revive
