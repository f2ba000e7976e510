#include "storage/version_store.h"

#include <algorithm>

#include "storage/text_fields.h"

namespace revive::storage {

Status VersionStore::Init() { return CreateDirs(env_, dir_); }

std::string VersionStore::VersionDir(uint64_t v) const { return dir_ + "/v-" + std::to_string(v); }

std::string VersionStore::DataPath(uint64_t v, const std::string& key, int rank, int nranks) const {
  std::string p = VersionDir(v) + "/" + key;
  if (nranks > 1) p += "." + std::to_string(rank);
  return p;
}

Status VersionStore::ListVersionDirs(std::vector<uint64_t>* out) const {
  return ListVersionNumbers(env_, dir_, out);
}

Status VersionStore::ListComplete(std::vector<uint64_t>* out) const {
  std::vector<uint64_t> all;
  Status s = ListVersionDirs(&all);
  out->clear();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (env_->FileExists(VersionDir(*it) + "/" + kManifestName)) out->push_back(*it);
  return s;
}

Status VersionStore::ReadManifest(uint64_t v, Manifest* m) const {
  std::string path = VersionDir(v) + "/" + kManifestName, text;
  Status s = ReadFileToString(env_, path, &text);
  if (!s.ok()) return s;
  s = DecodeManifest(path, text, m);
  if (s.ok() && m->version != v)
    return Status::Corruption(path + ": manifest says version " + std::to_string(m->version));
  return s;
}

Status VersionStore::BeginVersion(uint64_t v) {
  std::string d = VersionDir(v);
  if (env_->FileExists(d)) {
    Status s = DeleteDirTree(env_, d);
    if (!s.ok()) return s;
  }
  return env_->CreateDir(d);
}

Status VersionStore::Publish(const Manifest& m) {
  std::string d = VersionDir(m.version);
  Status s = env_->SyncDir(d);  // the data files' directory entries
  if (s.ok()) s = WriteFileAtomic(env_, d + "/" + kManifestName, EncodeManifest(m));
  if (s.ok()) s = env_->SyncDir(dir_);  // the v-<N> entry itself
  return s;
}

Status VersionStore::RemoveVersion(uint64_t v) {
  std::string d = VersionDir(v), man = d + "/" + kManifestName;
  if (env_->FileExists(man)) {
    Status s = env_->DeleteFile(man);
    if (s.ok()) s = env_->SyncDir(d);
    if (!s.ok()) return s;
  }
  return DeleteDirTree(env_, d);
}

Status VersionStore::Prune(int keep, uint64_t except) {
  std::vector<uint64_t> all, complete;
  Status s = ListVersionDirs(&all);
  if (s.ok()) s = ListComplete(&complete);
  if (!s.ok()) return s;
  if (complete.size() > static_cast<size_t>(keep)) complete.resize(keep);
  for (uint64_t v : all) {
    if (v == except || std::find(complete.begin(), complete.end(), v) != complete.end()) continue;
    // Never delete a newer incomplete directory: it may be a version another process is writing now.
    if (!complete.empty() && v > complete.front()) continue;
    s = RemoveVersion(v);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace revive::storage
