// The versions of one checkpoint: <dir>/v-<N>/<key>[.<rank>] + <dir>/v-<N>/MANIFEST.
// A version is complete iff its MANIFEST exists (it is renamed into place last, after every data file and
// the directory are fsynced), so a crash at any instant leaves the previous versions intact.
#ifndef REVIVE_STORAGE_VERSION_STORE_H_
#define REVIVE_STORAGE_VERSION_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "storage/manifest.h"

namespace revive::storage {

inline constexpr char kManifestName[] = "MANIFEST";

class VersionStore {
 public:
  VersionStore(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}
  Env* env() const { return env_; }
  const std::string& dir() const { return dir_; }

  // Creates the checkpoint directory (and its parents).
  Status Init();
  std::string VersionDir(uint64_t v) const;
  // <key> for a single rank, <key>.<rank> otherwise.
  std::string DataPath(uint64_t v, const std::string& key, int rank, int nranks) const;

  // Numbers of every v-<N> directory, complete or not, ascending.
  Status ListVersionDirs(std::vector<uint64_t>* out) const;
  // Numbers of versions that have a MANIFEST, newest first.
  Status ListComplete(std::vector<uint64_t>* out) const;
  Status ReadManifest(uint64_t v, Manifest* m) const;

  // Makes v-<N> exist (empty of stale files from an earlier failed attempt).
  Status BeginVersion(uint64_t v);
  // Makes m.version visible: fsync its directory, write MANIFEST atomically, fsync the checkpoint dir.
  Status Publish(const Manifest& m);
  // Deletes every version directory except the newest `keep` complete ones (and except `except`,
  // a version being written). Deletion removes the MANIFEST first, so a crash halfway leaves at worst an
  // incomplete directory, which readers ignore.
  Status Prune(int keep, uint64_t except = 0);
  Status RemoveVersion(uint64_t v);

 private:
  Env* env_;
  std::string dir_;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_VERSION_STORE_H_
