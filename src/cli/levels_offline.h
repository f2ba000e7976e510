// Offline view of a multi-level checkpoint (docs/storage-levels.md), shared by `revive ls`, `verify`,
// `rebuild` and `flush`. Unlike the MPI restart (src/applevel/multilevel.cc), which sees each node's
// directory from a rank on that node, the tools see every host's directory at once: <root>/<host>/<id> for
// every <host> under the local root (a shared file system, or simulated hosts in tests). They fill one
// storage::Catalog from all of them and read pieces directly.
//
// Host index = position of the host directory in sorted order among the hosts that hold a directory of this
// checkpoint. A rank's home host is the host named in its pieces' metas (meta.host), whether or not that
// host's directory still exists.
#ifndef REVIVE_CLI_LEVELS_OFFLINE_H_
#define REVIVE_CLI_LEVELS_OFFLINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/env.h"
#include "storage/catalog.h"
#include "storage/local_store.h"
#include "storage/version_store.h"

namespace revive::cli {

// REVIVE_LOCAL_PATH, else /dev/shm/revive-<uid> (the library's default).
std::string DefaultLocalRoot();
// Absolute, lexically normal, no trailing '/': the form the library hashes into the local <id>.
std::string NormalizeDir(const std::string& dir);

struct Offline {
  Env* env = nullptr;
  std::string global_dir;  // <base>/<name>, normalized
  std::string name, id, root;
  std::vector<std::string> hosts;                          // sorted; index = host index
  std::vector<std::unique_ptr<storage::LocalStore>> stores;  // per host index
  storage::Catalog catalog;
  std::vector<std::string> problems;  // metas that do not decode, unreadable directories
  std::vector<std::pair<int, storage::PieceMeta>> pieces;  // every decoded piece with its holder index

  // Loads every host directory under root (empty: DefaultLocalRoot()).
  Status Load(Env* e, const std::string& dir, const std::string& root_opt);
  // Versions with local pieces or an L4 directory, newest first.
  std::vector<uint64_t> AllVersions() const;
  int HostIndex(const std::string& host) const;  // -1: no directory for that host
  // A LocalStore for a host by name (its directory may not exist yet; WritePiece creates it).
  storage::LocalStore StoreFor(const std::string& host) const;
  std::string PiecePath(const std::string& host, const storage::PieceMeta& m) const;
  // Ranks recorded for version v (from any piece; 0: none).
  uint32_t RanksOf(uint64_t v) const;
  // Home host of rank r in version v ("" when no piece names it).
  std::string HomeOf(uint64_t v, uint32_t r) const;
  // Host index of every rank's home host (-1 where its directory is gone): Catalog::Plan's `home`, so a
  // plan reads each rank's own copy where it has one and says how many ranks need another node's pieces.
  std::vector<int> Homes(uint64_t v, uint32_t ranks) const;
};

// Per-version state of the local levels, from the metas alone (no bytes read).
struct LocalLevels {
  uint32_t ranks = 0;
  int64_t iteration = 0;
  uint64_t bytes = 0;                   // sum of the rank data lengths
  std::vector<uint32_t> l1, l2, l3;     // ranks covered by each level
  bool l2_used = false, l3_used = false;  // some piece of that level exists
  std::vector<std::string> hosts;       // hosts holding pieces of the version
  bool restorable = false;              // Catalog::Plan succeeds
  std::string why, summary;
};
LocalLevels AssessLocal(const Offline& o, uint64_t v);

// Per-version state of L4 (the global directory).
struct GlobalLevel {
  bool dir = false;        // v-<N> exists
  bool manifest = false;   // MANIFEST present and decodes
  std::string manifest_error;
  storage::Manifest m;
  uint64_t bytes = 0;      // sum of the files' sizes in v-<N>
  std::vector<std::string> damaged;  // "<file>: <reason>" (filled by VerifyGlobal only)
};
GlobalLevel AssessGlobal(const Offline& o, uint64_t v);
// AssessGlobal and reads every data file (DataFileReader::Verify; shared-file mode: range checksums).
GlobalLevel VerifyGlobal(const Offline& o, uint64_t v);

// Progress line on stderr, refreshed with '\r', only when stderr is a terminal.
class Progress {
 public:
  Progress();
  ~Progress();
  void Show(const std::string& line);
  void Done();

 private:
  bool tty_;
  bool shown_ = false;
};

// Every rank's bytes of version v from the local levels: reads pieces (ReadPiece checks length and
// checksum), rebuilds ranks without a copy from their group, marks damaged pieces bad (recorded in
// *damaged as "<file>: <reason>") and plans again. False with *why when not restorable.
bool RestoreLocal(Offline& o, uint64_t v, std::vector<std::string>* bytes, storage::VersionPlan* plan,
                  std::vector<std::string>* damaged, std::string* why, Progress* progress);

std::string Mib(uint64_t bytes);

// The arguments every tool takes: DIR and --local ROOT.
void AddDirOptions(CLI::App* c, std::string* dir, std::string* local);
// Load for a tool ("revive rebuild"): 2 on a load error (printed), else 0. With `need_local`, also reports
// undecodable metas, picks the version (`requested`, or the newest with local pieces) into *v and returns 1
// when there are no local pieces.
int LoadForTool(const char* tool, const std::string& dir, const std::string& local, Offline* o, bool need_local = false,
                uint64_t requested = 0, uint64_t* v = nullptr);  // "12.3 MiB" / "512 B"

}  // namespace revive::cli

#endif  // REVIVE_CLI_LEVELS_OFFLINE_H_
