// Multi-level storage for the application-level library (docs/storage-levels.md): node-local pieces (L1),
// partner copies (L2) and erasure-coded group parity (L3) written collectively through the Comm, the
// global level (L4) flushed in the background, and restart from whatever pieces survive. The byte layout
// and the bookkeeping are in src/storage (local_store.h, catalog.h, stripes.h, erasure.h, placement.h);
// this file moves the bytes between ranks.
#ifndef REVIVE_APPLEVEL_MULTILEVEL_H_
#define REVIVE_APPLEVEL_MULTILEVEL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "applevel/comm.h"
#include "applevel/levels.h"
#include "revive/checkpoint.hpp"
#include "storage/catalog.h"
#include "storage/local_store.h"

namespace revive::applevel {

// Bytes of one rank's version and what keeps them alive (a mapping of its node-local file, or a buffer).
struct Bytes {
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> keep;
};

struct VersionInfo {
  std::string name;
  uint64_t version = 0;
  int64_t iteration = 0;
  uint64_t parent_version = 0;
  std::vector<std::string> keys;
  storage::Layouts layouts;
};

class MultiLevel {
 public:
  // Not collective; the first collective call learns every rank's host and failure domain.
  MultiLevel(Env* env, const Options& opts, const std::string& name, const std::string& global_dir,
             detail::Comm* comm, LevelPolicy policy);
  ~MultiLevel();  // waits for a flush still running (its version stays unpublished)
  MultiLevel(const MultiLevel&) = delete;
  MultiLevel& operator=(const MultiLevel&) = delete;

  const LevelPolicy& policy() const { return policy_; }
  const std::string& local_dir() const { return local_.dir(); }

  // Collective: the largest version number in any rank's node-local storage (0: none), so a new version
  // never reuses a number with stale pieces left on some node.
  uint64_t NewestLocal();

  // Collective: writes this rank's bytes of a version (its records as spans, `length` bytes in all with
  // XXH3-64 `checksum`) at the local levels in `levels` (L1, L2, L3). The spans go straight to the L1 file,
  // which is then mapped: *out are those bytes, for the partner copy, the parity and the flush, with no
  // copy in memory. The result is the same on every rank; an error names the rank and the file or peer.
  Status Write(const VersionInfo& info, const std::vector<storage::Span>& spans, uint64_t length, uint64_t checksum,
               unsigned levels, Bytes* out);

  // Starts writing this rank's data files of a version (records at `offsets` in *bytes, to `paths`) to the
  // global level on a thread of its own. The caller made the version directory. Each rank's thread leaves
  // a marker in it when its files are durable; rank 0's thread waits for every rank's marker and then
  // calls `publish` (the MANIFEST, then pruning), so the version becomes complete at the global level as
  // soon as the slowest rank's files are durable, with no collective call and no stall of the program.
  void StartFlush(const VersionInfo& info, Bytes bytes,
                  std::vector<std::pair<size_t, size_t>> records, std::vector<std::string> paths,
                  std::string dir, std::function<Status()> publish);
  bool flush_pending() const { return flush_.active; }
  // Not collective. With wait, waits for this rank's flush thread (rank 0's: until the version is
  // published or failed); otherwise only looks. True once it has ended: *s is its result, *info the version.
  bool FinishFlush(bool wait, Status* s, VersionInfo* info);

  // Restart. Collective: every node's piece descriptions are gathered (once).
  void Scan();
  std::vector<uint64_t> Versions() const { return catalog_.Versions(); }
  // Collective: this rank's bytes of version v, read from its node, fetched from another node's copy or
  // rebuilt from its group's parity; pieces whose bytes fail their checksum are set aside and the plan
  // made again without them. False (on every rank alike) with *why when v cannot be had from the local
  // levels. want_parent: only a version written under that parent version (nested), or any if ~0.
  bool Restore(uint64_t v, uint64_t want_parent, Bytes* bytes, storage::VersionPlan* plan, std::string* why);
  // The version a restart read: the oldest that pruning keeps until newer ones are complete.
  void Restored(uint64_t v) { completed_.assign(1, v); }

 private:
  void Setup();
  Status WritePartner(const VersionInfo& info, const Bytes& bytes, const std::vector<uint64_t>& lens,
                      const std::vector<uint64_t>& sums);
  Status WriteParity(const VersionInfo& info, const Bytes& bytes, const std::vector<uint64_t>& lens,
                     const std::vector<uint64_t>& sums);
  storage::PieceMeta BaseMeta(const VersionInfo& info) const;

  Env* env_;
  Options opts_;
  std::string name_;
  detail::Comm* comm_;
  LevelPolicy policy_;
  storage::LocalStore local_;
  bool setup_ = false;
  std::vector<std::string> hosts_;   // per rank
  std::vector<std::string> domains_;  // per rank
  std::vector<int> host_of_;          // per rank: index into the distinct hosts
  std::vector<int> reader_;           // per host index: the lowest rank on it (reads its pieces for others)
  std::vector<std::vector<int>> groups_;  // L3 groups (ranks), made at the first L3 write
  std::vector<int> partner_;              // L2 partners, made at the first L2 write
  std::string placement_error_;
  bool placed_ = false;
  std::vector<uint64_t> completed_;  // versions complete at the local levels, oldest first
  // Receive and parity buffers, kept from version to version: fresh memory costs a host fault per page on
  // this VM (docs/performance.md), reused memory runs at memcpy speed.
  std::vector<std::string> l2_in_, l3_in_, l3_out_;
  std::string l3_parity_;
  storage::Catalog catalog_;
  bool scanned_ = false;

  struct Flush {
    bool active = false;
    VersionInfo info;
    Bytes bytes;
    std::thread thread;
    std::atomic<bool> done{false};
    std::atomic<bool> stop{false};  // the destructor: rank 0 stops waiting for the others after a while
    Status result;
  } flush_;
};

}  // namespace revive::applevel

#endif  // REVIVE_APPLEVEL_MULTILEVEL_H_
