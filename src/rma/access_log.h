// The logs of remote memory accesses (ftRMA section 3.2.3 and 4.1), as bytes.
//
// A record is a determinant (the access without its data: kind, origin, target, window, where, how much,
// and the order counters EC, GC, SC, GNC) followed by its data. Puts (and the "put half" of accumulates,
// fetch-and-op, compare-and-swap) are logged at their origin, per target (LP_p[q]); gets (and the "get
// half" of the fetching atomics) at their target (LG_q[p]), in two phases. Records travel between
// processes (a log is read by the process that replaces a failed one), so they hold no pointer and no MPI
// handle: datatypes and ops are indices into tables every process builds the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace revive::rma {

enum class Kind : uint8_t {
  kPut = 1,      // replacing put: data lands at the target as is
  kAcc = 2,      // combining put (MPI_Accumulate, and the update of Get_accumulate / Fetch_and_op)
  kCas = 3,      // compare-and-swap: data = origin value then compare value
  kGet = 4,      // a get's data as the origin received it (also the result of the fetching atomics)
};

struct Determinant {
  uint8_t kind = 0;
  uint8_t basic = 0;   // index of the element datatype (BasicTypes() in ftrma.cc); 0: bytes
  uint16_t op = 0;     // index of the reduction op for kAcc (0: replace)
  uint32_t win = 0;    // the window's id (its creation number; the same on every rank)
  int32_t origin = 0;  // ranks in the window's communicator
  int32_t target = 0;
  uint64_t disp = 0;   // byte offset in the target's window
  uint64_t len = 0;    // data bytes (for kCas: the size of one of the two values)
  uint64_t ec = 0;     // origin's epoch counter when the access was issued
  uint64_t gc = 0;     // origin's get counter (flushes and epoch closings so far)
  uint64_t sc = 0;     // target's synchronisation counter taken under the lock the access was made in
  uint64_t gnc = 0;    // gsync (fence) counter
  uint64_t seq = 0;    // issue order at the origin
};
static_assert(sizeof(Determinant) == 72, "a record header is 72 bytes on every rank");

inline size_t DataBytes(const Determinant& d) { return d.kind == static_cast<uint8_t>(Kind::kCas) ? 2 * d.len : d.len; }
inline size_t RecordBytes(const Determinant& d) { return (sizeof(Determinant) + DataBytes(d) + 7) & ~size_t{7}; }

// A sequence of records in blocks of at least 1 MiB that are kept when the log is cleared: a log grows
// and is trimmed at every checkpoint, and reusing its memory keeps page faults and zero-filling out of
// the put path (a growing std::vector cost an FFT-like transpose half its run time in copies and faults).
// A record never straddles two blocks.
class LogBuffer {
 public:
  // Appends a record; returns a pointer to its data (DataBytes(d) bytes) for the caller to fill.
  uint8_t* Append(const Determinant& d);
  void Clear();
  size_t bytes() const { return bytes_; }
  size_t count() const { return count_; }
  // The records, contiguous (for shipping a log to the process that replays it, and for tests).
  std::vector<uint8_t> Contiguous() const;

 private:
  struct Block {
    std::unique_ptr<uint8_t[]> mem;
    size_t used = 0, cap = 0;
  };
  std::vector<Block> blocks_;
  size_t cur_ = 0;  // the block being filled
  size_t bytes_ = 0, count_ = 0;
};

struct RecordView {
  Determinant det;
  const uint8_t* data = nullptr;
};

// Parses `n` bytes of records, up to an 8-byte zero word (the end of a log slice) or n. A truncated or inconsistent record stops the parse with an error that
// says where (never reads past n).
bool ParseRecords(const uint8_t* p, size_t n, std::vector<RecordView>* out, std::string* error);

// The order in which a recovering process replays the puts logged for it (the paper's Algorithm 2 for
// gsync codes, with the SC order of lock codes): by GNC, then SC, then per origin by EC and issue order.
// Accesses of different origins within one (GNC, SC) are unordered by the program (access determinism).
void SortForReplay(std::vector<RecordView>* recs);

}  // namespace revive::rma
