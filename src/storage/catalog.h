// Where the node-local pieces of multi-level versions are, and how each rank's bytes of a version can be
// had: read (its own copy or a partner's), or rebuilt from its erasure-coded group. Pure bookkeeping: the
// MPI restart (src/applevel/multilevel.cc) and the offline tools (`revive ls/verify/rebuild`) both fill a
// Catalog with the piece descriptions they found and ask it for a plan; they differ only in how bytes move.
// Every rank builds the same Catalog from the same (allgathered) input, so every rank computes the same
// plan without another round of messages.
#ifndef REVIVE_STORAGE_CATALOG_H_
#define REVIVE_STORAGE_CATALOG_H_

#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "storage/local_store.h"

namespace revive::storage {

// A piece and the place (a host index: who can read it) holding it.
struct PieceRef {
  int holder = -1;  // -1: none
  const PieceMeta* meta = nullptr;
  bool ok() const { return holder >= 0; }
};

struct RankSource {
  enum How { kRead, kRebuild };
  How how = kRead;
  PieceRef data;  // kRead: the rank's data piece (its own copy or a partner's)
  // kRebuild: the group (a parity description naming members, lengths, checksums) and, per member index,
  // the member's data and parity pieces (holder -1: lost). Members with both are the survivors.
  const PieceMeta* group = nullptr;
  int index = -1;  // the rank's index in group->members
  std::vector<PieceRef> member_data, member_parity;
};

struct VersionPlan {
  uint64_t version = 0;
  int64_t iteration = 0;
  uint64_t parent_version = 0;
  uint32_t ranks = 0;
  std::vector<std::string> keys;
  Layouts layouts;
  std::vector<RankSource> sources;  // per rank
  int own = 0, copies = 0, rebuilt = 0;  // ranks whose bytes are on their node now / fetched from another node / rebuilt
  // Plan failed because the version was written by another number of ranks: the program does not match
  // the checkpoint (an error for the caller, never a reason to fall back to an older version).
  bool rank_mismatch = false;
  std::string Summary() const;  // "4 ranks: 3 from their own node, 1 rebuilt from XOR parity"
};

class Catalog {
 public:
  // `holder` is a host index; pieces are kept in the order added.
  void Add(int holder, const PieceMeta& m);
  // A piece whose bytes failed their checks when read: never planned again.
  void MarkBad(int holder, PieceMeta::Kind kind, uint32_t rank, uint64_t version);
  bool IsBad(int holder, const PieceMeta& m) const;
  // Versions with at least one piece, newest first.
  std::vector<uint64_t> Versions() const;
  // Every (usable) piece of version v.
  std::vector<PieceRef> Pieces(uint64_t v) const;

  // Plans version v for `ranks` ranks; home[r] is the holder local to rank r now (its own pieces are read
  // there without a transfer), or -1. Prefers, per rank, a piece at home, then any copy, then a rebuild.
  // False with *why saying what is missing ("rank 3: no copy of its data; its XOR group (ranks 1 3 5 7)
  // lost 2 members (ranks 3, 5), parity tolerates 1").
  bool Plan(uint64_t v, uint32_t ranks, const std::vector<int>& home, VersionPlan* out, std::string* why) const;

 private:
  struct Held {
    int holder;
    PieceMeta meta;
  };
  std::deque<Held> held_;  // deque: PieceRefs point into it
  std::set<std::tuple<int, int, uint32_t, uint64_t>> bad_;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_CATALOG_H_
