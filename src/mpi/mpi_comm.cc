#include "mpi_comm.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

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

std::shared_ptr<detail::Comm> make_mpi_comm(MPI_Comm comm) { return std::make_shared<MpiComm>(comm); }

}  // namespace revive::mpi
