// FaultEnv: an Env that forwards to another one but fails chosen operations, for tests of every error
// path of the storage (the previous version must stay intact and usable whatever fails).
#ifndef REVIVE_CORE_FAULT_ENV_H_
#define REVIVE_CORE_FAULT_ENV_H_

#include <atomic>
#include <cstdint>

#include "core/env.h"

namespace revive {

class FaultEnv : public Env {
 public:
  enum class Op { kOpen, kWrite, kSync, kRename, kMkdir, kUnlink };

  explicit FaultEnv(Env* base) : base_(base) {}

  // Fails the nth (1-based) future operation of kind op with EIO. 0 disables.
  void FailNth(Op op, uint64_t n);
  // The nth Append writes only half its bytes, then fails with ENOSPC (a full disk).
  void ShortWriteNth(uint64_t n);
  // Every mutating operation from the nth on fails (the process "died" at that instant): models a crash
  // between any two steps of writing a version.
  void FailFrom(uint64_t n);
  void Reset();
  // Mutating operations performed so far (open, write, sync, rename, mkdir, unlink).
  uint64_t ops() const { return ops_; }
  // Bytes returned by reads of files opened through this Env.
  uint64_t bytes_read() const { return bytes_read_; }
  void CountRead(size_t n) { bytes_read_ += n; }

  Status NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) override;
  // Reads are never failed, only counted (tests of how often restart reads each byte).
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) override;
  Status GetFileSize(const std::string& path, uint64_t* size) override { return base_->GetFileSize(path, size); }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status DeleteFile(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  Status DeleteDir(const std::string& path) override;
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    return base_->GetChildren(dir, names);
  }
  Status SyncDir(const std::string& dir) override;

  // Used by the wrapped file: returns a failure if this operation is to fail.
  Status Check(Op op, const std::string& what);
  bool TakeShortWrite();

 private:
  Env* base_;
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> count_[6] = {};
  std::atomic<uint64_t> fail_nth_[6] = {};
  std::atomic<uint64_t> short_nth_{0};
  std::atomic<uint64_t> fail_from_{0};
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace revive

#endif  // REVIVE_CORE_FAULT_ENV_H_
