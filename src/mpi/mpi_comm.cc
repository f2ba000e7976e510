#include "mpi_comm.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace revive::mpi {

// A failed MPI call in a collective decision leaves the ranks disagreeing about the checkpoint; there is
// no safe way to continue, so say which call failed and abort the job (MPI's default handler would too).
static void Check(int rc, const char* what, MPI_Comm comm) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "revive_mpi: %s failed: %.*s\n", what, len, msg);
  MPI_Abort(comm, 1);
}

MpiComm::MpiComm(MPI_Comm comm) {
  Check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", comm);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiComm::barrier() { Check(MPI_Barrier(comm_), "MPI_Barrier", comm_); }

uint64_t MpiComm::allreduce_min_u64(uint64_t v) {
  uint64_t out = 0;
  Check(MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_MIN, comm_), "MPI_Allreduce(min)", comm_);
  return out;
}

bool MpiComm::allreduce_and(bool v) {
  int in = v ? 1 : 0, out = 0;
  Check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm_), "MPI_Allreduce(and)", comm_);
  return out != 0;
}

void MpiComm::bcast(void* buf, size_t n, int root) {
  // MPI counts are int: send in pieces of at most 1 GiB.
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const int piece = n > (1u << 30) ? (1 << 30) : static_cast<int>(n);
    Check(MPI_Bcast(p, piece, MPI_BYTE, root, comm_), "MPI_Bcast", comm_);
    p += piece;
    n -= static_cast<size_t>(piece);
  }
}

std::vector<std::string> MpiComm::allgather_string(const std::string& s) {
  // Lengths first, then the bytes with Allgatherv (int counts: the strings are metadata, well below 2 GiB).
  if (s.size() > static_cast<size_t>(INT_MAX / (size_ > 0 ? size_ : 1))) {
    std::fprintf(stderr, "revive_mpi: allgather of %zu bytes per rank is too large\n", s.size());
    MPI_Abort(comm_, 1);
  }
  int len = static_cast<int>(s.size());
  std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  Check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "MPI_Allgather", comm_);
  long total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
  }
  if (total > INT_MAX) {
    std::fprintf(stderr, "revive_mpi: allgather of %ld bytes in all is too large\n", total);
    MPI_Abort(comm_, 1);
  }
  std::string all(static_cast<size_t>(total), '\0');
  Check(MPI_Allgatherv(s.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, comm_),
        "MPI_Allgatherv", comm_);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

// Nonblocking sends and receives, pieces of at most 1 GiB (int counts), one tag: MPI keeps messages between
// a pair in order, so the pieces and the listed messages match up in order on both sides.
void MpiComm::exchange(const std::vector<SendBuf>& sends, const std::vector<RecvBuf>& recvs) {
  constexpr size_t kPiece = size_t{1} << 30;
  constexpr int kTag = 7301;
  std::vector<MPI_Request> reqs;
  for (const RecvBuf& r : recvs) {
    char* p = static_cast<char*>(r.data);
    size_t n = r.size;
    do {
      const int piece = static_cast<int>(n > kPiece ? kPiece : n);
      reqs.emplace_back();
      Check(MPI_Irecv(p, piece, MPI_BYTE, r.peer, kTag, comm_, &reqs.back()), "MPI_Irecv", comm_);
      p += piece;
      n -= static_cast<size_t>(piece);
    } while (n > 0);
  }
  for (const SendBuf& sb : sends) {
    const char* p = static_cast<const char*>(sb.data);
    size_t n = sb.size;
    do {
      const int piece = static_cast<int>(n > kPiece ? kPiece : n);
      reqs.emplace_back();
      Check(MPI_Isend(p, piece, MPI_BYTE, sb.peer, kTag, comm_, &reqs.back()), "MPI_Isend", comm_);
      p += piece;
      n -= static_cast<size_t>(piece);
    } while (n > 0);
  }
  Check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", comm_);
}

std::shared_ptr<detail::Comm> make_mpi_comm(MPI_Comm comm) { return std::make_shared<MpiComm>(comm); }

}  // namespace revive::mpi
