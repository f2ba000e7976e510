// Status: the result of every operation that can fail below the public API (LevelDB's idea).
// A failed Status carries a message that names the file/key and the reason; callers add context.
#ifndef REVIVE_CORE_STATUS_H_
#define REVIVE_CORE_STATUS_H_

#include <string>

namespace revive {

class Status {
 public:
  enum class Code { kOk, kNotFound, kCorruption, kInvalidArgument, kIOError, kAlreadyExists };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  // Something that must be ours is someone else's (e.g. a pid to recreate is taken).
  static Status AlreadyExists(std::string msg) { return Status(Code::kAlreadyExists, std::move(msg)); }
  // "<context>: <strerror(err)>"
  static Status FromErrno(const std::string& context, int err);

  bool ok() const { return code_ == Code::kOk; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsIOError() const { return code_ == Code::kIOError; }
  bool IsAlreadyExists() const { return code_ == Code::kAlreadyExists; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  // "OK" or "<kind>: <message>"
  std::string ToString() const;

 private:
  Status(Code c, std::string m) : code_(c), msg_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string msg_;
};

}  // namespace revive

#endif  // REVIVE_CORE_STATUS_H_
