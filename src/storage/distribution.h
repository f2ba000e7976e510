// Block distributions of an item over the ranks (Checkpoint::add_distributed), as recorded in a version's
// MANIFEST, and the arithmetic of a restart with another number of ranks: which old ranks' files hold which
// part of a new rank's block. MPI-free, so the serial tests check every case.
#ifndef REVIVE_STORAGE_DISTRIBUTION_H_
#define REVIVE_STORAGE_DISTRIBUTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace revive::storage {

// Indices [offset, offset + count) of the global index space, in units (see Distribution::unit).
struct Block {
  uint64_t offset = 0;
  uint64_t count = 0;
  bool operator==(const Block&) const = default;
};

// A key whose global index space [0, global_n) is split into one block per rank. One index is `unit`
// elements (1 for a 1-D array; the row length for a 2-D array distributed by rows).
struct Distribution {
  std::string key;
  uint64_t global_n = 0;
  uint64_t unit = 1;
  std::vector<Block> blocks;  // blocks[r]: rank r's
};

// OK iff every index of [0, global_n) is in exactly one block and units/sizes do not overflow. Otherwise
// InvalidArgument naming the key, the counts and the first gap or overlap.
Status CheckTiling(const Distribution& d);

// One part of a new block that an old rank's file holds: `count` units from unit `src` of old rank
// `rank`'s block into unit `dst` of the new block.
struct Piece {
  uint32_t rank = 0;
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t count = 0;
};
// The parts of `mine` held by the old blocks of `old` (which CheckTiling accepted), in order of dst.
// Their counts sum to mine.count when mine lies inside [0, old.global_n).
std::vector<Piece> Overlaps(const Distribution& old, const Block& mine);

// The layouts of a version's keys, as its MANIFEST and its node-local piece descriptions record them:
//   dist=<key> <global_n> <unit> <offset>:<count> ...   (one block per rank, rank order)
//   replicated=<key>
// Keys in neither list are private to each rank.
struct Layouts {
  std::vector<Distribution> distributed;
  std::vector<std::string> replicated;
  bool empty() const { return distributed.empty() && replicated.empty(); }
  const Distribution* Find(const std::string& key) const;
  bool IsReplicated(const std::string& key) const;
  // Appends the lines above to a text format.
  void Encode(std::string* text) const;
  // Takes line `k`=`v` (k is "dist" or "replicated"); false when it is malformed.
  bool ParseLine(const std::string& k, const std::string& v);
  // After parsing: every key named is one of `keys`, at most once; one block per rank; blocks tile. A
  // Corruption naming `what` otherwise.
  Status Check(const std::string& what, uint32_t ranks, const std::vector<std::string>& keys) const;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_DISTRIBUTION_H_
