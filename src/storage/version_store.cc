#include "storage/version_store.h"

#include <algorithm>

namespace revive::storage {
namespace {
bool ParseVersionDir(const std::string& n, uint64_t* v) {
  if (n.size() < 3 || n.size() > 22 || n.compare(0, 2, "v-") != 0) return false;
  if (n.find_first_not_of("0123456789", 2) != std::string::npos || n[2] == '0') return false;
  *v = std::stoull(n.substr(2));
  return true;
}
}  // namespace

Status VersionStore::Init() { return CreateDirs(env_, dir_); }

std::string VersionStore::VersionDir(uint64_t v) const { return dir_ + "/v-" + std::to_string(v); }

std::string VersionStore::DataPath(uint64_t v, const std::string& key, int rank, int nranks) const {
  std::string p = VersionDir(v) + "/" + key;
  if (nranks > 1) p += "." + std::to_string(rank);
  return p;
}

Status VersionStore::ListVersionDirs(std::vector<uint64_t>* out) const {
  out->clear();
  std::vector<std::string> names;
  Status s = env_->GetChildren(dir_, &names);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return s;
  for (const auto& n : names) {
    uint64_t v;
    if (ParseVersionDir(n, &v)) out->push_back(v);
  }
  std::sort(out->begin(), out->end());
  return Status::OK();
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
