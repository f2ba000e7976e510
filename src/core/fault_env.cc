#include "core/fault_env.h"

#include <cerrno>

namespace revive {
namespace {

const char* OpName(FaultEnv::Op op) {
  switch (op) {
    case FaultEnv::Op::kOpen: return "open";
    case FaultEnv::Op::kWrite: return "write";
    case FaultEnv::Op::kSync: return "fsync";
    case FaultEnv::Op::kRename: return "rename";
    case FaultEnv::Op::kMkdir: return "mkdir";
    case FaultEnv::Op::kUnlink: return "unlink";
  }
  return "?";
}

class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  Status Append(const void* data, size_t n) override {
    Status s = env_->Check(FaultEnv::Op::kWrite, path_);
    if (!s.ok()) return s;
    if (env_->TakeShortWrite()) {
      base_->Append(data, n / 2);
      return Status::FromErrno("write " + path_ + " (injected short write)", ENOSPC);
    }
    return base_->Append(data, n);
  }
  Status Sync() override {
    Status s = env_->Check(FaultEnv::Op::kSync, path_);
    return s.ok() ? base_->Sync() : s;
  }
  Status Close() override { return base_->Close(); }

 private:
  FaultEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultEnv::FailNth(Op op, uint64_t n) {
  int i = static_cast<int>(op);
  count_[i] = 0;
  fail_nth_[i] = n;
}
void FaultEnv::ShortWriteNth(uint64_t n) {
  count_[static_cast<int>(Op::kWrite)] = 0;
  short_nth_ = n;
}
void FaultEnv::FailFrom(uint64_t n) {
  ops_ = 0;
  fail_from_ = n;
}
void FaultEnv::Reset() {
  for (int i = 0; i < 6; ++i) count_[i] = 0, fail_nth_[i] = 0;
  short_nth_ = 0;
  fail_from_ = 0;
  ops_ = 0;
}

Status FaultEnv::Check(Op op, const std::string& what) {
  uint64_t op_no = ++ops_;
  int i = static_cast<int>(op);
  uint64_t n = ++count_[i];
  bool fail = (fail_nth_[i] != 0 && n == fail_nth_[i]) || (fail_from_ != 0 && op_no >= fail_from_);
  if (!fail) return Status::OK();
  return Status::FromErrno(std::string(OpName(op)) + " " + what + " (injected)", EIO);
}

bool FaultEnv::TakeShortWrite() {
  return short_nth_ != 0 && count_[static_cast<int>(Op::kWrite)] == short_nth_;
}

namespace {
class CountingSequentialFile : public SequentialFile {
 public:
  CountingSequentialFile(FaultEnv* env, std::unique_ptr<SequentialFile> base) : env_(env), base_(std::move(base)) {}
  Status Read(void* buf, size_t n, size_t* got) override {
    Status s = base_->Read(buf, n, got);
    if (s.ok()) env_->CountRead(*got);
    return s;
  }

 private:
  FaultEnv* env_;
  std::unique_ptr<SequentialFile> base_;
};
}  // namespace

Status FaultEnv::NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* out) {
  std::unique_ptr<SequentialFile> base;
  Status s = base_->NewSequentialFile(path, &base);
  if (s.ok()) out->reset(new CountingSequentialFile(this, std::move(base)));
  return s;
}

Status FaultEnv::NewWritableFile(const std::string& path, std::unique_ptr<WritableFile>* out) {
  Status s = Check(Op::kOpen, path);
  std::unique_ptr<WritableFile> base;
  if (s.ok()) s = base_->NewWritableFile(path, &base);
  if (s.ok()) out->reset(new FaultWritableFile(this, path, std::move(base)));
  return s;
}
Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  Status s = Check(Op::kRename, from + " -> " + to);
  return s.ok() ? base_->RenameFile(from, to) : s;
}
Status FaultEnv::DeleteFile(const std::string& path) {
  Status s = Check(Op::kUnlink, path);
  return s.ok() ? base_->DeleteFile(path) : s;
}
Status FaultEnv::CreateDir(const std::string& path) {
  Status s = Check(Op::kMkdir, path);
  return s.ok() ? base_->CreateDir(path) : s;
}
Status FaultEnv::DeleteDir(const std::string& path) {
  Status s = Check(Op::kUnlink, path);
  return s.ok() ? base_->DeleteDir(path) : s;
}
Status FaultEnv::SyncDir(const std::string& dir) {
  Status s = Check(Op::kSync, dir);
  return s.ok() ? base_->SyncDir(dir) : s;
}

}  // namespace revive
