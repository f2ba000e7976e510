// Helpers composed from Env primitives.
#include "core/env.h"

namespace revive {
namespace {
std::string Parent(const std::string& p) {
  size_t s = p.find_last_of('/');
  if (s == std::string::npos) return ".";
  if (s == 0) return "/";
  return p.substr(0, s);
}
}  // namespace

Status CreateDirs(Env* env, const std::string& path) {
  if (path.empty() || path == "/" || path == "." || env->FileExists(path)) return env->CreateDir(path);
  std::string parent = Parent(path);
  Status s = CreateDirs(env, parent);
  if (s.ok()) s = env->CreateDir(path);
  if (s.ok()) s = env->SyncDir(parent);
  return s;
}

Status DeleteDirTree(Env* env, const std::string& dir) {
  std::vector<std::string> names;
  Status s = env->GetChildren(dir, &names);
  if (!s.ok()) return s;
  for (const auto& n : names) {
    s = env->DeleteFile(dir + "/" + n);
    if (!s.ok()) return s;
  }
  return env->DeleteDir(dir);
}

Status ReadFileToString(Env* env, const std::string& path, std::string* out) {
  out->clear();
  std::unique_ptr<SequentialFile> f;
  Status s = env->NewSequentialFile(path, &f);
  if (!s.ok()) return s;
  char buf[8192];
  for (;;) {
    size_t got = 0;
    s = f->Read(buf, sizeof buf, &got);
    if (!s.ok()) return s;
    if (got == 0) return Status::OK();
    out->append(buf, got);
  }
}

Status WriteFileAtomic(Env* env, const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  std::unique_ptr<WritableFile> f;
  Status s = env->NewWritableFile(tmp, &f);
  if (s.ok()) s = f->Append(data.data(), data.size());
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = f->Close();
  if (s.ok()) s = env->RenameFile(tmp, path);
  if (s.ok()) s = env->SyncDir(Parent(path));
  if (!s.ok()) env->DeleteFile(tmp);  // best effort; a leftover .tmp is never read
  return s;
}

}  // namespace revive
