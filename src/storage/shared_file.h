// Shared-file mode: one file per version holding every rank's data, written and read collectively.
//
// The file <version dir>/ranks@shared is the concatenation, in rank order, of each rank's records; a
// rank's records are exactly the data files it would write in file-per-rank mode (format.h), one per key
// in registration order. Rank r's bytes start at the sum of the sizes of ranks 0..r-1 (an exclusive
// prefix sum). The MANIFEST (manifest.h) records every rank's (offset, length, XXH3-64), so restart
// verifies each rank's range before it reads anything into user memory.
//
// This is the interface the checkpoint library writes through; the implementation is MPI-IO (src/mpi,
// MPI_File_write_at_all / MPI_File_read_at_all), so the storage component stays free of MPI.
#ifndef REVIVE_STORAGE_SHARED_FILE_H_
#define REVIVE_STORAGE_SHARED_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "storage/data_file.h"
#include "storage/manifest.h"

namespace revive::storage {

// '@' is not allowed in keys, so the name cannot collide with a key's file.
inline constexpr char kSharedFileName[] = "ranks@shared";

class SharedFileIO {
 public:
  virtual ~SharedFileIO() = default;
  // Whether Write/Read may be called from a thread other than the one that initialised MPI while that
  // thread goes on using MPI (the async writer): MPI_THREAD_MULTIPLE. *level_name says what MPI gives.
  virtual bool ThreadsAllowed(std::string* level_name) const = 0;
  // Collective over every rank, always called by all of them (a rank with nothing valid to write passes
  // no spans, so the others do not hang). Creates `path`, writes this rank's `spans` at the exclusive
  // prefix sum of the ranks' sizes, makes the file durable (sync) and closes it. `checksum` is this
  // rank's XXH3-64 of its bytes; on success rank 0's *ranges holds every rank's range (others: empty).
  // An error names the file and, where it is one rank's, the rank.
  virtual Status Write(const std::string& path, const std::vector<Span>& spans, uint64_t checksum,
                       std::vector<RankRange>* ranges) = 0;
  // Collective: every rank reads its own `range` of `path` into buf (range.length bytes). A file too
  // short for a rank's range is Corruption naming the file, the rank and the sizes; the checksum is the
  // caller's to verify.
  virtual Status Read(const std::string& path, const RankRange& range, void* buf) = 0;
};

}  // namespace revive::storage

#endif  // REVIVE_STORAGE_SHARED_FILE_H_
