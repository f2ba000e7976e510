// The MANIFEST of one version: written last (atomically) by rank 0 once every rank's files are durable.
// Its presence is what makes a version complete. Text, one "field=value" per line, checksummed:
//   revive-manifest 1
//   name=<checkpoint>  version=<N>  iteration=<I>  parent_version=<P>  ranks=<R>
//   key=<k>            (one line per key, in registration order)
//   shared=<file>      (shared-file mode only: every rank's data is in this one file of the version)
//   range=<offset> <length> <XXH3-64 hex>   (shared-file mode: one line per rank, in rank order; the
//                      rank's bytes in <file> and their checksum)
//   dist=<key> <global_n> <unit> <offset>:<count> ...   (a distributed key: its global size in units of
//                      <unit> elements, then every rank's block, in rank order; see distribution.h)
//   replicated=<key>   (a key whose value is the same on every rank)
//   checksum=<XXH3-64 of everything above, 16 hex digits>
// The first line says "revive-manifest 2" when dist= or replicated= lines are present (so that a build that
// knows only format 1 refuses the version by its format, not by a line it does not know), 1 otherwise.
#ifndef REVIVE_STORAGE_MANIFEST_H_
#define REVIVE_STORAGE_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/distribution.h"

namespace revive::storage {

// One rank's bytes in the shared file of a version (shared_file.h).
struct RankRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t checksum = 0;  // XXH3-64 of those bytes
};

struct Manifest {
  std::string name;
  uint64_t version = 0;
  int64_t iteration = 0;
  // Version of the parent checkpoint that was current when this one was written (0 = none): a nested
  // child's version is only valid with that parent version (paper Table I).
  uint64_t parent_version = 0;
  uint32_t ranks = 1;
  std::vector<std::string> keys;
  // Shared-file mode (MPI-IO): the file's name inside the version directory and one range per rank.
  // Empty: one file per key and rank.
  std::string shared_file;
  std::vector<RankRange> ranges;
  // Keys added with add_distributed (their blocks tile the global size: checked when decoding) and with
  // add_replicated. Every other key is private to each rank.
  Layouts layouts;
};

std::string EncodeManifest(const Manifest& m);
Status DecodeManifest(const std::string& path, const std::string& text, Manifest* m);

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_MANIFEST_H_
